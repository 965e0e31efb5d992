import Foundation
import HarkBackendKit
import HarkCascade
import HarkCascadeSimulator
import HarkCore
import HarkGemini
import HarkHTTP
import HarkNet
import HarkTestKit
import Logging
import Synchronization
import Testing

/// The cascade simulator over real loopback sockets, with the project's own WebSocket and HTTP clients.
@Suite(.timeLimit(.minutes(1))) struct CascadeSimulatorTests {
    static let quiet = Logger(label: "cascade-sim") { _ in SwiftLogNoOpLogHandler() }

    func start(_ configure: (inout CascadeSimulatorConfiguration) -> Void = { _ in }) async throws -> CascadeSimulator {
        var configuration = CascadeSimulatorConfiguration()
        configuration.sarvamKey = Secret("sarvam-key")
        configuration.geminiKey = Secret("gemini-key")
        configure(&configuration)
        let simulator = CascadeSimulator(configuration: configuration, logger: Self.quiet)
        try await simulator.start()
        return simulator
    }

    func webSocketBase(_ simulator: CascadeSimulator) -> String {
        "ws" + simulator.httpBaseURL.dropFirst("http".count)
    }

    /// Opens `path` with `key`, runs `body` on it, and returns how it closed.
    func socket(
        _ simulator: CascadeSimulator,
        _ path: String,
        key: String = "sarvam-key",
        _ body: @escaping @Sendable (WebSocketInbound, any WebSocketOutbound) async throws -> Void
    ) async -> Result<WebSocketClose?, SessionFailure> {
        await NIOWebSocketTransport(logger: Self.quiet).exchange(
            WebSocketRequest(url: webSocketBase(simulator) + path, headers: [("api-subscription-key", key)]),
            handler: body
        )
    }

    static func text(_ message: WebSocketMessage?) -> String? {
        if case .text(let text)? = message { return text }
        return nil
    }

    @Test func speechToTextOverASocket() async throws {
        let simulator = try await start { $0.transcripts = ["hello"] }
        defer { Task { try? await simulator.stop() } }
        let events = Mutex<[SpeechToTextEvent]>([])
        let speech = TestSignals.tone(seconds: 1, frequency: 220, amplitude: 0.25)
        let path = "/speech-to-text/ws?language-code=unknown&model=saaras:v3&vad_signals=true&flush_signal=true"
        _ = await socket(simulator, path) { inbound, outbound in
            for start in stride(from: 0, to: speech.count, by: 800) {
                let chunk = Array(speech[start..<start + 800])
                try await outbound.send(text: SpeechToTextRequest.audio(samples: chunk, sampleRate: 16_000).text)
            }
            try await outbound.send(text: SpeechToTextRequest.flush.text)
            while events.withLock({ $0.count }) < 3, let text = Self.text(try await inbound.next()) {
                let event = try SpeechToTextEvent.decode(Data(text.utf8))
                events.withLock { $0.append(event) }
            }
            try await outbound.close(code: 1000, reason: "done")
        }
        #expect(events.withLock { $0.first } == .speechStarted)
        #expect(Set(events.withLock { $0 }) == [.speechStarted, .speechEnded, .transcript("hello", language: "en-IN")])
        #expect(simulator.snapshot.samplesReceived == 16_000 && simulator.snapshot.flushes == 1)
    }

    @Test func aWrongKeyIsRefusedAtTheUpgradeOrClosedWith4003() async throws {
        let simulator = try await start()
        defer { Task { try? await simulator.stop() } }
        let refused = await socket(simulator, "/text-to-speech/ws", key: "wrong") { _, _ in }
        guard case .failure(let failure) = refused else {
            Issue.record("a wrong key was let in")
            return
        }
        #expect(failure.kind == .authentication)

        let later = try await start { $0.refuseBadKeyAtUpgrade = false }
        defer { Task { try? await later.stop() } }
        let closed = await socket(later, "/speech-to-text/ws", key: "wrong") { inbound, outbound in
            try await outbound.send(text: SpeechToTextRequest.audio(samples: [1, 2, 3], sampleRate: 16_000).text)
            while try await inbound.next() != nil {}
        }
        guard case .success(let close) = closed else {
            Issue.record("the handshake failed: \(closed)")
            return
        }
        #expect(close?.code == 4003)
    }

    @Test func textToSpeechOverASocket() async throws {
        let simulator = try await start()
        defer { Task { try? await simulator.stop() } }
        let received = Mutex<(samples: Int, final: Bool)>((0, false))
        _ = await socket(simulator, "/text-to-speech/ws?model=bulbul:v3&send_completion_event=true") {
            inbound,
            outbound in
            try await outbound.send(text: try TextToSpeechRequest.config(SpeechVoice()).encoded())
            try await outbound.send(text: try TextToSpeechRequest.text("നമസ്കാരം.").encoded())
            try await outbound.send(text: try TextToSpeechRequest.flush.encoded())
            while let text = Self.text(try await inbound.next()) {
                switch try TextToSpeechEvent.decode(Data(text.utf8)) {
                case .audio(let samples): received.withLock { $0.samples += samples.count }
                case .final:
                    received.withLock { $0.final = true }
                    try await outbound.close(code: 1000, reason: "done")
                    return
                default: break
                }
            }
        }
        let (samples, final) = received.withLock { $0 }
        #expect(final)
        #expect(samples == 24_000 * TextToSpeechService.millisecondsPerCharacter * "നമസ്കാരം.".count / 1000)
        #expect(simulator.snapshot.texts == ["നമസ്കാരം."])
    }

    @Test func theTextStreamArrivesAsServerSentEvents() async throws {
        let simulator = try await start()
        defer { Task { try? await simulator.stop() } }
        let request = GenerateContentRequest(contents: [.text("good morning", role: "user")])
        let url = simulator.httpBaseURL + "/v1beta/models/gemini-3.8-flash:streamGenerateContent?alt=sse"
        let response = try await NIOHTTPClient().stream(
            HTTPRequest(
                method: "POST",
                url: url,
                headers: [("x-goog-api-key", "gemini-key"), ("Content-Type", "application/json")],
                body: try request.body()
            )
        )
        #expect(response.status == 200)
        #expect(response.header("Content-Type") == "text/event-stream")
        var parser = ServerSentEventParser()
        var text = ""
        var chunks = 0
        for try await data in response.body {
            for event in parser.feed(data) {
                text += try GenerateContentChunk.decode(Data(event.data.utf8)).spokenText
                chunks += 1
            }
        }
        #expect(chunks > 3)
        #expect(text == "I heard you. Here is my answer: you said good morning. That is all.")
        #expect(simulator.snapshot.textRequests.count == 1)

        let wrongKey = try await NIOHTTPClient().send(
            HTTPRequest(method: "POST", url: url, headers: [("x-goog-api-key", "wrong")], body: try request.body())
        )
        #expect(wrongKey.status == 400)
    }
}

