import HarkBackendKit
import HarkCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The `start` payload: who to talk to and how. Sent first on every connection (the REST hand-off
/// takes it as its request body and returns it, completed, as `start_message`).
public struct DatagridStart: Sendable, Hashable, Codable {
    /// How the service routes the conversation.
    public enum VoiceMode: String, Sendable, Hashable, Codable {
        case orchestrator
        case directAgent = "direct_agent"
    }

    /// Prompt overrides.
    public struct Config: Sendable, Hashable, Codable {
        /// Replaces the agent's system prompt.
        public var systemPrompt: String?
        /// Added to the agent's prompt.
        public var customPrompt: String?

        public init(systemPrompt: String? = nil, customPrompt: String? = nil) {
            self.systemPrompt = systemPrompt
            self.customPrompt = customPrompt
        }

        enum CodingKeys: String, CodingKey {
            case systemPrompt = "system_prompt"
            case customPrompt = "custom_prompt"
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.flexContainer(known: ["systemPrompt", "customPrompt"])
            systemPrompt = try container.flex(String.self, "systemPrompt")
            customPrompt = try container.flex(String.self, "customPrompt")
        }
    }

    /// Voice pipeline settings.
    public struct VoiceConfig: Sendable, Hashable, Codable {
        /// Transcribe the user's speech (`transcript` role `user`).
        public var inputTranscription: Bool?
        /// Transcribe the agent's speech (`transcript` role `agent`); the service's default is true.
        public var outputTranscription: Bool?
        /// Seconds of silent frames after which the service ends the session (`client_silence_timeout`).
        public var silenceTimeout: Double?
        /// Skip the agent's greeting.
        public var silentStart: Bool?
        /// The voice.
        public var voicePreset: String?
        /// Longest user segment, in milliseconds.
        public var segmentMaxDurationMs: Int?
        /// Silence that commits a user segment, in milliseconds.
        public var silenceCommitMs: Int?
        /// Share of silence above which a segment is discarded.
        public var silenceDiscardRatio: Double?

        public init(
            inputTranscription: Bool? = nil,
            outputTranscription: Bool? = nil,
            silenceTimeout: Double? = nil,
            silentStart: Bool? = nil,
            voicePreset: String? = nil,
            segmentMaxDurationMs: Int? = nil,
            silenceCommitMs: Int? = nil,
            silenceDiscardRatio: Double? = nil
        ) {
            self.inputTranscription = inputTranscription
            self.outputTranscription = outputTranscription
            self.silenceTimeout = silenceTimeout
            self.silentStart = silentStart
            self.voicePreset = voicePreset
            self.segmentMaxDurationMs = segmentMaxDurationMs
            self.silenceCommitMs = silenceCommitMs
            self.silenceDiscardRatio = silenceDiscardRatio
        }

        enum CodingKeys: String, CodingKey {
            case inputTranscription = "input_transcription"
            case outputTranscription = "output_transcription"
            case silenceTimeout = "silence_timeout"
            case silentStart = "silent_start"
            case voicePreset = "voice_preset"
            case segmentMaxDurationMs = "segment_max_duration_ms"
            case silenceCommitMs = "silence_commit_ms"
            case silenceDiscardRatio = "silence_discard_ratio"
        }

        static let known: Set<String> = [
            "inputTranscription", "outputTranscription", "silenceTimeout", "silentStart", "voicePreset",
            "segmentMaxDurationMs", "silenceCommitMs", "silenceDiscardRatio",
        ]

        public init(from decoder: any Decoder) throws {
            let container = try decoder.flexContainer(known: Self.known)
            inputTranscription = try container.flexBool("inputTranscription")
            outputTranscription = try container.flexBool("outputTranscription")
            silenceTimeout = try container.flexDouble("silenceTimeout")
            silentStart = try container.flexBool("silentStart")
            voicePreset = try container.flex(String.self, "voicePreset")
            segmentMaxDurationMs = try container.flexInt("segmentMaxDurationMs").map { Int($0) }
            silenceCommitMs = try container.flexInt("silenceCommitMs").map { Int($0) }
            silenceDiscardRatio = try container.flexDouble("silenceDiscardRatio")
        }
    }

    public var agentId: String?
    /// The conversation to continue (from `started`), kept across reconnects.
    public var conversationId: String?
    public var voiceMode: VoiceMode?
    public var config: Config?
    /// A first user message (at most 2000 characters).
    public var initialMessage: String?
    public var voiceConfig: VoiceConfig?
    /// Free-form user details.
    public var user: JSONValue?
    public var fileIds: [String]?
    public var knowledgeIds: [String]?

    public init(
        agentId: String? = nil,
        conversationId: String? = nil,
        voiceMode: VoiceMode? = nil,
        config: Config? = nil,
        initialMessage: String? = nil,
        voiceConfig: VoiceConfig? = nil,
        user: JSONValue? = nil,
        fileIds: [String]? = nil,
        knowledgeIds: [String]? = nil
    ) {
        self.agentId = agentId
        self.conversationId = conversationId
        self.voiceMode = voiceMode
        self.config = config
        self.initialMessage = initialMessage
        self.voiceConfig = voiceConfig
        self.user = user
        self.fileIds = fileIds
        self.knowledgeIds = knowledgeIds
    }

    /// Longest `initial_message` the service takes.
    public static let initialMessageLimit = 2000

    enum CodingKeys: String, CodingKey {
        case agentId = "agent_id"
        case conversationId = "conversation_id"
        case voiceMode = "voice_mode"
        case config
        case initialMessage = "initial_message"
        case voiceConfig = "voice_config"
        case user
        case fileIds = "file_ids"
        case knowledgeIds = "knowledge_ids"
    }

    static let known: Set<String> = [
        "agentId", "conversationId", "voiceMode", "config", "initialMessage", "voiceConfig", "user", "fileIds",
        "knowledgeIds",
    ]

    public init(from decoder: any Decoder) throws {
        let container = try decoder.flexContainer(known: Self.known)
        agentId = try container.flex(String.self, "agentId")
        conversationId = try container.flex(String.self, "conversationId")
        if let mode = try container.flex(String.self, "voiceMode") {
            voiceMode = VoiceMode(rawValue: mode)
        }
        config = try container.flex(Config.self, "config")
        initialMessage = try container.flex(String.self, "initialMessage")
        voiceConfig = try container.flex(VoiceConfig.self, "voiceConfig")
        user = try container.flex(JSONValue.self, "user")
        fileIds = try container.flexArray(String.self, "fileIds")
        knowledgeIds = try container.flexArray(String.self, "knowledgeIds")
    }
}

/// Audio in either direction: base64 little-endian PCM16 (16 kHz up, 24 kHz down).
public struct DatagridAudio: Sendable, Hashable, Codable {
    public var data: Base64Bytes
    public var mimeType: String?

    public init(data: Data, mimeType: String? = nil) {
        self.data = Base64Bytes(data)
        self.mimeType = mimeType
    }

    enum CodingKeys: String, CodingKey {
        case data
        case mimeType = "mime_type"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.flexContainer(known: ["data", "mimeType"])
        data = try container.flex(Base64Bytes.self, "data") ?? Base64Bytes(Data())
        mimeType = try container.flex(String.self, "mimeType")
    }

    /// The sample rate the MIME type states (`audio/pcm;rate=24000`): unstated, supported (within
    /// ``SampleRates/serverAudio``) or unsupported (a message not to play).
    public var audioRate: MIMEAudioRate { MIMEAudioRate(mimeType: mimeType) }

    /// The sample rate the MIME type states when it is within ``SampleRates/serverAudio``; nil when it
    /// states none or another.
    public var rate: Int? {
        if case .supported(let rate) = audioRate { return rate }
        return nil
    }
}

/// `started`: the service accepted the start.
public struct DatagridStarted: Sendable, Hashable, Codable {
    public var sessionId: String?
    public var conversationId: String?
    public var messageId: String?

    public init(sessionId: String? = nil, conversationId: String? = nil, messageId: String? = nil) {
        self.sessionId = sessionId
        self.conversationId = conversationId
        self.messageId = messageId
    }

    enum CodingKeys: String, CodingKey {
        case sessionId = "session_id"
        case conversationId = "conversation_id"
        case messageId = "message_id"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.flexContainer(known: ["sessionId", "conversationId", "messageId"])
        sessionId = try container.flex(String.self, "sessionId")
        conversationId = try container.flex(String.self, "conversationId")
        messageId = try container.flex(String.self, "messageId")
    }
}

/// One line of a transcript (`transcript` messages, and the list in `ended`).
public struct DatagridTranscriptLine: Sendable, Hashable, Codable {
    /// `user` or `agent` (others are kept as sent).
    public var role: String
    public var text: String

    public init(role: String, text: String) {
        self.role = role
        self.text = text
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.flexContainer(known: ["role", "text"])
        role = try container.flex(String.self, "role") ?? ""
        text = try container.flex(String.self, "text") ?? ""
    }
}

/// `tool_call`: a tool the agent runs on the service side changed status.
public struct DatagridToolCall: Sendable, Hashable, Codable {
    /// `started`, `completed` or `failed` (others are kept as sent).
    public var toolName: String
    public var status: String

    public init(toolName: String, status: String) {
        self.toolName = toolName
        self.status = status
    }

    enum CodingKeys: String, CodingKey {
        case toolName = "tool_name"
        case status
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.flexContainer(known: ["toolName", "status"])
        toolName = try container.flex(String.self, "toolName") ?? ""
        status = try container.flex(String.self, "status") ?? ""
    }
}

/// `citation`: sources the agent used.
public struct DatagridCitation: Sendable, Hashable, Codable {
    public var citations: [JSONValue]
    public var timestampMs: Int64?

    public init(citations: [JSONValue], timestampMs: Int64? = nil) {
        self.citations = citations
        self.timestampMs = timestampMs
    }

    enum CodingKeys: String, CodingKey {
        case citations
        case timestampMs = "timestamp_ms"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.flexContainer(known: ["citations", "timestampMs"])
        citations = try container.flexArray(JSONValue.self, "citations") ?? []
        timestampMs = try container.flexInt("timestampMs")
    }
}

/// `error`: something went wrong; `code` says what (e.g. `client_silence_timeout`).
public struct DatagridError: Sendable, Hashable, Codable {
    public var message: String
    public var code: String?

    public init(message: String, code: String? = nil) {
        self.message = message
        self.code = code
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.flexContainer(known: ["message", "code"])
        message = try container.flex(String.self, "message") ?? ""
        if let text = try? container.flex(String.self, "code") {
            code = text
        } else if let number = try? container.flexInt("code") {
            code = String(number)
        } else {
            code = nil
        }
    }
}

/// `ended`: the conversation is over.
public struct DatagridEnded: Sendable, Hashable, Codable {
    public var creditsConsumed: Double?
    public var transcript: [DatagridTranscriptLine]

    public init(creditsConsumed: Double? = nil, transcript: [DatagridTranscriptLine] = []) {
        self.creditsConsumed = creditsConsumed
        self.transcript = transcript
    }

    enum CodingKeys: String, CodingKey {
        case creditsConsumed = "credits_consumed"
        case transcript
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.flexContainer(known: ["creditsConsumed", "transcript"])
        creditsConsumed = try container.flexDouble("creditsConsumed")
        transcript = try container.flexArray(DatagridTranscriptLine.self, "transcript") ?? []
    }
}

/// What the device sends.
public enum DatagridClientMessage: Sendable, Hashable {
    case start(DatagridStart)
    case audio(DatagridAudio)
    /// A text turn, handled as if spoken.
    case text(String)
    /// The user barged in.
    case interrupt
    /// End gracefully.
    case stop
    /// A type this client does not know (decoding only).
    case unknown(type: String)

    /// The wire `type`.
    public var type: String {
        switch self {
        case .start: "start"
        case .audio: "audio"
        case .text: "text"
        case .interrupt: "interrupt"
        case .stop: "stop"
        case .unknown(let type): type
        }
    }
}

/// What the service sends.
public enum DatagridServerMessage: Sendable, Hashable {
    case started(DatagridStarted)
    /// Audio may flow now.
    case ready
    case audio(DatagridAudio)
    case transcript(DatagridTranscriptLine)
    case toolCall(DatagridToolCall)
    /// Drop queued playback.
    case interrupted
    case citation(DatagridCitation)
    case error(DatagridError)
    case ended(DatagridEnded)
    /// A type this client does not know: skipped.
    case unknown(type: String)

    /// The wire `type`.
    public var type: String {
        switch self {
        case .started: "started"
        case .ready: "ready"
        case .audio: "audio"
        case .transcript: "transcript"
        case .toolCall: "tool_call"
        case .interrupted: "interrupted"
        case .citation: "citation"
        case .error: "error"
        case .ended: "ended"
        case .unknown(let type): type
        }
    }
}

/// `{"text": ...}`, the payload of a `text` message.
struct TextPayload: Codable {
    var text: String

    init(text: String) { self.text = text }

    init(from decoder: any Decoder) throws {
        let container = try decoder.flexContainer(known: ["text"])
        text = try container.flex(String.self, "text") ?? ""
    }
}

/// The envelope `{"type": ..., "payload": ...}` with the payload still undecoded.
private struct Envelope: Decodable {
    var type: String
    var decoder: any Decoder

    enum CodingKeys: String, CodingKey { case type, payload }

    init(from decoder: any Decoder) throws {
        let container = try decoder.flexContainer(known: ["type", "payload"])
        type = try container.flex(String.self, "type") ?? ""
        self.decoder = decoder
    }

    func payload<T: Decodable>(_ type: T.Type) throws -> T? {
        let container = try decoder.container(keyedBy: FlexKey.self)
        let key = FlexKey("payload")
        guard container.contains(key), try !container.decodeNil(forKey: key) else { return nil }
        return try container.decode(T.self, forKey: key)
    }
}

/// A client message with its payload, for encoding.
private struct Outgoing<Payload: Encodable>: Encodable {
    var type: String
    var payload: Payload?

    enum CodingKeys: String, CodingKey { case type, payload }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(type, forKey: .type)
        if let payload { try container.encode(payload, forKey: .payload) }
    }
}

