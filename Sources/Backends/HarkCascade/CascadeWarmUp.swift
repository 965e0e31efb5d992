import HarkCore
import HarkGemini

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A turn's own work done once on made-up messages, before any turn needs it: the first use of each decoder,
/// encoder and text path in a process pays for type metadata, conformance lookups and Unicode tables (one to two
/// milliseconds in all here, in the first answer's time). Nothing here touches a socket or a session.
enum CascadeWarmUp {
    /// Runs the warm-up the first time it is read; later reads cost nothing.
    static let once: Void = { _ = run() }()

    /// Runs every step; returns the steps whose made-up message did not go the way a real one goes (none, unless
    /// a message's shape changed and this was not kept up with it).
    static func run() -> [String] {
        var failed: [String] = []
        func check(_ step: String, _ done: Bool) { if !done { failed.append(step) } }
        // The speech-to-text socket: a turn's signals and its transcript.
        let started = try? SpeechToTextEvent.decode(
            Data(#"{"type":"events","data":{"signal_type":"START_SPEECH","occured_at":1.5}}"#.utf8)
        )
        check("speech-to-text start", started == .speechStarted)
        let transcript = try? SpeechToTextEvent.decode(
            Data(
                #"{"type":"data","data":{"request_id":"w","transcript":"നമസ്കാരം, how are you?","language_code":"ml-IN"}}"#
                    .utf8
            )
        )
        check("speech-to-text transcript", transcript == .transcript("നമസ്കാരം, how are you?", language: "ml-IN"))
        // The text model's answer as it streams: an event of Malayalam and English, then its end.
        var reader = ReplyStreamReader()
        let event =
            #"data: {"candidates":[{"content":{"role":"model","parts":[{"text":"നമസ്കാരം! I am well. "#
            + #"How are you"}]}}],"modelVersion":"w"}"# + "\r\n\r\n"
            + #"data: {"candidates":[{"content":{"role":"model","parts":[{"text":"?"}]},"finishReason":"STOP"}]}"#
            + "\r\n\r\n"
        let chunks = reader.feed(Data(event.utf8)).compactMap { item -> GenerateContentChunk? in
            if case .chunk(let chunk) = item { return chunk }
            return nil
        }
        check("reply stream", chunks.count == 2)
        // The speech socket: a sentence and a flush out, audio and its end in.
        check("speech text", (try? TextToSpeechRequest.text("നമസ്കാരം! I am well.").encoded()) != nil)
        check("speech flush", (try? TextToSpeechRequest.flush.encoded()) != nil)
        let audio = String(repeating: "A", count: 1280)  // 960 bytes of silence
        let decoded = try? TextToSpeechEvent.decode(
            Data(#"{"type":"audio","data":{"content_type":"audio/wav","audio":"\#(audio)","request_id":"w"}}"#.utf8)
        )
        check("speech audio", decoded == .audio([Int16](repeating: 0, count: 480)))
        let final = try? TextToSpeechEvent.decode(Data(#"{"type":"event","data":{"event_type":"final"}}"#.utf8))
        check("speech final", final == .final)
        // The turn's decisions: the transcript into a request, the answer cut into sentences, its audio.
        var machine = CascadeMachine()
        _ = machine.speechStarted()
        _ = machine.transcribed("നമസ്കാരം, how are you?")
        var requested = false
        for action in machine.speechEnded() {
            guard case .requestReply(let contents) = action else { continue }
            var bodies = try? GenerateContentBodies(GenerateContentRequest(contents: []))
            requested = (try? bodies?.body(contents)) != nil
        }
        check("request", requested)
        var spoken: [String] = []
        for chunk in chunks {
            for case .speak(let sentence) in machine.replyChunk(chunk) { spoken.append(sentence) }
        }
        for case .speak(let sentence) in machine.replyFinished() { spoken.append(sentence) }
        check("sentences", spoken.joined(separator: " ") == "നമസ്കാരം! I am well. How are you?")
        let played = machine.speechAudio([Int16](repeating: 0, count: 480), sampleRate: 24_000)
        check("answer audio", played.contains { if case .emit(.audio) = $0 { true } else { false } })
        _ = machine.speechFinished()
        return failed
    }
}