/// The cascade session against the cascade simulator over loopback.
@Suite(.timeLimit(.minutes(1))) struct CascadeSessionTests {
    init() {}

    func session(
        _ simulator: CascadeSimulator,
        tools: ToolRegistry = ToolRegistry(),
        clock: any Clock<Duration> = ContinuousClock(),
        logger: Logger = CascadeSimulatorTests.quiet,
        _ configure: (inout CascadeConfiguration) -> Void = { _ in }
    ) -> CascadeSession {
        var configuration = CascadeConfiguration(
            sarvamEndpoint: simulator.httpBaseURL,
            geminiEndpoint: simulator.httpBaseURL,
            sarvamKey: Secret("sarvam-key"),
            geminiKey: Secret("gemini-key")
        )
        configuration.link.randomSeed = 1
        configure(&configuration)
        return CascadeSession(
            configuration: configuration,
            transport: NIOWebSocketTransport(logger: CascadeSimulatorTests.quiet),
            http: NIOHTTPClient(),
            tools: tools,
            clock: clock,
            logger: logger
        )
    }

    func speech(_ seconds: Double) -> SessionInput {
        .audio(
            AudioChunk(
                samples: (0..<Int(seconds * 16_000)).map {
                    Int16(8000 * sin(2 * Double.pi * 220 * Double($0) / 16_000))
                },
                sampleRate: 16_000
            )
        )
    }

    /// The samples of an audio input.
    func samples(_ input: SessionInput) -> [Int16] {
        if case .audio(let chunk) = input { chunk.samples } else { [] }
    }

    func silence(_ seconds: Double) -> SessionInput {
        .audio(AudioChunk(samples: [Int16](repeating: 0, count: Int(seconds * 16_000)), sampleRate: 16_000))
    }

    /// Events until `stop` matches one (inclusive).
    func collect(_ session: CascadeSession, until stop: (SessionEvent) -> Bool) async -> [SessionEvent] {
        var seen: [SessionEvent] = []
        for await event in session.events {
            seen.append(event)
            if stop(event) { break }
        }
        return seen
    }

    @Test func aSpokenTurnIsAnsweredSentenceBySentence() async throws {
        var configuration = CascadeSimulatorConfiguration()
        configuration.sarvamKey = Secret("sarvam-key")
        configuration.geminiKey = Secret("gemini-key")
        configuration.transcripts = ["what is the time"]
        let simulator = CascadeSimulator(configuration: configuration, logger: CascadeSimulatorTests.quiet)
        try await simulator.start()
        defer { Task { try? await simulator.stop() } }
        let session = session(simulator)
        let run = Task { try await session.run() }
        session.send(speech(1.0))
        session.send(silence(1.3))
        let events = await collect(session) { $0 == .turnComplete }
        #expect(
            events.contains(
                .transcript(Transcript(role: .user, segment: "user-1", text: "what is the time", isFinal: true))
            )
        )
        let audio = events.reduce(0) { if case .audio(let chunk) = $1 { $0 + chunk.samples.count } else { $0 } }
        let reply = "I heard you. Here is my answer: you said what is the time. That is all."
        let spoken = simulator.snapshot.texts
        #expect(spoken == ["I heard you.", "Here is my answer: you said what is the time.", "That is all."])
        // Every character synthesized was played; the service joins buffered sentences with a space.
        let perCharacter = 24_000 * TextToSpeechService.millisecondsPerCharacter / 1000
        let characters = spoken.reduce(0) { $0 + $1.count }
        #expect((characters * perCharacter...(characters + spoken.count - 1) * perCharacter).contains(audio))
        #expect(events.contains(.transcript(Transcript(role: .agent, segment: "agent-1", text: reply, isFinal: true))))
        #expect(simulator.snapshot.textRequests.count == 1)
        session.finish()
        try await run.value
    }
}