/// A decoded frame and the fields in it this client does not know.
public struct DatagridDecoded<Message: Sendable>: Sendable {
    public var message: Message
    /// Dotted paths of unknown fields (logged once at debug).
    public var unknownFields: [String]
}

/// Encodes and decodes Datagrid Voice frames. Tolerant: unknown types decode as `.unknown`, unknown
/// fields are collected, absent payloads are empty.
public struct DatagridCodec: Sendable {
    public init() {}

    /// The JSON text of a client message.
    public func encode(_ message: DatagridClientMessage) throws -> String {
        switch message {
        case .start(let start): return try text(Outgoing(type: "start", payload: start))
        case .audio(let audio): return try text(Outgoing(type: "audio", payload: audio))
        case .text(let value): return try text(Outgoing(type: "text", payload: TextPayload(text: value)))
        case .interrupt, .stop, .unknown: return try text(Outgoing<JSONValue>(type: message.type, payload: nil))
        }
    }

    /// The JSON text of a server message.
    public func encodeServer(_ message: DatagridServerMessage) throws -> String {
        switch message {
        case .started(let value): return try text(Outgoing(type: message.type, payload: value))
        case .audio(let value): return try text(Outgoing(type: message.type, payload: value))
        case .transcript(let value): return try text(Outgoing(type: message.type, payload: value))
        case .toolCall(let value): return try text(Outgoing(type: message.type, payload: value))
        case .citation(let value): return try text(Outgoing(type: message.type, payload: value))
        case .error(let value): return try text(Outgoing(type: message.type, payload: value))
        case .ended(let value): return try text(Outgoing(type: message.type, payload: value))
        case .ready, .interrupted, .unknown: return try text(Outgoing<JSONValue>(type: message.type, payload: nil))
        }
    }

