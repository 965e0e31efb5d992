import HarkBackendKit
import HarkCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// `responseModalities` values.
public struct Modality: OpenEnum {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let audio: Modality = "AUDIO"
    public static let text: Modality = "TEXT"
}

/// `startOfSpeechSensitivity` values.
public struct StartSensitivity: OpenEnum {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let unspecified: Self = "START_SENSITIVITY_UNSPECIFIED"
    public static let high: Self = "START_SENSITIVITY_HIGH"
    public static let low: Self = "START_SENSITIVITY_LOW"
}

/// `endOfSpeechSensitivity` values.
public struct EndSensitivity: OpenEnum {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let unspecified: Self = "END_SENSITIVITY_UNSPECIFIED"
    public static let high: Self = "END_SENSITIVITY_HIGH"
    public static let low: Self = "END_SENSITIVITY_LOW"
}

/// `activityHandling` values.
public struct ActivityHandling: OpenEnum {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let startOfActivityInterrupts: Self = "START_OF_ACTIVITY_INTERRUPTS"
    public static let noInterruption: Self = "NO_INTERRUPTION"
}

/// `turnCoverage` values.
public struct TurnCoverage: OpenEnum {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let onlyActivity: Self = "TURN_INCLUDES_ONLY_ACTIVITY"
    public static let allInput: Self = "TURN_INCLUDES_ALL_INPUT"
}

/// `speechConfig`.
public struct SpeechConfig: Codable, Sendable, Hashable {
    public struct VoiceConfig: Codable, Sendable, Hashable {
        public struct Prebuilt: Codable, Sendable, Hashable {
            public var voiceName: String
            public init(voiceName: String) { self.voiceName = voiceName }
            public init(from decoder: any Decoder) throws {
                let c = try decoder.flexContainer(known: ["voiceName"])
                self.voiceName = try c.flex(String.self, "voiceName") ?? ""
            }
        }
        public var prebuiltVoiceConfig: Prebuilt?
        public init(prebuiltVoiceConfig: Prebuilt?) { self.prebuiltVoiceConfig = prebuiltVoiceConfig }
        public init(from decoder: any Decoder) throws {
            let c = try decoder.flexContainer(known: ["prebuiltVoiceConfig"])
            self.prebuiltVoiceConfig = try c.flex(Prebuilt.self, "prebuiltVoiceConfig")
        }
    }
    public var voiceConfig: VoiceConfig?
    public var languageCode: String?

    public init(voiceName: String?, languageCode: String? = nil) {
        self.voiceConfig = voiceName.map { VoiceConfig(prebuiltVoiceConfig: .init(voiceName: $0)) }
        self.languageCode = languageCode
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.flexContainer(known: ["voiceConfig", "languageCode", "multiSpeakerVoiceConfig"])
        self.voiceConfig = try c.flex(VoiceConfig.self, "voiceConfig")
        self.languageCode = try c.flex(String.self, "languageCode")
    }
}

/// `thinkingConfig`.
public struct ThinkingConfig: Codable, Sendable, Hashable {
    /// Thinking tokens (2.5 models only; gone from 3.5 on).
    public var thinkingBudget: Int?
    public var includeThoughts: Bool?
    /// `low`, `medium` or `high` (the extended-thinking 3.8 model).
    public var thinkingLevel: String?

    public init(thinkingBudget: Int? = nil, includeThoughts: Bool? = nil, thinkingLevel: String? = nil) {
        self.thinkingBudget = thinkingBudget
        self.includeThoughts = includeThoughts
        self.thinkingLevel = thinkingLevel
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.flexContainer(known: ["thinkingBudget", "includeThoughts", "thinkingLevel"])
        self.thinkingBudget = try c.flexInt("thinkingBudget").map { Int($0) }
        self.includeThoughts = try c.flexBool("includeThoughts")
        self.thinkingLevel = try c.flex(String.self, "thinkingLevel")
    }
}

/// `generationConfig`.
public struct GenerationConfig: Codable, Sendable, Hashable {
    public var responseModalities: [Modality]?
    public var temperature: Double?
    public var topP: Double?
    public var topK: Int?
    public var maxOutputTokens: Int?
    public var seed: Int?
    public var candidateCount: Int?
    public var presencePenalty: Double?
    public var frequencyPenalty: Double?
    public var mediaResolution: String?
    public var speechConfig: SpeechConfig?
    public var thinkingConfig: ThinkingConfig?
    public var enableAffectiveDialog: Bool?

