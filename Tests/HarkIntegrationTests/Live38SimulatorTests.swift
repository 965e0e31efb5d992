import HarkBackendKit
import HarkCore
import HarkGemini
import HarkLiveSimulator
import HarkTestKit
import Testing

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

/// 16 kHz mono samples of a sine tone (speech to the simulator's detector).
private func voice(seconds: Double) -> [Int16] { TestSignals.tone(seconds: seconds) }

/// 16 kHz of digital silence.
private func quietness(seconds: Double) -> [Int16] {
    [Int16](repeating: 0, count: Int((seconds * 16_000).rounded()))
}

/// A 3.8 setup (or another model's), with the pieces the tests vary.
private func setup38(
    model: String = "models/gemini-3.8-live",
    functions: [FunctionDeclaration] = [],
    history: Bool = false,
    manual: Bool = false,
    _ change: (inout Setup) -> Void = { _ in }
) -> ClientMessage {
    var setup = Setup(
        model: model,
        tools: functions.isEmpty ? nil : [Tool(functionDeclarations: functions)],
        realtimeInputConfig: manual ? RealtimeInputConfig(automaticActivityDetection: .init(disabled: true)) : nil,
        historyConfig: history ? HistoryConfig(initialHistoryInClientContent: true) : nil
    )
    change(&setup)
    return .setup(setup)
}

private func function(_ name: String, _ behavior: String? = nil) -> FunctionDeclaration {
    FunctionDeclaration(name: name, description: name, parameters: nil, behavior: behavior)
}

private func typed(_ text: String) -> ClientMessage {
    .clientContent(ClientContent(turns: [.text(text, role: "user")], turnComplete: true))
}

private func respond(
    _ id: String,
    _ name: String,
    _ response: JSONValue,
    scheduling: String? = nil,
    willContinue: Bool? = nil
) -> ClientMessage {
    .toolResponse(
        ToolResponse(functionResponses: [
            FunctionResponse(id: id, name: name, response: response, scheduling: scheduling, willContinue: willContinue)
        ])
    )
}

/// What the 3.8 tests read of a ``Harness``: `mark()` forgets what a step before sent.
extension Harness {
    /// With `tools` scripted (`TURN:NAME[:ARGS]`) and `faults`.
    init(tools: [String], faults: [String] = []) throws {
        var configuration = LiveSimulatorConfiguration()
        configuration.scenario.toolCalls = try tools.map(ScriptedToolCall.parse)
        configuration.scenario.faults = try faults.map(SimulatorFault.parse)
        self.init(configuration)
    }

    var contents: [ServerContent] {
        sent.compactMap { if case .serverContent(let content) = $0.payload { content } else { nil } }
    }

    /// The `turnComplete`s sent: interaction status and reason.
    var turnCompletes: [(status: String?, reason: String?)] {
        contents.filter { $0.turnComplete == true }.map { ($0.interactionStatus, $0.turnCompleteReason) }
    }

    var statuses: [String?] { turnCompletes.map(\.status) }

    var audioChunkCount: Int { contents.filter { $0.modelTurn != nil }.count }

    var toolCalls: [FunctionCall] {
        sent.flatMap { message -> [FunctionCall] in
            if case .toolCall(let call) = message.payload { call.functionCalls } else { [] }
        }
    }

    var cancellations: [[String]] {
        sent.compactMap { if case .toolCallCancellation(let cancel) = $0.payload { cancel.ids } else { nil } }
    }

    var voiceActivities: [VoiceActivity] {
        sent.compactMap { if case .voiceActivity(let activity) = $0.payload { activity } else { nil } }
    }

    var setupComplete: SetupComplete? {
        sent.lazy.compactMap { if case .setupComplete(let complete) = $0.payload { complete } else { nil } }.first
    }

    /// Forgets what was sent so far (the next step's messages alone remain).
    mutating func mark() { actions.removeAll() }
}

// MARK: - The simulator's 3.8 behaviour, as a value

