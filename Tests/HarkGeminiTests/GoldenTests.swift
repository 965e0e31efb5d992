import Foundation
import HarkBackendKit
import HarkCore
import HarkGemini
import Testing

/// The JSON examples of the Live API reference (seed 000), the iOS seed's snake_case (seed 001), and
/// the shapes the protocol page adds. Where they disagree the protocol page wins.
@Suite struct GoldenClientMessageTests {
    let codec = LiveCodec()

    func decode(_ json: String) throws -> ClientMessage {
        try codec.decodeClient(Data(json.utf8)).message
    }

    @Test func seedSetupExample() throws {
        let json = """
            {"setup": {"model": "models/gemini-2.5-flash-native-audio-preview-12-2025",
              "generationConfig": {"responseModalities": ["AUDIO"], "temperature": 0.7,
                "speechConfig": {"voiceConfig": {"prebuiltVoiceConfig": {"voiceName": "Kore"}}}},
              "systemInstruction": {"parts": [{ "text": "You are a helpful assistant." }]},
              "tools": [],
              "realtimeInputConfig": {"automaticActivityDetection": {"disabled": false,
                  "startOfSpeechSensitivity": "START_SENSITIVITY_HIGH", "endOfSpeechSensitivity": "END_SENSITIVITY_HIGH",
                  "prefixPaddingMs": 20, "silenceDurationMs": 100},
                "activityHandling": "START_OF_ACTIVITY_INTERRUPTS", "turnCoverage": "TURN_INCLUDES_ONLY_ACTIVITY"},
              "inputAudioTranscription": {}, "outputAudioTranscription": {}, "sessionResumption": {},
              "contextWindowCompression": {"slidingWindow": {}, "triggerTokens": 100000}}}
            """
        guard case .setup(let setup) = try decode(json) else {
            Issue.record("not a setup")
            return
        }
        #expect(setup.model == "models/gemini-2.5-flash-native-audio-preview-12-2025")
        #expect(setup.generationConfig?.responseModalities == [.audio])
        #expect(setup.generationConfig?.temperature == 0.7)
        #expect(setup.generationConfig?.speechConfig?.voiceConfig?.prebuiltVoiceConfig?.voiceName == "Kore")
        #expect(setup.systemInstruction?.parts.first?.text == "You are a helpful assistant.")
        let vad = setup.realtimeInputConfig?.automaticActivityDetection
        #expect(vad?.disabled == false && vad?.startOfSpeechSensitivity == .high && vad?.silenceDurationMs == 100)
        #expect(setup.realtimeInputConfig?.activityHandling == .startOfActivityInterrupts)
        #expect(setup.realtimeInputConfig?.turnCoverage == .onlyActivity)
        #expect(setup.inputAudioTranscription != nil && setup.outputAudioTranscription != nil)
        #expect(setup.sessionResumption == SessionResumptionConfig())
        #expect(setup.contextWindowCompression?.triggerTokens == 100_000)
        #expect(setup.contextWindowCompression?.slidingWindow != nil)
    }

