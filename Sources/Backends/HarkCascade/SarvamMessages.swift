import HarkBackendKit
import HarkCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A message of either Sarvam socket: `{"type": ..., "data": {...}}`.
struct SarvamEnvelope<Payload: Decodable>: Decodable {
    var type: String?
    var data: Payload?

    init(from decoder: any Decoder) throws {
        let c = try decoder.flexContainer(known: ["type", "data"])
        type = try c.flex(String.self, "type")
        data = try c.flex(Payload.self, "data")
    }

    /// An error's `code`, which Sarvam sends as a string or a number.
    static func code(in container: KeyedDecodingContainer<FlexKey>) -> String? {
        (try? container.flex(String.self, "code"))
            ?? (try? container.flex(Int.self, "code")).flatMap { $0.map(String.init) }
    }
}

/// What the device sends Sarvam's streaming speech-to-text socket (text frames, JSON), as sarvamai 0.1.39 does.
public enum SpeechToTextRequest: Sendable, Hashable {
    /// Microphone audio: headerless PCM s16le mono, labelled `audio/wav` (the only encoding the SDK's type allows).
    case audio(samples: [Int16], sampleRate: Int)
    /// Transcribe what is buffered now (honoured with `flush_signal=true`).
    case flush

    /// The JSON text of the message.
    public var text: String {
        switch self {
        case .audio(let samples, let rate):
            let data = PCM16.bytes(samples).base64EncodedString()
            return #"{"audio":{"data":""# + data + #"","sample_rate":\#(rate),"encoding":"audio/wav"}}"#
        case .flush:
            return #"{"type":"flush"}"#
        }
    }
}

/// What the speech-to-text socket sends.
public enum SpeechToTextEvent: Sendable, Hashable {
    /// The service's voice detector heard speech start.
    case speechStarted
    /// It heard speech end (the transcript may come before or after).
    case speechEnded
    /// One final transcript of an utterance (may be empty), with the language it detected.
    case transcript(String, language: String?)
    /// An error the service reported in a message (it usually closes the socket instead).
    case error(String)
    /// A message of a type this client does not know (its type, printable and bounded).
    case unknown(String)

    /// The longest transcript kept (characters); the rest is dropped.
    public static let transcriptLimit = 8192

    /// Decodes one frame; throws when it is not JSON of the documented shape.
    public static func decode(_ bytes: Data) throws -> SpeechToTextEvent {
        let message = try JSONDecoder().decode(SarvamEnvelope<Payload>.self, from: bytes)
        switch message.type {
        case "data":
            let text = message.data?.transcript ?? ""
            let bounded = text.count <= transcriptLimit ? text : String(text.prefix(transcriptLimit))
            return .transcript(
                bounded,
                language: message.data?.languageCode.map { RemoteText.printable($0, limit: 32) }
            )
        case "events":
            switch message.data?.signalType {
            case "START_SPEECH"?: return .speechStarted
            case "END_SPEECH"?: return .speechEnded
            case let other: return .unknown("events " + RemoteText.printable(other ?? "(none)", limit: 64))
            }
        case "error":
            let text = message.data?.error ?? message.data?.message ?? "(no message)"
            let code = message.data?.code.map { " (\($0))" } ?? ""
            return .error(RemoteText.printable(text, limit: 300) + RemoteText.printable(code, limit: 40))
        case let other:
            return .unknown(RemoteText.printable(other ?? "(none)", limit: 64))
        }
    }

    struct Payload: Decodable {
        var transcript: String?
        var languageCode: String?
        var signalType: String?
        var error: String?
        var message: String?
        var code: String?

        init(from decoder: any Decoder) throws {
            let c = try decoder.flexContainer(known: [
                "requestId", "transcript", "timestamps", "diarizedTranscript", "languageCode", "languageProbability",
                "metrics", "signalType", "occuredAt", "timestamp", "eventType", "error", "code", "message",
            ])
            transcript = try c.flex(String.self, "transcript")
            languageCode = try c.flex(String.self, "languageCode")
            signalType = try c.flex(String.self, "signalType")
            error = try? c.flex(String.self, "error")
            message = try? c.flex(String.self, "message")
            code = SarvamEnvelope<Payload>.code(in: c)
        }
    }
}

