import HarkCascade
import HarkCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Sarvam's streaming text-to-speech socket as a value (`/text-to-speech/ws`), as the facts page describes it:
/// `config` first (either language key, exactly one; a bad one is an error message with code 422), `text` buffered
/// until `min_buffer_size` characters or a `flush`, audio as base64 PCM s16le at `speech_sample_rate`, the
/// `final` event after a flush's last audio (with `send_completion_event=true`), `ping` keeps it open, and the
/// socket closes after 60 s without traffic. No cancel message exists. The speech is a tone whose length follows
/// the text (``millisecondsPerCharacter``), so a test can tell how much of it was played. With a ``firstAudioDelay``
/// the audio of each synthesis (and the `final` event after it) goes out that long after the message that started it.
public struct TextToSpeechService: Sendable {
    /// What goes wrong on a socket (``fault``).
    public enum Fault: Sendable, Hashable {
        /// After the first audio message of the socket's first synthesis, the socket closes with this code.
        case closeMidReply(code: Int)
        /// Text and flushes are taken and nothing ever comes back (no audio, no `final`); the socket stays open.
        case silent
        /// Each synthesis sends this many times the audio its text speaks.
        case audioFlood(factor: Int)
    }

    /// Milliseconds of speech per character of text.
    public static let millisecondsPerCharacter = 20
    /// Largest audio message, in milliseconds.
    public static let chunkMilliseconds = 100

    public let completionEvents: Bool
    public let idleCut: Duration
    /// Between the text (or flush) that starts a synthesis and its audio.
    public let firstAudioDelay: Duration
    /// What goes wrong, if anything.
    public let fault: Fault?
    public private(set) var voice: SpeechVoice?
    /// The languages key the client used (`language_code` or `target_language_code`).
    public private(set) var languageKey: String?
    /// Every text received, in order (for tests), and the flushes.
    public private(set) var texts: [String] = []
    public private(set) var flushes = 0
    /// The text of each synthesis, in order (texts gathered in the buffer are one, joined with a space).
    public private(set) var syntheses: [String] = []
    public private(set) var closed = false
    /// Audio messages sent so far.
    public private(set) var audioSent = 0
    private var buffer = ""
    private var lastTraffic: Duration
    /// Synthesized messages held for their time (``firstAudioDelay``).
    private var pending: [(due: Duration, output: ServiceOutput)] = []

    public init(
        completionEvents: Bool = true,
        idleCut: Duration = .seconds(60),
        firstAudioDelay: Duration = .zero,
        fault: Fault? = nil,
        now: Duration
    ) {
        self.completionEvents = completionEvents
        self.idleCut = idleCut
        self.firstAudioDelay = max(.zero, firstAudioDelay)
        self.fault = fault
        self.lastTraffic = now
    }

