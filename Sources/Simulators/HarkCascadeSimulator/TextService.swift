import HarkCore
import HarkGemini

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Gemini's `streamGenerateContent?alt=sse` as a value: a request body in, the answer out — a status with a JSON
/// error body, or a stream of server-sent events framed with CRLF as Google frames them, each the data of one
/// `GenerateContentResponse`. The reply repeats the user's last words in two sentences; thoughts come only with
/// `includeThoughts`; the last chunk holds an empty text part with a `thoughtSignature` and `finishReason: STOP`.
/// A scripted function name is called (once per user turn) when the request declares it.
public struct TextService: Sendable {
    /// One piece of a streamed answer: its bytes (an event already framed, or a raw error line) and the delay
    /// before it.
    public struct Piece: Sendable, Hashable {
        public var delay: Duration
        public var bytes: String
    }

    /// What the service answers.
    public enum Answer: Sendable, Hashable {
        /// A status other than 200, with Google's JSON error body.
        case status(Int, body: String)
        /// 200 and `text/event-stream`.
        case stream([Piece])
    }

    /// Before the first chunk, and between chunks.
    public var firstChunkDelay: Duration = .milliseconds(100)
    public var chunkDelay: Duration = .milliseconds(30)
    /// Answer with this status instead (401, 403, 429, 503).
    public var failWithStatus: Int?
    /// Stop mid-answer with an error line (raw JSON without `data:`), after this many chunks.
    public var failAfterChunks: Int?
    /// A function the model calls when it is declared (the first reply of a user turn).
    public var scriptedCall: String?

    public init() {}

    /// The answer to a request body.
    public func answer(_ body: Data) -> Answer {
        if let status = failWithStatus {
            return .status(status, body: Self.errorBody(status))
        }
        guard let json = try? JSONDecoder().decode(JSONValue.self, from: body),
            let contents = json["contents"]?.arrayValue, let last = contents.last
        else {
            return .status(400, body: Self.errorBody(400, "Invalid JSON payload received."))
        }
        guard last["role"]?.stringValue == "user" else {
            return .status(400, body: Self.errorBody(400, "Please ensure that the contents end with a user turn."))
        }
        let thoughts = json["generationConfig"]?["thinkingConfig"]?["includeThoughts"] == .bool(true)
        let declared = (json["tools"]?.arrayValue ?? []).flatMap { $0["functionDeclarations"]?.arrayValue ?? [] }
            .compactMap { $0["name"]?.stringValue }
        let parts = last["parts"]?.arrayValue ?? []
        let results = parts.compactMap { $0["functionResponse"] }
        var chunks: [JSONValue] = []
        if thoughts { chunks.append(Self.chunk([["text": "Thinking about the answer.", "thought": true]])) }
        if results.isEmpty, let name = scriptedCall, declared.contains(name) {
            chunks.append(Self.chunk([["functionCall": ["name": .string(name), "args": [:]]]]))
        } else {
            let words: String
            if let result = results.first {
                words = "the tool said " + Self.compact(result["response"] ?? .null)
            } else {
                let said = parts.compactMap { $0["text"]?.stringValue }.joined(separator: " ")
                words = "you said " + String(said.prefix(200))
            }
            let text = "I heard you. Here is my answer: \(words). That is all."
            // Split where a sentence cutter must join pieces: mid-word and mid-sentence.
            let pieces = stride(from: 0, to: text.count, by: 17).map { start -> String in
                let from = text.index(text.startIndex, offsetBy: start)
                let to = text.index(from, offsetBy: min(17, text.count - start))
                return String(text[from..<to])
            }
            chunks += pieces.map { Self.chunk([["text": .string($0)]]) }
        }
        chunks.append(Self.chunk([["text": "", "thoughtSignature": "c2ltdWxhdGVkIHNpZ25hdHVyZQ=="]], finish: "STOP"))
        var events: [Piece] = []
        for (index, chunk) in chunks.enumerated() {
            if let failAfter = failAfterChunks, index == failAfter {
                events.append(Piece(delay: chunkDelay, bytes: Self.errorBody(503, "The model is overloaded.") + "\r\n"))
                return .stream(events)
            }
            let delay = index == 0 ? firstChunkDelay : chunkDelay
            events.append(Piece(delay: delay, bytes: "data: " + Self.text(chunk) + "\r\n\r\n"))
        }
        return .stream(events)
    }

    static func chunk(_ parts: [JSONValue], finish: String? = nil) -> JSONValue {
        var candidate: [String: JSONValue] = ["content": ["role": "model", "parts": .array(parts)], "index": 0]
        if let finish { candidate["finishReason"] = .string(finish) }
        return [
            "candidates": [.object(candidate)], "modelVersion": "gemini-3.8-flash",
            "usageMetadata": ["promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15],
        ]
    }

    static func errorBody(_ status: Int, _ message: String? = nil) -> String {
        let (standard, name) =
            switch status {
            case 400: ("Request contains an invalid argument.", "INVALID_ARGUMENT")
            case 401: ("API key not valid. Please pass a valid API key.", "UNAUTHENTICATED")
            case 403: ("Permission denied.", "PERMISSION_DENIED")
            case 429: ("Resource has been exhausted (e.g. check quota).", "RESOURCE_EXHAUSTED")
            default: ("The service is currently unavailable.", "UNAVAILABLE")
            }
        return text([
            "error": [
                "code": .number(Double(status)), "message": .string(message ?? standard), "status": .string(name),
            ]
        ])
    }

    static func compact(_ value: JSONValue) -> String { text(value) }

    static func text(_ value: JSONValue) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}
