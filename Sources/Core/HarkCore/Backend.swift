import Logging

/// What a backend can do, so the appliance asks only for what it offers and says so when it cannot.
public struct BackendCapabilities: OptionSet, Sendable, Hashable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// The agent can call the device's own tools (volume, mute, time, status).
    public static let deviceTools = BackendCapabilities(rawValue: 1 << 0)
    /// The device can mark the user's turn itself (push-to-talk: press to start, release to end).
    public static let manualActivity = BackendCapabilities(rawValue: 1 << 1)
    /// A restarted device continues the conversation it was in.
    public static let resumableAcrossRestarts = BackendCapabilities(rawValue: 1 << 2)
    /// The agent can speak first (the kiosk greets each visitor).
    public static let greetingFirst = BackendCapabilities(rawValue: 1 << 3)
    /// The service finds the end of the user's speech itself (hands-free).
    public static let serverVoiceDetection = BackendCapabilities(rawValue: 1 << 4)
    /// The service stops its answer when the user talks over it.
    public static let serviceBargeIn = BackendCapabilities(rawValue: 1 << 5)

    /// Every capability with its name for a person, in order.
    public static let named: [(BackendCapabilities, String)] = [
        (.deviceTools, "device tools"), (.manualActivity, "manual activity (push-to-talk)"),
        (.resumableAcrossRestarts, "resumable across restarts"), (.greetingFirst, "greeting first"),
        (.serverVoiceDetection, "server-side voice detection"), (.serviceBargeIn, "barge-in by the service"),
    ]

    /// The names of the capabilities in this set.
    public var names: [String] { Self.named.filter { contains($0.0) }.map(\.1) }
}

/// Where one of a backend's secrets comes from, in order: the file its configuration key names, the systemd
/// credential, the environment variable. Never the configuration file itself.
public struct BackendSecret: Sendable, Hashable {
    /// What it is, for a person ("Gemini API key").
    public var what: String
    /// The key in the backend's section that names a file holding it (`api_key_file`).
    public var fileKey: String
    /// The systemd credential (`gemini-api-key`, from `LoadCredential=` / `$CREDENTIALS_DIRECTORY`).
    public var credential: String
    /// The environment variable (`GEMINI_API_KEY`).
    public var environment: String

    public init(what: String, fileKey: String, credential: String, environment: String) {
        self.what = what
        self.fileKey = fileKey
        self.credential = credential
        self.environment = environment
    }

    /// The error when it is found nowhere and backend `section` needs it: every place it may come from, named.
    public func missing(in section: String) -> BackendSetupError {
        BackendSetupError(
            key: fileKey,
            "no \(what): set \(section).\(fileKey) (hark converse: \(SettingKey.flagName(fileKey))), install the "
                + "systemd credential \(credential), or set \(environment)",
            missingSecret: true
        )
    }

    /// The places to look, in order, given the section's settings.
    public func sources(_ settings: BackendSettings) -> [Secret.Source] {
        (settings.text(fileKey).map { [.file($0)] } ?? []) + [.credential(credential), .environment(environment)]
    }
}

/// Whether a backend needs one of its secrets with the settings it has.
public enum SecretNeed: Sendable, Hashable {
    /// It must be found: the backend cannot run without it.
    case required
    /// Not needed with these settings (a simulator or a proxy that adds the key), and why; one given anyway is
    /// still read from where a person put it.
    case optional(why: String)
    /// Never used with these settings (a token server hands out tokens instead), and why.
    case unused(why: String)
}

/// Why a backend cannot be made from its settings: one line for a person, naming the key (within the backend's
/// section) when one key is at fault.
public struct BackendSetupError: Error, Sendable, CustomStringConvertible {
    /// The key at fault within the section (`token_url`), or nil.
    public var key: String?
    public var message: String
    /// The secret was not found anywhere (not a wrong setting: under systemd a credential may still provide it).
    public var missingSecret: Bool

    public init(key: String? = nil, _ message: String, missingSecret: Bool = false) {
        self.key = key
        self.message = message
        self.missingSecret = missingSecret
    }

    public var description: String { message }
}

