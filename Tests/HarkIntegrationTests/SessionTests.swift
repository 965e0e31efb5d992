import Foundation
import HarkApp
import HarkAudio
import HarkBackendKit
import HarkCore
import HarkGemini
import HarkHTTP
import HarkLiveSimulator
import HarkNet
import HarkSimulatorKit
import HarkTestKit
import Logging
import Synchronization
import Testing

// MARK: - Helpers

/// Collects transcript lines printed by `hark converse`.
final class Lines: Sendable {
    private let lines = Mutex<[String]>([])
    var all: [String] { lines.withLock { $0 } }
    func append(_ line: String) { lines.withLock { $0.append(line) } }
}

let quietLogger = Logger(label: "simulator") { _ in SwiftLogNoOpLogHandler() }

func startSimulator(_ configure: (inout LiveSimulatorConfiguration) throws -> Void = { _ in }) async throws
    -> LiveSimulator
{
    var configuration = LiveSimulatorConfiguration()
    try configure(&configuration)
    let simulator = LiveSimulator(configuration: configuration, logger: quietLogger)
    try await simulator.start()
    return simulator
}

func writeKey(_ key: String) throws -> String {
    let path = FileManager.default.temporaryDirectory.path + "/hark-key-\(UUID().uuidString)"
    try key.write(toFile: path, atomically: true, encoding: .utf8)
    return path
}

struct ConverseRun {
    var outcome: ConverseOutcome
    var transcript: [String]
    var logs: [String]
    var inputSamples: Int
    var output: WAVAudio?
    /// The output file's first 44 bytes (its header, as the writer lays it out).
    var outputHeader: Data?
}

func converse(
    _ simulator: LiveSimulator,
    input: [Int16] = TestSignals.speech(total: .seconds(8)),
    _ configure: (inout ConverseOptions) -> Void = { _ in }
) async throws -> ConverseRun {
    try await converse(endpoint: simulator.baseURL, input: input, configure)
}

/// Runs `hark converse` in-process on `input` (`endpoint`: the shared `--endpoint`, nil for none).
func converse(
    endpoint: String?,
    input: [Int16],
    _ configure: (inout ConverseOptions) -> Void = { _ in }
) async throws -> ConverseRun {
    let inputPath = try TestSignals.writeTemporaryWAV(input)
    let outputPath = inputPath.replacingOccurrences(of: ".wav", with: "-out.wav")
    defer {
        try? FileManager.default.removeItem(atPath: inputPath)
        try? FileManager.default.removeItem(atPath: outputPath)
    }
    var options = ConverseOptions(input: inputPath, output: outputPath)
    options.endpoint = endpoint
    options.fast = true
    options.idleTimeout = .milliseconds(500)
    options.timeout = .seconds(60)
    configure(&options)
    let capture = LogCapture()
    let lines = Lines()
    let runner = ConverseRunner(
        options: options,
        network: .nio(logger: capture.logger("transport")),
        environment: [:],
        logger: capture.logger(),
        transcriptSink: { lines.append($0) }
    )
    let outcome = await runner.run()
    return ConverseRun(
        outcome: outcome,
        transcript: lines.all,
        logs: capture.all,
        inputSamples: input.count,
        output: try? WAVFile.read(path: outputPath),
        outputHeader: FileManager.default.contents(atPath: outputPath).map { Data($0.prefix(44)) }
    )
}

func makeSession(
    _ simulator: LiveSimulator,
    tools: ToolRegistry = ToolRegistry(),
    clock: any Clock<Duration> = ContinuousClock(),
    capture: LogCapture = LogCapture(),
    reportingTo audioSent: AudioSentReport? = nil,
    _ configure: (inout GeminiLiveConfiguration) -> Void = { _ in }
) -> GeminiLiveSession {
    var configuration = GeminiLiveConfiguration(
        endpoint: simulator.baseURL,
        authentication: .apiKey(Secret("test-key")),
        setup: Setup(model: "models/sim"),
        link: LinkSettings(randomSeed: 1)
    )
    // A manual clock times the session's timers here; a backlog paced on it would wait until the test
    // advanced it (the pacing has its own tests).
    if clock is ManualClock { configuration.catchUpRate = nil }
    configure(&configuration)
    return GeminiLiveSession(
        configuration: configuration,
        transport: NIOWebSocketTransport(logger: capture.logger("transport")),
        tools: tools,
        clock: clock,
        logger: capture.logger(),
        audioSent: audioSent?.report
    )
}

/// Where a session reports the audio it sent for the first time (a box, so a trailing closure still configures).
struct AudioSentReport {
    var report: @Sendable (AudioChunk) -> Void
}

