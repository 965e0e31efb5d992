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
    /// One piece of a streamed answer: its bytes (an event already framed, or a raw error line), the delay
    /// before it, and the text it adds to the answer (for the simulator's timings).
    public struct Piece: Sendable, Hashable {
        public var delay: Duration
        public var bytes: String
        public var text = ""
    }

    /// What the service answers.
    public enum Answer: Sendable, Hashable {
        /// A status other than 200, with Google's JSON error body, and a `Retry-After` in seconds if any.
        case status(Int, body: String, retryAfter: Int?)
        /// 200 and `text/event-stream`; when it `drops`, the connection closes after the pieces without the
        /// body's end.
        case stream([Piece], drops: Bool)
    }

    /// What goes wrong with a request.
    public enum Fault: Sendable, Hashable {
        /// This status (429, 503, 401, ...) with Google's error body before any text, and `Retry-After: seconds`
        /// when given.
        case status(Int, retryAfter: Int?)
        /// The key refused as Google refuses a key that is not valid: 400 `INVALID_ARGUMENT` with the reason
        /// `API_KEY_INVALID` (``keyInvalidBody``).
        case keyInvalid
        /// 200, then the connection closes before any event.
        case drop
        /// After this many events the connection closes without the body's end.
        case dropAfter(events: Int)
        /// After this many events an error as raw JSON lines without `data:`, as Google ends a stream that failed.
        case errorAfter(events: Int)
        /// The whole text, then this long a pause before the last event (the one that says STOP): the model has
        /// written its answer but not finished it.
        case stallBeforeFinish(Duration)
        /// 200 and `text/event-stream`, then only server-sent-event comments (`: keep-alive`), one every this
        /// long, for an hour: the link is alive and no answer ever comes.
        case keepAlive(every: Duration)
    }

    /// Before the first chunk, and between chunks.
    public var firstChunkDelay: Duration = .milliseconds(100)
    public var chunkDelay: Duration = .milliseconds(30)
    /// What goes wrong with every request (``CascadeSimulatorConfiguration/textFaults`` says it per request).
    public var fault: Fault?
    /// A function the model calls when it is declared (the first reply of a user turn).
    public var scriptedCall: String?
    /// The model calls ``scriptedCall`` in every reply, after a tool's result too: it never stops calling (a fault).
    public var callsEveryReply = false

    public init() {}

    /// The answer to a request body, with `fault` (else ``fault``).
    public func answer(_ body: Data, fault: Fault? = nil) -> Answer {
        let fault = fault ?? self.fault
        switch fault {
        case .status(let status, let retryAfter)?:
            return .status(status, body: Self.errorBody(status), retryAfter: retryAfter)
        case .keyInvalid?:
            return .status(400, body: Self.keyInvalidBody, retryAfter: nil)
        case .drop?:
            return .stream([], drops: true)
        case .keepAlive(let every)?:
            let count = Int(min(3600, max(1, Duration.seconds(3600) / max(every, .milliseconds(1)))))
            return .stream(
                (0..<count).map { _ in Piece(delay: max(every, .milliseconds(1)), bytes: ": keep-alive\r\n\r\n") },
                drops: false
            )
        default:
            break
        }
        guard let json = try? JSONDecoder().decode(JSONValue.self, from: body),
            let contents = json["contents"]?.arrayValue, let last = contents.last
        else {
            return .status(400, body: Self.errorBody(400, "Invalid JSON payload received."), retryAfter: nil)
        }
        guard last["role"]?.stringValue == "user" else {
            return .status(
                400,
                body: Self.errorBody(400, "Please ensure that the contents end with a user turn."),
                retryAfter: nil
            )
        }
        let thoughts = json["generationConfig"]?["thinkingConfig"]?["includeThoughts"] == .bool(true)
        let declared = (json["tools"]?.arrayValue ?? []).flatMap { $0["functionDeclarations"]?.arrayValue ?? [] }
            .compactMap { $0["name"]?.stringValue }
        let parts = last["parts"]?.arrayValue ?? []
        let results = parts.compactMap { $0["functionResponse"] }
        var chunks: [JSONValue] = []
        if thoughts { chunks.append(Self.chunk([["text": "Thinking about the answer.", "thought": true]])) }
        if results.isEmpty || callsEveryReply, let name = scriptedCall, declared.contains(name) {
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
            var delay = index == 0 ? firstChunkDelay : chunkDelay
            if case .stallBeforeFinish(let pause)? = fault, index == chunks.count - 1 { delay = pause }
            switch fault {
            case .dropAfter(let count)? where index == count:
                return .stream(events, drops: true)
            case .errorAfter(let count)? where index == count:
                events.append(Piece(delay: delay, bytes: Self.rawError(503, "The model is overloaded.")))
                return .stream(events, drops: false)
            default:
                break
            }
            let text = (chunk["candidates"]?.arrayValue?.first?["content"]?["parts"]?.arrayValue ?? [])
                .filter { $0["thought"] != .bool(true) }.compactMap { $0["text"]?.stringValue }.joined()
            events.append(Piece(delay: delay, bytes: "data: " + Self.text(chunk) + "\r\n\r\n", text: text))
        }
        return .stream(events, drops: false)
    }

    /// An error as a stream that already began ends with it: Google's JSON error body over several lines, without
    /// `data:`, CRLF line ends (what google-genai's `_iter_response_stream` gathers until its braces balance).
    static func rawError(_ status: Int, _ message: String) -> String {
        let value = try? JSONDecoder().decode(JSONValue.self, from: Data(errorBody(status, message).utf8))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        let pretty = value.flatMap { try? encoder.encode($0) }.map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        return pretty.split(separator: "\n", omittingEmptySubsequences: false).joined(separator: "\r\n") + "\r\n"
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

    /// What Google answers a request whose API key is not valid, with 400.
    public static let keyInvalidBody = text([
        "error": [
            "code": 400, "message": "API key not valid. Please pass a valid API key.", "status": "INVALID_ARGUMENT",
            "details": [
                [
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
                    "domain": "googleapis.com", "metadata": ["service": "generativelanguage.googleapis.com"],
                ]
            ],
        ]
    ])

    /// The answer to `models.get` for `model` when the key is taken.
    static func modelBody(_ model: String) -> String {
        text([
            "name": .string("models/" + model), "displayName": .string(model), "inputTokenLimit": 1_048_576,
            "outputTokenLimit": 65_536, "supportedGenerationMethods": ["generateContent", "countTokens"],
            "thinking": true,
        ])
    }

    static func compact(_ value: JSONValue) -> String { text(value) }

    static func text(_ value: JSONValue) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}
