import HarkBackendKit
import HarkCore

/// The cascade as a backend (`cascade:`): Sarvam speech-to-text → Gemini text → Sarvam text-to-speech, with the
/// device's tools through Gemini's function calling and its turns found by the speech-to-text service.
public struct CascadeBackend: Backend {
    public static let name = "cascade"
    public static let summary = "Sarvam speech-to-text -> Gemini text -> Sarvam text-to-speech, on the device"

    public static let settingKeys: [SettingKey] = [
        SettingKey(
            "sarvam_endpoint",
            .url(schemes: ["https", "http"]),
            help: "Sarvam's base URL (its sockets are derived: https -> wss); unset: api.sarvam.ai"
        ),
        SettingKey(
            "gemini_endpoint",
            .url(schemes: ["https", "http"]),
            help: "Gemini's base URL; unset: generativelanguage.googleapis.com"
        ),
        SettingKey(
            "sarvam_key_file",
            .path,
            help: "a file holding the Sarvam API key (sent only in the api-subscription-key header)"
        ),
        SettingKey("api_key_file", .path, help: "a file holding the Gemini API key"),
        SettingKey("stt_model", .text(limit: 100), default: .text("saaras:v3"), help: "the speech-to-text model"),
        SettingKey(
            "stt_language",
            .text(limit: 20),
            default: .text("unknown"),
            help: "what the user speaks (ml-IN, en-IN, ...); unknown: detected"
        ),
        SettingKey(
            "stt_mode",
            .choice(["transcribe", "translate", "verbatim", "translit", "codemix"]),
            default: .text("transcribe"),
            help: "what the transcript holds"
        ),
        SettingKey(
            "stt_high_sensitivity",
            .flag,
            default: .flag(false),
            help: "end turns after 0.5 s of silence instead of about 1 s"
        ),
        SettingKey("llm_model", .text(limit: 100), default: .text("gemini-3.8-flash"), help: "the text model"),
        SettingKey(
            "thinking_level",
            .choice(["MINIMAL", "LOW", "MEDIUM", "HIGH"]),
            default: .text("LOW"),
            help: "how much the model thinks before it writes (every thinking token delays the first sentence)"
        ),
        SettingKey("temperature", .decimal(0...2), help: "sampling temperature; unset: the model's default"),
        SettingKey("max_output_tokens", .number(1...65_536), help: "the longest reply; unset: the model's limit"),
        SettingKey("system_instruction", .instruction, help: "what the agent is and how it talks"),
        SettingKey("tts_model", .text(limit: 100), default: .text("bulbul:v3"), help: "the text-to-speech model"),
        SettingKey("speaker", .text(limit: 40), default: .text("kavitha"), help: "the voice (lowercase)"),
        SettingKey("tts_language", .languageCode, default: .text("ml-IN"), help: "the language the voice speaks"),
        SettingKey("pace", .decimal(0.5...2), default: .decimal(1), help: "speaking pace"),
        SettingKey(
            "sample_rate",
            .choice(["8000", "16000", "22050", "24000"]),
            default: .text("24000"),
            help: "the speech's sample rate"
        ),
        SettingKey(
            "min_buffer_size",
            .number(30...200),
            default: .number(50),
            help: "characters the speech service gathers before it speaks"
        ),
        SettingKey(
            "max_chunk_length",
            .number(50...500),
            default: .number(150),
            help: "the longest piece it synthesizes at once"
        ),
        SettingKey(
            "history_turns",
            .number(2...200),
            default: .number(20),
            help: "the turns of the conversation the text model is given"
        ),
        SettingKey(
            "history_characters",
            .number(100...200_000),
            default: .number(8000),
            help: "at most this many characters of them"
        ),
        .caFile,
        .allowInsecure,
    ]

    public static let sarvamKey = BackendSecret(
        what: "Sarvam API key",
        fileKey: "sarvam_key_file",
        credential: "sarvam-api-key",
        environment: "SARVAM_API_KEY"
    )

    public static let geminiKey = BackendSecret(
        what: "Gemini API key",
        fileKey: "api_key_file",
        credential: "gemini-api-key",
        environment: "GEMINI_API_KEY"
    )

    public static let secrets = [sarvamKey, geminiKey]

    public static let capabilities: BackendCapabilities = [
        .deviceTools, .manualActivity, .greetingFirst, .serverVoiceDetection, .serviceBargeIn,
    ]