    /// One text frame from the client: the messages to send back (audio, in order; the caller paces them).
    public mutating func received(_ text: String, now: Duration) -> [ServiceOutput] {
        guard !closed else { return [] }
        lastTraffic = now
        let due = release(now: now)
        guard let json = try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)),
            let type = json["type"]?.stringValue
        else { return due + [.send(Self.error("Invalid message format", code: 400))] }
        switch type {
        case "config":
            return due + hold(configure(json["data"] ?? .null), now: now)
        case "text":
            guard voice != nil else { return due + [.send(Self.error("Send a config message first", code: 400))] }
            guard let piece = json["data"]?["text"]?.stringValue, (1...2500).contains(piece.count) else {
                return due + [.send(Self.error("text must hold 1 to 2500 characters", code: 422))]
            }
            texts.append(piece)
            buffer += buffer.isEmpty ? piece : " " + piece
            guard let voice, buffer.count >= voice.minBufferSize else { return due }
            return due + hold(synthesize(final: false), now: now)
        case "flush":
            flushes += 1
            return due + hold(synthesize(final: true), now: now)
        case "ping":
            return due
        default:
            return due
                + [.send(Self.error("Unknown message type \(RemoteText.printable(type, limit: 40))", code: 400))]
        }
    }

    /// Time passed: held audio whose time came goes out; an idle socket is closed.
    public mutating func tick(now: Duration) -> [ServiceOutput] {
        guard !closed else { return [] }
        let due = release(now: now)
        guard now - lastTraffic >= idleCut else { return due }
        closed = true
        return due + [.close(code: 1000, reason: "Connection idle timeout")]
    }

    /// Synthesized messages: out now, or held for ``firstAudioDelay`` (after anything held before them).
    private mutating func hold(_ outputs: [ServiceOutput], now: Duration) -> [ServiceOutput] {
        guard firstAudioDelay > .zero || !pending.isEmpty else { return counted(outputs) }
        pending += outputs.map { (now + firstAudioDelay, $0) }
        return []
    }

    /// The held messages due by `now`, in order.
    private mutating func release(now: Duration) -> [ServiceOutput] {
        let count = pending.prefix { $0.due <= now }.count
        guard count > 0 else { return [] }
        let outputs = pending.prefix(count).map(\.output)
        pending.removeFirst(count)
        return counted(outputs)
    }

    private mutating func counted(_ outputs: [ServiceOutput]) -> [ServiceOutput] {
        let isAudio = { (output: ServiceOutput) in
            if case .send(let text) = output { text.hasPrefix(#"{"type":"audio""#) } else { false }
        }
        if case .closeMidReply(let code)? = fault, let first = outputs.firstIndex(where: isAudio) {
            // The first audio goes out, then the socket closes: the rest of the reply never comes.
            audioSent += 1
            closed = true
            return Array(outputs[...first]) + [.close(code: code, reason: "Internal server error")]
        }
        audioSent += outputs.count(where: isAudio)
        return outputs
    }

    private mutating func configure(_ data: JSONValue) -> [ServiceOutput] {
        let keys = ["language_code", "target_language_code"].filter { data[$0] != nil }
        guard keys.count == 1, let language = data[keys[0]]?.stringValue else {
            return [.send(Self.error("exactly one of language_code, target_language_code is required", code: 422))]
        }
        let rate = data["speech_sample_rate"].flatMap { if case .number(let n) = $0 { Int(n) } else { nil } } ?? 22_050
        guard [8000, 16_000, 22_050, 24_000].contains(rate) else {
            return [.send(Self.error("speech_sample_rate must be 8000, 16000, 22050 or 24000", code: 422))]
        }
        let speaker = data["speaker"]?.stringValue ?? "anushka"
        guard speaker == speaker.lowercased(), !speaker.isEmpty else {
            return [.send(Self.error("speaker must be a lowercase name", code: 422))]
        }
        let number = { (key: String, fallback: Double) -> Double in
            if case .number(let value)? = data[key] { value } else { fallback }
        }
        // A later config flushes what is buffered first, then applies.
        let outputs: [ServiceOutput] = voice == nil ? [] : synthesize(final: false)
        voice = SpeechVoice(
            model: data["model"]?.stringValue ?? "bulbul:v3",
            language: language,
            speaker: speaker,
            pace: number("pace", 1),
            sampleRate: rate,
            minBufferSize: Int(number("min_buffer_size", 50)),
            maxChunkLength: Int(number("max_chunk_length", 150))
        )
        languageKey = keys[0]
        return outputs
    }

    private mutating func synthesize(final: Bool) -> [ServiceOutput] {
        if fault == .silent {
            if !buffer.isEmpty { syntheses.append(buffer) }
            buffer = ""
            return []
        }
        var outputs: [ServiceOutput] = []
        if let voice, !buffer.isEmpty {
            syntheses.append(buffer)
            var total = voice.sampleRate * Self.millisecondsPerCharacter * buffer.count / 1000
            if case .audioFlood(let factor)? = fault { total *= max(1, factor) }
            let chunk = voice.sampleRate * Self.chunkMilliseconds / 1000
            var offset = 0
            while offset < total {
                let count = min(chunk, total - offset)
                outputs.append(.send(Self.audio(Self.tone(count: count, offset: offset, rate: voice.sampleRate))))
                offset += count
            }
        }
        buffer = ""
        if final, completionEvents { outputs.append(.send(#"{"type":"event","data":{"event_type":"final"}}"#)) }
        return outputs
    }

    /// The speech of one synthesis, from sample `offset` on: a 330 Hz tone at a quarter of full scale.
    public static func tone(count: Int, offset: Int, rate: Int) -> [Int16] {
        (0..<count).map { index in
            let phase = 2 * Double.pi * 330 * Double(offset + index) / Double(rate)
            return Int16((0.25 * 32767 * sin(phase)).rounded())
        }
    }

    static func audio(_ samples: [Int16]) -> String {
        let data = PCM16.bytes(samples).base64EncodedString()
        return #"{"type":"audio","data":{"content_type":"audio/L16","audio":""# + data + #""}}"#
    }

    static func error(_ message: String, code: Int) -> String {
        let value: JSONValue = ["type": "error", "data": ["message": .string(message), "code": .number(Double(code))]]
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}
