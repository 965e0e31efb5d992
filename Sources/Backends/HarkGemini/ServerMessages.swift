import HarkBackendKit
import HarkCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// `setupComplete`.
public struct SetupComplete: Codable, Sendable, Hashable {
    public var sessionId: String?
    public init(sessionId: String? = nil) { self.sessionId = sessionId }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.flexContainer(known: ["sessionId"])
        self.sessionId = try c.flex(String.self, "sessionId")
    }
}

/// A transcription piece (`inputTranscription` / `outputTranscription`).
public struct Transcription: Codable, Sendable, Hashable {
    public var text: String?
    public var finished: Bool?
    public var languageCode: String?

    public init(text: String?, finished: Bool? = nil, languageCode: String? = nil) {
        self.text = text
        self.finished = finished
        self.languageCode = languageCode
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.flexContainer(known: ["text", "finished", "languageCode"])
        self.text = try c.flex(String.self, "text")
        self.finished = try c.flexBool("finished")
        self.languageCode = try c.flex(String.self, "languageCode")
    }
}

/// `serverContent`.
public struct ServerContent: Codable, Sendable, Hashable {
    public var modelTurn: Content?
    public var turnComplete: Bool?
    public var interrupted: Bool?
    public var generationComplete: Bool?
    public var inputTranscription: Transcription?
    public var outputTranscription: Transcription?
    public var groundingMetadata: JSONValue?
    public var waitingForInput: Bool?
    public var turnCompleteReason: String?
    /// `IDLE`, `IN_PROGRESS` (more output follows: a `turnComplete` with it is not the end of the exchange) or
    /// `REQUIRES_ACTION` (deprecated, = `IDLE`); sent with `turnComplete` by newer models.
    public var interactionStatus: String?
    /// A low-latency transcript of what the user is saying, replaced as they go on.
    public var interimInputTranscription: Transcription?

    public init(
        modelTurn: Content? = nil,
        turnComplete: Bool? = nil,
        interrupted: Bool? = nil,
        generationComplete: Bool? = nil,
        inputTranscription: Transcription? = nil,
        outputTranscription: Transcription? = nil,
        turnCompleteReason: String? = nil,
        waitingForInput: Bool? = nil,
        interactionStatus: String? = nil,
        interimInputTranscription: Transcription? = nil
    ) {
        self.modelTurn = modelTurn
        self.turnComplete = turnComplete
        self.interrupted = interrupted
        self.generationComplete = generationComplete
        self.inputTranscription = inputTranscription
        self.outputTranscription = outputTranscription
        self.turnCompleteReason = turnCompleteReason
        self.waitingForInput = waitingForInput
        self.interactionStatus = interactionStatus
        self.interimInputTranscription = interimInputTranscription
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.flexContainer(known: [
            "modelTurn", "turnComplete", "interrupted", "generationComplete", "inputTranscription",
            "outputTranscription", "groundingMetadata", "waitingForInput", "turnCompleteReason",
            "urlContextMetadata", "interimInputTranscription", "interactionStatus",
        ])
        self.modelTurn = try c.flex(Content.self, "modelTurn")
        self.turnComplete = try c.flexBool("turnComplete")
        self.interrupted = try c.flexBool("interrupted")
        self.generationComplete = try c.flexBool("generationComplete")
        self.inputTranscription = try c.flex(Transcription.self, "inputTranscription")
        self.outputTranscription = try c.flex(Transcription.self, "outputTranscription")
        self.groundingMetadata = try c.flex(JSONValue.self, "groundingMetadata")
        self.waitingForInput = try c.flexBool("waitingForInput")
        self.turnCompleteReason = try c.flex(String.self, "turnCompleteReason")
        self.interactionStatus = try c.flex(String.self, "interactionStatus")
        self.interimInputTranscription = try c.flex(Transcription.self, "interimInputTranscription")
    }
}

/// `toolCall`.
public struct ToolCall: Codable, Sendable, Hashable {
    public var functionCalls: [FunctionCall]
    public init(functionCalls: [FunctionCall]) { self.functionCalls = functionCalls }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.flexContainer(known: ["functionCalls"])
        self.functionCalls = try c.flexArray(FunctionCall.self, "functionCalls") ?? []
    }
}

/// `toolCallCancellation`.
public struct ToolCallCancellation: Codable, Sendable, Hashable {
    public var ids: [String]
    public init(ids: [String]) { self.ids = ids }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.flexContainer(known: ["ids"])
        self.ids = try c.flexArray(String.self, "ids") ?? []
    }
}

/// `goAway`: the server will close the connection after `timeLeft`.
public struct GoAway: Codable, Sendable, Hashable {
    public var timeLeft: ProtoDuration?
    public init(timeLeft: Duration?) { self.timeLeft = timeLeft.map(ProtoDuration.init) }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.flexContainer(known: ["timeLeft"])
        self.timeLeft = try c.flex(ProtoDuration.self, "timeLeft")
    }
}

