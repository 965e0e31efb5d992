import Foundation
import HarkBackendKit
import HarkCascade
import HarkCascadeSimulator
import HarkCore
import HarkGemini
import HarkTestKit
import Testing

/// The simulated cascade services as values, driven with the client's own messages.
@Suite struct CascadeServiceTests {
    func speech(_ seconds: Double) -> [Int16] { TestSignals.tone(seconds: seconds, frequency: 220, amplitude: 0.25) }

    func silence(_ seconds: Double) -> [Int16] { Array(repeating: 0, count: Int(seconds * 16_000)) }

    func sent(_ outputs: [ServiceOutput]) throws -> [SpeechToTextEvent] {
        try outputs.compactMap { if case .send(let text) = $0 { text } else { nil } }
            .map { try SpeechToTextEvent.decode(Data($0.utf8)) }
    }

    func feed(_ service: inout SpeechToTextService, _ samples: [Int16], now: Duration = .zero) -> [ServiceOutput] {
        stride(from: 0, to: samples.count, by: 800).flatMap { start in
            let chunk = Array(samples[start..<min(start + 800, samples.count)])
            return service.received(SpeechToTextRequest.audio(samples: chunk, sampleRate: 16_000).text, now: now)
        }
    }

    @Test func speechToTextHearsAnUtteranceAfterASecondOfSilence() throws {
        var options = SpeechToTextService.Options(query: [
            "vad_signals": "true", "flush_signal": "true", "language-code": "unknown",
        ])
        #expect(options.vadSignals && options.flushSignal)
        var service = SpeechToTextService(options: options, transcripts: ["what is the time"], now: .zero)
        var events = try sent(feed(&service, speech(1.0)))
        #expect(events == [.speechStarted])
        events = try sent(feed(&service, silence(0.6)))
        #expect(events.isEmpty)  // not yet: its endpointing waits about a second
        events = try sent(feed(&service, silence(0.6)))
        #expect(Set(events) == [.speechEnded, .transcript("what is the time", language: "en-IN")])
        // Without VAD signals: only the transcript; a flush ends an utterance at once.
        options.vadSignals = false
        var quiet = SpeechToTextService(options: options, now: .zero)
        #expect(try sent(feed(&quiet, speech(0.5))).isEmpty)
        let flushed = try sent(quiet.received(SpeechToTextRequest.flush.text, now: .zero))
        #expect(flushed == [.transcript("utterance 1", language: "en-IN")])
    }

    @Test func speechToTextFaults() throws {
        var bad = SpeechToTextService(options: .init(), badKey: true, now: .zero)
        #expect(feed(&bad, speech(0.05)) == [.close(code: 4003, reason: "Invalid API key")])
        var idle = SpeechToTextService(options: .init(), now: .zero)
        #expect(idle.tick(now: .seconds(59)).isEmpty)
        #expect(idle.tick(now: .seconds(60)) == [.drop])
        var garbled = SpeechToTextService(options: .init(), now: .zero)
        #expect(garbled.received("{", now: .zero) == [.close(code: 1003, reason: "Invalid message format")])
    }

    @Test func textToSpeechBuffersFlushesAndTakesEitherLanguageKey() throws {
        var service = TextToSpeechService(now: .zero)
        #expect(
            service.received(try TextToSpeechRequest.config(SpeechVoice(minBufferSize: 30)).encoded(), now: .zero)
                .isEmpty
        )
        #expect(service.languageKey == "language_code")
        #expect(service.received(try TextToSpeechRequest.text("Hello there.").encoded(), now: .zero).isEmpty)
        let flushed = try service.received(try TextToSpeechRequest.flush.encoded(), now: .zero).map {
            output -> TextToSpeechEvent in
            guard case .send(let text) = output else { throw CancellationError() }
            return try TextToSpeechEvent.decode(Data(text.utf8))
        }
        #expect(flushed.last == .final)
        let samples = flushed.reduce(0) { if case .audio(let audio) = $1 { $0 + audio.count } else { $0 } }
        #expect(samples == 24_000 * TextToSpeechService.millisecondsPerCharacter * "Hello there.".count / 1000)