    /// Any JSON value (a `start_message` from the REST hand-off, sent as is) as text.
    public func encode(raw value: JSONValue) throws -> String {
        try text(value)
    }

    /// Decodes a server frame.
    public func decodeServer(_ bytes: Data) throws -> DatagridDecoded<DatagridServerMessage> {
        let (envelope, collector) = try decodeEnvelope(bytes)
        let message: DatagridServerMessage
        switch envelope.type {
        case "started": message = .started(try envelope.payload(DatagridStarted.self) ?? DatagridStarted())
        case "ready": message = .ready
        case "audio":
            message = .audio(try envelope.payload(DatagridAudio.self) ?? DatagridAudio(data: Data()))
        case "transcript":
            message = .transcript(
                try envelope.payload(DatagridTranscriptLine.self) ?? DatagridTranscriptLine(role: "", text: "")
            )
        case "tool_call":
            message = .toolCall(
                try envelope.payload(DatagridToolCall.self) ?? DatagridToolCall(toolName: "", status: "")
            )
        case "interrupted": message = .interrupted
        case "citation":
            message = .citation(try envelope.payload(DatagridCitation.self) ?? DatagridCitation(citations: []))
        case "error": message = .error(try envelope.payload(DatagridError.self) ?? DatagridError(message: ""))
        case "ended": message = .ended(try envelope.payload(DatagridEnded.self) ?? DatagridEnded())
        default: message = .unknown(type: envelope.type)
        }
        return DatagridDecoded(message: message, unknownFields: collector.paths)
    }

