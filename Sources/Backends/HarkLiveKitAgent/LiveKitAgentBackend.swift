import HarkCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A LiveKit room with a voice agent as a backend (`livekit:`): the device joins a room, publishes its
/// echo-cancelled microphone, and plays the agent's audio track; the agent's state (`lk.agent.state`) and
/// transcripts (`lk.transcription`) come back. LiveKit's Rust core (`liblivekit_ffi.so`) does the media in a helper
/// process, `hark-livekit` (the optional package of the same name): `hark` itself never loads it.
public struct LiveKitAgentBackend: Backend {
    public static let name = "livekit"
    public static let summary = "a LiveKit room with a voice agent (livekit-agents), through LiveKit's Rust core"

    public static let settingKeys: [SettingKey] = [
        SettingKey(
            "token_url",
            .url(schemes: ["https", "http"]),
            help: "your backend's token endpoint (POST room_name, participant_identity ... -> server_url, "
                + "participant_token); with sandbox_id: the sandbox token server's URL"
        ),
        SettingKey(
            "token_key_file",
            .path,
            help: "a file holding the device's credential for the token endpoint (sent as Authorization: Bearer)"
        ),
        SettingKey(
            "sandbox_id",
            .text(limit: 200),
            help: "LiveKit Cloud's sandbox token server (development): the sandbox's id"
        ),
        SettingKey(
            "livekit_url",
            .url(schemes: ["wss", "ws", "https", "http"]),
            help:
                "the LiveKit server (wss://...): for tokens minted here, and when a token endpoint's answer names none"
        ),
        SettingKey(
            "api_key",
            .text(limit: 200),
            help: "development only: mint tokens on the device with this API key and the secret in api_secret_file"
        ),
        SettingKey("api_secret_file", .path, help: "a file holding the API secret that signs minted tokens"),
        SettingKey(
            "room",
            .text(limit: 128),
            help:
                "the room to join; unset: a new room for each session (IDENTITY-RANDOM); the kiosk: ROOM-RANDOM per visitor"
        ),
        SettingKey("identity", .text(limit: 128), help: "the device's identity in the room; unset: hark-HOSTNAME"),
        SettingKey("participant_name", .text(limit: 128), default: .text("Hark"), help: "the device's display name"),
        SettingKey(
            "agent_name",
            .text(limit: 128),
            help: "the agent to dispatch to the room (an agent registered with agent_name); unset: the project's"
        ),
        SettingKey(
            "pre_connect_audio",
            .flag,
            default: .flag(true),
            help: "send what the user says before the agent has joined (up to 10 s) when it arrives"
        ),
        SettingKey(
            "join_timeout",
            .duration(.seconds(1) ... .seconds(120)),
            default: .duration(.seconds(20)),
            help: "the longest a join (token, signalling, media) may take"
        ),
        .caFile,
        .allowInsecure,
    ]

    public static let apiSecret = BackendSecret(
        what: "LiveKit API secret",
        fileKey: "api_secret_file",
        credential: "livekit-api-secret",
        environment: "LIVEKIT_API_SECRET"
    )

    public static let tokenKey = BackendSecret(
        what: "token endpoint credential",
        fileKey: "token_key_file",
        credential: "livekit-token-key",
        environment: "LIVEKIT_TOKEN_KEY"
    )

    public static let secrets = [apiSecret, tokenKey]

    /// Push-to-talk is the device's: the microphone reaches the agent only while the button is held, and the agent's
    /// own turn detection ends the turn in the silence after the release.
    public static let capabilities: BackendCapabilities = [
        .manualActivity, .greetingFirst, .serverVoiceDetection, .serviceBargeIn,
    ]

    public static func need(_ secret: BackendSecret, _ settings: BackendSettings) -> SecretNeed {
        guard secret == apiSecret else { return .optional(why: "optional: sent to the token endpoint when given") }
        guard settings.text("api_key") != nil else { return .optional(why: "not needed: no api_key mints tokens here") }
        return .required
    }

    public static let details = """
        The room's work is done by the helper hark-livekit (with LiveKit's library, liblivekit_ffi.so), from \
        scripts/setup or the hark-livekit package. The token comes from your backend's --token-url (with \
        --token-key-file; its answer may name another server), LiveKit Cloud's --sandbox-id, or is minted with \
        --api-key and --api-secret-file (development only). What is said before the agent joins is sent to it when \
        it arrives (--pre-connect-audio). Exit 3 when the token is refused.
        """

    /// Whether the helper (`hark-livekit`, its own package) is installed and loads LiveKit's library, and its version:
    /// the helper is started to see it.
    public static func doctor(environment: [String: String]) async -> [DoctorItem] {
        let fix = "only the LiveKit backend needs it; every other backend works without it"
        let helper: LiveKitHelperProgram
        do {
            helper = try LiveKitHelperProgram.locate(environment: environment)
        } catch {
            return [DoctorItem("livekit", .warning, "\(error)", fix: fix)]
        }
        switch await helper.probe() {
        case .success(let library):
            return [DoctorItem("livekit", .ok, "\(helper.path) runs \(library)")]
        case .failure(let error):
            return [DoctorItem("livekit", .warning, "\(helper.path): \(error)", fix: fix)]
        }
    }