    @Test func seedRealtimeClientContentAndToolResponse() throws {
        let audio = Data([1, 0, 2, 0, 0xFF, 0xFF])
        let realtime = try decode(
            #"{"realtimeInput": {"audio": {"mimeType": "audio/pcm;rate=16000", "data": "\#(audio.base64EncodedString())"}}}"#
        )
        #expect(realtime == .realtimeInput(RealtimeInput(audio: Blob(mimeType: "audio/pcm;rate=16000", data: audio))))
        let content = try decode(
            #"{"clientContent": {"turns": [{"role": "user", "parts": [{ "text": "Hello, how are you?" }]}], "turnComplete": true}}"#
        )
        #expect(
            content
                == .clientContent(
                    ClientContent(turns: [.text("Hello, how are you?", role: "user")], turnComplete: true)
                )
        )
        let tool = try decode(
            #"{"toolResponse": {"functionResponses": [{"id": "<function-call-id>", "name": "turn_on_the_lights", "response": { "result": "success" }}]}}"#
        )
        #expect(
            tool
                == .toolResponse(
                    ToolResponse(functionResponses: [
                        FunctionResponse(
                            id: "<function-call-id>",
                            name: "turn_on_the_lights",
                            response: ["result": "success"]
                        )
                    ])
                )
        )
        for marker in [#"{"activityStart": {}}"#, #"{"activityEnd": {}}"#, #"{"audioStreamEnd": true}"#] {
            guard case .realtimeInput = try decode(#"{"realtimeInput": \#(marker)}"#) else {
                Issue.record("\(marker) not decoded")
                continue
            }
        }
    }

    @Test func seedToolDeclarationsAndGoogleSearch() throws {
        let json = """
            {"setup": {"model": "models/x", "tools": [{"functionDeclarations": [{"name": "get_weather",
              "description": "Get weather for a location", "parameters": {"type": "object",
              "properties": {"location": { "type": "string" }}, "required": ["location"]}}]}, {"googleSearch": {}}]}}
            """
        guard case .setup(let setup) = try decode(json) else {
            Issue.record("not a setup")
            return
        }
        #expect(setup.tools?.count == 2)
        #expect(setup.tools?[0].functionDeclarations?.first?.name == "get_weather")
        #expect(setup.tools?[0].functionDeclarations?.first?.parameters?["required"] == ["location"])
        #expect(setup.tools?[1].googleSearch == .object([:]))
    }

    @Test func snakeCaseAndBase64URLAsPythonAndTheIOSSeedSend() throws {
        let audio = Data([0xFB, 0xFF, 0xBF, 0x00])
        // Python's base64.urlsafe_b64encode(bytes([0xFB, 0xFF, 0xBF, 0x00])): what the Python SDK sends.
        let urlSafe = "-_-_AA=="
        let realtime = try decode(
            #"{"realtime_input": {"media_chunks": [{"data": "\#(urlSafe)", "mime_type": "audio/pcm"}]}}"#
        )
        guard case .realtimeInput(let input) = realtime else {
            Issue.record("not realtime input")
            return
        }
        #expect(input.mediaChunks?.first?.data.data == audio)
        #expect(input.mediaChunks?.first?.mimeType == "audio/pcm")
        let content = try decode(
            #"{"client_content": {"turn_complete": "TRUE", "turns": [{"role": "user", "parts": [{"text": "ctx"}]}]}}"#
        )
        #expect(content == .clientContent(ClientContent(turns: [.text("ctx", role: "user")], turnComplete: true)))
        let setup = try decode(
            #"{"setup": {"model": "models/m", "generation_config": {"response_modalities": ["AUDIO"]}, "system_instruction": {"parts": {"text": "Be brief."}}}}"#
        )
        guard case .setup(let decoded) = setup else {
            Issue.record("not a setup")
            return
        }
        #expect(decoded.generationConfig?.responseModalities == [.audio])
        #expect(decoded.systemInstruction?.parts.first?.text == "Be brief.")
        let tool = try decode(
            #"{"tool_response": {"function_responses": [{"id": "c1", "name": "f", "response": {"output": 1}}]}}"#
        )
        guard case .toolResponse(let response) = tool else {
            Issue.record("not a tool response")
            return
        }
        #expect(response.functionResponses.first?.id == "c1")
    }

    @Test func rejectsZeroOrTwoTopLevelKeys() {
        #expect(throws: DecodingError.self) { try decode(#"{}"#) }
        #expect(throws: DecodingError.self) {
            try decode(#"{"setup": {"model": "m"}, "realtimeInput": {"audioStreamEnd": true}}"#)
        }
        #expect(throws: (any Error).self) { try decode("not json") }
    }

    @Test func sendsCanonicalCamelCaseAndStandardBase64() throws {
        let setup = Setup(
            model: "models/m",
            generationConfig: GenerationConfig(speechConfig: SpeechConfig(voiceName: "Puck")),
            systemInstruction: .text("hi"),
            realtimeInputConfig: RealtimeInputConfig(automaticActivityDetection: .init(disabled: true))
        )
        let text = try codec.encode(.setup(setup))
        for key in [
            "\"setup\"", "\"generationConfig\"", "\"responseModalities\":[\"AUDIO\"]", "\"speechConfig\"",
            "\"voiceName\":\"Puck\"", "\"systemInstruction\"", "\"realtimeInputConfig\"",
            "\"automaticActivityDetection\"",
            "\"inputAudioTranscription\":{}", "\"outputAudioTranscription\":{}", "\"sessionResumption\":{}",
            "\"contextWindowCompression\":{\"slidingWindow\":{}}",
        ] {
            #expect(text.contains(key), "\(key) missing in \(text)")
        }
        #expect(!text.contains("_"))
        let audio = Data([0xFB, 0xFF, 0xBF, 0x00])
        let message = try codec.encode(
            .realtimeInput(RealtimeInput(audio: Blob(mimeType: "audio/pcm;rate=16000", data: audio)))
        )
        #expect(
            message == #"{"realtimeInput":{"audio":{"data":"+/+/AA==","mimeType":"audio/pcm;rate=16000"}}}"#
                || message.contains(#""data":"+/+/AA==""#)
        )
        #expect(
            try decode(message)
                == .realtimeInput(RealtimeInput(audio: Blob(mimeType: "audio/pcm;rate=16000", data: audio)))
        )
        #expect(try decode(text) == .setup(setup))
    }
}