/// The project's HTTP client, noting which connections it opened ahead and which request went on which.
final class WatchedHTTPClient: HTTPClient {
    let client = NIOHTTPClient()
    /// Connections opened ahead, in order, and the one each streamed request was given (nil: none).
    let opened = Mutex<[ObjectIdentifier]>([])
    let used = Mutex<[ObjectIdentifier?]>([])

    func send(_ request: HTTPRequest) async throws -> HTTPResponse { try await client.send(request) }

    func stream(_ request: HTTPRequest) async throws -> HTTPStreamingResponse {
        try await stream(request, on: nil)
    }

    func openAhead(to url: String) -> (any HTTPOpenedAhead)? {
        let ahead = client.openAhead(to: url)
        if let ahead { opened.withLock { $0.append(ObjectIdentifier(ahead)) } }
        return ahead
    }

    func stream(_ request: HTTPRequest, on ahead: (any HTTPOpenedAhead)?) async throws -> HTTPStreamingResponse {
        used.withLock { $0.append(ahead.map(ObjectIdentifier.init)) }
        return try await client.stream(request, on: ahead)
    }
}

/// The cascade session's turn-taking over loopback: history, barge-in, tools, greeting, a dropped socket.
@Suite(.timeLimit(.minutes(1))) struct CascadeConversationTests {
    let helper = CascadeSessionTests()

    func start(_ configure: (inout CascadeSimulatorConfiguration) -> Void = { _ in }) async throws -> CascadeSimulator {
        var configuration = CascadeSimulatorConfiguration()
        configure(&configuration)
        let simulator = CascadeSimulator(configuration: configuration, logger: CascadeSimulatorTests.quiet)
        try await simulator.start()
        return simulator
    }

    /// The contents of text request `index` (0-based).
    func contents(_ simulator: CascadeSimulator, _ index: Int) throws -> [JSONValue] {
        let body = try #require(simulator.snapshot.textRequests.dropFirst(index).first)
        return try JSONDecoder().decode(JSONValue.self, from: Data(body.utf8))["contents"]?.arrayValue ?? []
    }

    @Test func aShortFirstSentenceIsHeardBeforeTheModelWritesOn() async throws {
        // The model writes slowly after its first piece ("I heard you. Here"): the speech service would hold "I heard
        // you." (12 characters) until the next sentence fills its buffer of 50, which takes the model's next pieces.
        let simulator = try await start {
            $0.text.firstChunkDelay = .milliseconds(10)
            $0.text.chunkDelay = .seconds(3)
        }
        defer { Task { try? await simulator.stop() } }
        let session = helper.session(simulator)
        let run = Task { try await session.run() }
        session.send(.text("good morning"))
        let events = try await withDeadline(.seconds(20), "the answer's first audio") {
            var seen: [SessionEvent] = []
            for await event in session.events {
                seen.append(event)
                if case .audio = event { break }
            }
            return seen
        }
        #expect(events.contains { if case .audio = $0 { true } else { false } })
        // The first audio came while the model had sent only its first piece.
        let snapshot = simulator.snapshot
        #expect(snapshot.turns.last?.answerSent.count == 1, "\(snapshot.turns.last?.answerSent ?? [])")
        #expect(snapshot.texts == ["I heard you."])
        #expect(snapshot.speechFlushes == 1)
        #expect(snapshot.syntheses == ["I heard you."])
        session.finish()
        try await run.value
    }

    @Test func twoTurnsCarryTheHistory() async throws {
        let simulator = try await start { $0.transcripts = ["first question", "second question"] }
        defer { Task { try? await simulator.stop() } }
        let session = helper.session(simulator)
        let run = Task { try await session.run() }
        session.send(helper.speech(1.0))
        session.send(helper.silence(1.3))
        _ = await helper.collect(session) { $0 == .turnComplete }
        session.send(helper.speech(1.0))
        session.send(helper.silence(1.3))
        _ = await helper.collect(session) { $0 == .turnComplete }
        let second = try contents(simulator, 1)
        #expect(second.map { $0["role"]?.stringValue } == ["user", "model", "user"])
        #expect(second.first?["parts"]?.arrayValue?.first?["text"] == "first question")
        // The model turn went back as received, its signature included.
        #expect(second[1]["parts"]?.arrayValue?.contains { $0["thoughtSignature"] != nil } == true)
        session.finish()
        try await run.value
    }

    @Test func speechOverTheAnswerAbandonsItAndKeepsWhatWasHeard() async throws {
        let simulator = try await start {
            $0.transcripts = ["tell me a long story about the sea", "stop"]
            // The model has written the whole text but not finished: the reply cannot end before the user speaks.
            $0.textFaults = [.stallBeforeFinish(.seconds(30))]
        }
        defer { Task { try? await simulator.stop() } }
        let clock = ManualClock()
        let session = helper.session(simulator, clock: clock)
        let run = Task { try await session.run() }
        session.send(helper.speech(1.0))
        session.send(helper.silence(1.3))
        // A second of the answer's audio has come (the speech service synthesizes faster than it plays).
        var received = 0
        _ = await helper.collect(session) { event in
            if case .audio(let chunk) = event { received += chunk.samples.count }
            return received >= 24_000
        }
        // The user talks over the answer a second into it (about 15 characters), before the model has finished it.
        clock.advance(by: .seconds(1))
        session.send(.interrupt)
        let stopped = await helper.collect(session) { $0 == .interrupted }
        #expect(stopped.last == .interrupted)
        session.send(helper.speech(1.0))
        session.send(helper.silence(1.3))
        _ = await helper.collect(session) { $0 == .turnComplete }
        // A fresh speech socket took the next answer; the abandoned reply is in the history only as heard.
        #expect(simulator.snapshot.textToSpeechSockets >= 2)
        let next = try contents(simulator, 1)
        #expect(next.map { $0["role"]?.stringValue } == ["user", "model", "user"])
        let heard = next[1]["parts"]?.arrayValue?.first?["text"]?.stringValue ?? ""
        #expect(
            heard.hasPrefix("I heard") && heard.hasSuffix("…") && heard.count < 30,
            "\(heard) of \(simulator.snapshot.texts)"
        )
        session.finish()
        try await run.value
    }

    @Test func aToolCallIsAnsweredAndSpokenAbout() async throws {
        let simulator = try await start {
            $0.transcripts = ["what time is it"]
            $0.text.scriptedCall = "get_time"
        }
        defer { Task { try? await simulator.stop() } }
        let tools = ToolRegistry([LocalTool(name: "get_time", description: "The time") { _ in ["time": "12:00"] }])
        let session = helper.session(simulator, tools: tools)
        let run = Task { try await session.run() }
        session.send(helper.speech(1.0))
        session.send(helper.silence(1.3))
        let events = await helper.collect(session) { $0 == .turnComplete }
        #expect(events.contains { if case .tool(.finished(_, "get_time", true)) = $0 { true } else { false } })
        #expect(simulator.snapshot.textRequests.count == 2)
        #expect(simulator.snapshot.texts.joined(separator: " ").contains(#"the tool said {"time":"12:00"}"#))
        session.finish()
        try await run.value
    }

    @Test func aGreetingIsATurnTheAgentAnswersFirst() async throws {
        let simulator = try await start()
        defer { Task { try? await simulator.stop() } }
        let session = helper.session(simulator)
        let run = Task { try await session.run() }
        session.send(.text("A visitor is here. Greet them."))
        let events = await helper.collect(session) { $0 == .turnComplete }
        #expect(events.contains { if case .audio = $0 { true } else { false } })
        #expect(
            try contents(simulator, 0).first?["parts"]?.arrayValue?.first?["text"] == "A visitor is here. Greet them."
        )
        session.finish()
        try await run.value
    }

    @Test func aDroppedSpeechToTextSocketIsReopenedAndTheConversationGoesOn() async throws {
        let simulator = try await start {
            $0.transcripts = ["one", "two"]
            $0.speechToTextIdleCut = .milliseconds(500)
        }
        defer { Task { try? await simulator.stop() } }
        let session = helper.session(simulator)
        let run = Task { try await session.run() }
        let seen = Mutex<[SessionEvent]>([])
        // No audio for longer than the service's idle cut: it drops the socket without a close frame.
        let reconnected =
            (try? await withDeadline(.seconds(20), "the dropped socket reopened") {
                var dropped = false
                for await event in session.events {
                    seen.withLock { $0.append(event) }
                    if case .link(.offline) = event { dropped = true }
                    if dropped, event == .link(.connected) { return true }
                }
                return false
            }) ?? false
        #expect(reconnected, "\(seen.withLock { $0 })")
        // Then a microphone's stream, in real time as a microphone gives it (a question, a pause, again): a socket
        // cut while the question was on its way (a loaded machine may be half a second late) loses only that one.
        let microphone = Task {
            let chunk = 1_600
            let question = helper.samples(helper.speech(1.0)) + helper.samples(helper.silence(1.3))
            let clock = ContinuousClock()
            var next = clock.now
            while !Task.isCancelled {
                for start in stride(from: 0, to: question.count, by: chunk) {
                    let piece = Array(question[start..<min(start + chunk, question.count)])
                    session.send(.audio(AudioChunk(samples: piece, sampleRate: 16_000)))
                    next += .milliseconds(100)
                    try await clock.sleep(until: next)
                }
            }
        }
        defer { microphone.cancel() }
        let completed =
            (try? await withDeadline(.seconds(20), "the turn after the drop") {
                for await event in session.events {
                    seen.withLock { $0.append(event) }
                    if event == .turnComplete { return true }
                }
                return false
            }) ?? false
        #expect(completed, "\(seen.withLock { $0 }) \(simulator.snapshot.speechToTextSockets) sockets")
        microphone.cancel()
        #expect(simulator.snapshot.textRequests.count >= 1)
        #expect(simulator.snapshot.speechToTextSockets >= 2, "\(seen.withLock { $0 })")
        #expect(seen.withLock { $0 }.contains { if case .link(.offline) = $0 { true } else { false } })
        session.finish()
        try await run.value
    }
}

