import HTTPTypes
import HarkBackendKit
import HarkCore
import HarkGemini
import HarkLiveSimulator
import HarkSimulatorKit
import HarkTestKit
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import NIOWebSocket
import Synchronization
import Testing
import WSClient

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

// MARK: - Helpers

/// 16 kHz mono samples of a sine tone.
private func tone(seconds: Double, frequency: Double = 300, amplitude: Double = 0.3) -> [Int16] {
    TestSignals.tone(seconds: seconds, frequency: frequency, amplitude: amplitude)
}

/// 16 kHz of digital silence.
private func silence(seconds: Double) -> [Int16] {
    [Int16](repeating: 0, count: Int((seconds * 16_000).rounded()))
}

private func setupMessage(
    manual: Bool = false,
    handling: ActivityHandling? = nil,
    handle: String? = nil,
    silenceMs: Int? = nil
) -> ClientMessage {
    .setup(
        Setup(
            model: "models/gemini-live-sim",
            realtimeInputConfig: RealtimeInputConfig(
                automaticActivityDetection: .init(disabled: manual ? true : nil, silenceDurationMs: silenceMs),
                activityHandling: handling
            ),
            sessionResumption: SessionResumptionConfig(handle: handle)
        )
    )
}

private func textTurn(_ text: String) -> ClientMessage {
    .clientContent(ClientContent(turns: [.text(text, role: "user")], turnComplete: true))
}

private let quiet = Logger(label: "simulator-tests", factory: { _ in SwiftLogNoOpLogHandler() })

// MARK: - State machine

@Suite("Live simulator")
struct SimulatorTests {
    @Test("the first message must be setup")
    func setupFirst() {
        var harness = Harness()
        harness.audio(silence(seconds: 0.1))
        #expect(harness.closes.map(\.code) == [1007])
        #expect(harness.closes.first?.reason == "Request contains an invalid argument.")
        #expect(!harness.kinds.contains("setupComplete"))
        // Nothing more once closed.
        harness.receive(setupMessage())
        #expect(harness.closes.count == 1)
    }

    @Test("setup is answered with setupComplete")
    func setupComplete() {
        var harness = Harness()
        harness.receive(setupMessage())
        #expect(harness.kinds == ["setupComplete"])
        #expect(harness.session.phase == .active)
        harness.receive(setupMessage())
        #expect(harness.closes.map(\.code) == [1007])
    }

    @Test("invalid JSON, no known key or two top-level keys close with 1007")
    func invalidFrames() {
        for frame in [
            "not json", "{}", #"{"someFutureMessage":{}}"#,
            #"{"setup":{"model":"models/x"},"clientContent":{"turnComplete":true}}"#,
            #"{"setup":{"model":"models/x"},"extra":1}"#,
        ] {
            var harness = Harness()
            harness.receive(json: frame)
            #expect(harness.closes.map(\.code) == [1007], "frame: \(frame)")
        }
        var harness = Harness()
        harness.receive(setupMessage())
        harness.receive(json: #"{"realtimeInput":{"text":"hi","activityStart":{}}}"#)
        #expect(harness.closes.map(\.code) == [1007])
    }

    @Test("VAD hears a tone burst; the answer comes with transcripts, generationComplete, turnComplete in order")
    func vadTurn() throws {
        var harness = Harness()
        harness.receive(setupMessage())
        harness.audio(silence(seconds: 0.5))
        harness.audio(tone(seconds: 1.4))
        #expect(!harness.kinds.contains("serverContent.turnComplete"))
        harness.audio(silence(seconds: 3))

        let input = harness.sent.compactMap { message -> String? in
            guard case .serverContent(let content) = message.payload else { return nil }
            return content.inputTranscription?.text
        }
        #expect(input == ["heard 1.4 s of speech"])
        // 1.4 s of speech: 4 + round(5.6) = 10 beeps = 20 chunks of 125 ms at 24 kHz.
        let chunks = harness.audioChunks
        #expect(chunks.count == 20)
        #expect(chunks.allSatisfy { $0.count == ModelAudio.chunkSamples * 2 })
        #expect(chunks.first == ModelAudio.chunk(turn: 1, index: 0))
        #expect(harness.outputTranscript == "answering turn 1")

        let lastTranscript = try #require(harness.lastIndex(of: "serverContent.outputTranscription"))
        let generationComplete = try #require(harness.index(of: "serverContent.generationComplete"))
        let turnComplete = try #require(harness.index(of: "serverContent.turnComplete"))
        let lastAudio = try #require(harness.lastIndex(of: "serverContent.modelTurn"))
        #expect(lastTranscript < generationComplete)
        #expect(lastAudio < generationComplete)
        #expect(generationComplete < turnComplete)
        #expect(harness.sent[turnComplete].usageMetadata?.responseTokenCount == 80)

        // A non-resumable update mid-generation, a resumable handle after the turn.
        let updates = harness.kinds.indices.filter { harness.kinds[$0] == "sessionResumptionUpdate" }
        #expect(updates.count == 2)
        #expect(updates[0] < generationComplete && updates[1] > turnComplete)
        #expect(harness.resumptionUpdates[0].resumable == false && harness.resumptionUpdates[0].newHandle == nil)
        #expect(harness.resumptionUpdates[1].resumable == true && harness.resumptionUpdates[1].newHandle != nil)

        let ended = harness.events.compactMap { event -> TurnRecord? in
            if case .userTurnEnded(let record) = event { record } else { nil }
        }
        #expect(ended.map(\.number) == [1])
        // From the first speech frame to the end commit: 1.4 s of tone + 500 ms of silence.
        #expect(ended.first?.audioSamples == 30_400)
    }

    @Test("the answer is the same however the audio is chunked")
    func chunkingIndependent() {
        func run(chunk: Int) -> [String] {
            var harness = Harness()
            harness.receive(setupMessage())
            harness.audio(silence(seconds: 0.3) + tone(seconds: 2.2) + silence(seconds: 4), chunk: chunk)
            return harness.kinds
        }
        let coarse = run(chunk: 1600)
        #expect(coarse.filter { $0 == "serverContent.modelTurn" }.count == 26)
        #expect(run(chunk: 320) == coarse)
        #expect(run(chunk: 4000) == coarse)
    }

    @Test("speech during an answer interrupts it: interrupted, then turnComplete, no generationComplete")
    func bargeIn() throws {
        var harness = Harness()
        harness.receive(setupMessage())
        harness.audio(tone(seconds: 1.4))
        harness.audio(silence(seconds: 1.0))
        let firstAudio = try #require(harness.index(of: "serverContent.modelTurn"))
        #expect(!harness.kinds.contains("serverContent.generationComplete"))
        harness.audio(tone(seconds: 0.6))
        harness.audio(silence(seconds: 3))

        let interrupted = try #require(harness.index(of: "serverContent.interrupted"))
        #expect(interrupted > firstAudio)
        #expect(harness.kinds[interrupted + 1] == "serverContent.turnComplete")
        let firstGenerationComplete = try #require(harness.index(of: "serverContent.generationComplete"))
        #expect(firstGenerationComplete > interrupted)
        // After the interruption only turn 2's audio (550 Hz) goes out.
        let later = harness.sent[interrupted...].compactMap { message -> Data? in
            guard case .serverContent(let content) = message.payload else { return nil }
            return content.modelTurn?.parts.first?.inlineData?.data.data
        }
        #expect(!later.isEmpty)
        #expect(
            later.allSatisfy { $0 == ModelAudio.chunk(turn: 2, index: 0) || $0 == ModelAudio.chunk(turn: 2, index: 1) }
        )
        #expect(harness.events.contains { if case .interrupted(turn: 1, _) = $0 { true } else { false } })
    }