@Suite("Live simulator: gemini-3.8-live")
struct Live38SimulatorTests {
    // MARK: Model choice and setup

    @Test("the model name chooses the behaviour")
    func family() {
        #expect(LiveModelFamily(model: "models/gemini-3.8-live") == .gemini38)
        #expect(LiveModelFamily(model: "gemini-3.8-live-extended-thinking") == .gemini38)
        #expect(LiveModelFamily(model: "models/gemini-2.5-flash-native-audio-preview-12-2025") == .gemini25)
        #expect(LiveModelFamily(model: "models/sim") == .gemini25)
        var harness = Harness()
        harness.receive(setup38())
        #expect(harness.session.family == .gemini38)
        #expect(harness.setupComplete?.sessionId == "sim-session-1")
        var older = Harness()
        older.receive(setup38(model: "models/gemini-2.5-flash-native-audio-preview-09-2025"))
        #expect(older.session.family == .gemini25)
        #expect(older.setupComplete != nil && older.setupComplete?.sessionId == nil)
    }

    @Test(
        "3.8 refuses what it no longer takes with 1007, naming the field",
        arguments: [
            ("gemini-3.8-live", "generationConfig.thinkingConfig"),
            ("gemini-3.8-live", "generationConfig.enableAffectiveDialog"),
            ("gemini-3.8-live", "proactivity.proactiveAudio"),
            ("gemini-3.8-live-extended-thinking", "generationConfig.thinkingConfig.thinkingBudget"),
            ("gemini-3.8-live-extended-thinking", "generationConfig.thinkingConfig.thinkingLevel"),
            ("gemini-3.8-live", "generationConfig.responseModalities"),
        ]
    )
    func rejectedFields(model: String, field: String) {
        var harness = Harness()
        harness.receive(
            setup38(model: "models/" + model) { setup in
                switch field {
                case "generationConfig.thinkingConfig":
                    setup.generationConfig?.thinkingConfig = ThinkingConfig(thinkingLevel: "low")
                case "generationConfig.enableAffectiveDialog":
                    setup.generationConfig?.enableAffectiveDialog = false
                case "proactivity.proactiveAudio":
                    setup.proactivity = Proactivity(proactiveAudio: false)
                case "generationConfig.thinkingConfig.thinkingBudget":
                    setup.generationConfig?.thinkingConfig = ThinkingConfig(thinkingBudget: 0)
                case "generationConfig.thinkingConfig.thinkingLevel":
                    setup.generationConfig?.thinkingConfig = ThinkingConfig(thinkingLevel: "enormous")
                default:
                    setup.generationConfig?.responseModalities = [.text]
                }
            }
        )
        #expect(harness.closes.map(\.code) == [1007])
        let reason = harness.closes.first?.reason ?? ""
        #expect(reason.hasPrefix("Request contains an invalid argument"))
        #expect(reason.contains(field), "\(reason)")
        #expect(reason.utf8.count <= 123)
        #expect(!harness.kinds.contains("setupComplete"))
    }

    @Test("what 3.8 takes, and what 2.5 still takes, is accepted")
    func acceptedFields() {
        let accepted: [ClientMessage] = [
            setup38(model: "models/gemini-3.8-live-extended-thinking") {
                $0.generationConfig?.thinkingConfig = ThinkingConfig(thinkingLevel: "high")
            },
            setup38 { $0.proactivity = Proactivity(proactiveAudio: true) },
            setup38 {
                $0.inputAudioTranscription = AudioTranscriptionConfig(
                    languageCodes: ["ml-IN", "en-IN"],
                    customVocabulary: ["നന്ദി", "സുഖമാണോ"]
                )
            },
            setup38(functions: [function("a", "BLOCKING"), function("b", "NON_BLOCKING"), function("c")]),
            setup38(model: "models/gemini-2.5-flash-native-audio-preview-09-2025") {
                $0.generationConfig?.thinkingConfig = ThinkingConfig(thinkingBudget: 0)
                $0.generationConfig?.enableAffectiveDialog = true
                $0.proactivity = Proactivity(proactiveAudio: false)
            },
        ]
        for setup in accepted {
            var harness = Harness()
            harness.receive(setup)
            #expect(harness.closes.isEmpty, "\(setup)")
            #expect(harness.kinds == ["setupComplete"])
            #expect(!harness.events.contains { if case .unknownFields = $0 { true } else { false } })
        }
    }