    public init(
        responseModalities: [Modality]? = [.audio],
        temperature: Double? = nil,
        topP: Double? = nil,
        topK: Int? = nil,
        maxOutputTokens: Int? = nil,
        seed: Int? = nil,
        speechConfig: SpeechConfig? = nil,
        thinkingConfig: ThinkingConfig? = nil,
        enableAffectiveDialog: Bool? = nil
    ) {
        self.responseModalities = responseModalities
        self.temperature = temperature
        self.topP = topP
        self.topK = topK
        self.maxOutputTokens = maxOutputTokens
        self.seed = seed
        self.speechConfig = speechConfig
        self.thinkingConfig = thinkingConfig
        self.enableAffectiveDialog = enableAffectiveDialog
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.flexContainer(known: [
            "responseModalities", "temperature", "topP", "topK", "maxOutputTokens", "seed", "candidateCount",
            "presencePenalty", "frequencyPenalty", "mediaResolution", "speechConfig", "thinkingConfig",
            "enableAffectiveDialog",
        ])
        self.responseModalities = try c.flexArray(Modality.self, "responseModalities")
        self.temperature = try c.flexDouble("temperature")
        self.topP = try c.flexDouble("topP")
        self.topK = try c.flexInt("topK").map { Int($0) }
        self.maxOutputTokens = try c.flexInt("maxOutputTokens").map { Int($0) }
        self.seed = try c.flexInt("seed").map { Int($0) }
        self.candidateCount = try c.flexInt("candidateCount").map { Int($0) }
        self.presencePenalty = try c.flexDouble("presencePenalty")
        self.frequencyPenalty = try c.flexDouble("frequencyPenalty")
        self.mediaResolution = try c.flex(String.self, "mediaResolution")
        self.speechConfig = try c.flex(SpeechConfig.self, "speechConfig")
        self.thinkingConfig = try c.flex(ThinkingConfig.self, "thinkingConfig")
        self.enableAffectiveDialog = try c.flexBool("enableAffectiveDialog")
    }
}

/// `FunctionDeclaration`.
public struct FunctionDeclaration: Codable, Sendable, Hashable {
    public var name: String
    public var description: String?
    /// JSON schema of the arguments (kept verbatim).
    public var parameters: JSONValue?
    /// A full JSON Schema of the arguments (an MCP tool's `inputSchema`), instead of ``parameters``.
    public var parametersJsonSchema: JSONValue?
    /// `BLOCKING` (default) or `NON_BLOCKING`.
    public var behavior: String?

    public init(
        name: String,
        description: String?,
        parameters: JSONValue?,
        parametersJsonSchema: JSONValue? = nil,
        behavior: String? = nil
    ) {
        self.name = name
        self.description = description
        self.parameters = parameters
        self.parametersJsonSchema = parametersJsonSchema
        self.behavior = behavior
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.flexContainer(known: [
            "name", "description", "parameters", "parametersJsonSchema", "behavior", "response",
            "responseJsonSchema",
        ])
        self.name = try c.flex(String.self, "name") ?? ""
        self.description = try c.flex(String.self, "description")
        self.parameters = try c.flex(JSONValue.self, "parameters")
        self.parametersJsonSchema = try c.flex(JSONValue.self, "parametersJsonSchema")
        self.behavior = try c.flex(String.self, "behavior")
    }
}

/// `Tool`: function declarations or a built-in tool such as `googleSearch`.
public struct Tool: Codable, Sendable, Hashable {
    public var functionDeclarations: [FunctionDeclaration]?
    public var googleSearch: JSONValue?
    public var codeExecution: JSONValue?

    public init(functionDeclarations: [FunctionDeclaration]? = nil, googleSearch: JSONValue? = nil) {
        self.functionDeclarations = functionDeclarations
        self.googleSearch = googleSearch
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.flexContainer(known: [
            "functionDeclarations", "googleSearch", "codeExecution", "googleSearchRetrieval", "urlContext",
        ])
        self.functionDeclarations = try c.flexArray(FunctionDeclaration.self, "functionDeclarations")
        self.googleSearch = try c.flex(JSONValue.self, "googleSearch")
        self.codeExecution = try c.flex(JSONValue.self, "codeExecution")
    }
}

/// `realtimeInputConfig`.
public struct RealtimeInputConfig: Codable, Sendable, Hashable {
    /// `automaticActivityDetection`: the service's own voice activity detection.
    public struct AutomaticActivityDetection: Codable, Sendable, Hashable {
        public var disabled: Bool?
        public var startOfSpeechSensitivity: StartSensitivity?
        public var endOfSpeechSensitivity: EndSensitivity?
        public var prefixPaddingMs: Int?
        public var silenceDurationMs: Int?

