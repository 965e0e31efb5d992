import Foundation
import HarkCascadeSimulator
import HarkCore
import HarkGemini
import Testing

@testable import HarkCascade

/// The cascade's pure parts: the sentence cutter, Sarvam's messages, the streamed Gemini text.
@Suite struct SentenceCutterTests {
    @Test func sentencesComeOutAsSoonAsTheyEnd() {
        var cutter = SentenceCutter()
        #expect(cutter.add("Hello there. How ar").isEmpty == false)
        var again = SentenceCutter()
        #expect(again.add("Hello there.") == [])  // the full stop alone is not the end: "3.5" has one too
        #expect(again.add(" How ar") == ["Hello there."])
        #expect(again.add("e you? I am") == ["How are you?"])
        #expect(again.finish() == ["I am"])
        #expect(again.finish() == [])
    }

    @Test func aSentenceThatEndsWithAPieceGoesWithIt() {
        var cutter = SentenceCutter()
        // The model's piece ends where the sentence does: it is not held until the next piece comes.
        #expect(cutter.add("Hello there.") + cutter.pieceEnded() == ["Hello there."])
        #expect(cutter.add(" How are you?\"") + cutter.pieceEnded() == ["How are you?\""])
        #expect(cutter.add(" എന്താണ് പേര്?") + cutter.pieceEnded() == ["എന്താണ് പേര്?"])
        // What may go on waits: a number, an initial, an ellipsis written with full stops, a clause.
        for piece in ["It costs 3.", "Ask J.", "Well..", "First,"] {
            var waiting = SentenceCutter()
            #expect(waiting.add(piece) + waiting.pieceEnded() == [], "\(piece)")
        }
        var number = SentenceCutter()
        _ = number.add("It costs 3.") + number.pieceEnded()
        #expect(number.add("5 rupees. Ok") + number.pieceEnded() == ["It costs 3.5 rupees."])
    }

    @Test func malayalamAndOtherScriptsAndClosersAndNumbers() {
        var cutter = SentenceCutter()
        let text = "നമസ്കാരം! സുഖമാണോ? \"Say it again.\" It costs 3.5 rupees… ok\nNext line। Done"
        var sentences: [String] = []
        for character in text { sentences += cutter.add(String(character)) }
        sentences += cutter.finish()
        #expect(
            sentences == [
                "നമസ്കാരം!", "സുഖമാണോ?", "\"Say it again.\"", "It costs 3.5 rupees…", "ok", "Next line।", "Done",
            ]
        )
    }

    @Test func aSentenceWithoutPunctuationIsCutAtAClauseThenAtTheBound() {
        var cutter = SentenceCutter(softLength: 20, hardLength: 40)
        let clause = cutter.add("one two three four five, six seven")
        #expect(clause == ["one two three four five,"])
        var words = SentenceCutter(softLength: 20, hardLength: 40)
        var out: [String] = []
        for _ in 0..<30 { out += words.add("word ") }
        #expect(!out.isEmpty)
        #expect(out.allSatisfy { $0.count <= 40 && !$0.hasSuffix("wor") })
        #expect(words.waiting < 40)
        var solid = SentenceCutter(softLength: 20, hardLength: 40)
        let cut = solid.add(String(repeating: "x", count: 100))
        #expect(cut.map(\.count) == [40, 40])
        #expect(solid.waiting == 20)
    }

    @Test func aResetForgetsTheAbandonedReply() {
        var cutter = SentenceCutter()
        _ = cutter.add("half a sent")
        cutter.reset()
        #expect(cutter.finish() == [])
    }
}

@Suite struct CascadeWarmUpTests {
    /// The warm-up's made-up messages go the way real ones go: each decoder, encoder and text path it means to run
    /// is run to its end (a message whose shape changed would warm nothing, silently).
    @Test func everyStepOfTheWarmUpRunsItsPathToTheEnd() {
        #expect(CascadeWarmUp.run() == [])
    }
}

@Suite struct SarvamMessageTests {
    @Test func speechToTextMessagesAsTheSDKSendsThem() throws {
        let audio = SpeechToTextRequest.audio(samples: [1, -1], sampleRate: 16_000).text
        let json = try JSONDecoder().decode(JSONValue.self, from: Data(audio.utf8))
        #expect(json["audio"]?["encoding"] == "audio/wav")
        #expect(json["audio"]?["sample_rate"] == .number(16_000))
        #expect(json["audio"]?["data"]?.stringValue == PCM16.bytes([1, -1]).base64EncodedString())
        #expect(SpeechToTextRequest.flush.text == #"{"type":"flush"}"#)
    }