/// Reads events until `predicate` matches one; returns all read so far.
/// Advances `clock` a stall-check period (15 s) at a time, each time once a task sleeps on it, until the
/// session has failed (the check noticed the silence; at most eight periods); expects the offline event
/// to say so; then lets the backoff after a healthy connection pass.
func leaveTheStalledConnection(
    _ session: GeminiLiveSession,
    _ clock: ManualClock,
    _ events: inout AsyncStream<SessionEvent>.Iterator
) async throws {
    for _ in 0..<8 where session.statistics.failures == 0 {
        try await withDeadline(.seconds(10), "the stall check") { await clock.waitForSleepers(1) }
        if session.statistics.failures == 0 { clock.advance(by: .seconds(15)) }
    }
    guard session.statistics.failures > 0 else {
        Issue.record("the stall was not noticed within eight periods")
        return
    }
    let failed = await collect(&events) { if case .link(.offline) = $0 { true } else { false } }
    guard case .link(.offline(let reason, _))? = failed.last else {
        Issue.record("no offline event after the stall")
        return
    }
    #expect(reason.contains("went silent mid-turn"), "\(reason)")
    try await withDeadline(.seconds(10), "the backoff") { await clock.waitForSleepers(1) }
    clock.advance(by: .seconds(2))
}

func collect(
    _ iterator: inout AsyncStream<SessionEvent>.Iterator,
    until predicate: (SessionEvent) -> Bool
) async -> [SessionEvent] {
    var seen: [SessionEvent] = []
    while let event = await iterator.next() {
        seen.append(event)
        if predicate(event) { return seen }
    }
    return seen
}

/// All agent transcript pieces, joined (the service sends them as deltas).
func agentText(_ events: [SessionEvent]) -> String {
    events.compactMap { event -> String? in
        if case .transcript(let piece) = event, piece.role == .agent { return piece.text }
        return nil
    }.joined()
}

func speech(_ seconds: Double) -> SessionInput {
    .audio(
        AudioChunk(
            samples: TestSignals.speech(
                total: .milliseconds(Int64(seconds * 1000)),
                burst: .milliseconds(Int64(seconds * 1000)),
                gap: .zero
            ),
            sampleRate: 16_000
        )
    )
}

func silence(_ seconds: Double) -> SessionInput {
    .audio(AudioChunk(samples: [Int16](repeating: 0, count: Int(seconds * 16_000)), sampleRate: 16_000))
}

// MARK: - hark converse against the simulator, over real loopback sockets

