import Foundation
import HarkBackendKit
import HarkCore
import HarkGemini
import Testing

/// The 3.8 models: what a setup may hold per model, interaction status, turn-complete reasons, non-blocking tools,
/// interim transcripts.
@Suite struct LateModelTests {
    func events(_ actions: [LiveSessionMachine.Action]) -> [SessionEvent] {
        actions.compactMap { if case .emit(let event) = $0 { event } else { nil } }
    }

    func logs(_ actions: [LiveSessionMachine.Action]) -> [String] {
        actions.compactMap {
            switch $0 {
            case .info(let text): "info: " + text
            case .warning(let text): "warning: " + text
            default: nil
            }
        }
    }

    func content(_ content: ServerContent) -> ServerMessage { ServerMessage(.serverContent(content)) }

    func audio() -> ServerMessage {
        content(
            ServerContent(
                modelTurn: Content(
                    role: "model",
                    parts: [Part(inlineData: Blob(mimeType: "audio/pcm;rate=24000", data: PCM16.bytes([1, 2])))]
                )
            )
        )
    }

    func ready(_ profile: LiveModelProfile = .gemini38) -> LiveSessionMachine {
        var machine = LiveSessionMachine(manualActivity: false, profile: profile)
        _ = machine.receive(ServerMessage(.setupComplete(SetupComplete())))
        return machine
    }

    // MARK: Profiles

    @Test func profilesFollowTheModelName() {
        #expect(LiveModelProfile.forModel("gemini-3.8-live") == .gemini38)
        #expect(LiveModelProfile.forModel("models/gemini-3.8-live") == .gemini38)
        #expect(LiveModelProfile.forModel("gemini-3.8-live-extended-thinking") == .gemini38ExtendedThinking)
        #expect(LiveModelProfile.forModel("gemini-3.1-flash-live-preview").availability == .legacyPreview)
        let preview = LiveModelProfile.forModel("gemini-2.5-flash-native-audio-preview-12-2025")
        #expect(preview.availability == .legacyPreview && preview.thinkingBudget && !preview.nonBlockingTools)
        #expect(LiveModelProfile.forModel("gemini-live-2.5-flash-native-audio").availability == .current)
        for gone in ["gemini-2.0-flash-live-001", "gemini-live-2.5-flash-preview"] {
            #expect(LiveModelProfile.forModel(gone).availability == .shutDown(since: "2025-12-09"))
        }
        let unknown = LiveModelProfile.forModel("gemini-4.0-live")
        #expect(unknown.availability == .unknown)
        #expect(unknown.nonBlockingTools && !unknown.thinkingBudget)
        #expect(GeminiBackend.defaultModel == "gemini-3.8-live")
    }

