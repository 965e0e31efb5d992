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

/// The cascade's turn-taking as a value, against what a hostile or broken service does: a model that calls a tool
/// in every reply, a user turn that never ends, a turn far larger than the history.
@Suite struct CascadeMachineHostileTests {
    func chunk(call name: String) -> GenerateContentChunk {
        GenerateContentChunk(candidates: [
            .init(
                content: Content(
                    role: "model",
                    parts: [Part(functionCall: FunctionCall(id: nil, name: name, args: nil))]
                )
            )
        ])
    }

    func events(_ actions: [CascadeMachine.Action]) -> [SessionEvent] {
        actions.compactMap { if case .emit(let event) = $0 { event } else { nil } }
    }

    static func characters(_ contents: [Content]) -> Int {
        contents.reduce(0) { total, content in total + content.parts.reduce(0) { $0 + ($1.text?.count ?? 0) } }
    }

    /// Plays the model that calls a tool in every reply, answering each request and each call at once, for at most
    /// `limit` requests; returns the requests made and every action.
    func toolLoop(_ machine: inout CascadeMachine, limit: Int = 100) -> (
        requests: Int, actions: [CascadeMachine.Action]
    ) {
        var all = machine.userText("what time is it")
        var requests = 0
        var next = all
        while requests < limit {
            guard next.contains(where: { if case .requestReply = $0 { true } else { false } }) else { break }
            requests += 1
            var round = machine.replyChunk(chunk(call: "get_time"))
            let calls = round.compactMap { if case .runTool(let call) = $0 { call } else { nil } }
            round += machine.replyFinished()
            for call in calls {
                round += machine.toolFinished(call.id ?? "", name: call.name, result: ["time": "12:00"])
            }
            all += round
            next = round
        }
        return (requests, all)
    }

    @Test func aModelThatCallsAToolInEveryReplyGetsABoundedNumberOfRoundsAndTheTurnEndsInError() {
        var machine = CascadeMachine()
        let (requests, actions) = toolLoop(&machine)
        #expect(requests <= 6, "\(requests) text requests for one user turn")
        #expect(events(actions).contains { if case .answerFailed = $0 { true } else { false } })
        #expect(events(actions).last == .conversation(.listening))
        #expect(machine.phase == .listening)
        // The last tool result tells the model why: it is in the history the next turn sends.
        let results = machine.history.flatMap(\.parts).compactMap(\.functionResponse)
        let last = results.last?.response["error"]?.stringValue ?? ""
        #expect(last.contains("tool"), "\(results.last.map { "\($0)" } ?? "no result")")
        // A new user turn starts the count again.
        let again = toolLoop(&machine)
        #expect(again.requests >= 2 && again.requests <= 6)
    }

    @Test func aUserTurnWithoutAnEndIsBoundedAndSentWithinTheHistory() {
        var machine = CascadeMachine()
        _ = machine.speechStarted()
        let piece = String(repeating: "word ", count: 1640)  // 8 KiB
        var actions: [CascadeMachine.Action] = []
        for _ in 0..<200 { actions += machine.transcribed(piece) }
        actions += machine.speechEnded()
        let requests = actions.compactMap { if case .requestReply(let contents) = $0 { contents } else { nil } }
        #expect(!requests.isEmpty)
        for contents in requests {
            #expect(Self.characters(contents) <= machine.historyCharacters, "\(Self.characters(contents)) characters")
        }
        // The transcript shown for the turn is bounded too.
        let shown = events(actions).compactMap { if case .transcript(let piece) = $0 { piece.text.count } else { nil } }
        #expect(shown.allSatisfy { $0 <= 2 * machine.historyCharacters })
    }