/// How sessions of a backend will be used: by the daemon for months, or once by a command.
public enum BackendUsage: Sendable, Hashable {
    /// `hark run`: reconnect for ever, retry a rejection slowly, keep what continues a conversation in
    /// `stateDirectory`. Microphone audio comes at `pace` times real time (a paced file device; 0: as fast as
    /// it is read; 1: a sound card).
    case daemon(stateDirectory: String, pace: Double)
    /// `hark converse`: give up on a rejection or after `maxRetries` failures in a row. `fast`: the input goes
    /// ahead of real time.
    case oneShot(maxRetries: Int, fast: Bool)
}

/// Makes the network clients a backend's sessions use (the adapters live outside the core).
public struct NetworkClients: Sendable {
    /// A WebSocket transport trusting the extra CA in `caFile` (nil: the system's roots only); plain `ws://`
    /// only to loopback unless `allowInsecure`.
    public var webSocket: @Sendable (_ caFile: String?, _ allowInsecure: Bool) -> any WebSocketTransport
    /// An HTTP client with the same rules.
    public var http: @Sendable (_ caFile: String?, _ allowInsecure: Bool) -> any HTTPClient

    public init(
        webSocket: @escaping @Sendable (_ caFile: String?, _ allowInsecure: Bool) -> any WebSocketTransport,
        http: @escaping @Sendable (_ caFile: String?, _ allowInsecure: Bool) -> any HTTPClient
    ) {
        self.webSocket = webSocket
        self.http = http
    }
}

/// Everything a backend is made from.
public struct BackendContext: Sendable {
    /// The backend's section of the configuration (or the command line's options), validated key by key.
    public var settings: BackendSettings
    /// The process environment: secrets (`GEMINI_API_KEY`, `$CREDENTIALS_DIRECTORY`).
    public var environment: [String: String]
    public var network: NetworkClients
    public var usage: BackendUsage
    public var logger: Logger
    /// The device's host name (`gethostname`), for a backend that names the device to its service; "device" when
    /// it cannot be read.
    public var hostName: String

    public init(
        settings: BackendSettings,
        environment: [String: String],
        network: NetworkClients,
        usage: BackendUsage,
        logger: Logger,
        hostName: String = "device"
    ) {
        self.settings = settings
        self.environment = environment
        self.network = network
        self.usage = usage
        self.logger = logger
        self.hostName = hostName
    }

    /// The first of `secret`'s sources that holds one; nil when none does. A file the settings name that cannot
    /// be read is an error naming its key.
    public func load(_ secret: BackendSecret) throws(BackendSetupError) -> Secret? {
        do {
            return try Secret.load(from: secret.sources(settings), environment: environment)
        } catch {
            throw BackendSetupError(key: secret.fileKey, "\(error)")
        }
    }
}

/// One session to open, whatever the backend.
public struct SessionRequest: Sendable {
    /// A new conversation: nothing kept from an earlier one is continued.
    public var fresh: Bool
    /// The device's tools the agent may call (a backend without ``BackendCapabilities/deviceTools`` ignores them).
    public var tools: ToolRegistry
    /// The device marks the user's turns itself (push-to-talk).
    public var manualActivity: Bool
    /// The agent speaks first (the kiosk): a backend that greets on its own is told so.
    public var greetsFirst: Bool
    /// When the service cannot continue the conversation (a resumption refused), a fresh session may be told
    /// what was said so far. False for the kiosk: each visitor starts with nothing.
    public var carriesConversation: Bool
    /// Asked when the service moves the session to a new connection: false ends the session instead.
    public var continueAfterSwitch: @Sendable () -> Bool
    /// Called right after a message of microphone audio first goes out, with that audio (capture-to-wire
    /// latency). Must return at once.
    public var audioSent: (@Sendable (AudioChunk) -> Void)?
    /// Times the session's deadlines and backoff.
    public var clock: any Clock<Duration>
    public var logger: Logger

    public init(
        fresh: Bool = false,
        tools: ToolRegistry = ToolRegistry(),
        manualActivity: Bool = false,
        greetsFirst: Bool = false,
        carriesConversation: Bool = true,
        continueAfterSwitch: @escaping @Sendable () -> Bool = { true },
        audioSent: (@Sendable (AudioChunk) -> Void)? = nil,
        clock: any Clock<Duration> = ContinuousClock(),
        logger: Logger
    ) {
        self.fresh = fresh
        self.tools = tools
        self.manualActivity = manualActivity
        self.greetsFirst = greetsFirst
        self.carriesConversation = carriesConversation
        self.continueAfterSwitch = continueAfterSwitch
        self.audioSent = audioSent
        self.clock = clock
        self.logger = logger
    }
}