/// `sessionResumptionUpdate`. Updates without a handle, or with `resumable: false`, happen mid-generation:
/// they must not erase the last resumable handle.
public struct SessionResumptionUpdate: Codable, Sendable, Hashable {
    public var newHandle: String?
    public var resumable: Bool?
    /// int64: arrives as a JSON number or a string.
    public var lastConsumedClientMessageIndex: Int64?

    public init(newHandle: String?, resumable: Bool?, lastConsumedClientMessageIndex: Int64? = nil) {
        self.newHandle = newHandle
        self.resumable = resumable
        self.lastConsumedClientMessageIndex = lastConsumedClientMessageIndex
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.flexContainer(known: ["newHandle", "resumable", "lastConsumedClientMessageIndex"])
        self.newHandle = try c.flex(String.self, "newHandle")
        self.resumable = try c.flexBool("resumable")
        self.lastConsumedClientMessageIndex = try c.flexInt("lastConsumedClientMessageIndex")
    }

    /// The handle to keep, if this update carries a usable one.
    public var resumableHandle: String? {
        guard resumable == true, let newHandle, !newHandle.isEmpty else { return nil }
        return newHandle
    }
}

/// Token count of one modality.
public struct ModalityTokenCount: Codable, Sendable, Hashable {
    public var modality: String?
    public var tokenCount: Int64?
    public init(modality: String?, tokenCount: Int64?) {
        self.modality = modality
        self.tokenCount = tokenCount
    }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.flexContainer(known: ["modality", "tokenCount"])
        self.modality = try c.flex(String.self, "modality")
        self.tokenCount = try c.flexInt("tokenCount")
    }
}

/// `usageMetadata`.
public struct UsageMetadata: Codable, Sendable, Hashable {
    public var promptTokenCount: Int64?
    public var cachedContentTokenCount: Int64?
    public var responseTokenCount: Int64?
    public var toolUsePromptTokenCount: Int64?
    public var thoughtsTokenCount: Int64?
    public var totalTokenCount: Int64?
    public var promptTokensDetails: [ModalityTokenCount]?
    public var responseTokensDetails: [ModalityTokenCount]?

    public init(promptTokenCount: Int64?, responseTokenCount: Int64?, totalTokenCount: Int64?) {
        self.promptTokenCount = promptTokenCount
        self.responseTokenCount = responseTokenCount
        self.totalTokenCount = totalTokenCount
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.flexContainer(known: [
            "promptTokenCount", "cachedContentTokenCount", "responseTokenCount", "toolUsePromptTokenCount",
            "thoughtsTokenCount", "totalTokenCount", "promptTokensDetails", "cacheTokensDetails",
            "responseTokensDetails", "toolUsePromptTokensDetails",
        ])
        self.promptTokenCount = try c.flexInt("promptTokenCount")
        self.cachedContentTokenCount = try c.flexInt("cachedContentTokenCount")
        self.responseTokenCount = try c.flexInt("responseTokenCount")
        self.toolUsePromptTokenCount = try c.flexInt("toolUsePromptTokenCount")
        self.thoughtsTokenCount = try c.flexInt("thoughtsTokenCount")
        self.totalTokenCount = try c.flexInt("totalTokenCount")
        self.promptTokensDetails = try c.flexArray(ModalityTokenCount.self, "promptTokensDetails")
        self.responseTokensDetails = try c.flexArray(ModalityTokenCount.self, "responseTokensDetails")
    }
}

/// `voiceActivity` (newer servers): the service's voice detector saw speech start or end.
public struct VoiceActivity: Codable, Sendable, Hashable {
    /// `ACTIVITY_START` or `ACTIVITY_END` (sent as `voiceActivityType`, or `type` by older servers).
    public var type: String?
    /// Where in the input audio the activity was detected, from the start of the stream (`"1.250s"`).
    public var audioOffset: ProtoDuration?
    public init(type: String?, audioOffset: Duration? = nil) {
        self.type = type
        self.audioOffset = audioOffset.map(ProtoDuration.init)
    }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.flexContainer(known: ["type", "voiceActivityType", "audioOffset"])
        self.type = try c.flex(String.self, "voiceActivityType") ?? c.flex(String.self, "type")
        self.audioOffset = try c.flex(ProtoDuration.self, "audioOffset")
    }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: FlexKey.self)
        try c.encodeIfPresent(type, forKey: FlexKey("voiceActivityType"))
        try c.encodeIfPresent(audioOffset, forKey: FlexKey("audioOffset"))
    }
}

/// A server → client message: `usageMetadata` may accompany any of them.
public struct ServerMessage: Sendable, Hashable {
    /// The message itself.
    public enum Payload: Sendable, Hashable {
        case setupComplete(SetupComplete)
        case serverContent(ServerContent)
        case toolCall(ToolCall)
        case toolCallCancellation(ToolCallCancellation)
        case goAway(GoAway)
        case sessionResumptionUpdate(SessionResumptionUpdate)
        case voiceActivity(VoiceActivity)
        /// Only `usageMetadata`, or only top-level keys this client does not know (listed).
        case none(unknownKeys: [String])
    }