    @Test("with NO_INTERRUPTION, speech during an answer waits its turn")
    func noInterruption() {
        var harness = Harness()
        harness.receive(setupMessage(handling: .noInterruption))
        harness.audio(tone(seconds: 1.4))
        harness.audio(silence(seconds: 1.0))
        harness.audio(tone(seconds: 0.6))
        harness.audio(silence(seconds: 6))
        #expect(!harness.kinds.contains("serverContent.interrupted"))
        #expect(harness.kinds.filter { $0 == "serverContent.generationComplete" }.count == 2)
        #expect(harness.outputTranscript == "answering turn 1answering turn 2")
    }

    @Test("audioStreamEnd ends an utterance at once")
    func audioStreamEnd() {
        var harness = Harness()
        harness.receive(setupMessage())
        harness.audio(tone(seconds: 1.0))
        harness.receive(.realtimeInput(RealtimeInput(audioStreamEnd: true)))
        let ended = harness.events.contains { if case .userTurnEnded = $0 { true } else { false } }
        #expect(ended)
    }

    @Test("realtimeInput.text is a text turn")
    func realtimeText() {
        var harness = Harness()
        harness.receive(setupMessage())
        harness.receive(.realtimeInput(RealtimeInput(text: "turn on the lights")))
        harness.idle(.seconds(2))
        #expect(harness.outputTranscript == "answering: turn on the lights")
        #expect(harness.audioChunks.count == 2 * ModelAudio.textTurnBeeps)
    }

    @Test("a scripted tool call waits for the tool response before answering")
    func toolCall() throws {
        var configuration = LiveSimulatorConfiguration()
        configuration.scenario.toolCalls = [try ScriptedToolCall.parse("1:get_time:{}")]
        var harness = Harness(configuration)
        harness.receive(setupMessage())
        harness.receive(textTurn("what time is it?"))
        harness.idle(.seconds(1))
        let call = try #require(
            harness.sent.compactMap { message -> ToolCall? in
                if case .toolCall(let call) = message.payload { call } else { nil }
            }.first
        )
        #expect(call.functionCalls.map(\.name) == ["get_time"])
        harness.idle(.seconds(3))
        #expect(harness.audioChunks.isEmpty)
        #expect(!harness.kinds.contains("serverContent.turnComplete"))