    func settings(_ values: [String: String]) throws -> BackendSettings {
        var settings = GeminiBackend.defaultSettings
        let keys = Dictionary(uniqueKeysWithValues: GeminiBackend.settingKeys.map { ($0.name, $0) })
        for (name, text) in values { settings[name] = try #require(keys[name]).parse(text) }
        return settings
    }

    @Test func whatAModelRejectsIsAConfigurationErrorNamingTheKey() throws {
        let cases: [([String: String], String)] = [
            (["thinking_budget": "1024"], "thinking_budget"),
            (["affective_dialog": "true"], "affective_dialog"),
            (["proactive_audio": "false"], "proactive_audio"),
            (["thinking_level": "high"], "thinking_level"),
            (["model": "gemini-2.0-flash-live-001"], "model"),
            (["model": "gemini-live-2.5-flash-preview"], "model"),
        ]
        for (values, key) in cases {
            #expect(GeminiBackend.crossCheck(try settings(values))?.key == key, "\(values)")
        }
        // What the model accepts passes.
        let fine: [[String: String]] = [
            ["model": "gemini-3.8-live-extended-thinking", "thinking_level": "high"],
            [
                "model": "gemini-2.5-flash-native-audio-preview-09-2025", "thinking_budget": "0",
                "affective_dialog": "true",
            ],
            ["proactive_audio": "true"],
            ["model": "gemini-4.0-live"],
        ]
        for values in fine { #expect(GeminiBackend.crossCheck(try settings(values)) == nil, "\(values)") }
    }

    @Test func legacyAndUnknownModelsWarnAndHintsTheyIgnoreAreSaid() throws {
        #expect(GeminiBackend.advice(try settings([:])).isEmpty)
        let legacy = GeminiBackend.advice(try settings(["model": "gemini-2.5-flash-native-audio-preview-12-2025"]))
        #expect(legacy.map(\.key) == ["model"])
        #expect(legacy.first?.note.contains("gemini-3.8-live") == true)
        #expect(GeminiBackend.advice(try settings(["model": "gemini-4.0-live"])).map(\.key) == ["model"])
        let hints = GeminiBackend.advice(
            try settings(["model": "gemini-live-2.5-flash-native-audio", "transcription_languages": "ml-IN"])
        )
        #expect(hints.map(\.key) == ["transcription_languages"])
    }

    @Test func theSetupHoldsOnlyWhatTheModelAccepts() throws {
        let values = [
            "proactive_audio": "true", "transcription_languages": "ml-IN, en-IN",
            "custom_vocabulary": "നമസ്കാരം, Hark",
        ]
        let current = GeminiBackend.setup(model: "gemini-3.8-live", settings: try settings(values))
        let json = try LiveCodec().encode(.setup(current))
        #expect(!json.contains("thinkingConfig") && !json.contains("proactivity") && !json.contains("Affective"))
        #expect(current.inputAudioTranscription?.languageCodes == ["ml-IN", "en-IN"])
        #expect(current.inputAudioTranscription?.customVocabulary == ["നമസ്കാരം", "Hark"])
        #expect(current.model == "models/gemini-3.8-live")

        let old = GeminiBackend.setup(
            model: "gemini-2.5-flash-native-audio-preview-09-2025",
            settings: try settings(values.merging(["thinking_budget": "0"]) { $1 })
        )
        #expect(old.generationConfig?.thinkingConfig?.thinkingBudget == 0)
        #expect(old.proactivity?.proactiveAudio == true)
        #expect(old.inputAudioTranscription == AudioTranscriptionConfig())

        let thinking = GeminiBackend.setup(
            model: "gemini-3.8-live-extended-thinking",
            settings: try settings(["thinking_level": "low"])
        )
        #expect(thinking.generationConfig?.thinkingConfig == ThinkingConfig(thinkingLevel: "LOW"))
    }

    // MARK: Interaction status

    @Test func aTurnCompleteInProgressIsNotTheEndOfTheExchange() {
        var machine = ready()
        _ = machine.receive(audio())
        let paused = machine.receive(content(ServerContent(turnComplete: true, interactionStatus: "IN_PROGRESS")))
        #expect(!events(paused).contains(.turnComplete))
        #expect(machine.exchangeInProgress && machine.owesReply)
        #expect(machine.conversation == .speaking)  // its audio still plays
        _ = machine.receive(audio())
        let over = machine.receive(content(ServerContent(turnComplete: true, interactionStatus: "IDLE")))
        #expect(events(over).contains(.turnComplete))
        #expect(events(over).last == .conversation(.listening))
        #expect(!machine.exchangeInProgress && !machine.owesReply)
    }

    @Test func anExchangeInProgressOutlivesItsConnectionButNotItsSession() {
        var machine = ready()
        _ = machine.receive(content(ServerContent(turnComplete: true, interactionStatus: "IN_PROGRESS")))
        #expect(!events(machine.connectionClosed()).contains(.turnComplete))
        machine.connectionOpened()
        #expect(machine.exchangeInProgress)  // resumed: the tool's result may still be spoken
        let ended = events(machine.forgetHandle())  // the resumption was refused: it is over
        #expect(ended.contains(.turnComplete) && !machine.exchangeInProgress)
        #expect(machine.forgetHandle().isEmpty)
    }

    @Test func withoutAudioInProgressShowsThinkingAndAStatuslessTurnCompleteEndsIt() {
        var machine = ready()
        _ = machine.receive(content(ServerContent(inputTranscription: Transcription(text: "what time is it"))))
        let paused = events(
            machine.receive(content(ServerContent(turnComplete: true, interactionStatus: "IN_PROGRESS")))
        )
        #expect(paused.last == .conversation(.thinking))
        #expect(machine.owesReply)
        // 2.5 models send no status: a turnComplete ends the exchange.
        var old = ready(.gemini25)
        _ = old.receive(audio())
        #expect(events(old.receive(content(ServerContent(turnComplete: true)))).contains(.turnComplete))
    }

    @Test func aTurnTheModelChoseNotToAnswerGoesBackToListeningWithoutAnError() {
        var machine = ready()
        _ = machine.receive(content(ServerContent(inputTranscription: Transcription(text: "la la la", finished: true))))
        #expect(machine.userHeard)
        let actions = machine.receive(
            content(
                ServerContent(turnComplete: true, turnCompleteReason: "RESPONSE_REJECTED", interactionStatus: "IDLE")
            )
        )
        #expect(events(actions).contains(.turnComplete))
        #expect(machine.conversation == .listening && !machine.userHeard && !machine.owesReply)
        #expect(
            logs(actions) == ["info: the model chose not to answer (RESPONSE_REJECTED) after \"la la la\"; listening"]
        )

        for reason in ["PROHIBITED_INPUT_CONTENT", "MALFORMED_FUNCTION_CALL"] {
            var machine = ready()
            let actions = machine.receive(content(ServerContent(turnComplete: true, turnCompleteReason: reason)))
            #expect(logs(actions).count == 1)
            #expect(logs(actions).first?.hasPrefix("warning: exchange 1 ended without an answer: \(reason)") == true)
        }
    }

    @Test func waitingForInputMeansNothingIsOwed() {
        var machine = ready()
        _ = machine.receive(content(ServerContent(inputTranscription: Transcription(text: "so I was thinking"))))
        #expect(machine.owesReply)
        let actions = machine.receive(content(ServerContent(waitingForInput: true)))
        #expect(!machine.owesReply)
        #expect(logs(actions) == ["info: the model waits for the user to go on"])
        #expect(!events(actions).contains(.turnComplete))
    }

    // MARK: Transcripts

    @Test func interimTranscriptsReplaceEachOtherInTheUsersSegment() {
        var machine = ready()
        let first = events(
            machine.receive(content(ServerContent(interimInputTranscription: Transcription(text: "wha"))))
        )
        #expect(first == [.transcript(Transcript(role: .user, segment: "user-1", text: "wha", isFinal: false))])
        let second = events(
            machine.receive(content(ServerContent(interimInputTranscription: Transcription(text: "what time"))))
        )
        #expect(second == [.transcript(Transcript(role: .user, segment: "user-1", text: "what time", isFinal: false))])
        let confirmed = events(machine.receive(content(ServerContent(inputTranscription: Transcription(text: "What")))))
        #expect(confirmed == [.transcript(Transcript(role: .user, segment: "user-1", text: "What", isFinal: false))])
        _ = machine.receive(content(ServerContent(interimInputTranscription: Transcription(text: " time is it"))))
        let closed = events(machine.receive(content(ServerContent(turnComplete: true))))
        #expect(
            closed.first
                == .transcript(Transcript(role: .user, segment: "user-1", text: "What time is it", isFinal: true))
        )
    }