        public init(
            disabled: Bool? = nil,
            startOfSpeechSensitivity: StartSensitivity? = nil,
            endOfSpeechSensitivity: EndSensitivity? = nil,
            prefixPaddingMs: Int? = nil,
            silenceDurationMs: Int? = nil
        ) {
            self.disabled = disabled
            self.startOfSpeechSensitivity = startOfSpeechSensitivity
            self.endOfSpeechSensitivity = endOfSpeechSensitivity
            self.prefixPaddingMs = prefixPaddingMs
            self.silenceDurationMs = silenceDurationMs
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.flexContainer(known: [
                "disabled", "startOfSpeechSensitivity", "endOfSpeechSensitivity", "prefixPaddingMs",
                "silenceDurationMs",
            ])
            self.disabled = try c.flexBool("disabled")
            self.startOfSpeechSensitivity = try c.flex(StartSensitivity.self, "startOfSpeechSensitivity")
            self.endOfSpeechSensitivity = try c.flex(EndSensitivity.self, "endOfSpeechSensitivity")
            self.prefixPaddingMs = try c.flexInt("prefixPaddingMs").map { Int($0) }
            self.silenceDurationMs = try c.flexInt("silenceDurationMs").map { Int($0) }
        }
    }

    public var automaticActivityDetection: AutomaticActivityDetection?
    public var activityHandling: ActivityHandling?
    public var turnCoverage: TurnCoverage?

    public init(
        automaticActivityDetection: AutomaticActivityDetection? = nil,
        activityHandling: ActivityHandling? = nil,
        turnCoverage: TurnCoverage? = nil
    ) {
        self.automaticActivityDetection = automaticActivityDetection
        self.activityHandling = activityHandling
        self.turnCoverage = turnCoverage
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.flexContainer(known: ["automaticActivityDetection", "activityHandling", "turnCoverage"])
        self.automaticActivityDetection = try c.flex(AutomaticActivityDetection.self, "automaticActivityDetection")
        self.activityHandling = try c.flex(ActivityHandling.self, "activityHandling")
        self.turnCoverage = try c.flex(TurnCoverage.self, "turnCoverage")
    }

    /// True when the client marks activity itself (`activityStart` / `activityEnd`).
    public var isManualActivity: Bool { automaticActivityDetection?.disabled == true }
}

/// `sessionResumption`: `{}` for a new resumable session, or `{handle}` to resume.
public struct SessionResumptionConfig: Codable, Sendable, Hashable {
    public var handle: String?
    public var transparent: Bool?

    public init(handle: String? = nil) { self.handle = handle }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.flexContainer(known: ["handle", "transparent"])
        self.handle = try c.flex(String.self, "handle")
        self.transparent = try c.flexBool("transparent")
    }
}

/// `contextWindowCompression`: without it audio sessions end at ~15 minutes.
public struct ContextWindowCompression: Codable, Sendable, Hashable {
    public struct SlidingWindow: Codable, Sendable, Hashable {
        public var targetTokens: Int64?
        public init(targetTokens: Int64? = nil) { self.targetTokens = targetTokens }
        public init(from decoder: any Decoder) throws {
            let c = try decoder.flexContainer(known: ["targetTokens"])
            self.targetTokens = try c.flexInt("targetTokens")
        }
    }
    public var triggerTokens: Int64?
    public var slidingWindow: SlidingWindow?

    public init(triggerTokens: Int64? = nil, slidingWindow: SlidingWindow? = SlidingWindow()) {
        self.triggerTokens = triggerTokens
        self.slidingWindow = slidingWindow
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.flexContainer(known: ["triggerTokens", "slidingWindow"])
        self.triggerTokens = try c.flexInt("triggerTokens")
        self.slidingWindow = try c.flex(SlidingWindow.self, "slidingWindow")
    }

}

/// `proactivity` (v1alpha).
public struct Proactivity: Codable, Sendable, Hashable {
    public var proactiveAudio: Bool?
    public init(proactiveAudio: Bool?) { self.proactiveAudio = proactiveAudio }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.flexContainer(known: ["proactiveAudio"])
        self.proactiveAudio = try c.flexBool("proactiveAudio")
    }
}

/// `setup`: the first and only first client message.
public struct Setup: Codable, Sendable, Hashable {
    /// `models/{id}`.
    public var model: String
    public var generationConfig: GenerationConfig?
    public var systemInstruction: Content?
    public var tools: [Tool]?
    public var realtimeInputConfig: RealtimeInputConfig?
    public var inputAudioTranscription: AudioTranscriptionConfig?
    public var outputAudioTranscription: AudioTranscriptionConfig?
    public var sessionResumption: SessionResumptionConfig?
    public var contextWindowCompression: ContextWindowCompression?
    public var proactivity: Proactivity?
    /// Seeding a fresh session with the conversation so far (3.8): see ``HistoryConfig``.
    public var historyConfig: HistoryConfig?