    public var payload: Payload
    public var usageMetadata: UsageMetadata?

    public init(_ payload: Payload, usageMetadata: UsageMetadata? = nil) {
        self.payload = payload
        self.usageMetadata = usageMetadata
    }
}

extension ServerMessage: Codable {
    static let knownKeys: Set<String> = [
        "setupComplete", "serverContent", "toolCall", "toolCallCancellation", "goAway", "sessionResumptionUpdate",
        "voiceActivity", "usageMetadata", "voiceActivityDetectionSignal",
    ]

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FlexKey.self)
        self.usageMetadata = try c.flex(UsageMetadata.self, "usageMetadata")
        if let value = try c.flex(SetupComplete.self, "setupComplete") {
            payload = .setupComplete(value)
        } else if let value = try c.flex(ServerContent.self, "serverContent") {
            payload = .serverContent(value)
        } else if let value = try c.flex(ToolCall.self, "toolCall") {
            payload = .toolCall(value)
        } else if let value = try c.flex(ToolCallCancellation.self, "toolCallCancellation") {
            payload = .toolCallCancellation(value)
        } else if let value = try c.flex(GoAway.self, "goAway") {
            payload = .goAway(value)
        } else if let value = try c.flex(SessionResumptionUpdate.self, "sessionResumptionUpdate") {
            payload = .sessionResumptionUpdate(value)
        } else if let value = try c.flex(VoiceActivity.self, "voiceActivity") {
            payload = .voiceActivity(value)
        } else {
            let unknown = c.allKeys.map(\.stringValue).filter {
                !Self.knownKeys.contains($0) && !Self.knownKeys.contains(FlexKey.camelCase($0))
            }
            payload = .none(unknownKeys: unknown.sorted())
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: FlexKey.self)
        try c.encodeIfPresent(usageMetadata, forKey: FlexKey("usageMetadata"))
        switch payload {
        case .setupComplete(let value): try c.encode(value, forKey: FlexKey("setupComplete"))
        case .serverContent(let value): try c.encode(value, forKey: FlexKey("serverContent"))
        case .toolCall(let value): try c.encode(value, forKey: FlexKey("toolCall"))
        case .toolCallCancellation(let value): try c.encode(value, forKey: FlexKey("toolCallCancellation"))
        case .goAway(let value): try c.encode(value, forKey: FlexKey("goAway"))
        case .sessionResumptionUpdate(let value): try c.encode(value, forKey: FlexKey("sessionResumptionUpdate"))
        case .voiceActivity(let value): try c.encode(value, forKey: FlexKey("voiceActivity"))
        case .none: break
        }
    }
}

/// Encodes and decodes Live API messages: canonical camelCase and standard base64 out; either casing,
/// either base64 alphabet, text or binary frames in.
public struct LiveCodec: Sendable {
    public init() {}

    /// The JSON text of a client message.
    public func encode(_ message: ClientMessage) throws -> String {
        if let text = Self.audioText(message) { return text }
        return String(decoding: try Self.encoder().encode(message), as: UTF8.self)
    }

    /// A `realtimeInput` carrying only audio, the message sent many times a second, written directly: the
    /// encoder's text with sorted keys (the tests hold them equal) at a fraction of the cost. Nil for any other
    /// message, or a MIME type that would need escaping.
    static func audioText(_ message: ClientMessage) -> String? {
        guard case .realtimeInput(let input) = message, let audio = input.audio, input.video == nil,
            input.text == nil, input.activityStart == nil, input.activityEnd == nil, input.audioStreamEnd == nil,
            input.mediaChunks == nil,
            audio.mimeType.utf8.allSatisfy({
                $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\")
            })
        else { return nil }
        return #"{"realtimeInput":{"audio":{"data":""# + audio.data.data.base64EncodedString() + #"","mimeType":""#
            + audio.mimeType + #""}}}"#
    }

    /// The JSON text of a server message (the simulator's side).
    public func encode(_ message: ServerMessage) throws -> String {
        String(decoding: try Self.encoder().encode(message), as: UTF8.self)
    }

    /// Slashes are not escaped: base64 audio has many, and `\/` only costs bytes.
    static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return encoder
    }

    /// Decodes a server message; `unknownFields` lists fields it skipped.
    public func decodeServer(_ bytes: Data) throws -> (message: ServerMessage, unknownFields: [String]) {
        let collector = UnknownFieldCollector()
        let decoder = JSONDecoder()
        decoder.userInfo[UnknownFieldCollector.userInfoKey] = collector
        let message = try decoder.decode(ServerMessage.self, from: bytes)
        return (message, collector.paths)
    }

    /// Decodes a client message (the simulator's side); `unknownFields` lists fields it skipped.
    public func decodeClient(_ bytes: Data) throws -> (message: ClientMessage, unknownFields: [String]) {
        let collector = UnknownFieldCollector()
        let decoder = JSONDecoder()
        decoder.userInfo[UnknownFieldCollector.userInfoKey] = collector
        let message = try decoder.decode(ClientMessage.self, from: bytes)
        return (message, collector.paths)
    }
}
