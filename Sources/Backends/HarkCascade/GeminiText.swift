import HarkBackendKit
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
        try Self.encoder().encode(self)
    }

    static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }
}

/// The bodies of one session's text requests, each the bytes ``GenerateContentRequest/body()`` makes, put together
/// from parts encoded once: the instruction, tools and settings when the session starts, each turn of the history
/// when it first goes out. A request then costs the encoding of its newest turn, not of the whole history again
/// (which grows with the conversation) while the user waits for the answer.
public struct GenerateContentBodies: Sendable {
    /// `"generationConfig":…,"systemInstruction":…,"tools":…}`: what follows the contents (keys sorted).
    private let tail: Data
    /// The turns of the last request and their encodings, in order. The history grows at its end and loses turns
    /// at its start, so the next request's turns are found here in order (compared, not hashed: a turn kept in the
    /// history shares its text's storage with the one here, and such strings compare at once).
    private var turns: [(content: Content, encoded: Data)] = []
    private let encoder = GenerateContentRequest.encoder()

    /// Bodies with the fixed parts of `request` (its contents are not used).
    public init(_ request: GenerateContentRequest) throws {
        var fixed = request
        fixed.contents = []
        let whole = try fixed.body()
        let head = Data(#"{"contents":[],"#.utf8)
        guard whole.starts(with: head) else {
            throw EncodingError.invalidValue(
                request,
                EncodingError.Context(codingPath: [], debugDescription: "the body does not begin with its contents")
            )
        }
        tail = whole.dropFirst(head.count)
    }

    /// The body of a request for `contents`.
    public mutating func body(_ contents: [Content]) throws -> Data {
        var kept: [(content: Content, encoded: Data)] = []
        kept.reserveCapacity(contents.count)
        var cursor = turns.startIndex
        var body = Data(#"{"contents":["#.utf8)
        for (index, content) in contents.enumerated() {
            let encoded: Data
            if let found = turns[cursor...].firstIndex(where: { $0.content == content }) {
                encoded = turns[found].encoded
                cursor = found + 1
            } else {
                encoded = try Self.textEncoding(content) ?? encoder.encode(content)
            }
            kept.append((content, encoded))
            if index > 0 { body.append(UInt8(ascii: ",")) }
            body.append(encoded)
        }
        body.append(contentsOf: #"],"#.utf8)
        body.append(tail)
        turns = kept
        return body
    }

    /// The encoding of a turn whose parts hold only text (with a thought flag and signature): the bytes the
    /// encoder makes (keys sorted, slashes plain), written directly, as it takes a good part of a millisecond to
    /// set up. Nil for any other turn.
    static func textEncoding(_ content: Content) -> Data? {
        var out = Data(#"{"parts":["#.utf8)
        for (index, part) in content.parts.enumerated() {
            guard part.functionCall == nil, part.functionResponse == nil, part.inlineData == nil else { return nil }
            if index > 0 { out.append(UInt8(ascii: ",")) }
            out.append(UInt8(ascii: "{"))
            var first = true
            func key(_ name: String) {
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                appendString(name, to: &out)
                out.append(UInt8(ascii: ":"))
            }
            if let text = part.text {
                key("text")
                appendString(text, to: &out)
            }
            if let thought = part.thought {
                key("thought")
                out.append(contentsOf: (thought ? "true" : "false").utf8)
            }
            if let signature = part.thoughtSignature {
                key("thoughtSignature")
                appendString(signature, to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
        out.append(UInt8(ascii: "]"))
        if let role = content.role {
            out.append(contentsOf: #","role":"#.utf8)
            appendString(role, to: &out)
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// `text` as a JSON string, escaped as the encoder escapes it.
    private static func appendString(_ text: String, to out: inout Data) {
        out.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: #"\""#.utf8)
            case UInt8(ascii: "\\"): out.append(contentsOf: #"\\"#.utf8)
            case 0x08: out.append(contentsOf: #"\b"#.utf8)
            case 0x0C: out.append(contentsOf: #"\f"#.utf8)
            case 0x0A: out.append(contentsOf: #"\n"#.utf8)
            case 0x0D: out.append(contentsOf: #"\r"#.utf8)
            case 0x09: out.append(contentsOf: #"\t"#.utf8)
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out.append(contentsOf: #"\u00"#.utf8)
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0xF)])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
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
