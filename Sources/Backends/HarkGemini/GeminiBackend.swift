import HarkBackendKit
import HarkCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The Gemini Live API as a backend: its section of the configuration (`gemini:`), its key, what it can do,
/// and sessions made from them.
public struct GeminiBackend: Backend {
    public static let name = "gemini"
    public static let summary = "Gemini Live API, native audio over WebSocket"

    /// Google's endpoint.
    public static let realEndpoint = "wss://generativelanguage.googleapis.com"
    /// The Live model used unless another is named: the one default of `hark run`, `hark converse` and the
    /// example configurations.
    public static let defaultModel = "gemini-3.8-live"

    public static let settingKeys: [SettingKey] = [
        SettingKey(
            "model",
            .text(required: true, limit: 200),
            default: .text(defaultModel),
            help: "the Live model (with or without models/)"
        ),
        SettingKey("endpoint", .url(schemes: ["ws", "wss"]), help: "a WebSocket base: a proxy or the simulator"),
        SettingKey(
            "api_version",
            .choice(LiveAPIVersion.allCases.map(\.rawValue)),
            default: .text("v1beta"),
            help: "the API version in the endpoint's path"
        ),
        SettingKey("voice", .text(limit: 100), help: "a prebuilt voice (Kore, Puck, ...); unset: the model's default"),
        SettingKey("language", .languageCode, help: "the language of speech (BCP-47), e.g. en-US"),
        SettingKey("system_instruction", .instruction, help: "what the agent is and how it talks"),
        SettingKey("api_key_file", .path, help: "a file holding the API key, readable only by the service"),
        SettingKey(
            "token_url",
            .url(schemes: ["http", "https"]),
            help: "fetch an ephemeral token per connection from your backend (no key on the device)"
        ),
        SettingKey(
            "mint_token",
            .flag,
            default: .flag(false),
            help: "mint ephemeral tokens from the key (development)"
        ),
        .caFile,
        SettingKey(
            "context_compression",
            .flag,
            default: .flag(true),
            help: "sliding-window compression (audio sessions end at about 15 minutes without it)"
        ),
        SettingKey("temperature", .decimal(0...2), help: "sampling temperature; unset: the model's default"),
        SettingKey(
            "thinking_budget",
            .number(-1...32768),
            help: "thinking tokens (0 off, -1 dynamic; 2.5 models only); unset: the model's default"
        ),
        SettingKey(
            "thinking_level",
            .choice(["low", "medium", "high"]),
            help: "background reasoning (gemini-3.8-live-extended-thinking only); unset: the model's default"
        ),
        SettingKey(
            "affective_dialog",
            .flag,
            help: "adapt the voice to the user's emotion (2.5 models only; v1alpha)"
        ),
        SettingKey(
            "proactive_audio",
            .flag,
            help: "let the model choose not to answer (2.5: v1alpha; always on from 3.8, where false is an error)"
        ),
        SettingKey(
            "transcription_languages",
            .languageCodes(count: 8),
            help: "languages the user speaks, comma-separated (ml-IN, en-IN); unset: detected (3.8)"
        ),
        SettingKey(
            "custom_vocabulary",
            .list(count: 100, length: 100),
            help: "words the transcripts should expect, comma-separated (names, taught words) (3.8)"
        ),
        SettingKey(
            "history_turns",
            .number(0...200),
            default: .number(20),
            help: "when a conversation cannot be resumed, this many recent turns seed the new one (0: none)"
        ),
        SettingKey(
            "history_characters",
            .number(0...100_000),
            default: .number(4000),
            help: "at most this many characters of them"
        ),
        .allowInsecure,
    ]

    public static let key = BackendSecret(
        what: "Gemini API key",
        fileKey: "api_key_file",
        credential: "gemini-api-key",
        environment: "GEMINI_API_KEY"
    )

    public static let secrets = [key]

    public static let capabilities: BackendCapabilities = [
        .deviceTools, .manualActivity, .resumableAcrossRestarts, .greetingFirst, .serverVoiceDetection,
        .serviceBargeIn,
    ]