    @Test func speechToTextEventsInEitherOrderAndEmptyTranscripts() throws {
        func event(_ text: String) throws -> SpeechToTextEvent { try SpeechToTextEvent.decode(Data(text.utf8)) }
        #expect(
            try event(#"{"type":"events","data":{"signal_type":"START_SPEECH","occured_at":1732.5}}"#) == .speechStarted
        )
        #expect(try event(#"{"type":"events","data":{"signal_type":"END_SPEECH","occured_at":1733}}"#) == .speechEnded)
        let final = #"""
            {"type":"data","data":{"request_id":"r1","transcript":"നമസ്കാരം","timestamps":null,
             "diarized_transcript":null,"language_code":"ml-IN","language_probability":0.93,
             "metrics":{"audio_duration":1.2,"processing_latency":0.3}}}
            """#
        #expect(try event(final) == .transcript("നമസ്കാരം", language: "ml-IN"))
        #expect(try event(#"{"type":"data","data":{"transcript":""}}"#) == .transcript("", language: nil))
        #expect(
            try event(#"{"type":"error","data":{"error":"bad\u001b[31m","code":"4003"}}"#)
                == .error("bad\\u{1B}[31m (4003)")
        )
        #expect(try event(#"{"type":"novel"}"#) == .unknown("novel"))
        #expect(throws: (any Error).self) { try event("not json") }
    }

    @Test func textToSpeechMessagesAndEvents() throws {
        let config = try TextToSpeechRequest.config(SpeechVoice()).encoded()
        let json = try JSONDecoder().decode(JSONValue.self, from: Data(config.utf8))
        #expect(json["type"] == "config")
        #expect(json["data"]?["language_code"] == "ml-IN" && json["data"]?["target_language_code"] == nil)
        #expect(json["data"]?["speaker"] == "kavitha" && json["data"]?["model"] == "bulbul:v3")
        #expect(json["data"]?["speech_sample_rate"] == .number(24_000))
        #expect(json["data"]?["output_audio_codec"] == "linear16")
        #expect(try TextToSpeechRequest.text("ഹലോ").encoded() == #"{"data":{"text":"ഹലോ"},"type":"text"}"#)
        #expect(try TextToSpeechRequest.flush.encoded() == #"{"type":"flush"}"#)
        #expect(try TextToSpeechRequest.ping.encoded() == #"{"type":"ping"}"#)

        func event(_ text: String) throws -> TextToSpeechEvent { try TextToSpeechEvent.decode(Data(text.utf8)) }
        let audio = PCM16.bytes([5, 6, 7]).base64EncodedString()
        #expect(
            try event(#"{"type":"audio","data":{"content_type":"audio/L16","audio":"\#(audio)"}}"#)
                == .audio([5, 6, 7])
        )
        #expect(try event(#"{"type":"event","data":{"event_type":"final"}}"#) == .final)
        #expect(
            try event(#"{"type":"error","data":{"message":"bad speaker","code":422}}"#) == .error("bad speaker (422)")
        )
        #expect(
            try event(#"{"type":"audio","data":{"audio":"@@@"}}"#) == .error("an audio message without decodable audio")
        )
    }
}

@Suite struct GeminiTextTests {
    @Test func theRequestIsWhatTheSDKBuilds() throws {
        let request = GenerateContentRequest(
            contents: [.text("hi", role: "user")],
            systemInstruction: "Be brief.",
            tools: [FunctionDeclaration(name: "get_time", description: "The time", parameters: nil)],
            temperature: 0.7,
            maxOutputTokens: 256
        )
        let json = try JSONDecoder().decode(JSONValue.self, from: try request.body())
        #expect(json["contents"]?.arrayValue?.first?["role"] == "user")
        #expect(json["systemInstruction"]?["parts"]?.arrayValue?.first?["text"] == "Be brief.")
        #expect(json["generationConfig"]?["thinkingConfig"]?["thinkingLevel"] == "LOW")
        #expect(json["generationConfig"]?["thinkingConfig"]?["includeThoughts"] == .bool(false))
        #expect(json["generationConfig"]?["maxOutputTokens"] == .number(256))
        #expect(json["tools"]?.arrayValue?.first?["functionDeclarations"]?.arrayValue?.first?["name"] == "get_time")
    }

    @Test func bodiesFromPartsAreTheWholeEncodingByteForByte() throws {
        let request = GenerateContentRequest(
            contents: [],
            systemInstruction: "Be brief / kind.",
            tools: [FunctionDeclaration(name: "get_time", description: "The time", parameters: nil)],
            temperature: 0.7,
            maxOutputTokens: 256
        )
        var bodies = try GenerateContentBodies(request)
        // Every character the escaping must get right: controls, quotes, slashes, Malayalam, an emoji.
        let awkward = (0..<0x20).map { String(UnicodeScalar(UInt8($0))) }.joined() + #"" \ / </ നമസ്കാരം 🙂 "# + "\u{7F}"
        let call = Content(
            role: "model",
            parts: [Part(functionCall: FunctionCall(id: "1", name: "get_time", args: ["zone": "UTC"]))]
        )
        let turns: [Content] = [
            .text("hi", role: "user"),
            Content(role: "model", parts: [Part(text: "Hello. "), Part(text: "", thoughtSignature: "c2ln/+==")]),
            .text(awkward, role: "user"), call,
            Content(
                role: "model",
                parts: [Part(text: "thinking", thought: true), Part(text: "Done.", thought: false)]
            ),
            .text("and then?", role: "user"),
        ]
        // The history as a conversation makes it: growing, the oldest turns dropped, the last model turn replaced.
        let histories: [[Content]] = [
            Array(turns[0..<1]), Array(turns[0..<3]), Array(turns[0..<6]), Array(turns[2..<6]),
            Array(turns[2..<5]) + [.text("heard…", role: "model")], Array(turns[3..<6]), [],
        ]
        for contents in histories {
            var whole = request
            whole.contents = contents
            let expected = try whole.body()
            let assembled = try bodies.body(contents)
            #expect(
                assembled == expected,
                "\(String(decoding: assembled, as: UTF8.self))\n\(String(decoding: expected, as: UTF8.self))"
            )
        }
    }

    @Test func chunksGiveTheSpokenTextNeverTheThoughtsAndKeepSignatures() throws {
        let chunk = try GenerateContentChunk.decode(
            Data(
                #"""
                {"candidates":[{"content":{"role":"model","parts":[{"text":"planning","thought":true},
                 {"text":"Hello. "},{"text":"","thoughtSignature":"c2ln"}]},"finishReason":"STOP","index":0}],
                 "usageMetadata":{"promptTokenCount":3},"modelVersion":"gemini-3.8-flash","responseId":"x"}
                """#.utf8
            )
        )
        #expect(chunk.spokenText == "Hello. ")
        #expect(chunk.finishReason == "STOP")
        #expect(chunk.parts.last?.thoughtSignature == "c2ln")
        let call = try GenerateContentChunk.decode(
            Data(#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"get_time","args":{}}}]}}]}"#.utf8)
        )
        #expect(call.functionCalls.map(\.name) == ["get_time"])
        let failed = try GenerateContentChunk.decode(
            Data(#"{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}"#.utf8)
        )
        #expect(failed.error == "overloaded (UNAVAILABLE)")
    }
}

/// How a text request turned away is asked again, and how a streamed answer is read.
@Suite struct ReplyRetryTests {
    @Test func fewAttemptsShortWaitsAndWhatTheServiceAsksForWithinABound() {
        let retry = ReplyRetry(attempts: 3, backoff: Backoff(initial: .milliseconds(400), cap: .seconds(2)))
        var backoff = retry.backoff
        var random = SeededRandom(seed: 7)
        let first = retry.wait(after: 1, asked: nil, backoff: &backoff, using: &random)
        #expect(first.map { (Duration.milliseconds(200)...Duration.milliseconds(400)).contains($0) } == true)
        // The service asked for longer than the backoff: that long.
        #expect(retry.wait(after: 2, asked: .seconds(3), backoff: &backoff, using: &random) == .seconds(3))
        // Out of attempts.
        #expect(retry.wait(after: 3, asked: nil, backoff: &backoff, using: &random) == nil)
        // Asked for more than anyone waits for an answer: given up at once.
        var fresh = retry.backoff
        #expect(retry.wait(after: 1, asked: .seconds(5), backoff: &fresh, using: &random) == nil)
        #expect(ReplyRetry(attempts: 0).attempts == 1)
        #expect(ReplyRetry.statuses.isSuperset(of: [429, 503]) && !ReplyRetry.statuses.contains(401))
    }

    @Test func theWaitAskedForComesFromRetryAfterOrGooglesRetryInfo() {
        #expect(ReplyRetry.asked(retryAfter: " 2 ", body: Data()) == .seconds(2))
        #expect(ReplyRetry.asked(retryAfter: "Wed, 21 Oct 2026 07:28:00 GMT", body: Data()) == nil)
        #expect(ReplyRetry.asked(retryAfter: "-1", body: Data()) == nil)
        #expect(ReplyRetry.asked(retryAfter: "99999999999999999999", body: Data()) == nil)
        let google = Data(
            #"""
            {"error": {"code": 429, "message": "Quota exceeded.", "status": "RESOURCE_EXHAUSTED", "details": [
              {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
              {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1.5s"}]}}
            """#.utf8
        )
        #expect(ReplyRetry.asked(retryAfter: nil, body: google) == .milliseconds(1500))
        // The header wins; nonsense in the body is no wait.
        #expect(ReplyRetry.asked(retryAfter: "1", body: google) == .seconds(1))
        let odd = Data(#"{"error":{"details":[{"@type":"google.rpc.RetryInfo","retryDelay":"nans"}]}}"#.utf8)
        #expect(ReplyRetry.asked(retryAfter: nil, body: odd) == nil)
    }

    @Test func theReaderTakesEventsAndAnErrorInRawJSONLinesSplitAnywhere() {
        let chunk = #"{"candidates":[{"content":{"role":"model","parts":[{"text":"Hello."}]},"finishReason":"STOP"}]}"#
        let stream =
            "data: \(chunk)\r\n\r\n{\r\n  \"error\": {\r\n    \"code\": 503,\r\n"
            + "    \"message\": \"The model is overloaded.\",\r\n    \"status\": \"UNAVAILABLE\"\r\n  }\r\n}\r\n"
        var items: [ReplyStreamReader.Item] = []
        var reader = ReplyStreamReader()
        for byte in Data(stream.utf8) { items += reader.feed(Data([byte])) }
        items += reader.finish()
        #expect(items.count == 2)
        guard case .chunk(let first)? = items.first else {
            Issue.record("no chunk: \(items)")
            return
        }
        #expect(first.spokenText == "Hello." && first.finishReason == "STOP")
        #expect(items.last == .error("The model is overloaded. (UNAVAILABLE)"))

        // A stream cut inside its error still ends with one; an error too long to keep is still an error.
        var cut = ReplyStreamReader()
        #expect(cut.feed(Data("{\n  \"error\": {\"code\": 500,\n".utf8)).isEmpty)
        #expect(cut.finish().count == 1)
        var long = ReplyStreamReader()
        let huge = "{\n \"error\": \"" + String(repeating: "x", count: ReplyStreamReader.rawLimit) + "\"\n}\n"
        let said = long.feed(Data(huge.utf8))
        #expect(said.count == 1)
        if case .error(let text)? = said.first { #expect(text.count < 100) } else { Issue.record("\(said)") }
        // An error as an event's data is an error too.
        var inEvent = ReplyStreamReader()
        #expect(
            inEvent.feed(Data("data: {\"error\":{\"message\":\"Internal error\",\"status\":\"INTERNAL\"}}\n\n".utf8))
                == [.error("Internal error (INTERNAL)")]
        )
    }

    @Test func aRefusedGeminiKeyIsToldFromAnyOtherRefusal() throws {
        let invalid = Data(TextService.keyInvalidBody.utf8)
        #expect(GeminiKeyRefusal.refuses(status: 400, body: invalid))
        #expect(GeminiKeyRefusal.refuses(status: 401, body: Data()))
        #expect(GeminiKeyRefusal.refuses(status: 403, body: Data()))
        // A request the service cannot take is no refused key, nor is a busy service.
        let badRequest = Data(
            #"{"error":{"code":400,"message":"Invalid JSON payload","status":"INVALID_ARGUMENT"}}"#.utf8
        )
        #expect(!GeminiKeyRefusal.refuses(status: 400, body: badRequest))
        #expect(!GeminiKeyRefusal.refuses(status: 429, body: invalid))
        #expect(!GeminiKeyRefusal.refuses(status: 400, body: Data("not json".utf8)))
        let echoed = Data(#"{"error":{"code":400,"message":"API key not valid: sk-secret"}}"#.utf8)
        #expect(GeminiKeyRefusal.refuses(status: 400, body: echoed))
        let failure = GeminiKeyRefusal.failure(
            status: 400,
            body: echoed,
            origin: "cascade.api_key_file",
            key: Secret("sk-secret")
        )
        #expect(failure.kind == .authentication)
        #expect(failure.message.contains("HTTP 400") && failure.message.contains("cascade.api_key_file"))
        #expect(!failure.message.contains("sk-secret"), "\(failure.message)")
    }
}