    @Test func aUserTurnWithoutAnEndIsAnsweredAtItsTimeBound() {
        var machine = CascadeMachine(maximumUserTurnDuration: .seconds(60))
        _ = machine.speechStarted()
        _ = machine.transcribed("what is the", now: .seconds(10))
        #expect(machine.tick(now: .seconds(69)).isEmpty)
        let actions = machine.tick(now: .seconds(70))
        let requests = actions.compactMap { if case .requestReply(let contents) = $0 { contents } else { nil } }
        #expect(requests == [[.text("what is the", role: "user")]])
        #expect(machine.phase == .thinking)
        // The rest of that utterance is dropped; the next utterance is heard again.
        #expect(machine.transcribed("time", now: .seconds(71)).isEmpty)
        _ = machine.speechEnded()
        _ = machine.speechStarted()
        #expect(!machine.transcribed("thanks", now: .seconds(80)).isEmpty)
    }

    @Test func aTypedTurnLargerThanTheHistoryIsCutToIt() {
        var machine = CascadeMachine(historyCharacters: 8000)
        let actions = machine.userText(String(repeating: "a", count: 100_000))
        let requests = actions.compactMap { if case .requestReply(let contents) = $0 { contents } else { nil } }
        #expect(requests.count == 1)
        #expect(requests.allSatisfy { Self.characters($0) <= 8000 }, "\(requests.map(Self.characters))")
        #expect(Self.characters(machine.history) <= 8000)
    }
}

