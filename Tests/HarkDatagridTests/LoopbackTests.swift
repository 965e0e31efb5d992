import Foundation
import HarkApp
import HarkBackendKit
import HarkCore
import HarkDatagrid
import HarkDatagridSimulator
import HarkHTTP
import HarkNet
import HarkSimulatorKit
import HarkTestKit
import Synchronization
import Testing

/// The session against the simulator over real loopback sockets: REST hand-off, WebSocket, reconnects.
@Suite(.serialized) struct LoopbackTests {
    static let key = "dg-secret-key-7f3a9c"

    /// One spoken turn.
    static let speech = TestSignals.speech(total: .milliseconds(2600), burst: .milliseconds(1600), gap: .seconds(1))

    @Test func aTurnOverTheRESTHandoffKeepsTheKeyInTheHeader() async throws {
        let simulator = try await startSimulator { $0.requiredKey = Secret(Self.key) }
        defer { Task { try? await simulator.stop() } }
        let running = startSession(simulator, key: Self.key) { $0.teamspace = "team-1" }
        // Audio sent before `ready` waits in the queue.
        sendAudio(running.session, Self.speech)
        try await running.events.waitFor("the agent's answer") { $0.turnCompletes >= 1 }
        await running.finish()

        let events = running.events.all
        #expect(
            events.transcripts.first
                == Transcript(role: .user, segment: "user-1", text: "speech 1 (1.6 s)", isFinal: true)
        )
        #expect(
            events.transcripts.contains(Transcript(role: .agent, segment: "agent-1", text: "answer 1", isFinal: true))
        )
        #expect(events.audioSamples > 24_000)
        #expect(events.conversationStates.prefix(4) == [.listening, .thinking, .speaking, .listening])

        let snapshot = simulator.recorder.snapshot()
        let request = try #require(snapshot.httpRequests.first)
        #expect(request.path == "/v1/voice")
        #expect(request.authorization == "bearer")
        #expect(request.teamspace == "team-1")
        #expect(!request.hadQuery)
        #expect(request.start?.agentId == "agent_test")
        let connection = try #require(snapshot.connection(1))
        #expect(connection.credential == "handoff")
        #expect(!connection.keyInURL)
        #expect(connection.audioBeforeReady == 0)
        #expect(connection.audioSamples == Int64(Self.speech.count))
        #expect(connection.receivedKinds.first == "start")
        #expect(connection.stops == 1)
        #expect(running.session.statistics.other["handoffs"] == 1)
        // The key never reaches a log line, and the token URL only redacted.
        let logs = running.logs.all
        #expect(!logs.isEmpty)
        #expect(!logs.contains { $0.contains(Self.key) })
        #expect(!logs.contains { $0.contains("token=vt_") })
        #expect(logs.contains { $0.contains("/ws/voice?token=REDACTED") })
    }

    @Test func aHandoffTokenIsSingleUse() async throws {
        let simulator = try await startSimulator { $0.requiredKey = Secret(Self.key) }
        defer { Task { try? await simulator.stop() } }
        let response = try await NIOHTTPClient().send(
            HTTPRequest(
                method: "POST",
                url: simulator.httpBaseURL + "/v1/voice",
                headers: [("Authorization", "Bearer \(Self.key)"), ("Content-Type", "application/json")],
                body: Data(#"{"agent_id":"agent_x"}"#.utf8)
            )
        )
        #expect(response.status == 200)
        let handoff = try JSONDecoder().decode(DatagridHandoff.self, from: response.body)
        #expect(handoff.object == "voice.session")
        #expect(handoff.agentId == "agent_x")
        #expect(handoff.startMessage == ["type": "start", "payload": ["agent_id": "agent_x"]])
        let transport = NIOWebSocketTransport(logger: quietLogger)
        let first = try await transport.connect(WebSocketRequest(url: handoff.url)) { inbound, outbound in
            try await outbound.send(text: try DatagridCodec().encode(raw: handoff.startMessage!))
            _ = try await inbound.next()  // started
            _ = try await inbound.next()  // ready
            try await outbound.close(code: 1000, reason: "done")
        }
        #expect(first?.code == 1000)
        // The same token again: refused.
        let second = try await transport.connect(WebSocketRequest(url: handoff.url)) { inbound, _ in
            while try await inbound.next() != nil {}
        }
        #expect(second?.code == 1008)
        let snapshot = simulator.recorder.snapshot()
        #expect(snapshot.connections.map(\.credential) == ["handoff", "invalid"])
        #expect(snapshot.connection(2)?.errorsSent == ["unauthorized"])
    }

    @Test func overTLS() async throws {
        let caPath = FileManager.default.temporaryDirectory.path + "/hark-dg-ca-\(UUID().uuidString).pem"
        defer { try? FileManager.default.removeItem(atPath: caPath) }
        let simulator = try await startSimulator {
            $0.requiredKey = Secret(Self.key)
            $0.tls = true
            $0.caOut = caPath
        }
        defer { Task { try? await simulator.stop() } }
        #expect(simulator.httpBaseURL.hasPrefix("https://localhost:"))
        let running = startSession(
            simulator,
            key: Self.key,
            transport: NIOWebSocketTransport(caFile: caPath, logger: quietLogger),
            http: NIOHTTPClient(caFile: caPath)
        )
        running.session.send(.text("secure?"))
        try await running.events.waitFor("the answer") { $0.turnCompletes >= 1 }
        await running.finish()
        #expect(simulator.recorder.snapshot().connection(1)?.credential == "handoff")
        #expect(running.logs.all.contains { $0.contains("wss://localhost:") && $0.contains("token=REDACTED") })
        #expect(!running.logs.all.contains { $0.contains(Self.key) })
    }

    @Test func aWrongKeyIsRejectedAsAuthentication() async throws {
        let simulator = try await startSimulator { $0.requiredKey = Secret(Self.key) }
        defer { Task { try? await simulator.stop() } }
        let running = startSession(simulator, key: "wrong-key-123") { $0.link.giveUpOnRejection = true }
        let result = await running.task.value
        guard case .failure(let error) = result, let failure = error as? SessionFailure else {
            Issue.record("expected a SessionFailure, got \(result)")
            return
        }
        #expect(failure.kind == .authentication)
        #expect(simulator.recorder.snapshot().httpRequests.first?.authorization == "wrong")
        #expect(!running.logs.all.contains { $0.contains("wrong-key-123") })
    }

    @Test func aRejectedStartIsAConfigurationError() async throws {
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        let running = startSession(simulator) {
            $0.start.initialMessage = String(repeating: "x", count: DatagridStart.initialMessageLimit + 1)
            $0.link.giveUpOnRejection = true
        }
        let result = await running.task.value
        guard case .failure(let error) = result, let failure = error as? SessionFailure else {
            Issue.record("expected a SessionFailure, got \(result)")
            return
        }
        #expect(failure.kind == .configuration)
        #expect(failure.message.contains("invalid_request"))
        #expect(simulator.recorder.snapshot().connection(1)?.errorsSent == ["invalid_request"])
        #expect(running.events.all.links.contains { if case .rejected = $0 { true } else { false } })
    }

    @Test func aDirectConnectionWithAWrongKeyExitsAsAnAuthenticationFailureAtOnce() async throws {
        // The service refuses the key on the socket itself (close 1008): a rejected key (exit 3), not a
        // network problem retried.
        let simulator = try await startSimulator { $0.requiredKey = Secret(Self.key) }
        defer { Task { try? await simulator.stop() } }
        let inputPath = try TestSignals.writeTemporaryWAV(Self.speech)
        defer {
            try? FileManager.default.removeItem(atPath: inputPath)
            try? FileManager.default.removeItem(atPath: inputPath + "-out.wav")
        }
        var options = ConverseOptions(input: inputPath, output: inputPath + "-out.wav")
        options.backend = "datagrid"
        options.endpoint = simulator.httpBaseURL
        options.settings["direct"] = "true"
        options.fast = true
        let logs = LogCapture()
        let outcome = await ConverseRunner(
            options: options,
            network: .nio(logger: logs.logger("transport")),
            environment: ["DATAGRID_API_KEY": "wrong-key-123"],
            logger: logs.logger(),
            transcriptSink: { _ in }
        ).run()
        #expect(outcome.exitCode == 3, "\(outcome.message ?? "")")
        #expect(outcome.message?.contains("unauthorized") == true, "\(outcome.message ?? "")")
        #expect(outcome.statistics?.failures == 1)
        #expect(!logs.all.contains { $0.contains("wrong-key-123") })
    }

    @Test func converseExitsWithAuthenticationFailureOnAWrongKey() async throws {
        let simulator = try await startSimulator { $0.requiredKey = Secret(Self.key) }
        defer { Task { try? await simulator.stop() } }
        let inputPath = try TestSignals.writeTemporaryWAV(Self.speech)
        defer { try? FileManager.default.removeItem(atPath: inputPath) }
        var options = ConverseOptions(input: inputPath, output: inputPath + "-out.wav")
        options.backend = "datagrid"
        options.endpoint = simulator.httpBaseURL
        options.fast = true
        let logs = LogCapture()
        let runner = ConverseRunner(
            options: options,
            network: .nio(logger: logs.logger("transport")),
            environment: ["DATAGRID_API_KEY": "wrong-key-987"],
            logger: logs.logger(),
            transcriptSink: { _ in }
        )
        let outcome = await runner.run()
        try? FileManager.default.removeItem(atPath: inputPath + "-out.wav")
        #expect(outcome.exitCode == 3)
        #expect(outcome.message?.contains("HTTP 401") == true)
        #expect(!logs.all.contains { $0.contains("wrong-key-987") })
    }

    @Test func directConnectionRedactsTheKey() async throws {
        let simulator = try await startSimulator { $0.requiredKey = Secret(Self.key) }
        defer { Task { try? await simulator.stop() } }
        let running = startSession(simulator, key: Self.key, mode: .direct)
        sendAudio(running.session, Self.speech)
        try await running.events.waitFor("the answer") { $0.turnCompletes >= 1 }
        await running.finish()
        let snapshot = simulator.recorder.snapshot()
        #expect(snapshot.httpRequests.isEmpty)
        #expect(snapshot.connection(1)?.credential == "key")
        let logs = running.logs.all
        #expect(!logs.contains { $0.contains(Self.key) })
        #expect(logs.contains { $0.contains("/ws/voice?token=REDACTED") })
    }

    @Test func withoutAHandoffEndpointItFallsBackToTheDirectConnection() async throws {
        let simulator = try await startSimulator {
            $0.requiredKey = Secret(Self.key)
            $0.handoffAvailable = false
        }
        defer { Task { try? await simulator.stop() } }
        let running = startSession(simulator, key: Self.key)
        running.session.send(.text("hello"))
        try await running.events.waitFor("the answer") { $0.turnCompletes >= 1 }
        await running.finish()
        let snapshot = simulator.recorder.snapshot()
        #expect(snapshot.httpRequests.map(\.status) == [404])
        #expect(snapshot.connection(1)?.credential == "key")
        #expect(running.session.statistics.other["directFallbacks"] == 1)
        #expect(!running.logs.all.contains { $0.contains(Self.key) })
    }

    @Test func aRejectedHandoffNeverFallsBack() async throws {
        let simulator = try await startSimulator { $0.requiredKey = Secret(Self.key) }
        defer { Task { try? await simulator.stop() } }
        let running = startSession(simulator, key: "not-the-key") { $0.link.giveUpOnRejection = true }
        _ = await running.task.value
        #expect(simulator.recorder.snapshot().connections.isEmpty)
        #expect(running.session.statistics.other["directFallbacks"] == nil)
    }

    @Test func bargeInInterruptsTheAnswer() async throws {
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        let running = startSession(simulator)
        // Speech, a pause long enough to end the turn, and speech again while the answer plays.
        let input = TestSignals.speech(total: .milliseconds(4900), burst: .milliseconds(1600), gap: .milliseconds(900))
        sendAudio(running.session, input)
        try await running.events.waitFor("the service's interruption") { $0.interruptions >= 1 }
        try await running.events.waitFor("the second answer") { $0.turnCompletes >= 1 }
        await running.finish()
        let snapshot = simulator.recorder.snapshot()
        let turns = try #require(snapshot.connection(1)?.turns)
        #expect(turns.map(\.outcome) == ["interrupted", "completed"])
        #expect(snapshot.connection(1)?.sentKinds.contains("interrupted") == true)
        // `interrupted` reached the conversation state: back to listening before the second answer.
        let states = running.events.all.conversationStates
        #expect(states.starts(with: [.listening, .thinking, .speaking, .listening]))
    }

    @Test func localInterruptIsSentAndDropsTheRestOfTheAnswer() async throws {
        let simulator = try await startSimulator { $0.audioPace = 0.05 }
        defer { Task { try? await simulator.stop() } }
        let running = startSession(simulator)
        sendAudio(running.session, Self.speech)
        try await running.events.waitFor("answer audio") { $0.audioSamples > 0 }
        running.session.send(.interrupt)
        try await running.events.waitFor("the local interruption") { $0.interruptions >= 1 }
        _ = try await simulator.recorder.waitFor("the interrupt message") { $0.connection(1)?.interrupts == 1 }
        _ = try await simulator.recorder.waitForFinishedTurns(1)
        await running.finish()
        #expect(simulator.recorder.snapshot().connection(1)?.turns.first?.outcome == "interrupted")
        #expect(running.events.all.transcripts.filter { $0.role == .agent && $0.text == "answer 1" }.isEmpty)
    }

    @Test func textTurn() async throws {
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        let running = startSession(simulator)
        running.session.send(.text("What is the weather?"))
        try await running.events.waitFor("the answer") { $0.turnCompletes >= 1 }
        await running.finish()
        #expect(simulator.recorder.snapshot().connection(1)?.texts == ["What is the weather?"])
        #expect(running.events.all.transcripts.first?.text == "What is the weather?")
    }

    @Test func withoutOutputTranscriptionTheTurnEndsWhenTheAudioGoesQuiet() async throws {
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        let running = startSession(simulator) {
            $0.start.voiceConfig?.outputTranscription = false
            $0.answerQuietTimeout = .milliseconds(300)
        }
        running.session.send(.text("quiet please"))
        let events = try await running.events.waitFor("the end of the answer") { $0.turnCompletes >= 1 }
        await running.finish()
        #expect(events.audioSamples == 8 * 3_000)
        #expect(events.transcripts.allSatisfy { $0.role == .user })
        // The agent's words still arrive, with `ended`.
        #expect(
            running.events.all.transcripts.last.map { "\($0.role) \($0.text) \($0.isFinal)" } == "agent answer 1 true"
        )
        #expect(simulator.recorder.snapshot().connection(1)?.sentKinds.filter { $0 == "transcript" }.count == 1)
        #expect(running.events.all.conversationStates.starts(with: [.listening, .thinking, .speaking, .listening]))
    }

    @Test func toolCallStatusSequence() async throws {
        let simulator = try await startSimulator {
            $0.tools = [
                DatagridToolScript(turn: 1, name: "search_kb"),
                DatagridToolScript(turn: 2, name: "send_email", fails: true),
            ]
        }
        defer { Task { try? await simulator.stop() } }
        let running = startSession(simulator)
        running.session.send(.text("first"))
        try await running.events.waitFor("the first answer") { $0.turnCompletes >= 1 }
        running.session.send(.text("second"))
        try await running.events.waitFor("the second answer") { $0.turnCompletes >= 2 }
        await running.finish()
        let events = running.events.all
        #expect(
            events.tools == [
                .started(id: "", name: "search_kb"), .finished(id: "", name: "search_kb", succeeded: true),
                .started(id: "", name: "send_email"), .finished(id: "", name: "send_email", succeeded: false),
            ]
        )
        // A running tool shows as thinking, then the answer speaks.
        let states = events.conversationStates
        #expect(states.starts(with: [.listening, .thinking, .speaking, .listening, .thinking, .speaking]))
        let sent = simulator.recorder.snapshot().connection(1)?.sentKinds ?? []
        #expect(sent.starts(with: ["started", "ready", "transcript", "tool_call", "tool_call", "audio", "transcript"]))
    }

    @Test func silenceTimeoutErrorIsTransientAndTheConversationContinues() async throws {
        // 60 s of silent frames, scaled to 0.6 s.
        let simulator = try await startSimulator { $0.timeScale = 0.01 }
        defer { Task { try? await simulator.stop() } }
        let running = startSession(simulator)
        sendAudio(running.session, silence(.seconds(1)))
        try await running.events.waitFor("the second connection") { $0.connectedCount >= 2 }
        await running.finish()
        let snapshot = simulator.recorder.snapshot()
        let first = try #require(snapshot.connection(1))
        #expect(first.errorsSent == ["client_silence_timeout"])
        #expect(first.close?.code == 1000)
        let links = running.events.all.links
        #expect(
            links.contains {
                if case .offline(let reason, _) = $0 { reason.contains("client_silence_timeout") } else { false }
            }
        )
        #expect(snapshot.connection(2)?.continued == true)
        #expect(snapshot.connection(2)?.conversationId == first.conversationId)
        #expect(running.session.statistics.serviceErrors == 1)
    }

    @Test func aDropReconnectsAndKeepsTheConversationId() async throws {
        let simulator = try await startSimulator { $0.faults = [DatagridFault(.afterTurn(1), .drop)] }
        defer { Task { try? await simulator.stop() } }
        let running = startSession(simulator)
        running.session.send(.text("one"))
        try await running.events.waitFor("the reconnect") { $0.connectedCount >= 2 }
        running.session.send(.text("two"))
        try await running.events.waitFor("the second answer") { $0.turnCompletes >= 2 }
        await running.finish()
        let snapshot = simulator.recorder.snapshot()
        let first = try #require(snapshot.connection(1))
        let second = try #require(snapshot.connection(2))
        #expect(first.close?.initiator == "drop")
        #expect(first.conversationId != nil)
        #expect(second.start?.conversationId == first.conversationId)
        #expect(second.continued)
        // The turn count continues in the same conversation.
        #expect(second.turns.map(\.number) == [2])
        #expect(snapshot.httpRequests.count == 2)
        #expect(snapshot.httpRequests[1].start?.conversationId == first.conversationId)
        #expect(running.session.conversationId == first.conversationId)
        #expect(running.events.all.links.contains { if case .offline = $0 { true } else { false } })
    }

    @Test func audioSpokenWhileOfflineIsHeldAndSentAfterReady() async throws {
        let simulator = try await startSimulator { $0.faults = [DatagridFault(.afterTurn(1), .drop)] }
        defer { Task { try? await simulator.stop() } }
        let running = startSession(simulator) {
            $0.link.backoff = Backoff(initial: .milliseconds(300), cap: .seconds(1))
        }
        running.session.send(.text("one"))
        try await running.events.waitFor("the drop") {
            $0.links.contains { if case .offline = $0 { true } else { false } }
        }
        // Spoken while offline: held in the bounded queue, sent once the new connection is ready.
        sendAudio(running.session, Self.speech)
        try await running.events.waitFor("the answer on the new connection") { $0.turnCompletes >= 2 }
        await running.finish()
        let second = try #require(simulator.recorder.snapshot().connection(2))
        #expect(second.audioBeforeReady == 0)
        #expect(second.audioSamples == Int64(Self.speech.count))
        #expect(second.turns.map(\.kind) == ["speech"])
        #expect(running.session.statistics.droppedInputSamples == 0)
    }

    @Test func aRestartContinuesThePersistedConversation() async throws {
        let path = FileManager.default.temporaryDirectory.path + "/hark-dg-conversation-\(UUID().uuidString).json"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let store = ResumptionStore(path: path)
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        let first = startSession(simulator) { $0.conversationStore = store }
        first.session.send(.text("remember me"))
        try await first.events.waitFor("the answer") { $0.turnCompletes >= 1 }
        let id = try #require(first.session.conversationId)
        #expect(store.load(model: "agent_test", now: Date().timeIntervalSince1970) == id)
        // The process dies: no stop, no ended.
        first.task.cancel()
        _ = await first.task.value
        #expect(store.load(model: "agent_test", now: Date().timeIntervalSince1970) == id)

        let second = startSession(simulator) { $0.conversationStore = store }
        second.session.send(.text("still me"))
        try await second.events.waitFor("the answer") { $0.turnCompletes >= 1 }
        let snapshot = simulator.recorder.snapshot()
        #expect(snapshot.connection(2)?.continued == true)
        #expect(snapshot.connection(2)?.conversationId == id)
        #expect(snapshot.connection(2)?.turns.map(\.number) == [2])
        // A finished conversation is forgotten.
        await second.finish()
        #expect(store.load(model: "agent_test", now: Date().timeIntervalSince1970) == nil)
    }

    @Test func aCloseCodeReconnects() async throws {
        let simulator = try await startSimulator {
            $0.faults = [DatagridFault(.afterReady(connection: 1), .close(code: 1011, reason: "internal"))]
        }
        defer { Task { try? await simulator.stop() } }
        let running = startSession(simulator)
        try await running.events.waitFor("the reconnect") { $0.connectedCount >= 2 }
        running.session.send(.text("after the reconnect"))
        try await running.events.waitFor("the answer") { $0.turnCompletes >= 1 }
        await running.finish()
        let snapshot = simulator.recorder.snapshot()
        #expect(snapshot.connection(1)?.close?.code == 1011)
        #expect(snapshot.connection(2)?.texts == ["after the reconnect"])
        #expect(running.events.all.links.contains { if case .offline = $0 { true } else { false } })
    }

    @Test func malformedFramesAndUnknownTypesAreSkipped() async throws {
        let simulator = try await startSimulator {
            $0.faults = [
                DatagridFault(.afterReady(connection: 1), .malformed),
                DatagridFault(.afterReady(connection: 1), .unknownType),
            ]
        }
        defer { Task { try? await simulator.stop() } }
        let running = startSession(simulator)
        running.session.send(.text("still there?"))
        try await running.events.waitFor("the answer") { $0.turnCompletes >= 1 }
        await running.finish()
        let statistics = running.session.statistics
        #expect(statistics.undecodableFrames == 2)
        #expect(statistics.unknownMessages == 1)
        #expect(statistics.readies == 1)
        #expect(running.logs.all.contains { $0.contains("unknown message type viseme") })
    }

    @Test func finishSendsStopAndDeliversTheEndedTranscript() async throws {
        let simulator = try await startSimulator { $0.greets = true }
        defer { Task { try? await simulator.stop() } }
        // Without silent start the agent greets first.
        let running = startSession(simulator) { $0.start.voiceConfig?.silentStart = nil }
        try await running.events.waitFor("the greeting") { $0.turnCompletes >= 1 }
        let result = await running.finish()
        #expect((try? result.get()) != nil)
        let snapshot = simulator.recorder.snapshot()
        #expect(snapshot.connection(1)?.stops == 1)
        #expect(snapshot.connection(1)?.sentKinds.last == "ended")
        let events = running.events.all
        #expect(events.transcripts.first?.text == "Hello! How can I help?")
        #expect(events.transcripts.first?.role == .agent)
        #expect(events.transcripts.first?.isFinal == true)
        #expect(
            events.contains { if case .notice(let text) = $0 { text.hasPrefix("conversation ended") } else { false } }
        )
        #expect(events.last == .link(.ended))
    }

    @Test func converseWithTheDatagridBackend() async throws {
        let simulator = try await startSimulator { $0.requiredKey = Secret(Self.key) }
        defer { Task { try? await simulator.stop() } }
        let input = TestSignals.speech(total: .seconds(8))
        let inputPath = try TestSignals.writeTemporaryWAV(input)
        let outputPath = inputPath.replacingOccurrences(of: ".wav", with: "-out.wav")
        let keyPath = FileManager.default.temporaryDirectory.path + "/hark-dg-key-\(UUID().uuidString)"
        try Self.key.write(toFile: keyPath, atomically: true, encoding: .utf8)
        defer {
            try? FileManager.default.removeItem(atPath: inputPath)
            try? FileManager.default.removeItem(atPath: outputPath)
            try? FileManager.default.removeItem(atPath: keyPath)
        }
        var options = ConverseOptions(input: inputPath, output: outputPath)
        options.backend = "datagrid"
        options.endpoint = simulator.httpBaseURL
        options.apiKeyFile = keyPath
        options.settings["agent_id"] = "agent_kiosk"
        options.settings["voice_preset"] = "warm"
        options.settings["silent_start"] = "true"
        options.fast = true
        options.idleTimeout = .milliseconds(500)
        options.timeout = .seconds(60)
        let logs = LogCapture()
        let lines = Lines()
        let runner = ConverseRunner(
            options: options,
            network: .nio(logger: logs.logger("transport")),
            environment: [:],
            logger: logs.logger(),
            transcriptSink: { lines.append($0) }
        )
        let outcome = await runner.run()
        #expect(outcome.exitCode == 0, "\(outcome.message ?? "")")
        #expect(outcome.inputSamplesSent == input.count)
        #expect(outcome.outputSamples > 24_000)
        #expect(outcome.statistics?.other["handoffs"] == 1)
        #expect(lines.all.contains("user: speech 1 (1.6 s)"))
        #expect(lines.all.contains("model: answer 1"))
        #expect(lines.all.contains("model: answer 2"))
        let start = simulator.recorder.snapshot().connection(1)?.start
        #expect(start?.agentId == "agent_kiosk")
        #expect(start?.voiceConfig?.voicePreset == "warm")
        #expect(!logs.all.contains { $0.contains(Self.key) })
    }
}

/// Collects transcript lines printed by `hark converse`.
final class Lines: Sendable {
    private let lines = Mutex<[String]>([])
    var all: [String] { lines.withLock { $0 } }
    func append(_ line: String) { lines.withLock { $0.append(line) } }
}