    public static func crossCheck(_ settings: BackendSettings) -> (key: String, problem: String)? {
        if settings.text("token_url") != nil, settings.flag("mint_token") {
            return ("mint_token", "cannot be true together with gemini.token_url (the token server mints the tokens)")
        }
        // What the chosen model rejects is refused here, naming the key, never sent to the service.
        let model = settings.text("model") ?? defaultModel
        let profile = LiveModelProfile.forModel(model)
        if case .shutDown(let date) = profile.availability {
            return ("model", "\(model) was shut down on \(date) and refuses every connection; use \(defaultModel)")
        }
        if settings.number("thinking_budget") != nil, !profile.thinkingBudget {
            return (
                "thinking_budget",
                "\(model) takes no thinking budget (\(profile.family) has no thinkingBudget); remove the key"
                    + (profile.thinkingLevel ? " or use gemini.thinking_level" : "")
            )
        }
        if settings.text("thinking_level") != nil, !profile.thinkingLevel {
            return (
                "thinking_level",
                "\(model) takes no thinking level (only gemini-3.8-live-extended-thinking does); remove the key"
            )
        }
        if settings.flag("affective_dialog"), !profile.affectiveDialog {
            return ("affective_dialog", "\(model) has no affective dialog (removed from 3.8 on); remove the key")
        }
        if settings.optionalFlag("proactive_audio") == false, !profile.proactivitySetting {
            return (
                "proactive_audio",
                "\(model) always uses proactive audio and refuses a setup that turns it off; remove the key"
            )
        }
        return nil
    }

    public static func advice(_ settings: BackendSettings) -> [(key: String, note: String)] {
        let model = settings.text("model") ?? defaultModel
        let profile = LiveModelProfile.forModel(model)
        var notes: [(key: String, note: String)] = []
        if let advice = LiveModelProfile.advice(for: model) { notes.append(("model", advice)) }
        if !profile.transcriptionHints {
            for key in ["transcription_languages", "custom_vocabulary"] where settings.text(key) != nil {
                notes.append((key, "\(model) takes no transcription hints: not sent (\(defaultModel) does)"))
            }
        }
        return notes
    }

    public static func need(_ secret: BackendSecret, _ settings: BackendSettings) -> SecretNeed {
        // A token server hands out tokens; a simulator or a proxy that adds the key needs none.
        if let tokenURL = settings.text("token_url") {
            return .unused(why: "not on this device; ephemeral tokens come from \(URLRedaction.redact(tokenURL))")
        }
        guard (settings.text("endpoint") ?? realEndpoint).hasPrefix(realEndpoint) else {
            return .optional(why: "not needed: the endpoint is not the service's own")
        }
        return .required
    }

    public static let details = """
        With --token-url the device holds no key: your backend hands it an ephemeral token for each session \
        (--mint-token mints one from the key instead, for development). The key travels in the \
        x-goog-api-key header, never in the URL, and is never logged. If the service asks the client to move \
        (goAway) or the connection drops, the session resumes on a new connection without losing input.
        """

    private let base: GeminiLiveConfiguration
    private let settings: BackendSettings
    private let network: NetworkClients
    private let store: ResumptionStore?

    public init(context: BackendContext) throws(BackendSetupError) {
        let settings = context.settings
        self.settings = settings
        network = context.network
        let endpoint = settings.text("endpoint") ?? Self.realEndpoint
        let allowInsecure = settings.flag("allow_insecure")
        if let problem = EndpointPolicy.check(url: endpoint, allowInsecure: allowInsecure) {
            throw BackendSetupError(key: "endpoint", problem)
        }
        if let tokenURL = settings.text("token_url"),
            let problem = EndpointPolicy.check(url: tokenURL, allowInsecure: allowInsecure)
        {
            throw BackendSetupError(key: "token_url", problem)
        }
        if let (key, problem) = Self.crossCheck(settings) { throw BackendSetupError(key: key, problem) }
        let key = try context.load(Self.key)
        let authentication: LiveAuthentication
        if let tokenURL = settings.text("token_url") {
            authentication = .tokenServer(url: tokenURL, bearer: nil)
        } else if settings.flag("mint_token") {
            guard let key else {
                throw BackendSetupError(key: "mint_token", "minting tokens needs an API key (\(Self.whereTheKeyGoes))")
            }
            authentication = .mintedToken(apiKey: key)
        } else if let key {
            authentication = .apiKey(key)
        } else if Self.requires(Self.key, settings) {
            throw BackendSetupError(
                key: "api_key_file",
                "no Gemini API key: \(Self.whereTheKeyGoes)",
                missingSecret: true
            )
        } else {
            authentication = .apiKey(Secret("none"))
        }
        let model = settings.text("model") ?? Self.defaultModel
        let setup = Self.setup(model: model, settings: settings)
        var configuration = GeminiLiveConfiguration(
            endpoint: endpoint,
            apiVersion: LiveAPIVersion(rawValue: settings.text("api_version") ?? "") ?? .v1beta,
            authentication: authentication,
            setup: setup
        )
        switch context.usage {
        case .daemon(let stateDirectory, let pace):
            // File-backed audio at `pace` runs the device's time that much faster (0: as fast as it can be
            // read, ahead of real time): the margins and the backlog's pace follow it.
            configuration.confirmationMargin = pace == 0 ? .zero : .milliseconds(300)
            configuration.confirmationLag = pace == 0 ? .zero : .milliseconds(300) / pace
            configuration.catchUpRate = pace == 0 ? nil : 4 * pace
            store = ResumptionStore(path: stateDirectory + "/resumption.json", validity: .seconds(2 * 3600))
        case .oneShot(_, let fast):
            // Input ahead of real time: the newest audio before a handle is audio of the future, which the
            // service would hear twice (a phantom fragment of speech) if sent again.
            configuration.confirmationMargin = fast ? .zero : .milliseconds(300)
            configuration.confirmationLag = fast ? .zero : .milliseconds(300)
            configuration.catchUpRate = fast ? nil : 4
            store = nil
        }
        configuration.resumptionStore = store
        configuration.link = LinkSettings(usage: context.usage)
        configuration.history = ConversationHistory(
            turns: settings.number("history_turns") ?? 20,
            characters: settings.number("history_characters") ?? 4000
        )
        base = configuration
    }