@Suite struct AudioMessageTextTests {
    let codec = LiveCodec()

    /// The encoder's text, keys sorted (its order is otherwise not fixed).
    func viaEncoder(_ message: ClientMessage) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes, .sortedKeys]
        return String(decoding: try encoder.encode(message), as: UTF8.self)
    }

    @Test func audioIsWrittenAsTheEncoderWritesIt() throws {
        var random = SystemRandomNumberGenerator()
        for count in [0, 1, 2, 3, 4, 1280, 3839] {
            let bytes = Data((0..<count).map { _ in UInt8.random(in: 0...255, using: &random) })
            for mime in ["audio/pcm;rate=16000", "audio/pcm;rate=24000", ""] {
                let message = ClientMessage.realtimeInput(RealtimeInput(audio: Blob(mimeType: mime, data: bytes)))
                let text = try codec.encode(message)
                #expect(text == (try viaEncoder(message)))
                #expect(try codec.decodeClient(Data(text.utf8)).message == message)
            }
        }
    }

    @Test func otherRealtimeInputsAndOddMimeTypesStillRoundTrip() throws {
        let audio = Blob(mimeType: "audio/pcm;rate=16000", data: Data([1, 2, 3]))
        let odd = Blob(mimeType: #"audio/"pcm"\x"#, data: Data([1, 2, 3]))
        for message: ClientMessage in [
            .realtimeInput(RealtimeInput(audio: audio, text: "hello")),
            .realtimeInput(RealtimeInput(audio: audio, audioStreamEnd: true)),
            .realtimeInput(RealtimeInput(audio: odd)),
            .realtimeInput(RealtimeInput(activityEnd: Empty())),
        ] {
            let text = try codec.encode(message)
            #expect(try codec.decodeClient(Data(text.utf8)).message == message)
        }
    }
}

@Suite struct GoldenServerMessageTests {
    let codec = LiveCodec()

    func decode(_ json: String) throws -> (message: ServerMessage, unknownFields: [String]) {
        try codec.decodeServer(Data(json.utf8))
    }

    @Test func seedServerContent() throws {
        let audio = Data([1, 0, 2, 0])
        let json = """
            {"serverContent": {"modelTurn": {"parts": [{"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": "\(audio.base64EncodedString())"}}]},
              "turnComplete": false, "interrupted": false, "generationComplete": false,
              "inputTranscription": { "text": "what the user said" }, "outputTranscription": { "text": "what the model said" },
              "groundingMetadata": {}}}
            """
        guard case .serverContent(let content) = try decode(json).message.payload else {
            Issue.record("not server content")
            return
        }
        #expect(content.modelTurn?.parts.first?.inlineData?.data.data == audio)
        #expect(content.modelTurn?.parts.first?.inlineData?.pcmRate == 24_000)
        #expect(content.turnComplete == false && content.interrupted == false && content.generationComplete == false)
        #expect(content.inputTranscription?.text == "what the user said")
        #expect(content.outputTranscription?.text == "what the model said")
    }

    @Test func seedToolCallCancellationGoAwayResumptionUsage() throws {
        guard
            case .toolCall(let call) = try decode(
                #"{"toolCall": {"functionCalls": [{"id": "call-123", "name": "turn_on_the_lights", "args": {}}]}}"#
            ).message.payload
        else {
            Issue.record("not a tool call")
            return
        }
        #expect(call.functionCalls == [FunctionCall(id: "call-123", name: "turn_on_the_lights", args: .object([:]))])
        #expect(
            try decode(#"{"toolCallCancellation": {"ids": ["call-123"]}}"#).message.payload
                == .toolCallCancellation(.init(ids: ["call-123"]))
        )
        #expect(
            try decode(#"{"goAway": {"timeLeft": "30s"}}"#).message.payload == .goAway(GoAway(timeLeft: .seconds(30)))
        )
        #expect(
            try decode(#"{"sessionResumptionUpdate": {"newHandle": "<opaque-token>", "resumable": true}}"#).message
                .payload
                == .sessionResumptionUpdate(SessionResumptionUpdate(newHandle: "<opaque-token>", resumable: true))
        )
        let usage = try decode(
            #"{"usageMetadata": {"promptTokenCount": 100, "responseTokenCount": 50, "totalTokenCount": 150, "thoughtsTokenCount": 20, "promptTokensDetails": [{ "modality": "AUDIO", "tokenCount": 80 }], "responseTokensDetails": [{ "modality": "AUDIO", "tokenCount": 50 }]}}"#
        ).message
        #expect(usage.payload == .none(unknownKeys: []))
        #expect(usage.usageMetadata?.totalTokenCount == 150 && usage.usageMetadata?.thoughtsTokenCount == 20)
        #expect(usage.usageMetadata?.promptTokensDetails?.first?.tokenCount == 80)
        #expect(try decode(#"{"setupComplete": {}}"#).message.payload == .setupComplete(SetupComplete()))
    }