        var older = TextToSpeechService(now: .zero)
        let config =
            #"{"type":"config","data":{"target_language_code":"ml-IN","speaker":"kavitha","speech_sample_rate":16000}}"#
        #expect(older.received(config, now: .zero).isEmpty)
        #expect(older.languageKey == "target_language_code" && older.voice?.sampleRate == 16_000)
        var both = TextToSpeechService(now: .zero)
        let twice = #"{"type":"config","data":{"language_code":"ml-IN","target_language_code":"ml-IN"}}"#
        guard case .send(let error)? = both.received(twice, now: .zero).first else {
            Issue.record("no error for two language keys")
            return
        }
        #expect(
            try TextToSpeechEvent.decode(Data(error.utf8))
                == .error("exactly one of language_code, target_language_code is required (422)")
        )
        #expect(both.tick(now: .seconds(61)) == [.close(code: 1000, reason: "Connection idle timeout")])
    }

    @Test func theTextServiceStreamsWhatTheClientReadsBack() throws {
        var service = TextService()
        let request = GenerateContentRequest(contents: [.text("how are you", role: "user")])
        guard case .stream(let pieces, drops: false) = service.answer(try request.body()) else {
            Issue.record("no stream")
            return
        }
        #expect(pieces.allSatisfy { $0.bytes.hasPrefix("data: ") && $0.bytes.hasSuffix("\r\n\r\n") })
        var parser = ServerSentEventParser()
        var text = ""
        var signature: String?
        for piece in pieces {
            for event in parser.feed(Data(piece.bytes.utf8)) {
                let chunk = try GenerateContentChunk.decode(Data(event.data.utf8))
                text += chunk.spokenText
                signature = chunk.parts.last?.thoughtSignature ?? signature
            }
        }
        #expect(text == "I heard you. Here is my answer: you said how are you. That is all.")
        #expect(signature != nil)
        service.fault = .status(401, retryAfter: nil)
        guard case .status(401, let body, nil) = service.answer(try request.body()) else {
            Issue.record("no status")
            return
        }
        #expect(body.contains("UNAUTHENTICATED"))
        let endsWithModel = GenerateContentRequest(contents: [.text("hi", role: "user"), .text("hello", role: "model")])
        service.fault = nil
        guard case .status(400, _, _) = service.answer(try endsWithModel.body()) else {
            Issue.record("a conversation ending with a model turn was taken")
            return
        }
    }

    @Test func theServicesTakeTheirOwnTimeWhenToldTo() throws {
        // Speech-to-text: the final transcript (and END_SPEECH) 300 ms after the endpoint, on the service's clock.
        let options = SpeechToTextService.Options(query: ["vad_signals": "true"])
        var speech = SpeechToTextService(options: options, finalDelay: .milliseconds(300), now: .zero)
        _ = feed(&speech, self.speech(1.0), now: .seconds(1))
        #expect(feed(&speech, silence(1.2), now: .seconds(2)).isEmpty)
        let endpoint = try #require(speech.lastEndpoint)
        #expect(speech.endpoints == 1 && speech.transcriptsSent == 0)
        // About a second of silence completed the endpoint (its frames are 20 ms).
        #expect((16_000...16_000 + 320).contains(endpoint.commit - endpoint.speechEnd))
        #expect(speech.tick(now: .milliseconds(2299)).isEmpty)
        let late = try sent(speech.tick(now: .milliseconds(2300)))
        #expect(Set(late) == [.speechEnded, .transcript("utterance 1", language: "en-IN")])
        #expect(speech.transcriptsSent == 1)

        // Text-to-speech: a synthesis's audio, and its final event, 150 ms after the flush that started it.
        var voice = TextToSpeechService(firstAudioDelay: .milliseconds(150), now: .zero)
        _ = voice.received(try TextToSpeechRequest.config(SpeechVoice()).encoded(), now: .zero)
        #expect(voice.received(try TextToSpeechRequest.text("Hello there.").encoded(), now: .seconds(1)).isEmpty)
        #expect(voice.received(try TextToSpeechRequest.flush.encoded(), now: .seconds(1)).isEmpty)
        #expect(voice.tick(now: .milliseconds(1149)).isEmpty && voice.audioSent == 0)
        let audio = voice.tick(now: .milliseconds(1150))
        #expect(audio.count > 1 && voice.audioSent == audio.count - 1)
        guard case .send(let last)? = audio.last else {
            Issue.record("nothing sent")
            return
        }
        #expect(try TextToSpeechEvent.decode(Data(last.utf8)) == .final)
    }

    @Test func theTextServiceFaultsReadAsTheClientReadsThem() throws {
        let service = TextService()
        let body = try GenerateContentRequest(contents: [.text("how are you", role: "user")]).body()
        guard case .status(429, let error, 2) = service.answer(body, fault: .status(429, retryAfter: 2)) else {
            Issue.record("no 429")
            return
        }
        #expect(error.contains("RESOURCE_EXHAUSTED"))
        #expect(service.answer(body, fault: .drop) == .stream([], drops: true))
        guard case .stream(let cut, drops: true) = service.answer(body, fault: .dropAfter(events: 2)) else {
            Issue.record("no drop")
            return
        }
        #expect(cut.count == 2)
        // An error after two events: raw JSON over several CRLF lines, which the client reads as an error.
        guard case .stream(let pieces, drops: false) = service.answer(body, fault: .errorAfter(events: 2)) else {
            Issue.record("no stream")
            return
        }
        #expect(pieces.count == 3)
        #expect(!pieces[2].bytes.hasPrefix("data:") && pieces[2].bytes.hasPrefix("{\r\n  \"error\""))
        var reader = ReplyStreamReader()
        var items = pieces.flatMap { reader.feed(Data($0.bytes.utf8)) }
        items += reader.finish()
        #expect(items.count == 3)
        #expect(items.last == .error("The model is overloaded. (UNAVAILABLE)"))
        // Each piece says what text it adds.
        #expect(pieces.map(\.text).joined() == "I heard you. Here is my answer: yo")
    }
}