    public static func crossCheck(_ settings: BackendSettings) -> (key: String, problem: String)? {
        let endpoint = settings.text("token_url") != nil
        let sandbox = settings.text("sandbox_id") != nil
        let mint = settings.text("api_key") != nil
        if mint && (endpoint || sandbox) {
            return (
                "api_key",
                "set either a token server (token_url or sandbox_id) or api_key to mint tokens on the device, "
                    + "not both"
            )
        }
        if mint && settings.text("livekit_url") == nil {
            return (
                "livekit_url", "api_key mints tokens on the device: set livekit_url to the LiveKit server (wss://...)"
            )
        }
        return nil
    }

    /// Why the settings name no token source (checked when the backend is used: an unused section may be empty).
    static let noTokenSource =
        "where the device gets its token: set token_url (your backend), sandbox_id (LiveKit Cloud's sandbox, "
        + "for development) or api_key, api_secret_file and livekit_url (development only)"

    public static func advice(_ settings: BackendSettings) -> [(key: String, note: String)] {
        var notes: [(key: String, note: String)] = []
        if settings.text("api_key") != nil {
            notes.append(
                (
                    "api_key",
                    "tokens are minted on the device: fine for development, but whoever reads the API secret can "
                        + "join any room of the project; a product asks its backend (token_url)"
                )
            )
        }
        if settings.text("sandbox_id") != nil {
            notes.append(("sandbox_id", "the sandbox token server is for development; a product uses token_url"))
        }
        return notes
    }

    private let base: LiveKitAgentConfiguration
    private let settings: BackendSettings
    private let network: NetworkClients

    public init(context: BackendContext) throws(BackendSetupError) {
        let settings = context.settings
        self.settings = settings
        network = context.network
        if let (key, problem) = Self.crossCheck(settings) { throw BackendSetupError(key: key, problem) }
        if ["token_url", "sandbox_id", "api_key"].allSatisfy({ settings.text($0) == nil }) {
            throw BackendSetupError(key: "token_url", Self.noTokenSource)
        }
        let allowInsecure = settings.flag("allow_insecure")
        for key in ["token_url", "livekit_url"] {
            if let url = settings.text(key), let problem = EndpointPolicy.check(url: url, allowInsecure: allowInsecure)
            {
                throw BackendSetupError(key: key, problem)
            }
        }
        let helper = try LiveKitHelperProgram.locate(environment: context.environment)
        let source: LiveKitTokenSource
        if let apiKey = settings.text("api_key"), let url = settings.text("livekit_url") {
            guard let secret = try context.load(Self.apiSecret) else { throw Self.apiSecret.missing(in: Self.name) }
            source = .mint(
                serverURL: LiveKitTokenSource.webSocketURL(url),
                apiKey: apiKey,
                apiSecret: secret,
                lifetime: .seconds(6 * 3600)
            )
        } else if let sandbox = settings.text("sandbox_id") {
            source = .sandbox(
                url: settings.text("token_url") ?? LiveKitTokenSource.sandboxURL,
                id: Secret(sandbox)
            )
        } else {
            source = .endpoint(
                url: settings.text("token_url") ?? "",
                credential: try context.load(Self.tokenKey),
                serverURL: settings.text("livekit_url").map(LiveKitTokenSource.webSocketURL)
            )
        }
        var configuration = LiveKitAgentConfiguration(helper: helper, tokens: source)
        configuration.room = settings.text("room")
        configuration.identity = settings.text("identity") ?? Self.defaultIdentity(host: context.hostName)
        configuration.participantName = settings.text("participant_name") ?? "Hark"
        configuration.agentName = settings.text("agent_name")
        configuration.preConnectAudio = settings.optionalFlag("pre_connect_audio") ?? true
        configuration.joinTimeout = settings.duration("join_timeout") ?? .seconds(20)
        configuration.allowInsecure = allowInsecure
        configuration.link = LinkSettings(usage: context.usage)
        base = configuration
    }

    /// `hark-` and the host's name, in the characters an identity keeps readable.
    static func defaultIdentity(host: String) -> String {
        let kept = String(host.filter { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }.prefix(60))
        return "hark-" + (kept.isEmpty ? "device" : kept)
    }

    public func makeSession(_ request: SessionRequest) -> any VoiceSession {
        var configuration = base
        configuration.manualActivity = request.manualActivity
        configuration.newRoomEachSession = !request.carriesConversation
        return LiveKitAgentSession(
            configuration: configuration,
            http: network.http(settings.text("ca_file"), settings.flag("allow_insecure")),
            clock: request.clock,
            logger: request.logger,
            audioSent: request.audioSent
        )
    }

    /// The agent's audio comes at 24 kHz (the track's 48 kHz, resampled by the helper).
    public var outputSampleRate: Int { LiveKitAgentConfiguration.outputRate }

    /// Nothing outlives a session on the device: the room holds the conversation.
    public func forgetConversation() {}
}
