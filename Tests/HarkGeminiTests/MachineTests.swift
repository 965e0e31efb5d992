import Foundation
import HarkCore
import HarkGemini
import Testing

@Suite struct LiveSessionMachineTests {
    func audioContent(_ samples: [Int16] = [1, 2, 3]) -> ServerMessage {
        ServerMessage(
            .serverContent(
                ServerContent(
                    modelTurn: Content(
                        role: "model",
                        parts: [Part(inlineData: Blob(mimeType: "audio/pcm;rate=24000", data: PCM16.bytes(samples)))]
                    )
                )
            )
        )
    }

    func events(_ actions: [LiveSessionMachine.Action]) -> [SessionEvent] {
        actions.compactMap { if case .emit(let event) = $0 { event } else { nil } }
    }

    @Test func setupCompleteConnectsAndListens() {
        var machine = LiveSessionMachine(manualActivity: false)
        let actions = machine.receive(ServerMessage(.setupComplete(SetupComplete())))
        #expect(events(actions) == [.link(.connected), .conversation(.listening)])
        #expect(machine.phase == .ready)
    }

    @Test func keepsTheLastResumableHandle() {
        var machine = LiveSessionMachine(manualActivity: false)
        #expect(
            machine.receive(ServerMessage(.sessionResumptionUpdate(.init(newHandle: "h1", resumable: true)))) == [
                .saveHandle("h1")
            ]
        )
        _ = machine.receive(ServerMessage(.sessionResumptionUpdate(.init(newHandle: nil, resumable: nil))))
        _ = machine.receive(ServerMessage(.sessionResumptionUpdate(.init(newHandle: nil, resumable: false))))
        _ = machine.receive(ServerMessage(.sessionResumptionUpdate(.init(newHandle: "h-not", resumable: false))))
        _ = machine.receive(ServerMessage(.sessionResumptionUpdate(.init(newHandle: "", resumable: true))))
        #expect(machine.handle == "h1")
        _ = machine.receive(ServerMessage(.sessionResumptionUpdate(.init(newHandle: "h2", resumable: true))))
        #expect(machine.handle == "h2")
    }

    @Test func aTurnEmitsSpeakingAudioTranscriptsAndTurnComplete() {
        var machine = LiveSessionMachine(manualActivity: false)
        _ = machine.receive(ServerMessage(.setupComplete(SetupComplete())))
        let first = events(machine.receive(audioContent([5, 6])))
        #expect(first == [.conversation(.speaking), .audio(AudioChunk(samples: [5, 6], sampleRate: 24_000))])
        #expect(machine.turnInFlight)
        let text = events(
            machine.receive(
                ServerMessage(.serverContent(ServerContent(outputTranscription: Transcription(text: "Hi"))))
            )
        )
        #expect(text == [.transcript(Transcript(role: .agent, segment: "agent-1", text: "Hi", isFinal: false))])
        let done = events(machine.receive(ServerMessage(.serverContent(ServerContent(turnComplete: true)))))
        #expect(
            done == [
                .transcript(Transcript(role: .agent, segment: "agent-1", text: "Hi", isFinal: true)), .turnComplete,
                .conversation(.listening),
            ]
        )
        #expect(!machine.turnInFlight)
    }

    @Test func interruptedStopsPlaybackAndALocalInterruptDropsTheRestOfTheTurn() {
        var machine = LiveSessionMachine(manualActivity: false)
        _ = machine.receive(ServerMessage(.setupComplete(SetupComplete())))
        _ = machine.receive(audioContent())
        let interrupted = events(machine.receive(ServerMessage(.serverContent(ServerContent(interrupted: true)))))
        #expect(interrupted == [.interrupted, .conversation(.listening)])

        _ = machine.receive(audioContent())
        let (message, actions) = machine.send(.interrupt)
        #expect(message == nil)
        #expect(events(actions).first == .interrupted)
        #expect(events(machine.receive(audioContent())).isEmpty)  // discarded
        _ = machine.receive(ServerMessage(.serverContent(ServerContent(turnComplete: true))))
        #expect(
            events(machine.receive(audioContent([9]))).contains(.audio(AudioChunk(samples: [9], sampleRate: 24_000)))
        )
    }

    @Test func goAwayWhileIdleSwitchesAtOnceAndDuringATurnAfterIt() {
        var idle = LiveSessionMachine(manualActivity: false)
        _ = idle.receive(ServerMessage(.setupComplete(SetupComplete())))
        #expect(
            idle.receive(ServerMessage(.goAway(GoAway(timeLeft: .seconds(10))))).contains(
                .switchConnection(reason: "goAway")
            )
        )

        var busy = LiveSessionMachine(manualActivity: false)
        _ = busy.receive(ServerMessage(.setupComplete(SetupComplete())))
        _ = busy.receive(audioContent())
        let actions = busy.receive(ServerMessage(.goAway(GoAway(timeLeft: .milliseconds(9990)))))
        #expect(actions.contains(.scheduleSwitch(after: .milliseconds(8990))))
        #expect(busy.phase == .draining)
        let done = busy.receive(ServerMessage(.serverContent(ServerContent(turnComplete: true))))
        #expect(done.contains(.switchConnection(reason: "goAway after the turn")))
        #expect(busy.switchDeadlineReached().isEmpty)  // already switching

        var late = LiveSessionMachine(manualActivity: false)
        _ = late.receive(ServerMessage(.setupComplete(SetupComplete())))
        _ = late.receive(audioContent())
        _ = late.receive(ServerMessage(.goAway(GoAway(timeLeft: .seconds(5)))))
        #expect(late.switchDeadlineReached() == [.switchConnection(reason: "goAway deadline")])
    }

    @Test func toolCallsRunAndAnswerWithTheirIdsAndCancellationsCancel() {
        var machine = LiveSessionMachine(manualActivity: false)
        _ = machine.receive(ServerMessage(.setupComplete(SetupComplete())))
        let call = FunctionCall(id: "c1", name: "get_time", args: [:])
        let actions = machine.receive(ServerMessage(.toolCall(ToolCall(functionCalls: [call]))))
        #expect(actions.contains(.runTool(call)))
        #expect(events(actions).contains(.conversation(.thinking)))
        let (message, finished) = machine.toolFinished(
            id: "c1",
            name: "get_time",
            result: ["time": "noon"],
            succeeded: true
        )
        #expect(
            message
                == .toolResponse(
                    ToolResponse(functionResponses: [
                        FunctionResponse(id: "c1", name: "get_time", response: ["time": "noon"])
                    ])
                )
        )
        #expect(events(finished) == [.tool(.finished(id: "c1", name: "get_time", succeeded: true))])
        #expect(machine.toolFinished(id: "c1", name: "get_time", result: [:], succeeded: true).message == nil)

        _ = machine.receive(
            ServerMessage(.toolCall(ToolCall(functionCalls: [FunctionCall(id: "c2", name: "slow", args: nil)])))
        )
        let cancelled = machine.receive(ServerMessage(.toolCallCancellation(ToolCallCancellation(ids: ["c2"]))))
        #expect(cancelled.contains(.cancelTools(["c2"])))
        #expect(machine.toolFinished(id: "c2", name: "slow", result: [:], succeeded: true).message == nil)
    }

    @Test func manualActivityMarksTurnsAndReopensAfterASwitch() {
        var machine = LiveSessionMachine(manualActivity: true)
        let setup = events(machine.receive(ServerMessage(.setupComplete(SetupComplete()))))
        #expect(setup == [.link(.connected)])  // idle until the button
        let (start, startActions) = machine.send(.activityStart)
        #expect(start == .realtimeInput(RealtimeInput(activityStart: Empty())))
        #expect(events(startActions) == [.conversation(.listening)])
        #expect(machine.send(.audioStreamEnd).message == nil)  // not in manual mode
        machine.connectionOpened()
        #expect(machine.replayAfterSetup() == [.realtimeInput(RealtimeInput(activityStart: Empty()))])
        let (end, endActions) = machine.send(.activityEnd)
        #expect(end == .realtimeInput(RealtimeInput(activityEnd: Empty())))
        #expect(events(endActions) == [.conversation(.thinking)])
        #expect(machine.replayAfterSetup().isEmpty)
        #expect(machine.send(.activityEnd).message == nil)  // no double end
    }

    @Test func audioAndTextGoOutAsTheProtocolWants() {
        var machine = LiveSessionMachine(manualActivity: false)
        let chunk = AudioChunk(samples: [1, -1], sampleRate: 16_000)
        #expect(
            machine.send(.audio(chunk)).message
                == .realtimeInput(
                    RealtimeInput(audio: Blob(mimeType: "audio/pcm;rate=16000", data: Data([1, 0, 0xFF, 0xFF])))
                )
        )
        #expect(machine.send(.audioStreamEnd).message == .realtimeInput(RealtimeInput(audioStreamEnd: true)))
        #expect(machine.send(.activityStart).message == nil)
        #expect(
            machine.send(.text("hello")).message
                == .clientContent(ClientContent(turns: [.text("hello", role: "user")], turnComplete: true))
        )
    }

    @Test func configurationBuildsURLsWithoutTheKey() {
        let configuration = GeminiLiveConfiguration(
            endpoint: "wss://proxy.example:8443/prefix/",
            apiVersion: .v1,
            authentication: .apiKey(Secret("k")),
            setup: Setup(model: "models/m")
        )
        #expect(
            configuration.webSocketURL(constrained: false)
                == "wss://proxy.example:8443/prefix/ws/google.ai.generativelanguage.v1.GenerativeService.BidiGenerateContent"
        )
        #expect(
            configuration.webSocketURL(constrained: true)
                == "wss://proxy.example:8443/prefix/ws/google.ai.generativelanguage.v1alpha.GenerativeService.BidiGenerateContentConstrained"
        )
        #expect(configuration.httpBase == "https://proxy.example:8443/prefix")
    }

    @Test func closeCodesClassify() {
        #expect(
            SessionFailure.fromClose(code: 1007, reason: "Request contains an invalid argument.").kind == .configuration
        )
        #expect(SessionFailure.fromClose(code: 1008, reason: "API key not valid").kind == .authentication)
        #expect(SessionFailure.fromClose(code: 1011, reason: "Internal error encountered.").kind == .transient)
        #expect(SessionFailure.fromClose(code: nil, reason: nil).closeCode == 1006)
        #expect(SessionFailure.fromHTTP(status: 401, what: "x").kind == .authentication)
        #expect(SessionFailure.fromHTTP(status: 429, what: "x").kind == .transient)
    }
}