        let id = try #require(call.functionCalls.first?.id)
        harness.receive(
            .toolResponse(
                ToolResponse(functionResponses: [
                    FunctionResponse(id: id, name: "get_time", response: ["time": "12:00"])
                ])
            )
        )
        harness.idle(.seconds(3))
        #expect(harness.audioChunks.count == 8)
        #expect(harness.outputTranscript.contains(#"tool get_time said {"time":"12:00"}"#))
        let generationComplete = try #require(harness.index(of: "serverContent.generationComplete"))
        #expect(harness.index(of: "serverContent.turnComplete", after: generationComplete) != nil)
    }

    @Test("barge-in while a tool call is pending cancels it")
    func toolCallCancelled() throws {
        var configuration = LiveSimulatorConfiguration()
        configuration.scenario.toolCalls = [ScriptedToolCall(turn: 1, name: "set_timer", args: ["minutes": 5])]
        var harness = Harness(configuration)
        harness.receive(setupMessage())
        harness.receive(textTurn("set a timer"))
        harness.idle(.seconds(1))
        #expect(harness.kinds.contains("toolCall"))
        harness.receive(textTurn("never mind"))
        let cancellation = try #require(harness.index(of: "toolCallCancellation"))
        #expect(harness.kinds[cancellation + 1] == "serverContent.interrupted")
        #expect(harness.kinds[cancellation + 2] == "serverContent.turnComplete")
        guard case .toolCallCancellation(let cancelled) = harness.sent[cancellation].payload else {
            Issue.record("not a cancellation")
            return
        }
        #expect(cancelled.ids == ["call-1-1-1"])
    }

    @Test("goAway at lifetime minus grace on the audio clock, then close 1000 after timeLeft of wall time")
    func goAway() throws {
        var configuration = LiveSimulatorConfiguration()
        configuration.connectionLifetime = .seconds(30)
        configuration.goAwayGrace = .seconds(10)
        var harness = Harness(configuration)
        harness.receive(setupMessage())
        harness.audio(silence(seconds: 19.9))
        #expect(!harness.kinds.contains("goAway"))
        harness.audio(silence(seconds: 0.1))
        let index = try #require(harness.index(of: "goAway"))
        guard case .goAway(let goAway) = harness.sent[index].payload else { return }
        #expect(goAway.timeLeft?.duration == .seconds(10))
        // A client faster than real time cannot run timeLeft out: its audio is read, the close waits.
        harness.audio(silence(seconds: 15))
        #expect(harness.closes.isEmpty)
        harness.idle(.seconds(10))
        #expect(harness.closes.map(\.code) == [1000])
        #expect(harness.closes.first?.reason == "The operation was cancelled.")
    }

    @Test("on the wall clock, audio sent at once does not use the lifetime up; wall time does")
    func goAwayOnTheWallClock() {
        var configuration = LiveSimulatorConfiguration()
        configuration.connectionLifetime = .seconds(30)
        configuration.goAwayGrace = .seconds(10)
        configuration.lifetimeOnWallClock = true
        var harness = Harness(configuration)
        harness.receive(setupMessage())
        // 25 s of audio sent again after a resume, in 250 ms of wall time: on the session clock this
        // would be past the goAway.
        harness.audio(silence(seconds: 25))
        #expect(!harness.kinds.contains("goAway"))
        harness.idle(.seconds(19))
        #expect(!harness.kinds.contains("goAway"))
        harness.idle(.seconds(1))
        #expect(harness.kinds.contains("goAway"))
        harness.idle(.seconds(10))
        #expect(harness.closes.map(\.code) == [1000])
    }

    @Test("the time scale compresses the lifetime")
    func timeScale() {
        var configuration = LiveSimulatorConfiguration()
        configuration.connectionLifetime = .seconds(600)
        configuration.timeScale = 0.01
        var harness = Harness(configuration)
        harness.receive(setupMessage())
        // 600 s and 10 s of grace at 1/100: goAway at 5.9 s, the close at 6 s.
        harness.audio(silence(seconds: 5.8))
        #expect(harness.kinds == ["setupComplete"])
        harness.audio(silence(seconds: 0.1))
        #expect(harness.kinds == ["setupComplete", "goAway"])
        #expect(harness.closes.isEmpty)
        harness.idle(.milliseconds(110))
        #expect(harness.closes.map(\.code) == [1000])
    }

    @Test("a silent client still gets goAway and the close, by the wall clock")
    func silentClientGoAway() {
        var configuration = LiveSimulatorConfiguration()
        configuration.connectionLifetime = .seconds(30)
        var harness = Harness(configuration)
        harness.receive(setupMessage())
        harness.idle(.seconds(20))
        #expect(!harness.kinds.contains("goAway"))
        harness.idle(.seconds(1))
        #expect(harness.kinds.contains("goAway"))
        harness.idle(.seconds(10))
        #expect(harness.closes.map(\.code) == [1000])
    }

    @Test("a session resumes by handle and keeps its turn numbering")
    func resume() throws {
        let store = SimulatorStore()
        var first = Harness(store: store)
        first.receive(setupMessage())
        first.receive(textTurn("hello"))
        first.idle(.seconds(2))
        let handle = try #require(first.lastHandle)
        first.session.socketClosed(wallNow: first.wall)

        var second = Harness(store: store, number: 2, wall: first.wall)
        second.receive(setupMessage(handle: handle))
        #expect(second.kinds == ["setupComplete"])
        #expect(second.session.sessionID == first.session.sessionID)
        second.receive(textTurn("again"))
        second.idle(.seconds(2))
        #expect(second.session.turnCount == 2)
        #expect(second.audioChunks.first == ModelAudio.chunk(turn: 2, index: 0))
        #expect(second.lastHandle != handle)
    }

    @Test("resuming while the old socket is open closes with 1011")
    func resumeWhileOpen() throws {
        let store = SimulatorStore()
        var first = Harness(store: store)
        first.receive(setupMessage())
        first.receive(textTurn("hello"))
        first.idle(.seconds(2))
        let handle = try #require(first.lastHandle)

        var second = Harness(store: store, number: 2, wall: first.wall)
        second.receive(setupMessage(handle: handle))
        #expect(second.closes.map(\.code) == [1011])
        #expect(second.closes.first?.reason == "Internal error encountered.")
        #expect(!second.kinds.contains("setupComplete"))
    }

    @Test("an unknown or expired handle closes with 1007")
    func badHandle() throws {
        let store = SimulatorStore(handleLifetime: .seconds(7200))
        var unknown = Harness(store: store)
        unknown.receive(setupMessage(handle: "no-such-handle"))
        #expect(unknown.closes.map(\.code) == [1007])
        #expect(unknown.closes.first?.reason.contains("handle") == true)

        var first = Harness(store: store, number: 2)
        first.receive(setupMessage())
        first.receive(textTurn("hello"))
        first.idle(.seconds(2))
        let handle = try #require(first.lastHandle)
        first.session.socketClosed(wallNow: first.wall)
        var late = Harness(store: store, number: 3, wall: first.wall + .seconds(7201))
        late.receive(setupMessage(handle: handle))
        #expect(late.closes.map(\.code) == [1007])
    }

    @Test("refused resumption closes every resume with the scenario's code")
    func refuseResumption() throws {
        var configuration = LiveSimulatorConfiguration()
        configuration.scenario.refuseResumption = 1011
        let store = SimulatorStore()
        var first = Harness(configuration, store: store)
        first.receive(setupMessage())
        first.receive(textTurn("hello"))
        first.idle(.seconds(2))
        let handle = try #require(first.lastHandle)
        first.session.socketClosed(wallNow: first.wall)
        var second = Harness(configuration, store: store, number: 2)
        second.receive(setupMessage(handle: handle))
        #expect(second.closes.map(\.code) == [1011])
    }

    @Test("snake_case fields and URL-safe base64 are accepted, with manual activity")
    func snakeCaseAndBase64URL() throws {
        var harness = Harness()
        harness.receive(
            json: #"""
                {"setup": {"model": "models/x", "realtime_input_config": {"automatic_activity_detection": \#
                {"disabled": true}}, "input_audio_transcription": {}, "session_resumption": {}}}
                """#
        )
        #expect(harness.kinds == ["setupComplete"])
        harness.receive(json: #"{"realtime_input": {"activity_start": {}}}"#)
        let samples = tone(seconds: 0.5, frequency: 1234, amplitude: 0.6)
        let data = Base64Bytes.urlSafeString(PCM16.bytes(samples))
        #expect(data.contains("-") || data.contains("_"))
        harness.receive(
            json: #"{"realtime_input": {"audio": {"mime_type": "audio/pcm;rate=16000", "data": "\#(data)"}}}"#
        )
        harness.receive(json: #"{"realtime_input": {"activity_end": {}}}"#)
        #expect(harness.closes.isEmpty)
        let ended = harness.events.compactMap { event -> TurnRecord? in
            if case .userTurnEnded(let record) = event { record } else { nil }
        }
        #expect(ended.first?.audioSamples == Int64(samples.count))
        #expect(ended.first?.speechSeconds == 0.5)
    }

    @Test("activityStart with automatic activity detection on is an invalid argument")
    func activityStartInAutomaticMode() {
        var harness = Harness()
        harness.receive(setupMessage())
        harness.receive(.realtimeInput(RealtimeInput(activityStart: Empty())))
        #expect(harness.closes.map(\.code) == [1007])
    }

    @Test("a wrong or missing API key is closed with 1008 after setup")
    func wrongKey() {
        var configuration = LiveSimulatorConfiguration()
        configuration.requiredKey = Secret("right-key")
        for credentials in [LiveCredentials(apiKey: Secret("wrong-key")), LiveCredentials()] {
            var harness = Harness(configuration, credentials: credentials)
            harness.idle(.milliseconds(100))
            #expect(harness.actions.isEmpty)
            harness.receive(setupMessage())
            #expect(harness.closes.map(\.code) == [1008])
            #expect(harness.closes.first?.reason == "API key not valid. Please pass a valid API key.")
        }
        var good = Harness(configuration, credentials: LiveCredentials(apiKey: Secret("right-key")))
        good.receive(setupMessage())
        #expect(good.kinds == ["setupComplete"])
    }

    @Test("an ephemeral token opens one new session; resuming does not use it up")
    func ephemeralTokens() throws {
        let store = SimulatorStore()
        let token = store.mintToken(uses: 1, wall: .zero)
        #expect(token.name.hasPrefix("auth_tokens/"))
        let constrained = LiveEndpoint(version: "v1alpha", constrained: true)
        let credentials = LiveCredentials(token: Secret(token.name))

        var first = Harness(store: store, endpoint: constrained, credentials: credentials)
        first.receive(setupMessage())
        #expect(first.kinds == ["setupComplete"])
        first.receive(textTurn("hello"))
        first.idle(.seconds(2))
        let handle = try #require(first.lastHandle)
        first.session.socketClosed(wallNow: first.wall)

        var second = Harness(store: store, endpoint: constrained, credentials: credentials, number: 2, wall: first.wall)
        second.receive(setupMessage())
        #expect(second.closes.map(\.code) == [1008])

        var resumed = Harness(
            store: store,
            endpoint: constrained,
            credentials: credentials,
            number: 3,
            wall: first.wall
        )
        resumed.receive(setupMessage(handle: handle))
        #expect(resumed.kinds == ["setupComplete"])

        var unknown = Harness(
            store: store,
            endpoint: constrained,
            credentials: LiveCredentials(token: Secret("auth_tokens/unknown"))
        )
        unknown.receive(setupMessage())
        #expect(unknown.closes.map(\.code) == [1008])
    }

    @Test("faults fire at their trigger, once per run unless repeated")
    func faults() throws {
        var configuration = LiveSimulatorConfiguration()
        configuration.scenario.faults = [
            try SimulatorFault.parse("turn=1:close=1011"),
            try SimulatorFault.parse("setup:snake-case:conn=2"),
        ]
        let store = SimulatorStore()
        var first = Harness(configuration, store: store)
        first.receive(setupMessage())
        #expect(!first.actions.contains { if case .outputStyle = $0 { true } else { false } })
        first.receive(textTurn("hello"))
        #expect(first.closes.map(\.code) == [1011])
        #expect(first.closes.first?.reason == "Internal error encountered.")

        var second = Harness(configuration, store: store, number: 2)
        second.receive(setupMessage())
        #expect(second.actions.contains { if case .outputStyle(let style) = $0 { style.snakeCase } else { false } })
        second.receive(textTurn("hello"))
        second.idle(.seconds(2))
        #expect(second.closes.isEmpty)
        #expect(second.kinds.contains("serverContent.turnComplete"))
    }

    @Test("audio and wall-clock triggers; stalls scale with the time scale")
    func faultTriggers() throws {
        var configuration = LiveSimulatorConfiguration()
        configuration.timeScale = 0.5
        configuration.scenario.faults = try [
            "audio=2s:stall=20s:repeat", "wall=5s:close=1008:repeat",
        ].map(SimulatorFault.parse)
        var harness = Harness(configuration)
        harness.receive(setupMessage())
        harness.audio(silence(seconds: 1.9))
        #expect(!harness.actions.contains { if case .stall = $0 { true } else { false } })
        harness.audio(silence(seconds: 0.1))
        #expect(harness.actions.contains(.stall(.seconds(10))))
        harness.idle(.seconds(4))
        #expect(harness.closes.isEmpty)
        harness.idle(.seconds(1))
        #expect(harness.closes.map(\.code) == [1008])
        #expect(harness.closes.first?.reason == "The operation was aborted.")
    }

    @Test("a drop fault mid-answer closes without a close frame")
    func dropMidAnswer() throws {
        var configuration = LiveSimulatorConfiguration()
        configuration.scenario.faults = [try SimulatorFault.parse("answer=1:drop")]
        var harness = Harness(configuration)
        harness.receive(setupMessage())
        harness.receive(textTurn("hello"))
        harness.idle(.seconds(2))
        #expect(harness.dropped)
        #expect(harness.closes.isEmpty)
        #expect(harness.audioChunks.count >= 1)
        #expect(!harness.kinds.contains("serverContent.turnComplete"))
    }

    @Test("fault, tool call and duration specs parse; bad ones are rejected")
    func parsing() throws {
        let fault = try SimulatorFault.parse("audio=3s:close=1008,Policy says no: really:conn=2:repeat")
        #expect(fault.trigger == .audio(.seconds(3)))
        #expect(fault.action == .close(code: 1008, reason: "Policy says no: really"))
        #expect(fault.connection == 2 && fault.repeats)
        #expect(try SimulatorFault.parse("answer=2:stall=1.5s").action == .stall(.milliseconds(1500)))
        #expect(try SimulatorFault.parse("wall=250ms:slow=20ms").trigger == .wall(.milliseconds(250)))
        #expect(try SimulatorFault.parse("setup:oversized").action == .oversizedFrame(bytes: 3 << 20))
        #expect(try SimulatorFault.parse("presetup:stall").trigger == .presetup)
        for bad in ["drop", "turn=0:drop", "turn=1:explode", "audio=x:drop", "turn=1:close=99"] {
            #expect(throws: SimulatorConfigurationError.self) { try SimulatorFault.parse(bad) }
        }
        let call = try ScriptedToolCall.parse(#"2:set_volume:{"level":3,"note":"a:b"}"#)
        #expect(call.turn == 2 && call.name == "set_volume")
        #expect(call.args["note"] == "a:b")
        #expect(throws: SimulatorConfigurationError.self) { try ScriptedToolCall.parse("x:get_time") }
        #expect(SimulatorDurations.parse("10m") == .seconds(600))
        #expect(SimulatorDurations.parse("1.5") == .milliseconds(1500))
        #expect(SimulatorDurations.parse("soon") == nil)

        let scenario = try SimulatorScenario(
            json: Data(
                #"""
                {"toolCalls": [{"turn": 1, "name": "get_time"}],
                 "faults": ["turn=2:drop", {"trigger": "audio=1", "action": "stall", "connection": 3}],
                 "refuseResumption": 1007}
                """#.utf8
            )
        )
        #expect(scenario.toolCalls.map(\.name) == ["get_time"])
        #expect(scenario.faults.map(\.description) == ["turn=2:drop", "audio=1s:stall:conn=3"])
        #expect(scenario.refuseResumption == 1007)
    }

    @Test("paths route to endpoints, token minting or 404")
    func routing() {
        let base = "/ws/google.ai.generativelanguage."
        #expect(
            LiveRouting.route(base + "v1beta.GenerativeService.BidiGenerateContent?key=k")
                == .live(LiveEndpoint(version: "v1beta"))
        )
        #expect(
            LiveRouting.route("/prefix" + base + "v1.GenerativeService.BidiGenerateContent")
                == .live(LiveEndpoint(version: "v1", prefix: "/prefix"))
        )
        #expect(
            LiveRouting.route(base + "v1alpha.GenerativeService.BidiGenerateContentConstrained")
                == .live(LiveEndpoint(version: "v1alpha", constrained: true))
        )
        #expect(LiveRouting.route(base + "v1beta.GenerativeService.BidiGenerateContentConstrained") == .notFound)
        #expect(LiveRouting.route(base + "v2.GenerativeService.BidiGenerateContent") == .notFound)
        #expect(LiveRouting.route("/ws/other") == .notFound)
        #expect(LiveRouting.route("/v1alpha/auth_tokens") == .authTokens)

        let credentials = LiveCredentials(
            headers: [("Authorization", "Token auth_tokens/abc")],
            query: "key=k%2By&alt=json"
        )
        #expect(credentials.apiKey?.reveal() == "k+y" && credentials.apiKeyInQuery)
        #expect(credentials.token?.reveal() == "auth_tokens/abc" && !credentials.tokenInQuery)
        #expect(!credentials.summary.contains("k+y") && !credentials.summary.contains("abc"))
    }

    @Test("the voice detector's sensitivities shift thresholds and durations")
    func vadParameters() {
        let low = SimulatorVoiceDetector.Parameters(.init(startOfSpeechSensitivity: .low, endOfSpeechSensitivity: .low))
        let high = SimulatorVoiceDetector.Parameters(nil)
        #expect(low.startThresholdDBFS > high.startThresholdDBFS)
        #expect(low.silenceDuration > high.silenceDuration)
        #expect(high.silenceDuration == .milliseconds(500))
        // A −40 dBFS murmur starts speech at high sensitivity only.
        let murmur = tone(seconds: 0.5, amplitude: 0.014)
        var sensitive = SimulatorVoiceDetector(parameters: high)
        var deaf = SimulatorVoiceDetector(parameters: low)
        #expect(sensitive.process(samples: murmur).count == 1)
        #expect(deaf.process(samples: murmur).isEmpty)
    }
}

// MARK: - Real sockets

/// A WebSocket conversation with a running simulator: sends `messages`, then collects server messages, sending
/// what `respond` returns after each, until `until` says stop (then closes) or the server closes.
private func converse(
    url: String,
    headers: HTTPFields = [:],
    tls: TLSConfiguration? = nil,
    send messages: [ClientMessage],
    respond: @escaping @Sendable ([ServerMessage]) -> [ClientMessage] = { _ in [] },
    until: @escaping @Sendable ([ServerMessage]) -> Bool
) async throws -> (messages: [ServerMessage], binaryFrames: Int, rawTexts: [String], close: WebSocketCloseFrame?) {
    let box = ResultBox()
    let close = try await WebSocketClient.connect(
        url: url,
        configuration: WebSocketClientConfiguration(maxFrameSize: 1 << 20, additionalHeaders: headers),
        tlsConfiguration: tls,
        logger: quiet
    ) { inbound, outbound, _ in
        let codec = LiveCodec()
        for message in messages {
            try await outbound.write(.text(try codec.encode(message)))
        }
        for try await frame in inbound.messages(maxSize: 1 << 22) {
            let bytes: [UInt8]
            switch frame {
            case .text(let text):
                bytes = Array(text.utf8)
            case .binary(let buffer):
                bytes = Array(buffer.readableBytesView)
                box.binaryFrame()
            }
            box.raw(String(decoding: bytes, as: UTF8.self))
            let decoded = try codec.decodeServer(Data(bytes)).message
            let all = box.append(decoded)
            for message in respond(all) {
                try await outbound.write(.text(try codec.encode(message)))
            }
            if until(all) {
                try await outbound.close(.normalClosure, reason: "done")
                return
            }
        }
    }
    return (box.messages, box.binaryFrames, box.rawTexts, close)
}

/// Like ``converse``, but keeps every frame as text, decodable or not.
private func rawConversation(
    url: String,
    send messages: [ClientMessage],
    until: @escaping @Sendable ([String]) -> Bool
) async throws -> [String] {
    let box = ResultBox()
    try await WebSocketClient.connect(
        url: url,
        configuration: WebSocketClientConfiguration(maxFrameSize: 1 << 22),
        logger: quiet
    ) { inbound, outbound, _ in
        let codec = LiveCodec()
        for message in messages {
            try await outbound.write(.text(try codec.encode(message)))
        }
        for try await frame in inbound.messages(maxSize: 1 << 22) {
            switch frame {
            case .text(let text): box.raw(text)
            case .binary(let buffer): box.raw(String(buffer: buffer))
            }
            if until(box.rawTexts) {
                try await outbound.close(.normalClosure, reason: "done")
                return
            }
        }
    }
    return box.rawTexts
}

private final class ResultBox: Sendable {
    private struct State {
        var messages: [ServerMessage] = []
        var binaryFrames = 0
        var rawTexts: [String] = []
    }
    private let state = Mutex(State())

    func append(_ message: ServerMessage) -> [ServerMessage] {
        state.withLock {
            $0.messages.append(message)
            return $0.messages
        }
    }
    func binaryFrame() { state.withLock { $0.binaryFrames += 1 } }
    func raw(_ text: String) { state.withLock { $0.rawTexts.append(text) } }
    var messages: [ServerMessage] { state.withLock { $0.messages } }
    var binaryFrames: Int { state.withLock { $0.binaryFrames } }
    var rawTexts: [String] { state.withLock { $0.rawTexts } }
}

/// Runs `body` against a started simulator, and stops it whatever happens.
private func withSimulator<T>(
    _ configuration: LiveSimulatorConfiguration = LiveSimulatorConfiguration(),
    _ body: (LiveSimulator) async throws -> T
) async throws -> T {
    let simulator = LiveSimulator(configuration: configuration, logger: quiet)
    try await simulator.start()
    do {
        let result = try await body(simulator)
        try await simulator.stop()
        return result
    } catch {
        try? await simulator.stop()
        throw error
    }
}

private func contains(_ messages: [ServerMessage], _ kind: String) -> Bool {
    messages.contains { $0.simulatorKind == kind }
}

extension SimulatorTests {
    @Suite("Live simulator over sockets", .timeLimit(.minutes(1)))
    struct Sockets {
        @Test("a text turn and an audio turn over a real WebSocket, recorded")
        func conversation() async throws {
            var configuration = LiveSimulatorConfiguration()
            configuration.binarySetupComplete = true
            try await withSimulator(configuration) { simulator in try await conversation(simulator) }
        }

        private func conversation(_ simulator: LiveSimulator) async throws {
            #expect(simulator.port > 0)
            #expect(simulator.baseURL == "ws://127.0.0.1:\(simulator.port)")

            let speech = tone(seconds: 1.0) + silence(seconds: 4)
            let audio = stride(from: 0, to: speech.count, by: 1600).map { start in
                ClientMessage.realtimeInput(
                    RealtimeInput(
                        audio: Blob(
                            mimeType: "audio/pcm;rate=16000",
                            data: PCM16.bytes(Array(speech[start..<min(start + 1600, speech.count)]))
                        )
                    )
                )
            }
            let result = try await converse(
                url: simulator.liveURL(),
                headers: [HTTPField.Name("x-goog-api-key")!: "test-key"],
                send: [setupMessage(), textTurn("hello there")],
                respond: { messages in
                    // The audio turn once the text turn is answered.
                    guard messages.last?.simulatorKind == "serverContent.turnComplete",
                        messages.filter({ $0.simulatorKind == "serverContent.turnComplete" }).count == 1
                    else { return [] }
                    return audio
                }
            ) { messages in
                messages.filter { $0.simulatorKind == "serverContent.turnComplete" }.count == 2
            }
            #expect(result.messages.first?.simulatorKind == "setupComplete")
            #expect(result.binaryFrames == 1)
            #expect(contains(result.messages, "serverContent.generationComplete"))
            let chunks = result.messages.compactMap { message -> Data? in
                guard case .serverContent(let content) = message.payload else { return nil }
                return content.modelTurn?.parts.first?.inlineData?.data.data
            }
            // 4 beeps for the text turn, 8 for 1 s of speech: 24 chunks.
            #expect(chunks.count == 24)

            let closed = try await simulator.recorder.waitForClose(connection: 1)
            #expect(closed.initiator == "client" && closed.code == 1000)
            let record = try #require(simulator.recorder.snapshot().connection(1))
            #expect(record.messageKinds.prefix(2) == ["setup", "clientContent"])
            #expect(record.messageKinds.dropFirst(2).allSatisfy { $0 == "realtimeInput.audio" })
            #expect(record.audioSamples == Int64(speech.count))
            #expect(record.credential == "api key (header)")
            #expect(record.setup?.model == "models/gemini-live-sim")
            #expect(record.turns.map(\.outcome) == ["completed", "completed"])
            #expect(record.turns.map(\.kind) == ["text", "audio"])
            #expect(record.lastHandleIssued != nil)
            #expect(record.sentMessageKinds.first == "setupComplete")
        }

        @Test("a wrong key is closed with 1008 after setup; an unknown path gets 404")
        func wrongKeyAndNotFound() async throws {
            var configuration = LiveSimulatorConfiguration()
            configuration.requiredKey = Secret("right")
            try await withSimulator(configuration) { simulator in try await wrongKeyAndNotFound(simulator) }
        }

        private func wrongKeyAndNotFound(_ simulator: LiveSimulator) async throws {
            let result = try await converse(
                url: simulator.liveURL() + "?key=wrong",
                send: [setupMessage()],
                until: { _ in false }
            )
            #expect(result.messages.isEmpty)
            #expect(result.close?.closeCode == .policyViolation)
            #expect(result.close?.reason == "API key not valid. Please pass a valid API key.")
            #expect(simulator.recorder.snapshot().connection(1)?.credential == "api key (query)")

            await #expect(throws: (any Error).self) {
                _ = try await converse(url: simulator.baseURL + "/ws/nothing/here", send: [], until: { _ in true })
            }
            let snapshot = try await simulator.recorder.waitFor(within: .seconds(5)) { !$0.httpRequests.isEmpty }
            #expect(snapshot.httpRequests.first?.status == 404)
        }

        @Test("TLS with a generated CA; binary frames, snake_case and base64url output still decode")
        func tlsAndStyles() async throws {
            var configuration = LiveSimulatorConfiguration()
            configuration.tls = .selfSigned(caOut: nil)
            configuration.binaryFrames = true
            configuration.scenario.faults = [
                try SimulatorFault.parse("setup:snake-case"),
                try SimulatorFault.parse("setup:base64url"),
                try SimulatorFault.parse("setup:unknown-message"),
            ]
            try await withSimulator(configuration) { simulator in try await tlsAndStyles(simulator) }
        }

        private func tlsAndStyles(_ simulator: LiveSimulator) async throws {
            #expect(simulator.baseURL.hasPrefix("wss://localhost:"))
            let ca = try #require(simulator.caCertificatePEM)

            var tls = TLSConfiguration.makeClientConfiguration()
            tls.trustRoots = .certificates([try NIOSSLCertificate(bytes: Array(ca.utf8), format: .pem)])
            let result = try await converse(
                url: simulator.liveURL(version: "v1alpha"),
                tls: tls,
                send: [setupMessage(), textTurn("hi")],
                until: { messages in messages.contains { $0.simulatorKind == "serverContent.turnComplete" } }
            )
            #expect(result.messages.first?.simulatorKind == "setupComplete")
            #expect(result.binaryFrames == result.rawTexts.count)
            #expect(result.rawTexts.contains(#"{"someFutureMessage":{}}"#))
            let audio = try #require(result.rawTexts.first { $0.contains("inline_data") })
            #expect(audio.contains("model_turn") && audio.contains("mime_type"))
            let data = try #require(audio.split(separator: #""data":""#).last?.split(separator: "\"").first)
            #expect(data.count == 8000)
            #expect(!data.contains("+") && !data.contains("/"))
            #expect(data.contains("-") || data.contains("_"))
            let chunks = result.messages.compactMap { message -> Data? in
                guard case .serverContent(let content) = message.payload else { return nil }
                return content.modelTurn?.parts.first?.inlineData?.data.data
            }
            #expect(chunks.first == ModelAudio.chunk(turn: 1, index: 0))
        }

        @Test("POST /v1alpha/auth_tokens mints a token the Constrained endpoint accepts")
        func authTokens() async throws {
            var configuration = LiveSimulatorConfiguration()
            configuration.requiredKey = Secret("real-key")
            try await withSimulator(configuration) { simulator in try await authTokens(simulator) }
        }

        private func authTokens(_ simulator: LiveSimulator) async throws {
            let denied = try await httpPOST(
                port: simulator.port,
                path: "/v1alpha/auth_tokens",
                headers: ["x-goog-api-key": "wrong"],
                body: #"{"uses": 1}"#
            )
            #expect(denied.status == 401)
            #expect(denied.body.contains("UNAUTHENTICATED"))

            let minted = try await httpPOST(
                port: simulator.port,
                path: "/v1alpha/auth_tokens",
                headers: ["x-goog-api-key": "real-key"],
                body: #"{"uses": 1, "bidiGenerateContentSetup": {"model": "models/x"}}"#
            )
            #expect(minted.status == 200)
            let json = try JSONDecoder().decode(JSONValue.self, from: Data(minted.body.utf8))
            let name = try #require(json["name"]?.stringValue)
            #expect(name.hasPrefix("auth_tokens/"))
            #expect(json["uses"] == 1)

            let result = try await converse(
                url: simulator.liveURL(version: "v1alpha", constrained: true),
                headers: [.authorization: "Token \(name)"],
                send: [setupMessage()],
                until: { messages in messages.contains { $0.simulatorKind == "setupComplete" } }
            )
            #expect(result.messages.first?.simulatorKind == "setupComplete")
            #expect(simulator.recorder.snapshot().tokensMinted == 1)
        }

        @Test("a silent client gets goAway, then close 1000, by the wall clock")
        func goAwayOverSocket() async throws {
            var configuration = LiveSimulatorConfiguration()
            configuration.connectionLifetime = .seconds(20)
            configuration.goAwayGrace = .seconds(10)
            configuration.timeScale = 0.05
            try await withSimulator(configuration) { simulator in
                let result = try await converse(url: simulator.liveURL(), send: [setupMessage()], until: { _ in false })
                #expect(result.messages.map(\.simulatorKind) == ["setupComplete", "goAway"])
                #expect(result.close?.closeCode == .normalClosure)
                #expect(result.close?.reason == "The operation was cancelled.")
                let close = try await simulator.recorder.waitForClose(connection: 1)
                #expect(close.initiator == "server" && close.code == 1000)
            }
        }

        @Test("a closed session resumes on a new connection; a resume while it is open gets 1011")
        func resumeOverSocket() async throws {
            try await withSimulator { simulator in
                let first = try await converse(
                    url: simulator.liveURL(),
                    send: [setupMessage(), textTurn("remember this")],
                    until: { messages in
                        messages.contains { message in
                            if case .sessionResumptionUpdate(let update) = message.payload {
                                return update.resumableHandle != nil
                            }
                            return false
                        }
                    }
                )
                let handle = try #require(
                    first.messages.compactMap { message -> String? in
                        if case .sessionResumptionUpdate(let update) = message.payload {
                            update.resumableHandle
                        } else {
                            nil
                        }
                    }.last
                )
                let second = try await converse(
                    url: simulator.liveURL(),
                    send: [setupMessage(handle: handle), textTurn("what did I say?")],
                    until: { messages in messages.contains { $0.simulatorKind == "serverContent.turnComplete" } }
                )
                #expect(second.messages.first?.simulatorKind == "setupComplete")
                let snapshot = simulator.recorder.snapshot()
                #expect(snapshot.connection(2)?.resumed == true)
                #expect(snapshot.connection(2)?.resumptionHandle == handle)
                #expect(snapshot.connection(2)?.turns.map(\.number) == [2])
            }
        }

        @Test("fault frames arrive: flood, malformed, truncated, oversized, after a stall and with slow replies")
        func faultFrames() async throws {
            var configuration = LiveSimulatorConfiguration()
            configuration.scenario.faults = try [
                "setup:stall=300ms", "setup:flood=50", "setup:malformed", "setup:truncated",
                "setup:oversized=100000", "setup:slow=20ms",
            ].map(SimulatorFault.parse)
            try await withSimulator(configuration) { simulator in
                let started = ContinuousClock.now
                let raw = try await rawConversation(
                    url: simulator.liveURL(),
                    send: [setupMessage(), textTurn("hello")],
                    until: { texts in texts.contains { $0.contains("turnComplete") } }
                )
                #expect(ContinuousClock.now - started >= .milliseconds(300))
                #expect(raw.first == #"{"setupComplete":{}}"#)
                #expect(raw.filter { $0 == #"{"usageMetadata":{"totalTokenCount":0}}"# }.count == 50)
                let codec = LiveCodec()
                let undecodable = raw.filter { (try? codec.decodeServer(Data($0.utf8))) == nil }
                #expect(undecodable.count == 2)
                #expect(raw.contains { $0.utf8.count >= 99_000 && (try? codec.decodeServer(Data($0.utf8))) != nil })
                let record = try #require(simulator.recorder.snapshot().connection(1))
                #expect(record.faults.count == 6)
            }
        }

        @Test("TLS from --cert-file / --key-file PEMs")
        func tlsFromFiles() async throws {
            let certificates = try SimulatorCertificates.generate()
            let stem = "/tmp/hark-sim-test-\(UInt64.random(in: 0...UInt64.max))"
            let (certPath, keyPath) = (stem + "-cert.pem", stem + "-key.pem")
            try Data(certificates.leafPEM.utf8).write(to: URL(filePath: certPath))
            try Data(certificates.leafKeyPEM.utf8).write(to: URL(filePath: keyPath))
            defer {
                unlink(certPath)
                unlink(keyPath)
            }
            var configuration = LiveSimulatorConfiguration()
            configuration.tls = .files(certificate: certPath, key: keyPath)
            try await withSimulator(configuration) { simulator in
                var tls = TLSConfiguration.makeClientConfiguration()
                tls.trustRoots = .certificates([
                    try NIOSSLCertificate(bytes: Array(certificates.caPEM.utf8), format: .pem)
                ])
                let result = try await converse(
                    url: simulator.liveURL(),
                    tls: tls,
                    send: [setupMessage()],
                    until: { messages in !messages.isEmpty }
                )
                #expect(result.messages.first?.simulatorKind == "setupComplete")
            }
        }
    }
}

/// A bare HTTP/1.1 POST over NIO: status code and body.
private func httpPOST(
    port: Int,
    path: String,
    headers: [String: String],
    body: String
) async throws -> (status: Int, body: String) {
    let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .connect(host: "127.0.0.1", port: port) { channel in
            channel.eventLoop.makeCompletedFuture {
                try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
            }
        }
    var request = "POST \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    for (name, value) in headers { request += "\(name): \(value)\r\n" }
    request += "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
    let response: String = try await channel.executeThenClose { inbound, outbound in
        try await outbound.write(ByteBuffer(string: request))
        var text = ""
        for try await chunk in inbound {
            text += String(buffer: chunk)
        }
        return text
    }
    let statusLine = response.split(separator: "\r\n", maxSplits: 1).first ?? ""
    let status = Int(statusLine.split(separator: " ").dropFirst().first ?? "") ?? 0
    let responseBody = response.split(separator: "\r\n\r\n", maxSplits: 1).last.map(String.init) ?? ""
    return (status, responseBody)
}