/// A voice backend: one service (or cascade of services) the appliance can hold a conversation with. A backend
/// is a module of its own that declares what it needs and offers, and one line in the registry
/// (`Sources/Backends/HarkBackends/Registry.swift`); `hark run`, `hark converse`, `hark config check` and
/// `hark doctor` find it there.
public protocol Backend: Sendable {
    /// Its name: the value of `backend:` and the section of its settings (`gemini`).
    static var name: String { get }
    /// One line for `--help` and `hark doctor`.
    static var summary: String { get }
    /// The keys of its configuration section, in the order the example file shows them.
    static var settingKeys: [SettingKey] { get }
    /// Its secrets.
    static var secrets: [BackendSecret] { get }
    /// What it can do.
    static var capabilities: BackendCapabilities { get }
    /// Checks across keys of the section (`token_url` with `mint_token`): the key at fault and why, or nil.
    static func crossCheck(_ settings: BackendSettings) -> (key: String, problem: String)?
    /// Whether `secret` must be found for these settings (a token server, or a local simulator, needs no key),
    /// and if not, why.
    static func need(_ secret: BackendSecret, _ settings: BackendSettings) -> SecretNeed
    /// What a person should know to use it from `hark converse` beyond its summary and options (how it connects,
    /// where its key goes), for the command's help; empty when nothing.
    static var details: String { get }
    /// `hark doctor`'s lines about what the backend needs of this machine beyond its settings (a native library, a
    /// helper program it may start to see it work), whichever backend is configured: a missing part is a warning,
    /// since only this backend needs it.
    static func doctor(environment: [String: String]) async -> [DoctorItem]
    /// What a person should know about these settings that does not stop them working (an older model, a key
    /// the chosen model ignores): the key and one line each. `hark config check` prints them as warnings and
    /// `hark run` / `hark converse` log them.
    static func advice(_ settings: BackendSettings) -> [(key: String, note: String)]

    /// Validates the settings, loads the secrets and prepares; throws a ``BackendSetupError`` naming the key.
    init(context: BackendContext) throws(BackendSetupError)
    /// A session for `request`; nothing happens until its `run()`.
    func makeSession(_ request: SessionRequest) -> any VoiceSession
    /// The sample rate of the answer audio its sessions give (24 kHz unless the backend says otherwise): what
    /// `hark converse --output` is written at.
    var outputSampleRate: Int { get }
    /// Forgets what is kept to continue the conversation (a resumption handle, a conversation id).
    func forgetConversation()
}

extension Backend {
    public static func crossCheck(_ settings: BackendSettings) -> (key: String, problem: String)? { nil }
    public static func need(_ secret: BackendSecret, _ settings: BackendSettings) -> SecretNeed { .required }
    public static var details: String { "" }
    public static func doctor(environment: [String: String]) async -> [DoctorItem] { [] }

    /// Whether `secret` must be found for these settings (``need(_:_:)`` says it is required).
    public static func requires(_ secret: BackendSecret, _ settings: BackendSettings) -> Bool {
        need(secret, settings) == .required
    }
    public static func advice(_ settings: BackendSettings) -> [(key: String, note: String)] { [] }
    public var outputSampleRate: Int { 24_000 }

    /// The settings as the keys' defaults give them.
    public static var defaultSettings: BackendSettings { BackendSettings(keys: settingKeys) }
}

/// A backend's own options of `hark converse` (an option group of its module): the settings they give, by key
/// name, as text that the key's ``SettingKey/parse(_:)`` reads (so a flag is checked exactly as the key is in the
/// configuration file). The options every backend shares (`--endpoint`, `--api-key-file`, ...) are the command's.
public protocol BackendOptionGroup: Sendable {
    /// The backend these options belong to.
    static var backendName: String { get }
    /// The settings given, by key name (`model` for `--model`).
    var settings: [String: String] { get }
}