    @Test("models that were shut down are refused as unknown models, with 1008")
    func shutDownModels() {
        for model in ["gemini-2.0-flash-live-001", "gemini-live-2.5-flash-preview"] {
            var harness = Harness()
            harness.receive(setup38(model: "models/" + model))
            #expect(harness.closes.map(\.code) == [1008])
            let reason = harness.closes.first?.reason ?? ""
            #expect(
                reason.hasPrefix(
                    "models/\(model) is not found for API version v1beta, or is not supported for bidiGenerateContent"
                ),
                "\(reason)"
            )
            #expect(reason.utf8.count <= 123)
        }
    }

    // MARK: Interaction status and non-blocking calls

    @Test("every turnComplete carries IDLE when nothing more is to come")
    func idleStatus() {
        var harness = Harness()
        harness.receive(setup38())
        harness.receive(typed("hello"))
        harness.idle(.seconds(3))
        harness.audio(voice(seconds: 1.6) + quietness(seconds: 1))
        harness.idle(.seconds(4))
        #expect(harness.statuses == ["IDLE", "IDLE"])
        // 2.5 sends none.
        var older = Harness()
        older.receive(setup38(model: "models/gemini-2.5-flash-native-audio-preview-12-2025"))
        older.receive(typed("hello"))
        older.idle(.seconds(3))
        #expect(older.statuses == [nil])
    }

    @Test("a NON_BLOCKING call: the model answers at once, IN_PROGRESS, then speaks the result when idle")
    func nonBlockingWhenIdle() throws {
        var harness = try Harness(tools: [#"1:check_status:{"what":"battery"}"#])
        harness.receive(setup38(functions: [function("check_status", "NON_BLOCKING")]))
        harness.receive(typed("how is the battery?"))
        harness.idle(.seconds(3))
        // The call went out and the answer was spoken without its result.
        let call = try #require(harness.toolCalls.first)
        #expect(call.name == "check_status")
        #expect(harness.audioChunkCount == 8)
        #expect(harness.outputTranscript == "answering: how is the battery?")
        #expect(harness.statuses == ["IN_PROGRESS"])
        let inProgress = try #require(harness.kinds.firstIndex(of: "serverContent.turnComplete"))
        #expect(harness.kinds.firstIndex(of: "toolCall")! < harness.kinds.firstIndex(of: "serverContent.modelTurn")!)
        #expect(inProgress > harness.kinds.lastIndex(of: "serverContent.modelTurn")!)

        harness.mark()
        let id = try #require(call.id)
        harness.receive(respond(id, "check_status", ["level": 80]))
        harness.idle(.seconds(3))
        #expect(harness.outputTranscript == #"tool check_status said {"level":80}"#)
        #expect(harness.audioChunkCount == 8)
        #expect(harness.statuses == ["IDLE"])
        #expect(
            harness.events.contains {
                if case .toolResult(let result) = $0 {
                    result.outcome == "spoken" && result.scheduling == "WHEN_IDLE" && result.id == id
                } else {
                    false
                }
            }
        )
    }

    @Test("a WHEN_IDLE result that arrives mid-answer waits for the answer to end")
    func whenIdleWaitsForTheAnswer() throws {
        var harness = try Harness(tools: ["1:set_volume"])
        harness.receive(setup38())  // undeclared: NON_BLOCKING, the 3.8 default
        harness.receive(typed("louder"))
        harness.idle(.milliseconds(600))  // the answer's first burst is out
        let id = try #require(harness.toolCalls.first?.id)
        #expect(harness.audioChunkCount > 0 && harness.audioChunkCount < 8)
        harness.receive(respond(id, "set_volume", ["percent": 60], scheduling: "WHEN_IDLE"))
        harness.idle(.seconds(4))
        // The answer went on to its end, then the result had its own turn.
        #expect(!harness.kinds.contains("serverContent.interrupted"))
        #expect(harness.statuses == ["IN_PROGRESS", "IDLE"])
        #expect(harness.outputTranscript == #"answering: louder"# + #"tool set_volume said {"percent":60}"#)
    }

    @Test("an INTERRUPT result cuts the answer off and is spoken at once")
    func interruptScheduling() throws {
        var harness = try Harness(tools: ["1:get_time"])
        harness.receive(setup38())
        harness.receive(.realtimeInput(RealtimeInput(text: "what time is it")))
        harness.idle(.milliseconds(600))
        let id = try #require(harness.toolCalls.first?.id)
        harness.mark()
        harness.receive(respond(id, "get_time", ["time": "12:00"], scheduling: "INTERRUPT"))
        #expect(Array(harness.kinds.prefix(2)) == ["serverContent.interrupted", "serverContent.turnComplete"])
        #expect(harness.statuses == ["IN_PROGRESS"])
        #expect(harness.audioChunkCount > 0)  // at once: no latency before the result's turn
        harness.idle(.seconds(3))
        #expect(harness.outputTranscript == #"tool get_time said {"time":"12:00"}"#)
        #expect(harness.statuses == ["IN_PROGRESS", "IDLE"])
        #expect(harness.events.contains { if case .interrupted(turn: 1, _) = $0 { true } else { false } })
    }

    @Test("a SILENT result starts no turn: a bare turnComplete with IDLE ends the interaction")
    func silentScheduling() throws {
        var harness = try Harness(tools: ["1:mute"])
        harness.receive(setup38())
        harness.receive(typed("be quiet"))
        harness.idle(.seconds(3))
        #expect(harness.statuses == ["IN_PROGRESS"])
        let id = try #require(harness.toolCalls.first?.id)
        harness.mark()
        harness.receive(respond(id, "mute", ["muted": true], scheduling: "SILENT"))
        harness.idle(.seconds(3))
        #expect(harness.kinds == ["serverContent.turnComplete", "sessionResumptionUpdate"])
        let bare = try #require(harness.contents.first)
        #expect(bare.turnComplete == true && bare.interactionStatus == "IDLE")
        #expect(bare.modelTurn == nil && bare.generationComplete == nil && bare.outputTranscription == nil)
        #expect(harness.audioChunkCount == 0)
    }

    @Test("willContinue responses are progress; the last response ends the call")
    func progressResponses() throws {
        var harness = try Harness(tools: ["1:download"])
        harness.receive(setup38(functions: [function("download")]))
        harness.receive(typed("fetch the lesson"))
        harness.idle(.seconds(3))
        let id = try #require(harness.toolCalls.first?.id)
        harness.mark()
        harness.receive(respond(id, "download", ["percent": 50], scheduling: "WHEN_IDLE", willContinue: true))
        harness.receive(respond(id, "download", ["percent": 90], scheduling: "WHEN_IDLE", willContinue: true))
        harness.idle(.seconds(2))
        #expect(harness.audioChunkCount == 0 && harness.statuses.isEmpty)
        let progress = harness.events.compactMap { event -> [ToolResponseRecord]? in
            if case .toolResponse(let records) = event { records } else { nil }
        }.flatMap { $0 }
        #expect(progress.map(\.matched) == [true, true])
        #expect(progress.map(\.willContinue) == [true, true])
        harness.receive(respond(id, "download", ["done": true], scheduling: "WHEN_IDLE", willContinue: false))
        harness.idle(.seconds(3))
        #expect(harness.outputTranscript == #"tool download said {"done":true}"#)
        #expect(harness.statuses == ["IDLE"])
    }

    @Test("a BLOCKING function is waited for, as on 2.5")
    func blockingFunction() throws {
        var harness = try Harness(tools: ["1:get_time"])
        harness.receive(setup38(functions: [function("get_time", "BLOCKING")]))
        harness.receive(typed("what time is it"))
        harness.idle(.seconds(3))
        #expect(harness.toolCalls.count == 1)
        #expect(harness.audioChunkCount == 0 && harness.statuses.isEmpty)
        let id = try #require(harness.toolCalls.first?.id)
        harness.receive(respond(id, "get_time", ["time": "12:00"]))
        harness.idle(.seconds(3))
        #expect(harness.outputTranscript == #"answering: what time is it; tool get_time said {"time":"12:00"}"#)
        #expect(harness.statuses == ["IDLE"])
    }

    @Test("a NON_BLOCKING call still running when its connection ends goes on in the resumed session")
    func runningCallsSurviveAResumption() throws {
        let store = SimulatorStore()
        var configuration = LiveSimulatorConfiguration()
        configuration.scenario.toolCalls = [try ScriptedToolCall.parse("1:slow_lookup")]
        var first = Harness(configuration, store: store)
        first.receive(setup38())
        first.receive(typed("look it up"))
        first.idle(.seconds(3))
        #expect(first.statuses == ["IN_PROGRESS"])
        let id = try #require(first.toolCalls.first?.id)
        let handle = try #require(first.session.lastHandle)
        first.session.socketClosed(wallNow: first.wall)

        var second = Harness(configuration, store: store, number: 2, wall: first.wall + .seconds(1))
        second.receive(setup38 { $0.sessionResumption = SessionResumptionConfig(handle: handle) })
        #expect(second.kinds == ["setupComplete"])
        second.receive(respond(id, "slow_lookup", ["found": true]))
        second.idle(.seconds(3))
        #expect(second.outputTranscript == #"tool slow_lookup said {"found":true}"#)
        #expect(second.statuses == ["IDLE"])
        // A fresh session knows nothing of it.
        var fresh = Harness(configuration, store: store, number: 3)
        fresh.receive(setup38())
        fresh.receive(respond(id, "slow_lookup", ["found": true]))
        #expect(
            fresh.events.contains {
                if case .toolResponse(let records) = $0 { records.map(\.matched) == [false] } else { false }
            }
        )
    }

    // MARK: Cancellation

    @Test("a barge-in cancels the NON_BLOCKING calls still running; later responses are ignored")
    func bargeInCancels() throws {
        var harness = try Harness(tools: ["1:slow_lookup"])
        harness.receive(setup38())
        harness.audio(voice(seconds: 1.6) + quietness(seconds: 1))
        harness.idle(.seconds(4))
        #expect(harness.statuses == ["IN_PROGRESS"])
        let id = try #require(harness.toolCalls.first?.id)
        harness.mark()
        harness.audio(voice(seconds: 0.5))  // the user talks again
        #expect(harness.cancellations == [[id]])
        #expect(harness.events.contains(.toolCallsCancelled(ids: [id], why: "barge-in")))
        // Nothing is left running: the interaction is over.
        #expect(harness.statuses == ["IDLE"])
        harness.audio(quietness(seconds: 1))
        harness.idle(.seconds(4))
        harness.mark()
        harness.receive(respond(id, "slow_lookup", ["found": true]))
        harness.idle(.seconds(3))
        #expect(
            harness.events == [
                .toolResponse([
                    ToolResponseRecord(id: id, name: "slow_lookup", scheduling: nil, willContinue: nil, matched: false)
                ])
            ]
        )
        #expect(harness.audioChunkCount == 0)
    }

    @Test("the cancel-tools fault cancels the calls waiting for their responses")
    func cancelToolsFault() throws {
        var harness = try Harness(tools: ["1:slow_lookup"], faults: ["answer=1:cancel-tools"])
        harness.receive(setup38())
        harness.receive(typed("look it up"))
        harness.idle(.seconds(3))
        let id = try #require(harness.toolCalls.first?.id)
        #expect(harness.cancellations == [[id]])
        // The answer that was under way when it fired ended IDLE: nothing runs any more.
        #expect(harness.statuses == ["IDLE"])
        // On 2.5 it cancels the call the answer waits for, and the answer goes on without it.
        var older = try Harness(tools: ["1:slow_lookup"], faults: ["wall=1:cancel-tools"])
        older.receive(setup38(model: "models/sim"))
        older.receive(typed("look it up"))
        older.idle(.seconds(4))
        #expect(older.cancellations.count == 1)
        #expect(older.outputTranscript == "answering: look it up")
        #expect(older.statuses == [nil])
    }

    // MARK: Rejection

    @Test("a rejected turn gets only turnComplete with RESPONSE_REJECTED and IDLE")
    func rejectedTurn() throws {
        var harness = try Harness(tools: [], faults: ["turn=2:reject"])
        harness.receive(setup38())
        harness.receive(typed("first"))
        harness.idle(.seconds(3))
        harness.mark()
        harness.receive(typed("second"))
        harness.idle(.seconds(3))
        #expect(harness.audioChunkCount == 0)
        #expect(harness.turnCompletes.map(\.reason) == ["RESPONSE_REJECTED"])
        #expect(harness.statuses == ["IDLE"])
        #expect(harness.events.contains(.answerRejected(turn: 2)))
        harness.mark()
        harness.receive(typed("third"))
        harness.idle(.seconds(3))
        #expect(harness.outputTranscript == "answering: third")
        #expect(harness.turnCompletes.map(\.reason) == [nil])
    }

    // MARK: Polite barge-in

    @Test("an answer does not start while the user speaks: it waits for the end of the speech")
    func politeBargeIn() throws {
        var configuration = LiveSimulatorConfiguration()
        configuration.responseLatency = .seconds(1)
        var harness = Harness(configuration)
        harness.receive(setup38())
        harness.audio(voice(seconds: 1.6) + quietness(seconds: 0.6))  // turn 1 ends; its answer is 1 s away
        #expect(harness.events.contains { if case .userTurnEnded = $0 { true } else { false } })
        harness.mark()
        harness.audio(voice(seconds: 2.0))  // the user goes on meanwhile
        #expect(harness.audioChunkCount == 0)
        #expect(!harness.kinds.contains("serverContent.interrupted"))
        harness.audio(quietness(seconds: 1.0))
        harness.idle(.seconds(8))
        let endMessage = try #require(
            harness.sent.firstIndex {
                if case .voiceActivity(let activity) = $0.payload { activity.type == "ACTIVITY_END" } else { false }
            }
        )
        let firstAudio = try #require(harness.kinds.firstIndex(of: "serverContent.modelTurn"))
        #expect(firstAudio > endMessage)
        // Both turns answered, in order, and neither interrupted.
        #expect(harness.outputTranscript == "answering turn 1answering turn 2")
        #expect(harness.statuses == ["IDLE", "IDLE"])

        // 2.5 answers the same speech by giving up the first answer.
        var older = Harness(configuration)
        older.receive(setup38(model: "models/sim"))
        older.audio(voice(seconds: 1.6) + quietness(seconds: 0.6))
        older.audio(voice(seconds: 2.0))
        #expect(older.kinds.contains("serverContent.interrupted"))
    }

    // MARK: History

    @Test("historyConfig: clientContent turns are history, taken without an answer until turnComplete")
    func historySeeding() {
        var harness = Harness()
        harness.receive(setup38(history: true))
        harness.mark()
        harness.receive(
            .clientContent(
                ClientContent(
                    turns: [.text("what is thank you?", role: "user"), .text("nanni", role: "model")],
                    turnComplete: false
                )
            )
        )
        harness.receive(
            .clientContent(ClientContent(turns: [.text("and hello?", role: "user")], turnComplete: true))
        )
        harness.idle(.seconds(3))
        #expect(harness.sent.isEmpty)
        let seeded = harness.events.compactMap { event -> SeededTurn? in
            if case .historySeeded(let turn, true) = event { turn } else { nil }
        }
        #expect(seeded.map(\.role) == ["user", "model", "user"])
        #expect(seeded.map(\.text) == ["what is thank you?", "nanni", "and hello?"])
        #expect(harness.events.contains(.historyComplete(turns: 3, beforeRealtimeInput: true)))
        // After the history, text is a turn like any other.
        harness.receive(typed("good morning"))
        harness.idle(.seconds(3))
        #expect(harness.outputTranscript == "answering: good morning")
    }

    @Test("history after realtime input is recorded as such; without historyConfig clientContent is a turn")
    func historyOrderAndAbsence() {
        var harness = Harness()
        harness.receive(setup38(history: true))
        harness.audio(quietness(seconds: 0.2))
        harness.receive(.clientContent(ClientContent(turns: [.text("hi", role: "user")], turnComplete: true)))
        #expect(harness.events.contains(.historyComplete(turns: 1, beforeRealtimeInput: false)))
        var plain = Harness()
        plain.receive(setup38())
        plain.receive(.clientContent(ClientContent(turns: [.text("hi", role: "user")], turnComplete: true)))
        plain.idle(.seconds(3))
        #expect(plain.outputTranscript == "answering: hi")
        #expect(!plain.events.contains { if case .historySeeded = $0 { true } else { false } })
        // Roles are user or model.
        var odd = Harness()
        odd.receive(setup38(history: true))
        odd.receive(.clientContent(ClientContent(turns: [.text("hi", role: "system")], turnComplete: true)))
        #expect(odd.closes.map(\.code) == [1007])
    }

    // MARK: Transcripts and voice activity

    @Test("while the user speaks: interim transcripts, then the final one; voiceActivity at start and end")
    func interimTranscriptsAndVoiceActivity() throws {
        var harness = Harness()
        harness.receive(setup38())
        harness.audio(quietness(seconds: 1.0) + voice(seconds: 1.6) + quietness(seconds: 1.0))
        let interim = harness.contents.compactMap { $0.interimInputTranscription?.text }
        #expect(interim == ["heard 0.5 s", "heard 1.0 s", "heard 1.5 s"])
        let final = try #require(harness.contents.firstIndex { $0.inputTranscription != nil })
        let lastInterim = try #require(harness.contents.lastIndex { $0.interimInputTranscription != nil })
        #expect(lastInterim < final)
        #expect(harness.contents[final].inputTranscription?.text == "heard 1.6 s of speech")
        let activity = harness.voiceActivities
        #expect(activity.map(\.type) == ["ACTIVITY_START", "ACTIVITY_END"])
        let start = try #require(activity.first?.audioOffset?.duration)
        let end = try #require(activity.last?.audioOffset?.duration)
        #expect(start >= .milliseconds(900) && start <= .milliseconds(1050), "\(start)")
        #expect(end >= .milliseconds(2550) && end <= .milliseconds(2650), "\(end)")
        // The wire form: "voiceActivityType" and a protobuf duration.
        let text = try LiveCodec().encode(ServerMessage(.voiceActivity(activity[0])))
        #expect(text.contains(#""voiceActivityType":"ACTIVITY_START""#) && text.contains(#""audioOffset":"#))
        // 2.5 sends neither.
        var older = Harness()
        older.receive(setup38(model: "models/sim"))
        older.audio(quietness(seconds: 1.0) + voice(seconds: 1.6) + quietness(seconds: 1.0))
        #expect(older.voiceActivities.isEmpty)
        #expect(!older.contents.contains { $0.interimInputTranscription != nil })
    }

    @Test("the new fault actions parse and print back")
    func faultGrammar() throws {
        for spec in ["turn=2:reject", "answer=1:cancel-tools", "wall=3s:cancel-tools:conn=1"] {
            #expect(try SimulatorFault.parse(spec).description == spec)
        }
        #expect(try SimulatorFault.parse("turn=2:reject").action == .reject)
        #expect(SimulatorFault.grammar.contains("reject") && SimulatorFault.grammar.contains("cancel-tools"))
    }
}
