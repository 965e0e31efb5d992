import HarkCore
import HarkGemini

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The body of `models/MODEL:streamGenerateContent?alt=sse`, as google-genai 3.6.1 builds it: the conversation
/// (ending with a user turn), the system instruction, the device's tools, and a generation configuration that
/// thinks little (every thinking token is latency before the first spoken sentence) and never returns thoughts.
public struct GenerateContentRequest: Encodable, Sendable, Hashable {
    public struct ThinkingConfig: Encodable, Sendable, Hashable {
        /// `MINIMAL`, `LOW`, `MEDIUM` or `HIGH`.
        public var thinkingLevel: String?
        public var includeThoughts: Bool
    }

    public struct GenerationConfig: Encodable, Sendable, Hashable {
        public var temperature: Double?
        public var maxOutputTokens: Int?
        public var thinkingConfig: ThinkingConfig?
    }

    public var contents: [Content]
    public var systemInstruction: Content?
    public var tools: [Tool]?
    public var generationConfig: GenerationConfig

    public init(
        contents: [Content],
        systemInstruction: String? = nil,
        tools: [FunctionDeclaration] = [],
        temperature: Double? = nil,
        maxOutputTokens: Int? = nil,
        thinkingLevel: String? = "LOW"
    ) {
        self.contents = contents
        self.systemInstruction = systemInstruction.map { Content(parts: [Part(text: $0)]) }
        self.tools = tools.isEmpty ? nil : [Tool(functionDeclarations: tools)]
        self.generationConfig = GenerationConfig(
            temperature: temperature,
            maxOutputTokens: maxOutputTokens,
            thinkingConfig: ThinkingConfig(thinkingLevel: thinkingLevel, includeThoughts: false)
        )
    }

    /// The JSON body.
    public func body() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(self)
    }
}

/// One server-sent event's data of a streamed reply: a `GenerateContentResponse`.
public struct GenerateContentChunk: Decodable, Sendable, Hashable {
    public struct Candidate: Decodable, Sendable, Hashable {
        public var content: Content?
        /// `STOP`, `MAX_TOKENS`, `SAFETY`, ... on the last chunk.
        public var finishReason: String?

        public init(content: Content?, finishReason: String? = nil) {
            self.content = content
            self.finishReason = finishReason
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.flexContainer(known: [
                "content", "finishReason", "index", "safetyRatings", "citationMetadata", "tokenCount",
                "groundingMetadata", "avgLogprobs", "logprobsResult", "urlContextMetadata", "finishMessage",
            ])
            content = try c.flex(Content.self, "content")
            finishReason = try c.flex(String.self, "finishReason")
        }
    }

    public var candidates: [Candidate]
    /// An error the stream reported after it started (raw JSON `{"error": {...}}`), printable and bounded.
    public var error: String?

    public init(candidates: [Candidate], error: String? = nil) {
        self.candidates = candidates
        self.error = error
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.flexContainer(known: [
            "candidates", "usageMetadata", "modelVersion", "responseId", "promptFeedback", "createTime", "error",
        ])
        candidates = try c.flexArray(Candidate.self, "candidates") ?? []
        if let error = try c.flex(JSONValue.self, "error") {
            let message = error["message"]?.stringValue ?? error.stringValue ?? "an error"
            let status = error["status"]?.stringValue.map { " (\($0))" } ?? ""
            self.error = RemoteText.printable(message + status, limit: 300)
        }
    }

    /// Decodes one event's data.
    public static func decode(_ data: Data) throws -> GenerateContentChunk {
        try JSONDecoder().decode(GenerateContentChunk.self, from: data)
    }

    /// The first candidate's parts (the only one asked for).
    public var parts: [Part] { candidates.first?.content?.parts ?? [] }

    /// The text to speak: the parts' text that is not a thought.
    public var spokenText: String {
        parts.filter { $0.thought != true }.compactMap(\.text).joined()
    }

    /// The function calls the model made in this chunk.
    public var functionCalls: [FunctionCall] { parts.compactMap(\.functionCall) }

    /// Why the reply ended, on its last chunk.
    public var finishReason: String? { candidates.first?.finishReason }
}

/// Reads a streamed reply as google-genai 3.6.1 does (`_api_client.py` `_iter_response_stream`): each `data:` event
/// is one ``GenerateContentChunk``; lines outside the events that are no field — an error the service sent after
/// the stream had begun, as raw JSON over one or more lines — are gathered until their braces balance, and are one
/// error. Bounded: events by ``ServerSentEventParser``'s bounds, a raw error by ``rawLimit`` bytes (the rest of a
/// longer one is not kept; it is still an error).
public struct ReplyStreamReader: Sendable {
    /// What the stream said.
    public enum Item: Sendable, Hashable {
        /// One chunk of the answer.
        case chunk(GenerateContentChunk)
        /// An error the stream carried (printable, bounded).
        case error(String)
        /// An event that is no chunk (skipped).
        case undecodable
    }