    @Test func voiceActivityWithAnOffsetIsUnderstood() throws {
        let decoded = try LiveCodec().decodeServer(
            Data(#"{"voiceActivity":{"voiceActivityType":"ACTIVITY_END","audioOffset":"1.250s"}}"#.utf8)
        )
        guard case .voiceActivity(let activity) = decoded.message.payload else {
            Issue.record("not a voiceActivity")
            return
        }
        #expect(activity.type == "ACTIVITY_END" && activity.audioOffset?.duration == .milliseconds(1250))
        var machine = ready()
        #expect(events(machine.receive(decoded.message)) == [.conversation(.thinking)])
        let status = try LiveCodec().decodeServer(
            Data(#"{"serverContent":{"turnComplete":true,"interactionStatus":"IN_PROGRESS"}}"#.utf8)
        )
        #expect(status.unknownFields.isEmpty)
    }

    // MARK: Tools

    @Test func declarationsStateTheirBehaviourOnlyToModelsThatTakeIt() {
        let tool = LocalTool(name: "set_volume", description: "", behavior: .nonBlocking(.whenIdle)) { _ in .null }
        let blocking = LocalTool(name: "b", description: "") { _ in .null }
        #expect(ready().declaration(of: tool).behavior == "NON_BLOCKING")
        #expect(ready().declaration(of: blocking).behavior == "BLOCKING")
        #expect(ready(.gemini25).declaration(of: tool).behavior == nil)
    }

    @Test func responsesCarryTheirSchedulingAndProgressOn38Only() throws {
        var machine = ready()
        let call = FunctionCall(id: "c1", name: "count", args: nil)
        _ = machine.receive(audio())
        let started = machine.receive(ServerMessage(.toolCall(ToolCall(functionCalls: [call]))))
        #expect(machine.conversation == .speaking)  // a non-blocking call lets the model go on
        #expect(started.contains(.runTool(call)))
        let partial = machine.toolProgress(
            id: "c1",
            name: "count",
            partial: ["done": 1],
            behavior: .nonBlocking(.silent)
        )
        #expect(
            partial
                == .toolResponse(
                    ToolResponse(functionResponses: [
                        FunctionResponse(
                            id: "c1",
                            name: "count",
                            response: ["done": 1],
                            scheduling: "SILENT",
                            willContinue: true
                        )
                    ])
                )
        )
        let (final, _) = machine.toolFinished(
            id: "c1",
            name: "count",
            result: ["done": 2],
            succeeded: true,
            behavior: .nonBlocking(.interrupt)
        )
        #expect(
            final
                == .toolResponse(
                    ToolResponse(functionResponses: [
                        FunctionResponse(
                            id: "c1",
                            name: "count",
                            response: ["done": 2],
                            scheduling: "INTERRUPT",
                            willContinue: false
                        )
                    ])
                )
        )
        // A 2.5 model hears only the final result, without scheduling.
        var old = ready(.gemini25)
        _ = old.receive(ServerMessage(.toolCall(ToolCall(functionCalls: [call]))))
        #expect(old.toolProgress(id: "c1", name: "count", partial: ["done": 1], behavior: .nonBlocking(.silent)) == nil)
        let (plain, _) = old.toolFinished(
            id: "c1",
            name: "count",
            result: [:],
            succeeded: true,
            behavior: .nonBlocking(.silent)
        )
        #expect(
            plain
                == .toolResponse(
                    ToolResponse(functionResponses: [FunctionResponse(id: "c1", name: "count", response: [:])])
                )
        )
    }

    // MARK: History

    @Test func historyKeepsFinalTurnsWithinItsBounds() {
        var history = ConversationHistory(turns: 3, characters: 30)
        history.record(Transcript(role: .user, segment: "user-1", text: "hello", isFinal: false))
        #expect(history.isEmpty)
        history.record(Transcript(role: .user, segment: "user-1", text: "hello", isFinal: true))
        history.record(Transcript(role: .user, segment: "user-2", text: "there", isFinal: true))
        history.record(Transcript(role: .agent, segment: "agent-1", text: "hi!", isFinal: true))
        #expect(history.turns == [.init(role: .user, text: "hello there"), .init(role: .agent, text: "hi!")])
        history.record(Transcript(role: .user, segment: "user-3", text: "one", isFinal: true))
        history.record(Transcript(role: .agent, segment: "agent-2", text: "two", isFinal: true))
        #expect(history.turns.map(\.text) == ["hi!", "one", "two"])
        history.record(
            Transcript(role: .user, segment: "user-4", text: String(repeating: "x", count: 50), isFinal: true)
        )
        #expect(history.turns.count == 1 && history.turns[0].text.count == 30)
        var none = ConversationHistory(turns: 0, characters: 100)
        none.record(Transcript(role: .user, segment: "user-1", text: "hello", isFinal: true))
        #expect(none.isEmpty)
    }
}