    public static func need(_ secret: BackendSecret, _ settings: BackendSettings) -> SecretNeed {
        // A simulator or a proxy that adds the key needs none.
        let (key, real) =
            secret == sarvamKey
            ? ("sarvam_endpoint", CascadeConfiguration.sarvamRealEndpoint)
            : ("gemini_endpoint", CascadeConfiguration.geminiRealEndpoint)
        guard (settings.text(key) ?? real).hasPrefix(real) else {
            return .optional(why: "not needed: \(key) is not the service's own")
        }
        return .required
    }

    public static let details = """
        Speech-to-text and text-to-speech stream over WebSockets, the text model over HTTPS; --sarvam-endpoint and \
        --gemini-endpoint point them at hark-cascade-sim.
        """

    private let base: CascadeConfiguration
    private let settings: BackendSettings
    private let network: NetworkClients

    public init(context: BackendContext) throws(BackendSetupError) {
        let settings = context.settings
        self.settings = settings
        network = context.network
        let allowInsecure = settings.flag("allow_insecure")
        let sarvam = settings.text("sarvam_endpoint") ?? CascadeConfiguration.sarvamRealEndpoint
        let gemini = settings.text("gemini_endpoint") ?? CascadeConfiguration.geminiRealEndpoint
        for (key, url) in [("sarvam_endpoint", sarvam), ("gemini_endpoint", gemini)] {
            if let problem = EndpointPolicy.check(url: url, allowInsecure: allowInsecure) {
                throw BackendSetupError(key: key, problem)
            }
        }
        var keys: [Secret] = []
        for secret in Self.secrets {
            if let key = try context.load(secret) {
                keys.append(key)
            } else if Self.requires(secret, settings) {
                throw secret.missing(in: Self.name)
            } else {
                keys.append(Secret("none"))
            }
        }
        var configuration = CascadeConfiguration(
            sarvamEndpoint: sarvam,
            geminiEndpoint: gemini,
            sarvamKey: keys[0],
            geminiKey: keys[1]
        )
        configuration.geminiKeyOrigin =
            "cascade.\(Self.geminiKey.fileKey) (hark converse: \(SettingKey.flagName(Self.geminiKey.fileKey))), "
            + "the systemd credential \(Self.geminiKey.credential) or \(Self.geminiKey.environment)"
        configuration.sttModel = settings.text("stt_model") ?? configuration.sttModel
        configuration.sttLanguage = settings.text("stt_language") ?? configuration.sttLanguage
        configuration.sttMode = settings.text("stt_mode") ?? configuration.sttMode
        configuration.sttHighSensitivity = settings.flag("stt_high_sensitivity")
        configuration.llmModel = settings.text("llm_model") ?? configuration.llmModel
        configuration.thinkingLevel = settings.text("thinking_level")
        configuration.temperature = settings.decimal("temperature")
        configuration.maxOutputTokens = settings.number("max_output_tokens")
        configuration.systemInstruction = settings.text("system_instruction")
        configuration.voice = SpeechVoice(
            model: settings.text("tts_model") ?? "bulbul:v3",
            language: settings.text("tts_language") ?? "ml-IN",
            speaker: (settings.text("speaker") ?? "kavitha").lowercased(),
            pace: settings.decimal("pace") ?? 1,
            sampleRate: Int(settings.text("sample_rate") ?? "") ?? 24_000,
            minBufferSize: settings.number("min_buffer_size") ?? 50,
            maxChunkLength: settings.number("max_chunk_length") ?? 150
        )
        configuration.historyTurns = settings.number("history_turns") ?? 20
        configuration.historyCharacters = settings.number("history_characters") ?? 8000
        configuration.link = LinkSettings(usage: context.usage)
        base = configuration
    }

    public func makeSession(_ request: SessionRequest) -> any VoiceSession {
        let caFile = settings.text("ca_file")
        let allowInsecure = settings.flag("allow_insecure")
        return CascadeSession(
            configuration: base,
            transport: network.webSocket(caFile, allowInsecure),
            http: network.http(caFile, allowInsecure),
            tools: request.tools,
            clock: request.clock,
            logger: request.logger,
            audioSent: request.audioSent
        )
    }

    /// The speech's sample rate (`sample_rate`): the synthesized audio comes at it.
    public var outputSampleRate: Int { base.voice.sampleRate }

    /// Nothing outlives a session: its history is in memory.
    public func forgetConversation() {}
}