    /// Decodes a client frame (the simulator's side).
    public func decodeClient(_ bytes: Data) throws -> DatagridDecoded<DatagridClientMessage> {
        let (envelope, collector) = try decodeEnvelope(bytes)
        let message: DatagridClientMessage
        switch envelope.type {
        case "start": message = .start(try envelope.payload(DatagridStart.self) ?? DatagridStart())
        case "audio": message = .audio(try envelope.payload(DatagridAudio.self) ?? DatagridAudio(data: Data()))
        case "text": message = .text(try envelope.payload(TextPayload.self)?.text ?? "")
        case "interrupt": message = .interrupt
        case "stop": message = .stop
        default: message = .unknown(type: envelope.type)
        }
        return DatagridDecoded(message: message, unknownFields: collector.paths)
    }

    private func decodeEnvelope(_ bytes: Data) throws -> (Envelope, UnknownFieldCollector) {
        let decoder = JSONDecoder()
        let collector = UnknownFieldCollector()
        decoder.userInfo[UnknownFieldCollector.userInfoKey] = collector
        let envelope = try decoder.decode(Envelope.self, from: bytes)
        guard !envelope.type.isEmpty else {
            throw DecodingError.dataCorrupted(
                DecodingError.Context(codingPath: [], debugDescription: "a frame without a type")
            )
        }
        return (envelope, collector)
    }

    private func text(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }
}

/// The answer of `POST /v1/voice`: where to connect and what to send first.
public struct DatagridHandoff: Sendable, Hashable, Codable {
    public var object: String?
    /// The WebSocket URL, carrying a short-lived token (redact it in logs).
    public var url: String
    public var agentId: String?
    /// The `start` message to send as is.
    public var startMessage: JSONValue?

    public init(object: String? = "voice.session", url: String, agentId: String? = nil, startMessage: JSONValue?) {
        self.object = object
        self.url = url
        self.agentId = agentId
        self.startMessage = startMessage
    }

    enum CodingKeys: String, CodingKey {
        case object, url
        case agentId = "agent_id"
        case startMessage = "start_message"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.flexContainer(known: ["object", "url", "agentId", "startMessage"])
        object = try container.flex(String.self, "object")
        guard let url = try container.flex(String.self, "url") else {
            throw DecodingError.keyNotFound(
                FlexKey("url"),
                DecodingError.Context(codingPath: decoder.codingPath, debugDescription: "no url in the answer")
            )
        }
        self.url = url
        agentId = try container.flex(String.self, "agentId")
        startMessage = try container.flex(JSONValue.self, "startMessage")
    }
}