/// The cascade session when the services turn it away, over loopback: a text request answered 429 or 503, or dropped,
/// before its answer began is asked again (a few times, honouring a Retry-After within a bound); one that fails
/// part-way says so; a speech-to-text upgrade refused with 429 is retried with backoff.
@Suite(.timeLimit(.minutes(1))) struct CascadeFaultTests {
    let helper = CascadeSessionTests()

    func start(_ configure: (inout CascadeSimulatorConfiguration) -> Void) async throws -> CascadeSimulator {
        var configuration = CascadeSimulatorConfiguration()
        configure(&configuration)
        let simulator = CascadeSimulator(configuration: configuration, logger: CascadeSimulatorTests.quiet)
        try await simulator.start()
        return simulator
    }

    /// A session whose waits are short (a test need not wait seconds for a backoff).
    func session(_ simulator: CascadeSimulator) -> CascadeSession {
        helper.session(simulator) {
            $0.link.backoff = Backoff(initial: .milliseconds(40), cap: .milliseconds(100))
            $0.replyRetry.backoff = Backoff(initial: .milliseconds(40), cap: .milliseconds(100))
        }
    }

    /// The session's events until one matches `stop` (included), within `timeout`.
    func events(
        _ session: CascadeSession,
        within timeout: Duration = .seconds(20),
        until stop: @escaping @Sendable (SessionEvent) -> Bool
    ) async throws -> [SessionEvent] {
        try await withDeadline(timeout, "the session's events") {
            var seen: [SessionEvent] = []
            for await event in session.events {
                seen.append(event)
                if stop(event) { return seen }
            }
            return seen
        }
    }

    static func audioSamples(_ events: [SessionEvent]) -> Int {
        events.reduce(0) { if case .audio(let chunk) = $1 { $0 + chunk.samples.count } else { $0 } }
    }

    static func failed(_ events: [SessionEvent]) -> String? {
        events.lazy.compactMap { if case .answerFailed(let why) = $0 { why } else { nil } }.first
    }

    @Test func aTextRequestTurnedAwayOrDroppedBeforeItsAnswerIsAskedAgain() async throws {
        let simulator = try await start {
            $0.textFaults = [.status(429, retryAfter: nil), .drop]
            $0.text.firstChunkDelay = .milliseconds(10)
        }
        defer { Task { try? await simulator.stop() } }
        let session = session(simulator)
        let run = Task { try await session.run() }
        session.send(.text("good morning"))
        let events = try await events(session) { $0 == .turnComplete }
        #expect(Self.failed(events) == nil, "\(events)")
        #expect(Self.audioSamples(events) > 0)
        // Three requests (429, a drop, then the answer), all of the same conversation.
        let requests = simulator.snapshot.textRequests
        #expect(requests.count == 3)
        #expect(Set(requests).count == 1)
        #expect(simulator.snapshot.texts.first == "I heard you.")
        session.finish()
        try await run.value
    }

    @Test func aStreamThatBeginsWithAnErrorIsAskedAgainAndTheAttemptsAreBounded() async throws {
        let simulator = try await start {
            $0.textFaults = [.errorAfter(events: 0), .status(503, retryAfter: nil), .status(503, retryAfter: nil)]
        }
        defer { Task { try? await simulator.stop() } }
        let session = session(simulator)
        let run = Task { try await session.run() }
        session.send(.text("good morning"))
        let events = try await events(session) { $0 == .turnComplete }
        // Three requests in all, then the reply fails and says so; nothing was spoken.
        let why = try #require(Self.failed(events), "\(events)")
        #expect(why.contains("HTTP 503") && why.contains("3 requests"), "\(why)")
        #expect(simulator.snapshot.textRequests.count == 3)
        #expect(Self.audioSamples(events) == 0)
        #expect(simulator.snapshot.texts.isEmpty)
        session.finish()
        try await run.value
    }

    @Test func aRetryAfterIsWaitedForWithinItsBoundAndALongerOneFailsAtOnce() async throws {
        let simulator = try await start { $0.textFaults = [.status(429, retryAfter: 1)] }
        defer { Task { try? await simulator.stop() } }
        let session = session(simulator)
        let run = Task { try await session.run() }
        session.send(.text("good morning"))
        let events = try await events(session) { $0 == .turnComplete }
        #expect(Self.failed(events) == nil, "\(events)")
        // The second request came when the service said, not after the (shorter) backoff.
        let times = simulator.snapshot.textRequestTimes
        #expect(times.count == 2)
        let first = try #require(times.first)
        let second = try #require(times.last)
        #expect(first.duration(to: second) >= .seconds(1))
        session.finish()
        try await run.value

        // A service that asks for longer than anyone waits for an answer: the reply fails at once, asked once.
        let busy = try await start { $0.textFaults = [.status(429, retryAfter: 30)] }
        defer { Task { try? await busy.stop() } }
        let again = self.session(busy)
        let running = Task { try await again.run() }
        again.send(.text("good morning"))
        let started = ContinuousClock.now
        let refused = try await self.events(again) { $0 == .turnComplete }
        #expect(ContinuousClock.now - started < .seconds(4))
        #expect(Self.failed(refused)?.contains("HTTP 429") == true, "\(refused)")
        #expect(busy.snapshot.textRequests.count == 1)
        again.finish()
        try await running.value
    }

    @Test(arguments: [TextService.Fault.dropAfter(events: 2), .errorAfter(events: 2)])
    func anAnswerThatFailsPartWaySaysSoAndTheNextOneIsWhole(_ fault: TextService.Fault) async throws {
        let simulator = try await start {
            $0.textFaults = [fault]
            $0.text.chunkDelay = .milliseconds(60)
        }
        defer { Task { try? await simulator.stop() } }
        let session = session(simulator)
        let run = Task { try await session.run() }
        session.send(.text("good morning"))
        let first = try await events(session) { $0 == .turnComplete }
        // Not asked again (its first sentence may have been sent to the speech socket): the failure is said.
        #expect(Self.failed(first) != nil, "\(first)")
        #expect(simulator.snapshot.textRequests.count == 1)

        session.send(.text("good evening"))
        let second = try await events(session) { $0 == .turnComplete }
        #expect(Self.failed(second) == nil, "\(second)")
        // The next reply's audio is its own sentences' only: nothing of the failed one is spoken with it. (What the
        // failed one sent may reach the service after its failure was told, on the socket closed for it.)
        let spoken = Array(simulator.snapshot.texts.suffix(3))
        #expect(spoken == ["I heard you.", "Here is my answer: you said good evening.", "That is all."])
        let perCharacter = 24_000 * TextToSpeechService.millisecondsPerCharacter / 1000
        let characters = spoken.reduce(0) { $0 + $1.count }
        #expect(
            (characters * perCharacter...(characters + spoken.count - 1) * perCharacter).contains(
                Self.audioSamples(second)
            )
        )
        session.finish()
        try await run.value
    }

    @Test func theTextRequestGoesOnAConnectionOpenedWhenTheUserBeganToSpeak() async throws {
        let simulator = try await start { $0.transcripts = ["hello"] }
        defer { Task { try? await simulator.stop() } }
        let http = WatchedHTTPClient()
        var configuration = CascadeConfiguration(
            sarvamEndpoint: simulator.httpBaseURL,
            geminiEndpoint: simulator.httpBaseURL,
            sarvamKey: Secret("sarvam-key"),
            geminiKey: Secret("gemini-key")
        )
        configuration.link.randomSeed = 1
        let session = CascadeSession(
            configuration: configuration,
            transport: NIOWebSocketTransport(logger: CascadeSimulatorTests.quiet),
            http: http,
            logger: CascadeSimulatorTests.quiet
        )
        let run = Task { try await session.run() }
        session.send(helper.speech(1.0))
        session.send(helper.silence(1.3))
        let turn = try await events(session) { $0 == .turnComplete }
        #expect(Self.audioSamples(turn) > 0)
        // One connection opened at START_SPEECH, and the reply's request went on it.
        let opened = http.opened.withLock { $0 }
        #expect(opened.count == 1)
        #expect(http.used.withLock { $0 } == opened.map { Optional($0) })
        // A typed turn (no speech) opens none ahead: its request connects itself.
        session.send(.text("and again"))
        _ = try await events(session) { $0 == .turnComplete }
        #expect(http.opened.withLock { $0.count } == 1)
        #expect(http.used.withLock { $0.count } == 2 && http.used.withLock { $0.last } == .some(nil))
        session.finish()
        try await run.value
    }

    static func rejections(_ events: [SessionEvent]) -> [SessionFailure] {
        events.compactMap { if case .link(.rejected(let failure, _)) = $0 { failure } else { nil } }
    }

    @Test(arguments: [TextService.Fault.keyInvalid, .status(401, retryAfter: nil), .status(403, retryAfter: nil)])
    func aGeminiKeyRefusedOnTheTextRequestIsAnAuthenticationError(_ fault: TextService.Fault) async throws {
        let simulator = try await start {
            $0.geminiKey = Secret("gemini-key")
            $0.textFaults = [fault]
        }
        defer { Task { try? await simulator.stop() } }
        let logs = LogCapture()
        let session = helper.session(simulator, logger: logs.logger()) {
            $0.link.rejectedRetryDelay = .milliseconds(100)
        }
        let run = Task { try await session.run() }
        _ = try await events(session) { $0 == .link(.connected) }
        session.send(.text("good morning"))
        // The reply fails and says so; the session is in its error state, not offline: no quick retry.
        let refused = try await events(session) { if case .link(.rejected) = $0 { true } else { false } }
        #expect(Self.failed(refused) != nil, "\(refused)")
        let failure = try #require(Self.rejections(refused).first)
        #expect(failure.kind == .authentication)
        #expect(failure.message.contains("Gemini refused the API key"), "\(failure.message)")
        #expect(failure.message.contains("cascade.api_key_file"), "\(failure.message)")
        #expect(!refused.contains { if case .link(.offline) = $0 { true } else { false } })
        // After the slow retry the key is asked about first; taken now, the session listens again.
        _ = try await events(session) { $0 == .link(.connected) }
        #expect(simulator.snapshot.modelRequests == 1)
        session.send(.text("good evening"))
        let answered = try await events(session) { $0 == .turnComplete }
        #expect(Self.failed(answered) == nil, "\(answered)")
        // (Counted here, not at the connection: the simulator counts a socket once its upgrade is done, which may
        // come just after the client has its answer.)
        #expect(simulator.snapshot.speechToTextSockets == 2)
        session.finish()
        try await run.value
        #expect(!logs.all.contains { $0.contains("gemini-key") })
    }

    @Test func aWrongGeminiKeyKeepsTheSessionInItsErrorStateUntilItIsTaken() async throws {
        let simulator = try await start { $0.geminiKey = Secret("gemini-key") }
        defer { Task { try? await simulator.stop() } }
        let logs = LogCapture()
        let session = helper.session(simulator, logger: logs.logger()) {
            $0.geminiKey = Secret("wrong-gemini-key")
            $0.link.rejectedRetryDelay = .milliseconds(100)
        }
        let run = Task { try await session.run() }
        session.send(.text("good morning"))
        // Refused by the text request, then by the check before each next connection: no speech-to-text socket is
        // opened to listen for turns that cannot be answered.
        var rejections: [SessionFailure] = []
        var seen: [SessionEvent] = []
        while rejections.count < 3 {
            let more = try await events(session) { if case .link(.rejected) = $0 { true } else { false } }
            seen += more
            rejections += Self.rejections(more)
        }
        #expect(rejections.allSatisfy { $0.kind == .authentication && $0.message.contains("GEMINI_API_KEY") })
        #expect(seen.filter { $0 == .link(.connected) }.count == 1, "\(seen)")
        #expect(simulator.snapshot.speechToTextSockets == 1)
        #expect(simulator.snapshot.modelRequests >= 2)
        session.finish()
        try await run.value
        #expect(!logs.all.contains { $0.contains("wrong-gemini-key") })
        #expect(logs.all.contains { $0.contains("Gemini refused the API key") })
    }

    @Test func aSpeechToTextUpgradeRefusedWith429IsRetriedWithBackoff() async throws {
        let simulator = try await start {
            $0.speechToTextRefusals = [429, 429]
            $0.transcripts = ["hello"]
        }
        defer { Task { try? await simulator.stop() } }
        let session = session(simulator)
        let run = Task { try await session.run() }
        let opening = try await events(session) { $0 == .link(.connected) }
        let offline = opening.compactMap { event -> String? in
            if case .link(.offline(let reason, _)) = event { reason } else { nil }
        }
        #expect(offline.count == 2, "\(opening)")
        #expect(offline.allSatisfy { $0.contains("429") }, "\(offline)")
        #expect(simulator.snapshot.refusedSpeechToText == [429, 429])
        // The conversation goes on over the socket that was let in.
        session.send(helper.speech(1.0))
        session.send(helper.silence(1.3))
        let turn = try await events(session) { $0 == .turnComplete }
        #expect(Self.audioSamples(turn) > 0)
        #expect(simulator.snapshot.textRequests.count == 1)
        #expect(simulator.snapshot.speechToTextSockets == 1)
        session.finish()
        try await run.value
    }
}