    /// The most bytes of a raw error kept.
    public static let rawLimit = 64 * 1024

    private var events = ServerSentEventParser()
    /// No byte of the current line was seen yet.
    private var atLineStart = true
    /// The current line belongs to a raw error.
    private var lineIsRaw = false
    private var afterCR = false
    private var raw: [UInt8] = []
    private var rawOverflow = false
    /// Open braces of the raw error so far.
    private var depth = 0

    public init() {}

    /// The items the next bytes of the stream complete, in order.
    public mutating func feed(_ data: Data) -> [Item] {
        var errors: [Item] = []
        for byte in data {
            if byte == 0x0A || byte == 0x0D {
                if byte == 0x0A && afterCR {
                    afterCR = false
                    continue
                }
                afterCR = byte == 0x0D
                if let error = endLine() { errors.append(error) }
                continue
            }
            afterCR = false
            if atLineStart {
                atLineStart = false
                // A field starts with its name (data, event, id, retry) or ':' (a comment); JSON does not.
                lineIsRaw = depth > 0 || [UInt8(ascii: "{"), UInt8(ascii: "["), 0x20, 0x09].contains(byte)
            }
            guard lineIsRaw else { continue }
            if byte == UInt8(ascii: "{") { depth += 1 }
            if byte == UInt8(ascii: "}") { depth -= 1 }
            if raw.count < Self.rawLimit { raw.append(byte) } else { rawOverflow = true }
        }
        return events.feed(data).map(Self.item) + errors
    }

    /// What the end of the stream completes: a last event without its blank line, an unfinished raw error.
    public mutating func finish() -> [Item] {
        let last = events.finish().map(Self.item)
        guard !raw.isEmpty else { return last }
        depth = 0
        return last + [rawError()]
    }

    private mutating func endLine() -> Item? {
        defer {
            atLineStart = true
            lineIsRaw = false
        }
        guard lineIsRaw, depth <= 0, !raw.isEmpty else { return nil }
        depth = 0
        return rawError()
    }

    private mutating func rawError() -> Item {
        defer {
            raw = []
            rawOverflow = false
        }
        guard !rawOverflow, let chunk = try? GenerateContentChunk.decode(Data(raw)), let error = chunk.error else {
            return .error("an error the stream could not say (\(raw.count) bytes)")
        }
        return .error(error)
    }

    private static func item(_ event: ServerSentEvent) -> Item {
        guard let chunk = try? GenerateContentChunk.decode(Data(event.data.utf8)) else { return .undecodable }
        if let error = chunk.error, chunk.candidates.isEmpty { return .error(error) }
        return .chunk(chunk)
    }
}

/// How Gemini's text service says a request's API key is refused: 401 or 403, or the 400 it answers a key that is
/// not valid (or expired) with — `INVALID_ARGUMENT` whose `details` hold an `ErrorInfo` with the reason
/// `API_KEY_INVALID`: `{"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.",
/// "status": "INVALID_ARGUMENT", "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason":
/// "API_KEY_INVALID", "domain": "googleapis.com", ...}]}}`. Any other 400 is a request the service cannot take.
public enum GeminiKeyRefusal {
    /// The `ErrorInfo` reasons that refuse the key.
    public static let reasons: Set<String> = ["API_KEY_INVALID", "API_KEY_EXPIRED"]

    /// True when an answer with `status` and `body` (read up to its first 64 KiB) refused the key.
    public static func refuses(status: Int, body: Data) -> Bool {
        switch status {
        case 401, 403: return true
        case 400: break
        default: return false
        }
        guard body.count <= 64 * 1024, let json = try? JSONDecoder().decode(JSONValue.self, from: body) else {
            return false
        }
        let error = json["error"]
        let reasons = (error?["details"]?.arrayValue ?? []).compactMap { $0["reason"]?.stringValue }
        if reasons.contains(where: Self.reasons.contains) { return true }
        let message = error?["message"]?.stringValue ?? ""
        return message.hasPrefix("API key not valid") || message.hasPrefix("API key expired")
    }

    /// The session's failure for a refused key: an authentication error that names the Gemini key and where it is
    /// set (`origin`), quoting what the service said (printable, bounded, with `key` hidden should it be echoed).
    public static func failure(status: Int, body: Data, origin: String, key: Secret) -> SessionFailure {
        var said = ""
        if body.count <= 64 * 1024, let json = try? JSONDecoder().decode(JSONValue.self, from: body),
            let message = json["error"]?["message"]?.stringValue, !message.isEmpty
        {
            let shown = key.reveal().isEmpty ? message : message.replacing(key.reveal(), with: key.description)
            said = ": " + RemoteText.printable(shown, limit: 200)
        }
        return SessionFailure(
            .authentication,
            "Gemini refused the API key (HTTP \(status)\(said)); check the Gemini API key set by \(origin)"
        )
    }
}