    /// The setup message for `model` from the section's settings, holding only what the model's profile accepts
    /// (``crossCheck(_:)`` has refused what it would reject).
    public static func setup(model: String, settings: BackendSettings) -> Setup {
        let profile = LiveModelProfile.forModel(model)
        let voice = settings.text("voice")
        let language = settings.text("language")
        var thinking = ThinkingConfig()
        if profile.thinkingBudget { thinking.thinkingBudget = settings.number("thinking_budget") }
        // The service's enum is upper case (LOW, MEDIUM, HIGH), as the SDK sends it.
        if profile.thinkingLevel { thinking.thinkingLevel = settings.text("thinking_level")?.uppercased() }
        var transcription = AudioTranscriptionConfig()
        if profile.transcriptionHints {
            let languages = settings.list("transcription_languages")
            let vocabulary = settings.list("custom_vocabulary")
            transcription.languageCodes = languages.isEmpty ? nil : languages
            transcription.customVocabulary = vocabulary.isEmpty ? nil : vocabulary
        }
        var setup = Setup(
            model: model.hasPrefix("models/") ? model : "models/" + model,
            generationConfig: GenerationConfig(
                responseModalities: [.audio],
                temperature: settings.decimal("temperature"),
                speechConfig: (voice != nil || language != nil)
                    ? SpeechConfig(voiceName: voice, languageCode: language) : nil,
                thinkingConfig: thinking == ThinkingConfig() ? nil : thinking,
                enableAffectiveDialog: profile.affectiveDialog && settings.flag("affective_dialog") ? true : nil
            ),
            systemInstruction: settings.text("system_instruction").map { Content.text($0) },
            inputAudioTranscription: transcription,
            outputAudioTranscription: AudioTranscriptionConfig(),
            contextWindowCompression: settings.flag("context_compression") ? ContextWindowCompression() : nil
        )
        if profile.proactivitySetting, let proactive = settings.optionalFlag("proactive_audio") {
            setup.proactivity = Proactivity(proactiveAudio: proactive)
        }
        return setup
    }

    /// Where a key may come from, for a person.
    static let whereTheKeyGoes =
        "set gemini.api_key_file (hark converse: --api-key-file), install the systemd credential gemini-api-key, "
        + "set GEMINI_API_KEY, or use a token server (gemini.token_url, --token-url)"

    /// The session configuration a request gets (for tests and tools that drive a session directly).
    public func configuration(for request: SessionRequest) -> GeminiLiveConfiguration {
        var configuration = base
        if request.manualActivity {
            configuration.setup.realtimeInputConfig = RealtimeInputConfig(
                automaticActivityDetection: .init(disabled: true)
            )
        }
        configuration.initialHandle =
            request.fresh ? nil : store?.load(model: base.setup.model, now: Date().timeIntervalSince1970)
        configuration.resumeAfterGoAway = request.continueAfterSwitch
        if !request.carriesConversation { configuration.history = nil }
        return configuration
    }

    public func makeSession(_ request: SessionRequest) -> any VoiceSession {
        let caFile = settings.text("ca_file")
        let allowInsecure = settings.flag("allow_insecure")
        return GeminiLiveSession(
            configuration: configuration(for: request),
            transport: network.webSocket(caFile, allowInsecure),
            tokens: EphemeralTokenSource(http: network.http(caFile, allowInsecure)),
            tools: request.tools,
            clock: request.clock,
            logger: request.logger,
            audioSent: request.audioSent
        )
    }

    public func forgetConversation() {
        store?.clear()
    }
}