/// The speech-synthesis socket's configuration (its first message; a later one flushes, then applies).
public struct SpeechVoice: Sendable, Hashable {
    public var model: String
    /// `ml-IN`, `en-IN`, ... (sent as `language_code`, as sarvamai 0.1.30 and later do).
    public var language: String
    /// A lowercase speaker name (`kavitha`).
    public var speaker: String
    /// 0.5–2.0.
    public var pace: Double
    /// 8000, 16000, 22050 or 24000 (always sent: the default is disputed).
    public var sampleRate: Int
    /// Characters buffered before synthesis starts (30–200).
    public var minBufferSize: Int
    /// The longest piece synthesized at once (50–500).
    public var maxChunkLength: Int

    public init(
        model: String = "bulbul:v3",
        language: String = "ml-IN",
        speaker: String = "kavitha",
        pace: Double = 1.0,
        sampleRate: Int = 24_000,
        minBufferSize: Int = 50,
        maxChunkLength: Int = 150
    ) {
        self.model = model
        self.language = language
        self.speaker = speaker
        self.pace = pace
        self.sampleRate = sampleRate
        self.minBufferSize = minBufferSize
        self.maxChunkLength = maxChunkLength
    }
}

/// What the device sends the text-to-speech socket.
public enum TextToSpeechRequest: Sendable, Hashable {
    case config(SpeechVoice)
    /// One sentence (1–2500 characters).
    case text(String)
    /// Synthesize what is buffered now (the end of a reply).
    case flush
    /// Keeps an idle socket open (it closes after 60 s without traffic).
    case ping

    /// The JSON text of the message.
    public func encoded() throws -> String {
        let value: JSONValue =
            switch self {
            case .config(let voice):
                [
                    "type": "config",
                    "data": [
                        "model": .string(voice.model), "language_code": .string(voice.language),
                        "speaker": .string(voice.speaker), "pace": .number(voice.pace),
                        "speech_sample_rate": .number(Double(voice.sampleRate)), "output_audio_codec": "linear16",
                        "min_buffer_size": .number(Double(voice.minBufferSize)),
                        "max_chunk_length": .number(Double(voice.maxChunkLength)),
                    ],
                ]
            case .text(let text): ["type": "text", "data": ["text": .string(text)]]
            case .flush: ["type": "flush"]
            case .ping: ["type": "ping"]
            }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }
}

/// What the text-to-speech socket sends.
public enum TextToSpeechEvent: Sendable, Hashable {
    /// Synthesized audio: PCM s16le mono at the configured rate.
    case audio([Int16])
    /// The last audio of the flushed text has been sent.
    case final
    /// An error the service reported (a bad configuration: code 422).
    case error(String)
    /// Anything else (its type, printable and bounded).
    case unknown(String)

    /// Decodes one frame; throws when it is not JSON of the documented shape.
    public static func decode(_ bytes: Data) throws -> TextToSpeechEvent {
        let message = try JSONDecoder().decode(SarvamEnvelope<Payload>.self, from: bytes)
        switch message.type {
        case "audio":
            guard let audio = message.data?.audio, let bytes = Base64Bytes.decode(audio) else {
                return .error("an audio message without decodable audio")
            }
            return .audio(PCM16.samples(bytes))
        case "event":
            if message.data?.eventType == "final" { return .final }
            return .unknown("event " + RemoteText.printable(message.data?.eventType ?? "(none)", limit: 64))
        case "error":
            let code = message.data?.code.map { " (\($0))" } ?? ""
            return .error(RemoteText.printable((message.data?.message ?? "(no message)") + code, limit: 300))
        case let other:
            return .unknown(RemoteText.printable(other ?? "(none)", limit: 64))
        }
    }

    struct Payload: Decodable {
        var audio: String?
        var eventType: String?
        var message: String?
        var code: String?

        init(from decoder: any Decoder) throws {
            let c = try decoder.flexContainer(known: [
                "contentType", "audio", "requestId", "eventType", "message", "timestamp", "code", "details",
            ])
            audio = try c.flex(String.self, "audio")
            eventType = try c.flex(String.self, "eventType")
            message = try? c.flex(String.self, "message")
            code = SarvamEnvelope<Payload>.code(in: c)
        }
    }
}