@Suite(.timeLimit(.minutes(2))) struct ConverseTests {
    @Test func aNormalConversationIsHeardAnsweredAndRecorded() async throws {
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        let run = try await converse(simulator)
        #expect(run.outcome.exitCode == 0, "\(run.outcome.message ?? "")")
        let snapshot = simulator.recorder.snapshot()
        // Every input sample arrived, exactly once, over one connection.
        #expect(snapshot.connections.count == 1)
        #expect(snapshot.audioSamples == Int64(run.inputSamples))
        #expect(run.outcome.inputSamplesSent == run.inputSamples)
        // Setup first, audio after, audioStreamEnd at the end.
        let kinds = snapshot.connections[0].messageKinds
        #expect(kinds.first == "setup")
        #expect(kinds.last == "realtimeInput.audioStreamEnd")
        #expect(snapshot.connections[0].setup?.contextWindowCompression != nil)
        #expect(snapshot.connections[0].setup?.sessionResumption != nil)
        // Two utterances, two answers, in order.
        #expect(run.transcript.filter { $0.hasPrefix("user: heard") }.count == 2)
        #expect(run.transcript.contains("model: answering turn 1"))
        #expect(run.transcript.contains("model: answering turn 2"))
        // The output file holds all the model audio, at 24 kHz.
        let answered = snapshot.connections[0].turns.reduce(0.0) { $0 + $1.answerAudioSeconds }
        #expect(run.output?.sampleRate == 24_000)
        #expect(abs(Double(run.output?.samples.count ?? 0) - answered * 24_000) < 24)
    }

    @Test func aGoAwayDuringTheRunLosesNothing() async throws {
        let simulator = try await startSimulator {
            // goAway 3 s into the connection, on the wall clock as the service counts it (on the audio clock
            // the audio sent again would use up the next connection's short life at once); its grace leaves a
            // loaded machine time to close first.
            $0.connectionLifetime = .seconds(6)
            $0.goAwayGrace = .seconds(3)
            $0.lifetimeOnWallClock = true
        }
        defer { Task { try? await simulator.stop() } }
        // In real time, as a device talks. Input sent ahead of real time (--fast) reaches the goAway with
        // every utterance already on the old connection, and without the service's message index no client
        // can tell the last message it wrote there (read or not) from the ones the service had: a fast run
        // may lose or repeat one message at the switch.
        let run = try await converse(simulator, input: TestSignals.speech(total: .seconds(11))) { $0.fast = false }
        #expect(run.outcome.exitCode == 0, "\(run.outcome.message ?? "")")
        let snapshot = simulator.recorder.snapshot()
        // Sample-exact: what the file held is what the service received, over however many connections,
        // plus what followed the last resumption handle on the old connection, sent again on the new one.
        let resent = run.outcome.statistics?.audioSamplesResent ?? -1
        #expect(snapshot.audioSamples == Int64(run.inputSamples + resent))
        #expect((run.outcome.statistics?.droppedInputSamples ?? -1) == 0)
        #expect(snapshot.connections.first?.sentMessageKinds.contains("goAway") == true)
        #expect(run.transcript.filter { $0.hasPrefix("model: answering turn") }.count == 3)
    }

    @Test func theWrongKeyExitsThreeAndIsNeverPrinted() async throws {
        let simulator = try await startSimulator { $0.requiredKey = Secret("the-right-key") }
        defer { Task { try? await simulator.stop() } }
        let keyFile = try writeKey("wrong-key-4711")
        let run = try await converse(simulator) { $0.apiKeyFile = keyFile }
        #expect(run.outcome.exitCode == 3)
        #expect(run.outcome.message?.contains("1008") == true)
        let everything = run.logs + run.transcript + [run.outcome.message ?? ""]
        #expect(!everything.contains { $0.contains("wrong-key-4711") })
        let connection = try #require(simulator.recorder.snapshot().connections.first)
        #expect(!connection.path.contains("key"))
        #expect(simulator.recorder.snapshot().connections.count == 1)  // no hammering after a rejection
    }

    @Test func tlsWithTheSimulatorsCAWorksAndWithoutItIsRefused() async throws {
        let caPath = FileManager.default.temporaryDirectory.path + "/hark-ca-\(UUID().uuidString).pem"
        defer { try? FileManager.default.removeItem(atPath: caPath) }
        let simulator = try await startSimulator { $0.tls = .selfSigned(caOut: caPath) }
        defer { Task { try? await simulator.stop() } }
        #expect(simulator.baseURL.hasPrefix("wss://"))
        let trusted = try await converse(simulator, input: TestSignals.speech(total: .seconds(3))) {
            $0.caFile = caPath
        }
        #expect(trusted.outcome.exitCode == 0, "\(trusted.outcome.message ?? "")")
        let untrusted = try await converse(simulator, input: TestSignals.speech(total: .seconds(3))) {
            $0.maxRetries = 1
        }
        // Refused as untrusted (exit 5), in words a person reads, without BoringSSL's internals.
        #expect(untrusted.outcome.exitCode == 5, "\(untrusted.outcome.message ?? "")")
        let message = untrusted.outcome.message ?? ""
        #expect(message.contains("is not trusted") && message.contains("ca_file"), "\(message)")
        #expect(!message.contains("OPENSSL_internal") && !message.contains("error:"), "\(message)")
    }

    @Test func tlsFailuresReadAsOneLineAndAnUnsetClockIsNotCalledUntrusted() {
        let verify = """
            handshakeFailed(NIOSSL.BoringSSLError.sslError([Error: 268435581 error:1000007d:SSL routines:\
            OPENSSL_internal:CERTIFICATE_VERIFY_FAILED at /src/ssl/handshake.cc:320]))
            """
        let url = "wss://example.net:443/ws/x?key=secret-4711"
        let untrusted = NIOWebSocketTransport.classifyTLS(verify, url: url, now: Date(timeIntervalSince1970: 1.8e9))
        #expect(untrusted.kind == .untrusted)
        #expect(untrusted.message.hasPrefix("the certificate of example.net:443 is not trusted"))
        // A board without a clock battery boots in the past: every certificate looks not yet valid.
        let early = NIOWebSocketTransport.classifyTLS(verify, url: url, now: Date(timeIntervalSince1970: 86_400))
        #expect(early.kind == .tls && early.message.contains("clock is not set"))
        let other = NIOWebSocketTransport.classifyTLS(
            "handshakeFailed(NIOSSL.BoringSSLError.sslError([Error: 1 error:1 :SSL routines:OPENSSL_internal:WRONG_VERSION_NUMBER]))",
            url: url
        )
        #expect(
            other.kind == .tls && other.message == "TLS handshake with example.net:443 failed (WRONG_VERSION_NUMBER)"
        )
        for error in [untrusted, early, other] { #expect(!error.message.contains("secret-4711")) }
    }

    @Test func wssToAnIPAddressIsTriedLikeAnyHost() async throws {
        // The certificate is checked against the address (no SNI); nothing listens here, so it is an outage.
        let transport = NIOWebSocketTransport(logger: quietLogger)
        do {
            _ = try await transport.connect(WebSocketRequest(url: "wss://127.0.0.1:9/ws")) { _, _ in }
            Issue.record("expected the connection to be refused")
        } catch let error as WebSocketConnectError {
            #expect(error.kind == .refused, "\(error)")
            #expect(error.message.contains("127.0.0.1:9"), "\(error)")
            #expect(SessionFailure.fromConnect(error).kind == .transient)
        }
    }

    @Test func anEphemeralTokenIsMintedAndUsedOnTheConstrainedEndpoint() async throws {
        let simulator = try await startSimulator { $0.requiredKey = Secret("dev-key") }
        defer { Task { try? await simulator.stop() } }
        let keyFile = try writeKey("dev-key")
        let run = try await converse(simulator, input: TestSignals.speech(total: .seconds(3))) {
            $0.apiKeyFile = keyFile
            $0.settings["mint_token"] = "true"
        }
        #expect(run.outcome.exitCode == 0, "\(run.outcome.message ?? "")")
        let snapshot = simulator.recorder.snapshot()
        #expect(snapshot.tokensMinted == 1)
        #expect(snapshot.connections.first?.constrained == true)
        #expect(snapshot.connections.first?.apiVersion == "v1alpha")
    }

    @Test func aTokenFromTheOwnersTokenServerIsUsedForEachSession() async throws {
        // The simulator's auth_tokens endpoint stands in for the owner's backend: it answers JSON with the token.
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        let run = try await converse(simulator, input: TestSignals.speech(total: .seconds(3))) {
            $0.settings["token_url"] = simulator.httpBaseURL + "/v1alpha/auth_tokens"
        }
        #expect(run.outcome.exitCode == 0, "\(run.outcome.message ?? "")")
        let snapshot = simulator.recorder.snapshot()
        #expect(snapshot.tokensMinted == 1)
        #expect(snapshot.connections.first?.constrained == true)
        #expect(snapshot.connections.first?.credential == "token (header)")
    }

    @Test func pushToTalkMarksActivityItself() async throws {
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        let run = try await converse(
            simulator,
            input: TestSignals.speech(total: .seconds(2), burst: .seconds(2), gap: .zero)
        ) {
            $0.manualActivity = true
        }
        #expect(run.outcome.exitCode == 0, "\(run.outcome.message ?? "")")
        let kinds = try #require(simulator.recorder.snapshot().connections.first).messageKinds
        #expect(kinds.dropFirst().first == "realtimeInput.activityStart")
        #expect(kinds.last == "realtimeInput.activityEnd")
        #expect(!kinds.contains("realtimeInput.audioStreamEnd"))
        #expect(run.transcript.contains("model: answering turn 1"))
    }

    @Test func badAndUnknownFramesAreSkippedAndBinaryFramesRead() async throws {
        let simulator = try await startSimulator {
            $0.binaryFrames = true
            $0.scenario.faults = [
                try SimulatorFault.parse("setup:snake-case"),
                try SimulatorFault.parse("setup:base64url"),
                try SimulatorFault.parse("answer=1:malformed"),
                try SimulatorFault.parse("answer=1:truncated"),
                try SimulatorFault.parse("answer=1:unknown-message"),
                try SimulatorFault.parse("answer=1:unknown-fields"),
            ]
        }
        defer { Task { try? await simulator.stop() } }
        let run = try await converse(simulator, input: TestSignals.speech(total: .seconds(4)))
        #expect(run.outcome.exitCode == 0, "\(run.outcome.message ?? "")")
        #expect(run.transcript.contains("model: answering turn 1"))
        #expect((run.outcome.statistics?.undecodableFrames ?? 0) >= 2)
        #expect((run.output?.samples.count ?? 0) > 0)
        // Logged once per kind, not per frame, and the connection survived.
        #expect(run.logs.filter { $0.contains("could not be decoded") }.count <= 2)
        #expect(simulator.recorder.snapshot().connections.count == 1)
    }

    @Test func usageErrorsExitTwoWithAClearMessage() async throws {
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        let missing = try await converse(simulator) { $0.input = "/nonexistent/question.wav" }
        #expect(missing.outcome.exitCode == 2)
        #expect(missing.outcome.message?.contains("/nonexistent/question.wav") == true)
        let realService = try await converse(simulator) { $0.endpoint = GeminiBackend.realEndpoint }
        #expect(realService.outcome.exitCode == 2)
        #expect(realService.outcome.message?.contains("API key") == true)
        // A WAV without a sample is refused before any connection.
        let empty = try await converse(simulator, input: [])
        #expect(empty.outcome.exitCode == 2)
        #expect(simulator.recorder.snapshot().connections.isEmpty)
    }

    @Test func aStoppedRunKeepsTheAnswerReceivedSoFar() async throws {
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        let inputPath = try TestSignals.writeTemporaryWAV(TestSignals.speech(total: .seconds(12)))
        let outputPath = inputPath.replacingOccurrences(of: ".wav", with: "-out.wav")
        defer {
            try? FileManager.default.removeItem(atPath: inputPath)
            try? FileManager.default.removeItem(atPath: outputPath)
        }
        var options = ConverseOptions(input: inputPath, output: outputPath)
        options.endpoint = simulator.baseURL
        options.fast = true
        options.timeout = .seconds(60)
        let stop = ConverseStop()
        // Stopped (as by Ctrl-C) once the first answer was heard, mid-conversation.
        let outcome = await ConverseRunner(
            options: options,
            network: .nio(logger: quietLogger),
            environment: [:],
            logger: quietLogger,
            stop: stop,
            transcriptSink: { line in if line.hasPrefix("model:") { stop.pull() } }
        ).run()
        #expect(outcome.exitCode == 130, "\(outcome.message ?? "")")
        #expect(outcome.message?.contains("so far is in \(outputPath)") == true)
        let written = try WAVFile.read(path: outputPath)
        #expect(written.samples.count > 0)
        #expect(written.samples.count == outcome.outputSamples)
        #expect(!FileManager.default.fileExists(atPath: outputPath + ".partial"))
    }
}