/// The cascade session against a hostile or broken simulator over loopback: every such reply ends (with the error
/// earcon's event) in bounded time, however the services behave.
@Suite(.timeLimit(.minutes(2))) struct CascadeHostileServiceTests {
    let helper = CascadeSessionTests()

    func start(_ configure: (inout CascadeSimulatorConfiguration) -> Void) async throws -> CascadeSimulator {
        var configuration = CascadeSimulatorConfiguration()
        configure(&configuration)
        let simulator = CascadeSimulator(configuration: configuration, logger: CascadeSimulatorTests.quiet)
        try await simulator.start()
        return simulator
    }

    /// The session's events until one matches `stop` (included), within `timeout`.
    func events(
        _ session: CascadeSession,
        within timeout: Duration = .seconds(30),
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

    static func failure(_ events: [SessionEvent]) -> String? {
        events.lazy.compactMap { if case .answerFailed(let why) = $0 { why } else { nil } }.first
    }

    static func audioSamples(_ events: [SessionEvent]) -> Int {
        events.reduce(0) { if case .audio(let chunk) = $1 { $0 + chunk.samples.count } else { $0 } }
    }

    @Test func aModelThatCallsAToolInEveryReplyIsStoppedAndToldWhy() async throws {
        let simulator = try await start {
            $0.text.scriptedCall = "get_time"
            $0.text.callsEveryReply = true
            $0.text.firstChunkDelay = .milliseconds(1)
            $0.text.chunkDelay = .milliseconds(1)
        }
        defer { Task { try? await simulator.stop() } }
        let tools = ToolRegistry([LocalTool(name: "get_time", description: "The time") { _ in ["time": "12:00"] }])
        let session = helper.session(simulator, tools: tools)
        let run = Task { try await session.run() }
        session.send(.text("what time is it"))
        let first = try await events(session) { $0 == .turnComplete }
        #expect(Self.failure(first) != nil, "\(first)")
        let requests = simulator.snapshot.textRequests.count
        #expect((2...6).contains(requests), "\(requests) text requests for one user turn")
        // The next turn's request carries the last result, which tells the model why it got no more.
        session.send(.text("and now?"))
        _ = try await events(session) { $0 == .turnComplete }
        let body = try #require(simulator.snapshot.textRequests.dropFirst(requests).first)
        let contents = try JSONDecoder().decode(JSONValue.self, from: Data(body.utf8))["contents"]?.arrayValue ?? []
        let results = contents.flatMap { $0["parts"]?.arrayValue ?? [] }.compactMap { $0["functionResponse"] }
        #expect(results.last?["response"]?["error"]?.stringValue?.contains("tool") == true, "\(results)")
        session.finish()
        try await run.value
    }

    @Test func textRequestsAreRateLimitedPerMinute() async throws {
        let simulator = try await start {
            $0.text.firstChunkDelay = .milliseconds(1)
            $0.text.chunkDelay = .milliseconds(1)
        }
        defer { Task { try? await simulator.stop() } }
        let session = helper.session(simulator)
        let run = Task { try await session.run() }
        var failures = 0
        for turn in 1...40 {
            session.send(.text("turn \(turn)"))
            let events = try await self.events(session) { $0 == .turnComplete }
            if Self.failure(events) != nil { failures += 1 }
        }
        // Forty turns in seconds: those past the minute's budget fail at once, without a request.
        #expect(simulator.snapshot.textRequests.count <= 30, "\(simulator.snapshot.textRequests.count) requests")
        #expect(failures >= 10)
        session.finish()
        try await run.value
    }

    @Test func aUserTurnThatNeverEndsIsCutAndAnsweredWithinBounds() async throws {
        let simulator = try await start { $0.speechToTextEndlessTurn = 8192 }
        defer { Task { try? await simulator.stop() } }
        let session = helper.session(simulator)
        let run = Task { try await session.run() }
        session.send(helper.speech(1.0))
        for _ in 0..<80 { session.send(helper.speech(0.1)) }
        // The turn is cut (its characters or its time) and asked of the model, in a request of bounded size.
        let answer = try await events(session, within: .seconds(60)) { $0 == .turnComplete }
        #expect(Self.failure(answer) == nil, "\(answer)")
        let requests = simulator.snapshot.textRequests
        #expect(!requests.isEmpty)
        #expect(requests.allSatisfy { $0.utf8.count < 64 * 1024 }, "\(requests.map(\.utf8.count)) bytes")
        session.finish()
        try await run.value
    }

    @Test(arguments: [1011, 1000])
    func aSpeechSocketClosedMidReplyFailsTheReplyAndTheNextOneIsWhole(_ code: Int) async throws {
        let simulator = try await start {
            $0.textToSpeechFault = .closeMidReply(code: code)
            $0.textToSpeechFaultSockets = 1
            $0.text.firstChunkDelay = .milliseconds(1)
            $0.text.chunkDelay = .milliseconds(1)
        }
        defer { Task { try? await simulator.stop() } }
        let session = helper.session(simulator)
        let run = Task { try await session.run() }
        session.send(.text("tell me a story"))
        let first = try await events(session) { $0 == .turnComplete }
        #expect(Self.failure(first) != nil, "\(first)")
        session.send(.text("again"))
        let second = try await events(session) { $0 == .turnComplete }
        #expect(Self.failure(second) == nil, "\(second)")
        #expect(Self.audioSamples(second) > 0)
        session.finish()
        try await run.value
    }

    @Test func aSpeechServiceThatSendsFarMoreAudioThanItsTextFailsTheReply() async throws {
        let simulator = try await start {
            $0.textToSpeechFault = .audioFlood(factor: 100)
            $0.text.firstChunkDelay = .milliseconds(1)
            $0.text.chunkDelay = .milliseconds(1)
        }
        defer { Task { try? await simulator.stop() } }
        let session = helper.session(simulator)
        let run = Task { try await session.run() }
        session.send(.text("hello"))
        let events = try await self.events(session) { $0 == .turnComplete }
        #expect(Self.failure(events) != nil)
        // What was spoken: "I heard you. Here is my answer: you said hello. That is all." (58 characters); at a
        // slow 5 characters a second that is under 12 s of 24 kHz audio; 100 times that is not passed on.
        #expect(Self.audioSamples(events) < 24_000 * 30, "\(Self.audioSamples(events)) samples")
        session.finish()
        try await run.value
    }

    @Test func aSpeechSocketThatNeverAnswersEndsTheReplyAtItsDeadline() async throws {
        let simulator = try await start {
            $0.textToSpeechFault = .silent
            $0.text.firstChunkDelay = .milliseconds(1)
            $0.text.chunkDelay = .milliseconds(1)
        }
        defer { Task { try? await simulator.stop() } }
        let clock = ManualClock()
        let session = helper.session(simulator, clock: clock)
        let run = Task { try await session.run() }
        session.send(.text("hello"))
        let failed = Mutex<[SessionEvent]?>(nil)
        let reader = Task {
            let seen = try await self.events(session, within: .seconds(60)) { $0 == .turnComplete }
            failed.withLock { $0 = seen }
        }
        // Once the reply's text has all gone to the silent speech socket, minutes pass on the session's clock.
        try await withDeadline(.seconds(20), "the reply's flush") {
            while simulator.snapshot.speechFlushes == 0 { await Task.yield() }
        }
        for _ in 0..<40 where failed.withLock({ $0 == nil }) {
            await clock.waitForSleepers(1)
            clock.advance(by: .seconds(5))
            await Task.yield()
        }
        try await reader.value
        let events = try #require(failed.withLock { $0 })
        #expect(Self.failure(events) != nil, "\(events)")
        session.finish()
        run.cancel()
        _ = try? await run.value
    }

    @Test func aTextStreamOfKeepAlivesEndsTheReplyAtItsDeadline() async throws {
        let simulator = try await start { $0.textFaults = [.keepAlive(every: .milliseconds(50))] }
        defer { Task { try? await simulator.stop() } }
        let clock = ManualClock()
        let session = helper.session(simulator, clock: clock)
        let run = Task { try await session.run() }
        session.send(.text("hello"))
        let failed = Mutex<[SessionEvent]?>(nil)
        let reader = Task {
            let seen = try await self.events(session, within: .seconds(60)) { $0 == .turnComplete }
            failed.withLock { $0 = seen }
        }
        try await withDeadline(.seconds(20), "the text request") {
            while simulator.snapshot.textRequests.isEmpty { await Task.yield() }
        }
        for _ in 0..<40 where failed.withLock({ $0 == nil }) {
            await clock.waitForSleepers(1)
            clock.advance(by: .seconds(5))
            await Task.yield()
        }
        try await reader.value
        let events = try #require(failed.withLock { $0 })
        #expect(Self.failure(events) != nil, "\(events)")
        session.finish()
        run.cancel()
        _ = try? await run.value
    }

    @Test func aRefusedTextRequestsEndlessBodyIsReadOnlyToItsBound() async throws {
        let simulator = try await start { _ in }
        defer { Task { try? await simulator.stop() } }
        let endless = EndlessErrorBody()
        let session = CascadeSession(
            configuration: {
                var configuration = CascadeConfiguration(
                    sarvamEndpoint: simulator.httpBaseURL,
                    geminiEndpoint: simulator.httpBaseURL,
                    sarvamKey: Secret("sarvam-key"),
                    geminiKey: Secret("gemini-key")
                )
                configuration.replyRetry = ReplyRetry(attempts: 1)
                return configuration
            }(),
            transport: NIOWebSocketTransport(logger: CascadeSimulatorTests.quiet),
            http: endless,
            logger: CascadeSimulatorTests.quiet
        )
        let run = Task { try await session.run() }
        session.send(.text("hello"))
        let events = try await self.events(session, within: .seconds(20)) { $0 == .turnComplete }
        #expect(Self.failure(events)?.contains("503") == true, "\(events)")
        #expect(endless.bytesRead <= 128 * 1024, "\(endless.bytesRead) bytes read")
        session.finish()
        try await run.value
    }
}

/// An HTTP client whose every streamed answer is 503 with a body that never ends (64 KiB at a time), counting what
/// was read of it.
final class EndlessErrorBody: HTTPClient {
    private let read = Atomic<Int>(0)
    var bytesRead: Int { read.load(ordering: .relaxed) }

    func send(_ request: HTTPRequest) async throws -> HTTPResponse { HTTPResponse(status: 503, body: Data()) }

    func stream(_ request: HTTPRequest) async throws -> HTTPStreamingResponse {
        let piece = Data(repeating: 0x20, count: 64 * 1024)
        return HTTPStreamingResponse(
            status: 503,
            headers: [("Content-Type", "application/json")],
            body: HTTPBodyStream(
                next: { [self] in
                    read.add(piece.count, ordering: .relaxed)
                    await Task.yield()
                    return piece
                },
                cancel: {}
            )
        )
    }
}