@Suite struct ConnectionLossTests {
    @Test func aTurnCutByTheConnectionIsReportedEnded() {
        var machine = LiveSessionMachine(manualActivity: false)
        _ = machine.receive(ServerMessage(.setupComplete(SetupComplete())))
        #expect(machine.connectionClosed().isEmpty)
        _ = machine.receive(
            ServerMessage(
                .serverContent(
                    ServerContent(
                        modelTurn: Content(parts: [
                            Part(inlineData: Blob(mimeType: "audio/pcm;rate=24000", data: Data([1, 0])))
                        ])
                    )
                )
            )
        )
        let actions = machine.connectionClosed()
        #expect(actions.contains(.emit(.turnComplete)))
        #expect(!machine.turnInFlight)
        #expect(machine.connectionClosed().isEmpty)
    }
}

/// Records requests and answers with a canned response (the protocol page's token-minting shape).
final class RecordingHTTPClient: HTTPClient, @unchecked Sendable {
    private let lock = NSLock()
    private var requests: [HTTPRequest] = []
    let answer: HTTPResponse

    init(answer: HTTPResponse) { self.answer = answer }

    var recorded: [HTTPRequest] { lock.withLock { requests } }

    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        lock.withLock { requests.append(request) }
        return answer
    }
}

@Suite struct EphemeralTokenTests {
    @Test func mintingFollowsTheProtocolPageNotTheSeed() async throws {
        let http = RecordingHTTPClient(
            answer: HTTPResponse(
                status: 200,
                body: Data(#"{"name": "auth_tokens/abc", "expireTime": "x", "uses": 1}"#.utf8)
            )
        )
        let configuration = GeminiLiveConfiguration(
            endpoint: "wss://generativelanguage.googleapis.com",
            authentication: .mintedToken(apiKey: Secret("REAL-KEY")),
            setup: Setup(model: "models/m")
        )
        let token = try await EphemeralTokenSource(http: http).token(for: configuration)
        #expect(token.reveal() == "auth_tokens/abc")
        let request = try #require(http.recorded.first)
        #expect(request.method == "POST")
        // Not the seed's v1beta/authTokens?key=...
        #expect(request.url == "https://generativelanguage.googleapis.com/v1alpha/auth_tokens")
        #expect(request.headers.contains { $0.name == "x-goog-api-key" && $0.value == "REAL-KEY" })
        let body = try JSONDecoder().decode(JSONValue.self, from: try #require(request.body))
        #expect(body["authToken"] == nil)  // the seed's wrapper is not what the service takes
        #expect(body["uses"] == 1)
        #expect(body["expireTime"]?.stringValue?.hasSuffix("Z") == true)
        #expect(body["newSessionExpireTime"]?.stringValue != nil)
    }

    @Test func aTokenServersAnswerAndItsRefusal() async throws {
        let configuration = GeminiLiveConfiguration(
            authentication: .tokenServer(url: "https://owner.example/token", bearer: Secret("device-secret")),
            setup: Setup(model: "models/m")
        )
        let ok = RecordingHTTPClient(
            answer: HTTPResponse(status: 200, body: Data(#"{"token": "auth_tokens/t1"}"#.utf8))
        )
        #expect(try await EphemeralTokenSource(http: ok).token(for: configuration).reveal() == "auth_tokens/t1")
        #expect(
            ok.recorded.first?.headers.contains { $0.name == "Authorization" && $0.value == "Bearer device-secret" }
                == true
        )
        let refused = RecordingHTTPClient(answer: HTTPResponse(status: 403, body: Data()))
        await #expect(throws: SessionFailure(.authentication, "token server: credential rejected (HTTP 403)")) {
            try await EphemeralTokenSource(http: refused).token(for: configuration)
        }
        let empty = RecordingHTTPClient(answer: HTTPResponse(status: 200, body: Data("{}".utf8)))
        await #expect(throws: SessionFailure.self) {
            try await EphemeralTokenSource(http: empty).token(for: configuration)
        }
    }
}