    @Test func protocolPageShapes() throws {
        #expect(
            try decode(#"{"goAway": {"timeLeft": "49.990s"}}"#).message.payload
                == .goAway(GoAway(timeLeft: .milliseconds(49_990)))
        )
        let update = try decode(
            #"{"sessionResumptionUpdate": {"newHandle": "h", "resumable": true, "lastConsumedClientMessageIndex": "9007199254740993"}}"#
        )
        guard case .sessionResumptionUpdate(let value) = update.message.payload else {
            Issue.record("not an update")
            return
        }
        #expect(value.lastConsumedClientMessageIndex == 9_007_199_254_740_993)
        #expect(
            try decode(#"{"sessionResumptionUpdate": {}}"#).message.payload
                == .sessionResumptionUpdate(.init(newHandle: nil, resumable: nil))
        )
        #expect(
            try decode(#"{"setupComplete": {"sessionId": "s-1"}}"#).message.payload
                == .setupComplete(SetupComplete(sessionId: "s-1"))
        )
        #expect(
            try decode(#"{"voiceActivity": {"type": "ACTIVITY_START"}}"#).message.payload
                == .voiceActivity(.init(type: "ACTIVITY_START"))
        )
        let content = try decode(
            #"{"serverContent": {"inputTranscription": {"text": "hi", "finished": true, "languageCode": "en-US"}, "turnCompleteReason": "NEED_MORE_INPUT", "waitingForInput": true}}"#
        )
        guard case .serverContent(let value) = content.message.payload else {
            Issue.record("not content")
            return
        }
        #expect(value.inputTranscription == Transcription(text: "hi", finished: true, languageCode: "en-US"))
        #expect(value.waitingForInput == true && value.turnCompleteReason == "NEED_MORE_INPUT")
    }

    @Test func unknownMessagesFieldsAndEnumsAreSkippedNotFatal() throws {
        let unknown = try decode(#"{"someFutureMessage": {"x": 1}}"#)
        #expect(unknown.message.payload == .none(unknownKeys: ["someFutureMessage"]))
        let fields = try decode(
            #"{"serverContent": {"turnComplete": true, "brandNewField": 3, "modelTurn": {"parts": [], "extra": 1}}}"#
        )
        #expect(fields.unknownFields.sorted() == ["serverContent.brandNewField", "serverContent.modelTurn.extra"])
        let setup = try codec.decodeClient(
            Data(#"{"setup": {"model": "m", "realtimeInputConfig": {"activityHandling": "SOMETHING_NEW"}}}"#.utf8)
        )
        guard case .setup(let value) = setup.message else {
            Issue.record("not setup")
            return
        }
        #expect(value.realtimeInputConfig?.activityHandling?.rawValue == "SOMETHING_NEW")
    }

    @Test func snakeCaseBase64URLAndBinaryFramesFromTheServer() throws {
        let audio = Data([0xFB, 0xFF, 0xBF, 0x00])
        let json =
            #"{"server_content": {"model_turn": {"parts": [{"inline_data": {"mime_type": "audio/pcm;rate=24000", "data": "\#(Base64Bytes.urlSafeString(audio))"}}]}, "turn_complete": true}}"#
        let frame = WebSocketMessage.binary(Data(json.utf8))
        guard case .serverContent(let content) = try codec.decodeServer(frame.bytes).message.payload else {
            Issue.record("not content")
            return
        }
        #expect(content.modelTurn?.parts.first?.inlineData?.data.data == audio)
        #expect(content.turnComplete == true)
    }

    @Test func serverMessagesRoundTrip() throws {
        let messages: [ServerMessage] = [
            ServerMessage(.setupComplete(SetupComplete())),
            ServerMessage(.goAway(GoAway(timeLeft: .milliseconds(9990)))),
            ServerMessage(
                .serverContent(ServerContent(turnComplete: true)),
                usageMetadata: UsageMetadata(promptTokenCount: 1, responseTokenCount: 2, totalTokenCount: 3)
            ),
            ServerMessage(.toolCall(ToolCall(functionCalls: [FunctionCall(id: "a", name: "b", args: ["c": 1])]))),
        ]
        for message in messages {
            let text = try codec.encode(message)
            #expect(try codec.decodeServer(Data(text.utf8)).message == message, "\(text)")
        }
        #expect(
            try codec.encode(ServerMessage(.goAway(GoAway(timeLeft: .milliseconds(9990)))))
                == #"{"goAway":{"timeLeft":"9.990s"}}"#
        )
    }
}
