import HarkBackendKit
import HarkCore

/// Datagrid Voice as a backend: its section of the configuration (`datagrid:`), its key, what it can do, and
/// sessions made from them. Its agent runs its tools on the service, so the device's tools are not offered.
public struct DatagridBackend: Backend {
    public static let name = "datagrid"
    public static let summary = "Datagrid Voice agent over WebSocket (REST hand-off, tools run on the service)"

    public static let settingKeys: [SettingKey] = [
        SettingKey(
            "endpoint",
            .url(schemes: ["https", "http", "wss", "ws"]),
            help: "the REST base (http(s)://) or WebSocket base: a proxy or the simulator"
        ),
        SettingKey("agent_id", .text(limit: 200), help: "the agent to talk to; unset: the service's default agent"),
        SettingKey("voice_preset", .text(limit: 100), help: "the agent's voice"),
        SettingKey("teamspace", .text(limit: 200), help: "sent as Datagrid-Teamspace on the hand-off"),
        SettingKey("system_prompt", .instruction, help: "the agent's system prompt; unset: the agent's own"),
        SettingKey("api_key_file", .path, help: "a file holding the API key, readable only by the service"),
        SettingKey(
            "direct",
            .flag,
            default: .flag(false),
            help: "connect with the key in the WebSocket URL (redacted in logs) instead of the REST hand-off"
        ),
        SettingKey("silent_start", .flag, help: "skip the agent's greeting; unset: it greets only in kiosk mode"),
        SettingKey(
            "resume_within",
            .duration(.zero...(.seconds(30 * 24 * 3600))),
            default: .duration(.seconds(24 * 3600)),
            help: "a restarted device continues the conversation it was in if it ended less than this ago (0: never)"
        ),
        .caFile,
        .allowInsecure,
    ]

    public static let key = BackendSecret(
        what: "Datagrid API key",
        fileKey: "api_key_file",
        credential: "datagrid-api-key",
        environment: "DATAGRID_API_KEY"
    )

    public static let secrets = [key]

    public static let capabilities: BackendCapabilities = [
        .resumableAcrossRestarts, .greetingFirst, .serverVoiceDetection, .serviceBargeIn,
    ]

    public static func need(_ secret: BackendSecret, _ settings: BackendSettings) -> SecretNeed {
        let base = settings.text("endpoint") ?? DatagridConfiguration.realBaseURL
        guard
            base.hasPrefix(DatagridConfiguration.realBaseURL)
                || base.hasPrefix(DatagridConfiguration.realWebSocketBaseURL)
        else { return .optional(why: "not needed: the endpoint is not the service's own") }
        return .required
    }

    public static let details = """
        --system-instruction is the agent's system prompt, --greeting a first text turn. Each connection starts \
        with POST /v1/voice \
        (key in the Authorization header) and opens the WebSocket URL it returns; --direct (or a service without \
        that endpoint) connects with the key as token in the URL, which is then only logged redacted. --endpoint \
        is the REST base, e.g. http://127.0.0.1:PORT of hark-datagrid-sim. Dropped connections continue the same \
        conversation.
        """

    private let base: DatagridConfiguration
    private let settings: BackendSettings
    private let network: NetworkClients
    private let store: ResumptionStore?
    private let oneShot: Bool

    public init(context: BackendContext) throws(BackendSetupError) {
        let settings = context.settings
        self.settings = settings
        network = context.network
        let endpoint = settings.text("endpoint") ?? DatagridConfiguration.realBaseURL
        if let problem = EndpointPolicy.check(url: endpoint, allowInsecure: settings.flag("allow_insecure")) {
            throw BackendSetupError(key: "endpoint", problem)
        }
        let key = try context.load(Self.key)
        guard key != nil || !Self.requires(Self.key, settings) else {
            throw BackendSetupError(
                key: "api_key_file",
                "no Datagrid API key: set datagrid.api_key_file (hark converse: --api-key-file), install the systemd "
                    + "credential datagrid-api-key, or set DATAGRID_API_KEY",
                missingSecret: true
            )
        }
        let restBase = endpoint.hasPrefix("ws") ? "http" + endpoint.dropFirst(2) : endpoint
        var configuration = DatagridConfiguration(
            apiKey: key ?? Secret("none"),
            baseURL: restBase,
            webSocketBaseURL: DatagridConfiguration.webSocketBase(for: endpoint),
            mode: settings.flag("direct") ? .direct : .handoff,
            teamspace: settings.text("teamspace"),
            start: DatagridStart(
                agentId: settings.text("agent_id"),
                config: settings.text("system_prompt").map { DatagridStart.Config(systemPrompt: $0) },
                voiceConfig: DatagridStart.VoiceConfig(
                    inputTranscription: true,
                    outputTranscription: true,
                    voicePreset: settings.text("voice_preset")
                )
            )
        )
        switch context.usage {
        case .daemon(let stateDirectory, _):
            let validity = settings.duration("resume_within") ?? .seconds(24 * 3600)
            store =
                validity > .zero
                ? ResumptionStore(path: stateDirectory + "/datagrid-conversation.json", validity: validity) : nil
            oneShot = false
        case .oneShot:
            store = nil
            oneShot = true
        }
        configuration.conversationStore = store
        configuration.link = LinkSettings(usage: context.usage)
        base = configuration
    }

    /// The session configuration a request gets.
    public func configuration(for request: SessionRequest) -> DatagridConfiguration {
        var configuration = base
        // The agent greets unless told not to: the daemon lets it greet only where the device greets first (the
        // kiosk); a one-shot run leaves it to the service unless told.
        let silent: Bool? =
            settings["silent_start"] != nil ? settings.flag("silent_start") : (oneShot ? nil : !request.greetsFirst)
        configuration.start.voiceConfig?.silentStart = silent
        return configuration
    }

    public func makeSession(_ request: SessionRequest) -> any VoiceSession {
        let caFile = settings.text("ca_file")
        let allowInsecure = settings.flag("allow_insecure")
        // A new conversation: the one kept is not continued (the new one's id is kept instead).
        if request.fresh { store?.clear() }
        return DatagridSession(
            configuration: configuration(for: request),
            transport: network.webSocket(caFile, allowInsecure),
            http: network.http(caFile, allowInsecure),
            clock: request.clock,
            logger: request.logger,
            audioSent: request.audioSent
        )
    }

    public func forgetConversation() {
        store?.clear()
    }
}
