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