// MARK: - The session against the simulator

@Suite(.timeLimit(.minutes(2))) struct LiveSessionTests {
    @Test func bargeInInterruptsTheAnswer() async throws {
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        let session = makeSession(simulator)
        let run = Task { try await session.run() }
        var events = session.events.makeAsyncIterator()
        // A long question, so its answer (7 s) is still playing out when the user talks over it,
        // even on a loaded machine where the simulator's clock runs on the wall clock meanwhile.
        session.send(speech(6.0))
        session.send(silence(1.0))
        let untilAudio = await collect(&events) { if case .audio = $0 { true } else { false } }
        #expect(untilAudio.contains(.conversation(.speaking)))
        session.send(speech(1.0))  // the user talks over the answer
        let rest = await collect(&events) { $0 == .turnComplete }
        let interrupted = try #require(rest.firstIndex(of: .interrupted))
        #expect(interrupted < rest.firstIndex(of: .turnComplete)!)
        let turn = try #require(simulator.recorder.snapshot().connections.first?.turns.first)
        #expect(turn.outcome == "interrupted")
        session.finish()
        try await run.value
    }

    @Test func aToolCallRoundTripsWithItsID() async throws {
        let simulator = try await startSimulator {
            $0.scenario.toolCalls = [ScriptedToolCall(turn: 1, name: "get_time", args: ["zone": "UTC"])]
        }
        defer { Task { try? await simulator.stop() } }
        let received = Mutex<JSONValue?>(nil)
        let tools = ToolRegistry([
            LocalTool(name: "get_time", description: "The time", parameters: ["type": "object"]) { args in
                received.withLock { $0 = args }
                return ["time": "12:00"]
            }
        ])
        let session = makeSession(simulator, tools: tools)
        let run = Task { try await session.run() }
        var events = session.events.makeAsyncIterator()
        session.send(speech(1.6))
        session.send(silence(1.0))
        let seen = await collect(&events) { $0 == .turnComplete }
        #expect(seen.contains { if case .tool(.started(_, "get_time")) = $0 { true } else { false } })
        #expect(seen.contains { if case .tool(.finished(_, "get_time", true)) = $0 { true } else { false } })
        #expect(agentText(seen).contains("tool get_time said"))
        #expect(received.withLock { $0 } == ["zone": "UTC"])
        let connection = try #require(simulator.recorder.snapshot().connections.first)
        #expect(connection.toolResponseIDs.count == 1)
        #expect(connection.setup?.tools?.first?.functionDeclarations?.first?.name == "get_time")
        session.finish()
        try await run.value
    }

    @Test func aDroppedConnectionIsResumedAndTheTurnStillAnswered() async throws {
        let simulator = try await startSimulator {
            $0.scenario.faults = [try SimulatorFault.parse("audio=3.5s:drop")]
        }
        defer { Task { try? await simulator.stop() } }
        let session = makeSession(simulator)
        let run = Task { try await session.run() }
        var events = session.events.makeAsyncIterator()
        session.send(speech(1.6))
        session.send(silence(1.0))
        _ = await collect(&events) { $0 == .turnComplete }  // a resumable handle follows it
        session.send(silence(1.0))  // the TCP drop comes during this
        let offline = await collect(&events) { if case .link(.offline) = $0 { true } else { false } }
        #expect(!offline.contains(SessionEvent.link(.connected)))
        session.send(speech(1.6))
        session.send(silence(1.0))
        let rest = await collect(&events) { $0 == .turnComplete }
        #expect(rest.contains(SessionEvent.link(.connected)))
        #expect(rest.contains { if case .audio = $0 { true } else { false } })
        let snapshot = simulator.recorder.snapshot()
        #expect(snapshot.connections.count == 2)
        #expect(snapshot.connections[0].close?.code == nil || snapshot.connections[0].close?.code == 1006)
        #expect(snapshot.connections[1].resumed)
        #expect(snapshot.connections[1].turns.first?.number == 2)  // the conversation went on
        #expect(session.statistics.failures == 1)
        session.finish()
        try await run.value
    }

    @Test func audioSentOnAConnectionClosedBeforeAnyHandleGoesOutAgainOnTheNext() async throws {
        let simulator = try await startSimulator {
            // Mid-question, before any handle: the service's session is lost with what it heard.
            $0.scenario.faults = [try SimulatorFault.parse("audio=0.5s:close=1011:conn=1")]
        }
        defer { Task { try? await simulator.stop() } }
        let session = makeSession(simulator)
        // The question waits in the queue, so it goes out the moment setup completes, as a device's
        // pre-roll does.
        session.send(speech(1.6))
        session.send(silence(1.0))
        let sent = Int64(2.6 * 16_000)
        let run = Task { try await session.run() }
        var events = session.events.makeAsyncIterator()
        let seen = await collect(&events) { $0 == .turnComplete }
        #expect(seen.contains { if case .audio = $0 { true } else { false } })
        let snapshot = simulator.recorder.snapshot()
        #expect(snapshot.connections.count == 2)
        #expect(snapshot.connections[0].close?.code == 1011)
        // Whatever the first connection swallowed was sent again: the second heard the whole question.
        #expect(snapshot.connections[1].audioSamples == sent)
        #expect(snapshot.connections[1].turns.first?.number == 1)
        // What went out on the closing connection (recorded there or not) was counted as sent again.
        let resent = Int64(session.statistics.audioSamplesResent)
        #expect(snapshot.connections[0].audioSamples >= 8_000)
        #expect(resent <= sent && resent >= snapshot.connections[0].audioSamples, "\(resent)")
        #expect(session.statistics.audioSamplesSent == Int(sent))
        session.finish()
        try await run.value
    }

    /// Where a stall fault fires, and the event after which the service owes a reply.
    enum StallPoint: String, CaseIterable, Sendable {
        /// Right after the first audio of answer 1: mid-answer.
        case midAnswer = "answer=1:stall:conn=1"
        /// Once question 1 is transcribed, before anything of its answer.
        case afterTheQuestion = "turn=1:stall:conn=1"

        func isOwedAfter(_ event: SessionEvent) -> Bool {
            switch (self, event) {
            case (.midAnswer, .audio): true
            case (.afterTheQuestion, .transcript(let piece)): piece.role == .user
            default: false
            }
        }
    }

    @Test(arguments: StallPoint.allCases)
    func aServerSilentWhileItOwesAReplyIsLeftAndTheQuestionAnsweredOnTheNext(_ point: StallPoint) async throws {
        let simulator = try await startSimulator {
            // Connection 1 sends nothing more from this point and answers no ping.
            $0.scenario.faults = [try SimulatorFault.parse(point.rawValue)]
        }
        defer { Task { try? await simulator.stop() } }
        let clock = ManualClock()
        let session = makeSession(simulator, clock: clock) { $0.stallTimeout = .seconds(15) }
        session.send(speech(1.6))
        session.send(silence(1.0))
        let run = Task { try await session.run() }
        var events = session.events.makeAsyncIterator()
        _ = await collect(&events) { point.isOwedAfter($0) }
        // Two checks 15 s apart see the reply owed and no frame between them (a frame still on its way
        // can push that one check later).
        try await leaveTheStalledConnection(session, clock, &events)
        // The next connection hears the question again.
        let rest = await collect(&events) { $0 == .turnComplete }
        #expect(rest.contains { if case .audio = $0 { true } else { false } })
        let snapshot = simulator.recorder.snapshot()
        #expect(snapshot.connections.count == 2)
        #expect(snapshot.connections[0].close?.initiator != "server")  // hark left; the server said nothing
        #expect(snapshot.connections[1].turns.contains { $0.answerAudioSeconds > 0 })
        #expect(session.statistics.audioSamplesResent > 0)
        session.finish()
        try await run.value
    }

    @Test func aQuestionTheServiceNeverAnswersCostsOneReconnectNotOneEveryHalfMinute() async throws {
        let simulator = try await startSimulator {
            // Every connection transcribes question 1 and then says nothing (as a service may choose).
            $0.scenario.faults = [try SimulatorFault.parse("turn=1:stall:repeat")]
        }
        defer { Task { try? await simulator.stop() } }
        let clock = ManualClock()
        let session = makeSession(simulator, clock: clock) { $0.stallTimeout = .seconds(15) }
        session.send(speech(1.6))
        session.send(silence(1.0))
        let run = Task { try await session.run() }
        var events = session.events.makeAsyncIterator()
        _ = await collect(&events) { StallPoint.afterTheQuestion.isOwedAfter($0) }
        try await leaveTheStalledConnection(session, clock, &events)
        // The next connection hears the question again and is silent too: it is kept.
        _ = await collect(&events) { StallPoint.afterTheQuestion.isOwedAfter($0) }
        for _ in 0..<4 {
            try await withDeadline(.seconds(10), "the stall check") { await clock.waitForSleepers(1) }
            clock.advance(by: .seconds(15))
        }
        try await withDeadline(.seconds(10), "the stall check") { await clock.waitForSleepers(1) }
        #expect(session.statistics.failures == 1)
        #expect(simulator.recorder.snapshot().connections.count == 2)
        session.finish()
        try await run.value
    }

    @Test func aLongSilenceWhileNothingIsOwedIsNotAStall() async throws {
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        let clock = ManualClock()
        let logs = LogCapture()
        let session = makeSession(simulator, clock: clock, capture: logs) {
            $0.stallTimeout = .seconds(15)
            // "connected" is announced a moment before the setup timer is cancelled: the first sleeper the
            // test sees may still be that timer, which the advances below must not fire.
            $0.setupTimeout = .seconds(300)
        }
        let run = Task { try await session.run() }
        var events = session.events.makeAsyncIterator()
        _ = await collect(&events) { $0 == .link(.connected) }
        // Idle and listening: the service owes nothing, however long it says nothing.
        for _ in 0..<4 {
            try await withDeadline(.seconds(10), "the stall check") { await clock.waitForSleepers(1) }
            clock.advance(by: .seconds(15))
        }
        try await withDeadline(.seconds(10), "the stall check") { await clock.waitForSleepers(1) }
        #expect(simulator.recorder.snapshot().connections.count == 1, "\(logs.all.joined(separator: "\n"))")
        #expect(session.statistics.failures == 0)
        session.finish()
        try await run.value
    }

    @Test func goAwayMidInputResumesAndAudioDuringTheSwitchArrivesAfter() async throws {
        let simulator = try await startSimulator {
            // goAway at 7 s of audio; its grace (wall clock) leaves a loaded machine time to close first.
            $0.connectionLifetime = .seconds(11)
            $0.goAwayGrace = .seconds(4)
        }
        defer { Task { try? await simulator.stop() } }
        // What the session reports as gone out for the first time (the appliance's capture-to-wire figures).
        let reported = Mutex(0)
        let report = AudioSentReport { chunk in reported.withLock { $0 += chunk.samples.count } }
        let session = makeSession(simulator, reportingTo: report)
        let run = Task { try await session.run() }
        var events = session.events.makeAsyncIterator()
        var sent = 0
        func push(_ input: SessionInput) {
            if case .audio(let chunk) = input { sent += chunk.samples.count }
            session.send(input)
        }
        push(speech(1.6))
        push(silence(1.0))
        _ = await collect(&events) { $0 == .turnComplete }  // a resumable handle follows each turn
        push(speech(1.6))
        push(silence(3.0))  // 7.2 s in all: past the goAway at 7 s
        _ = await collect(&events) { $0 == .link(.connecting(attempt: 2)) }
        // The switch is under way: this audio must wait for the new connection, not vanish.
        push(speech(1.6))
        push(silence(1.0))
        let resumed = await collect(&events) { $0 == .turnComplete }
        #expect(resumed.contains(SessionEvent.link(.connected)))
        _ = try await simulator.recorder.waitForAudio(samples: Int64(sent), within: .seconds(10))
        // What is sent again may still be under way on a loaded machine: await the last of it with a deadline.
        let total = sent
        try await withDeadline(.seconds(10), "the repeated audio to arrive") {
            while simulator.recorder.snapshot().audioSamples < Int64(total + session.statistics.audioSamplesResent)
                || reported.withLock({ $0 }) < total
            {
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        let snapshot = simulator.recorder.snapshot()
        // Two connections (a third only when a slow machine outlives the second's lifetime meanwhile).
        try #require(snapshot.connections.count >= 2)
        #expect(snapshot.connections[1].resumed)
        #expect(snapshot.connections[1].resumptionHandle == snapshot.connections[0].lastHandleIssued)
        #expect(snapshot.connections[0].close?.initiator == "client")  // old socket closed first
        #expect(snapshot.connections[0].audioSamples > 0 && snapshot.connections[1].audioSamples > 0)
        // Sample-exact across both connections; what followed the last handle on the old one is sent again.
        #expect(snapshot.audioSamples == Int64(sent + session.statistics.audioSamplesResent))
        #expect(snapshot.distinctAudioSamples >= Int64(sent))
        #expect(snapshot.connections[1].audioSamples >= Int64(session.statistics.audioSamplesResent))
        #expect(session.statistics.droppedInputSamples == 0)
        // Every input sample was reported once as it first went out, none of the repeats.
        #expect(reported.withLock { $0 } == sent)
        session.finish()
        try await run.value
    }

    @Test func refusedConnectionsBackOffExponentiallyWithoutAHotLoop() async throws {
        // Nothing listens on this port: every attempt is refused at once.
        let simulator = try await startSimulator()
        let port = simulator.port
        try await simulator.stop()
        let clock = ManualClock()
        let configuration = GeminiLiveConfiguration(
            endpoint: "ws://127.0.0.1:\(port)",
            authentication: .apiKey(Secret("k")),
            setup: Setup(model: "models/sim"),
            link: LinkSettings(
                backoff: Backoff(initial: .milliseconds(500), cap: .seconds(30)),
                maxConsecutiveFailures: 5,
                randomSeed: 42
            )
        )
        let session = GeminiLiveSession(
            configuration: configuration,
            transport: NIOWebSocketTransport(logger: quietLogger),
            clock: clock,
            logger: quietLogger
        )
        let run = Task { try await session.run() }
        let drain = Task { for await _ in session.events {} }
        for _ in 0..<4 {
            try await withDeadline(.seconds(10), "a backoff sleep") { await clock.waitForSleepers(1) }
            clock.advance(by: .seconds(60))
        }
        await #expect(throws: SessionFailure.self) { try await run.value }
        await drain.value
        let sleeps = clock.requestedSleeps.map(\.milliseconds)
        #expect(sleeps.count == 4)  // 5 attempts, a wait between each: no hot loop
        for (sleep, ceiling) in zip(sleeps, [500, 1000, 2000, 4000] as [Int64]) {
            #expect(sleep >= ceiling / 2 && sleep <= ceiling, "\(sleeps)")
        }
        #expect(session.statistics.failures == 5)
    }

    @Test func noSetupCompleteWithinTheTimeoutIsATransientFailure() async throws {
        let simulator = try await startSimulator { $0.scenario.faults = [try SimulatorFault.parse("presetup:stall")] }
        defer { Task { try? await simulator.stop() } }
        let clock = ManualClock()
        let session = makeSession(simulator, clock: clock) { $0.setupTimeout = .seconds(15) }
        let run = Task { try await session.run() }
        var events = session.events.makeAsyncIterator()
        _ = try await simulator.recorder.waitForConnections(1)
        try await withDeadline(.seconds(10), "the setup timer") { await clock.waitForSleepers(1) }
        #expect(clock.requestedSleeps == [.seconds(15)])
        clock.advance(by: .seconds(15))
        let seen = await collect(&events) { if case .link(.offline) = $0 { true } else { false } }
        guard case .link(.offline(let reason, _))? = seen.last else {
            Issue.record("no offline event")
            return
        }
        #expect(reason.contains("no setupComplete within 15 s"))
        #expect(!seen.contains(SessionEvent.link(.connected)))
        session.finish()
        try await run.value
    }

    @Test func finishStopsABackoffAtOnce() async throws {
        let simulator = try await startSimulator()
        let port = simulator.port
        try await simulator.stop()
        let clock = ManualClock()
        let session = GeminiLiveSession(
            configuration: GeminiLiveConfiguration(
                endpoint: "ws://127.0.0.1:\(port)",
                authentication: .apiKey(Secret("k")),
                setup: Setup(model: "models/sim")
            ),
            transport: NIOWebSocketTransport(logger: quietLogger),
            clock: clock,
            logger: quietLogger
        )
        let run = Task { try await session.run() }
        var events = session.events.makeAsyncIterator()
        let offline = await collect(&events) { if case .link(.offline) = $0 { true } else { false } }
        #expect(offline.first == .link(.connecting(attempt: 1)))
        try await withDeadline(.seconds(10), "the backoff sleep") { await clock.waitForSleepers(1) }
        session.finish()  // the clock never moves: only finish() can end this
        try await withDeadline(.seconds(10), "run() to return") { try await run.value }
        let rest = await collect(&events) { _ in false }
        #expect(rest.last == .link(.ended))
    }

    @Test func anUnknownHandleIsRefusedAndAFreshSessionStarts() async throws {
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        let session = makeSession(simulator) { $0.initialHandle = "handle-from-another-life" }
        let run = Task { try await session.run() }
        var events = session.events.makeAsyncIterator()
        let seen = await collect(&events) { $0 == .link(.connected) }
        #expect(seen.contains(.notice("resumption refused; starting a fresh session")))
        let snapshot = simulator.recorder.snapshot()
        #expect(snapshot.connections.count == 2)
        #expect(snapshot.connections[0].close?.code == 1007)
        #expect(snapshot.connections[1].resumptionHandle == nil)
        #expect(session.statistics.resumptionsRefused == 1)
        session.finish()
        try await run.value
    }

    @Test func aGreetingTextTurnIsAnswered() async throws {
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        let session = makeSession(simulator)
        let run = Task { try await session.run() }
        var events = session.events.makeAsyncIterator()
        session.send(.text("Greet the visitor"))
        let seen = await collect(&events) { $0 == .turnComplete }
        #expect(agentText(seen).contains("answering: Greet the visitor"))
        #expect(seen.contains { if case .audio = $0 { true } else { false } })
        session.finish()
        try await run.value
    }
}