    public init(
        model: String,
        generationConfig: GenerationConfig? = GenerationConfig(),
        systemInstruction: Content? = nil,
        tools: [Tool]? = nil,
        realtimeInputConfig: RealtimeInputConfig? = nil,
        inputAudioTranscription: AudioTranscriptionConfig? = AudioTranscriptionConfig(),
        outputAudioTranscription: AudioTranscriptionConfig? = AudioTranscriptionConfig(),
        sessionResumption: SessionResumptionConfig? = SessionResumptionConfig(),
        contextWindowCompression: ContextWindowCompression? = ContextWindowCompression(),
        proactivity: Proactivity? = nil,
        historyConfig: HistoryConfig? = nil
    ) {
        self.model = model
        self.generationConfig = generationConfig
        self.systemInstruction = systemInstruction
        self.tools = tools
        self.realtimeInputConfig = realtimeInputConfig
        self.inputAudioTranscription = inputAudioTranscription
        self.outputAudioTranscription = outputAudioTranscription
        self.sessionResumption = sessionResumption
        self.contextWindowCompression = contextWindowCompression
        self.proactivity = proactivity
        self.historyConfig = historyConfig
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.flexContainer(known: [
            "model", "generationConfig", "systemInstruction", "tools", "realtimeInputConfig",
            "inputAudioTranscription", "outputAudioTranscription", "sessionResumption", "contextWindowCompression",
            "proactivity", "explicitVadSignal", "historyConfig", "avatarConfig", "translationConfig",
        ])
        self.model = try c.flex(String.self, "model") ?? ""
        self.generationConfig = try c.flex(GenerationConfig.self, "generationConfig")
        self.systemInstruction = try c.flex(Content.self, "systemInstruction")
        self.tools = try c.flexArray(Tool.self, "tools")
        self.realtimeInputConfig = try c.flex(RealtimeInputConfig.self, "realtimeInputConfig")
        self.inputAudioTranscription = try c.flex(AudioTranscriptionConfig.self, "inputAudioTranscription")
        self.outputAudioTranscription = try c.flex(AudioTranscriptionConfig.self, "outputAudioTranscription")
        self.sessionResumption = try c.flex(SessionResumptionConfig.self, "sessionResumption")
        self.contextWindowCompression = try c.flex(ContextWindowCompression.self, "contextWindowCompression")
        self.proactivity = try c.flex(Proactivity.self, "proactivity")
        self.historyConfig = try c.flex(HistoryConfig.self, "historyConfig")
    }
}

/// `inputAudioTranscription` / `outputAudioTranscription`: `{}` asks for transcripts; the 3.8 models also take
/// language hints and domain words.
public struct AudioTranscriptionConfig: Codable, Sendable, Hashable {
    /// BCP-47 codes of the languages spoken (empty or absent: detected).
    public var languageCodes: [String]?
    /// Words and phrases the recognizer should expect (names, words a tutor teaches).
    public var customVocabulary: [String]?

    public init(languageCodes: [String]? = nil, customVocabulary: [String]? = nil) {
        self.languageCodes = languageCodes
        self.customVocabulary = customVocabulary
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.flexContainer(known: [
            "languageCodes", "customVocabulary", "languageAuto", "languageHints", "adaptationPhrases",
            "wordTimestamp", "diarization", "mode", "sourceText",
        ])
        self.languageCodes = try c.flexArray(String.self, "languageCodes")
        self.customVocabulary = try c.flexArray(String.self, "customVocabulary")
    }
}

/// `historyConfig`: with `initialHistoryInClientContent`, the service first takes `clientContent` turns (user
/// and model) without answering, until one with `turnComplete: true`.
public struct HistoryConfig: Codable, Sendable, Hashable {
    public var initialHistoryInClientContent: Bool?

    public init(initialHistoryInClientContent: Bool? = true) {
        self.initialHistoryInClientContent = initialHistoryInClientContent
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.flexContainer(known: ["initialHistoryInClientContent"])
        self.initialHistoryInClientContent = try c.flexBool("initialHistoryInClientContent")
    }
}

/// `realtimeInput`: exactly one of its fields per message.
public struct RealtimeInput: Codable, Sendable, Hashable {
    public var audio: Blob?
    public var video: Blob?
    public var text: String?
    public var activityStart: Empty?
    public var activityEnd: Empty?
    public var audioStreamEnd: Bool?
    /// Deprecated list form of audio/video chunks; still accepted by the service.
    public var mediaChunks: [Blob]?

