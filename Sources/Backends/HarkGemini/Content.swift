import HarkBackendKit
import HarkCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A string-backed enum value of the Live API. Unknown values are kept, never rejected.
public protocol OpenEnum: RawRepresentable, Codable, Sendable, Hashable, ExpressibleByStringLiteral
where RawValue == String {
    init(rawValue: String)
}

extension OpenEnum {
    public init(stringLiteral value: String) { self.init(rawValue: value) }
    public init(from decoder: any Decoder) throws {
        self.init(rawValue: try decoder.singleValueContainer().decode(String.self))
    }
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// An empty message (`{}`), e.g. `activityStart`, `setupComplete`, `inputAudioTranscription`.
public struct Empty: Codable, Sendable, Hashable {
    public init() {}
    public init(from decoder: any Decoder) throws {
        _ = try decoder.flexContainer(known: [])
    }
    public func encode(to encoder: any Encoder) throws {
        _ = encoder.container(keyedBy: FlexKey.self)
    }
}

/// `Blob`: inline bytes with a MIME type (audio chunks both ways).
public struct Blob: Codable, Sendable, Hashable {
    public var mimeType: String
    public var data: Base64Bytes

    public init(mimeType: String, data: Data) {
        self.mimeType = mimeType
        self.data = Base64Bytes(data)
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.flexContainer(known: ["mimeType", "data", "displayName"])
        self.mimeType = try c.flex(String.self, "mimeType") ?? ""
        self.data = try c.flex(Base64Bytes.self, "data") ?? Base64Bytes(Data())
    }

    /// The sample rate the MIME type states (`audio/pcm;rate=24000`): unstated, supported (within
    /// ``SampleRates/serverAudio``) or unsupported (a message not to play).
    public var audioRate: MIMEAudioRate { MIMEAudioRate(mimeType: mimeType) }

    /// The sample rate in a `audio/pcm;rate=N` MIME type when it states one within
    /// ``SampleRates/serverAudio``; nil when it states none or another.
    public var pcmRate: Int? {
        if case .supported(let rate) = audioRate { return rate }
        return nil
    }
}

/// `FunctionCall` inside a model turn part or a `toolCall`.
public struct FunctionCall: Codable, Sendable, Hashable {
    public var id: String?
    public var name: String
    public var args: JSONValue?

    public init(id: String?, name: String, args: JSONValue?) {
        self.id = id
        self.name = name
        self.args = args
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.flexContainer(known: ["id", "name", "args", "partialArgs", "willContinue"])
        self.id = try c.flex(String.self, "id")
        self.name = try c.flex(String.self, "name") ?? ""
        self.args = try c.flex(JSONValue.self, "args")
    }
}

/// `FunctionResponse`: the device's answer to one call, matched by `id`.
public struct FunctionResponse: Codable, Sendable, Hashable {
    public var id: String
    public var name: String
    public var response: JSONValue
    /// `SILENT`, `WHEN_IDLE` or `INTERRUPT` for non-blocking functions.
    public var scheduling: String?
    /// True: more responses to the same call follow (a tool reporting progress); the last one says false.
    public var willContinue: Bool?

    public init(
        id: String,
        name: String,
        response: JSONValue,
        scheduling: String? = nil,
        willContinue: Bool? = nil
    ) {
        self.id = id
        self.name = name
        self.response = response
        self.scheduling = scheduling
        self.willContinue = willContinue
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.flexContainer(known: ["id", "name", "response", "scheduling", "willContinue", "parts"])
        self.id = try c.flex(String.self, "id") ?? ""
        self.name = try c.flex(String.self, "name") ?? ""
        self.response = try c.flex(JSONValue.self, "response") ?? .object([:])
        self.scheduling = try c.flex(String.self, "scheduling")
        self.willContinue = try c.flexBool("willContinue")
    }
}

/// `Part`: one piece of content.
public struct Part: Codable, Sendable, Hashable {
    public var text: String?
    public var inlineData: Blob?
    /// True for a thought summary (with `includeThoughts`).
    public var thought: Bool?
    public var functionCall: FunctionCall?
    public var functionResponse: FunctionResponse?
    /// An opaque signature of the model's reasoning: a model turn goes back into the history with it, as
    /// received.
    public var thoughtSignature: String?

    public init(
        text: String? = nil,
        inlineData: Blob? = nil,
        thought: Bool? = nil,
        functionCall: FunctionCall? = nil,
        functionResponse: FunctionResponse? = nil,
        thoughtSignature: String? = nil
    ) {
        self.text = text
        self.inlineData = inlineData
        self.thought = thought
        self.functionCall = functionCall
        self.functionResponse = functionResponse
        self.thoughtSignature = thoughtSignature
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.flexContainer(known: [
            "text", "inlineData", "thought", "functionCall", "functionResponse", "thoughtSignature",
            "executableCode", "codeExecutionResult", "fileData", "videoMetadata",
        ])
        self.text = try c.flex(String.self, "text")
        self.inlineData = try c.flex(Blob.self, "inlineData")
        self.thought = try c.flexBool("thought")
        self.functionCall = try c.flex(FunctionCall.self, "functionCall")
        self.functionResponse = try c.flex(FunctionResponse.self, "functionResponse")
        self.thoughtSignature = try c.flex(String.self, "thoughtSignature")
    }
}

/// `Content`: a role and its parts.
public struct Content: Codable, Sendable, Hashable {
    /// `user` or `model`; absent in system instructions.
    public var role: String?
    public var parts: [Part]

    public init(role: String? = nil, parts: [Part]) {
        self.role = role
        self.parts = parts
    }

    /// A content of one text part.
    public static func text(_ text: String, role: String? = nil) -> Content {
        Content(role: role, parts: [Part(text: text)])
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.flexContainer(known: ["role", "parts"])
        self.role = try c.flex(String.self, "role")
        self.parts = try c.flexArray(Part.self, "parts") ?? []
    }
}