    public init(
        audio: Blob? = nil,
        video: Blob? = nil,
        text: String? = nil,
        activityStart: Empty? = nil,
        activityEnd: Empty? = nil,
        audioStreamEnd: Bool? = nil
    ) {
        self.audio = audio
        self.video = video
        self.text = text
        self.activityStart = activityStart
        self.activityEnd = activityEnd
        self.audioStreamEnd = audioStreamEnd
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.flexContainer(known: [
            "audio", "video", "text", "activityStart", "activityEnd", "audioStreamEnd", "mediaChunks",
        ])
        self.audio = try c.flex(Blob.self, "audio")
        self.video = try c.flex(Blob.self, "video")
        self.text = try c.flex(String.self, "text")
        self.activityStart = try c.flex(Empty.self, "activityStart")
        self.activityEnd = try c.flex(Empty.self, "activityEnd")
        self.audioStreamEnd = try c.flexBool("audioStreamEnd")
        self.mediaChunks = try c.flexArray(Blob.self, "mediaChunks")
    }
}

/// `clientContent`: whole turns; interrupts the current generation.
public struct ClientContent: Codable, Sendable, Hashable {
    public var turns: [Content]?
    public var turnComplete: Bool?

    public init(turns: [Content]?, turnComplete: Bool?) {
        self.turns = turns
        self.turnComplete = turnComplete
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.flexContainer(known: ["turns", "turnComplete"])
        self.turns = try c.flexArray(Content.self, "turns")
        self.turnComplete = try c.flexBool("turnComplete")
    }
}

/// `toolResponse`.
public struct ToolResponse: Codable, Sendable, Hashable {
    public var functionResponses: [FunctionResponse]

    public init(functionResponses: [FunctionResponse]) { self.functionResponses = functionResponses }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.flexContainer(known: ["functionResponses"])
        self.functionResponses = try c.flexArray(FunctionResponse.self, "functionResponses") ?? []
    }
}

/// `contextUpdate` (google-genai's `LiveClientContextUpdate`): replaces, mid-session, the fields it sets (a `tools`
/// list replaces the whole earlier list), in order with the rest of the input.
public struct ContextUpdate: Codable, Sendable, Hashable {
    public var systemInstruction: Content?
    public var tools: [Tool]?

    public init(systemInstruction: Content? = nil, tools: [Tool]? = nil) {
        self.systemInstruction = systemInstruction
        self.tools = tools
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.flexContainer(known: ["systemInstruction", "tools"])
        self.systemInstruction = try c.flex(Content.self, "systemInstruction")
        self.tools = try c.flexArray(Tool.self, "tools")
    }
}

/// A client → server message: exactly one top-level key.
public enum ClientMessage: Sendable, Hashable {
    case setup(Setup)
    case clientContent(ClientContent)
    case realtimeInput(RealtimeInput)
    case toolResponse(ToolResponse)
    /// Tools or the instruction changed while the session is open (models that take it: ``LiveModelProfile``).
    case contextUpdate(ContextUpdate)
}

extension ClientMessage: Codable {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.flexContainer(known: [
            "setup", "clientContent", "realtimeInput", "toolResponse", "contextUpdate",
        ])
        var found: [ClientMessage] = []
        if let value = try c.flex(Setup.self, "setup") { found.append(.setup(value)) }
        if let value = try c.flex(ClientContent.self, "clientContent") { found.append(.clientContent(value)) }
        if let value = try c.flex(RealtimeInput.self, "realtimeInput") { found.append(.realtimeInput(value)) }
        if let value = try c.flex(ToolResponse.self, "toolResponse") { found.append(.toolResponse(value)) }
        if let value = try c.flex(ContextUpdate.self, "contextUpdate") { found.append(.contextUpdate(value)) }
        guard found.count == 1, let message = found.first else {
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: decoder.codingPath,
                    debugDescription: found.isEmpty
                        ? "no known top-level field (setup, clientContent, realtimeInput, toolResponse, contextUpdate)"
                        : "more than one top-level field"
                )
            )
        }
        self = message
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: FlexKey.self)
        switch self {
        case .setup(let value): try c.encode(value, forKey: FlexKey("setup"))
        case .clientContent(let value): try c.encode(value, forKey: FlexKey("clientContent"))
        case .realtimeInput(let value): try c.encode(value, forKey: FlexKey("realtimeInput"))
        case .toolResponse(let value): try c.encode(value, forKey: FlexKey("toolResponse"))
        case .contextUpdate(let value): try c.encode(value, forKey: FlexKey("contextUpdate"))
        }
    }
}
