import HarkCore
import Logging

/// What changes on a configuration reload without reopening the devices.
public struct ApplianceBehaviour: Sendable {
    public var settings: ApplianceMachine.Settings
    /// Opens a session (`fresh`: a new conversation) declaring `tools`; the session calls `audioSent` with
    /// each message of microphone audio it puts on the wire, for the capture-to-wire latency.
    public var makeSession:
        @Sendable (_ fresh: Bool, _ tools: ToolRegistry, _ audioSent: @escaping @Sendable (AudioChunk) -> Void) ->
            any VoiceSession
    /// Drops what is kept to continue the conversation (a resumption handle, a conversation id).
    public var forgetConversation: @Sendable () -> Void
    /// The device tools the agent may call.
    public var tools: DeviceToolSet
    /// How each tool runs, by name, where it differs from ``DeviceTools/defaultBehaviors``.
    public var toolBehaviors: [String: ToolBehavior]
    /// Earcon loudness, 0–1 of full scale (before the playback volume).
    public var earconLevel: Double
    public var vad: EnergyVAD
    public var preRoll: Duration
    /// The wake word, when sessions open on one (``ApplianceMachine/Settings/wakeWord``).
    public var wake: WakeBehaviour?
    /// The stop word, when one is configured: heard while the agent speaks, it stops the answer.
    public var stopWord: StopWordBehaviour?
    /// The timers and alarms (nil: turned off).
    public var timers: TimerBehaviour?
    /// The music and radio the media tools reach (nil: no media tools).
    public var media: (any MediaControls)?
    public var logTranscripts: Bool
    /// Names for `hark status`.
    public var mode: String
    public var backend: String

    public init(
        settings: ApplianceMachine.Settings,
        makeSession:
            @escaping @Sendable (
                _ fresh: Bool, _ tools: ToolRegistry, _ audioSent: @escaping @Sendable (AudioChunk) -> Void
            ) -> any VoiceSession,
        forgetConversation: @escaping @Sendable () -> Void = {},
        tools: DeviceToolSet = [],
        toolBehaviors: [String: ToolBehavior] = [:],
        earconLevel: Double = 0.2,
        vad: EnergyVAD = EnergyVAD(),
        preRoll: Duration = .milliseconds(500),
        wake: WakeBehaviour? = nil,
        stopWord: StopWordBehaviour? = nil,
        timers: TimerBehaviour? = nil,
        media: (any MediaControls)? = nil,
        logTranscripts: Bool = false,
        mode: String,
        backend: String
    ) {
        self.settings = settings
        self.makeSession = makeSession
        self.forgetConversation = forgetConversation
        self.tools = tools
        self.toolBehaviors = toolBehaviors
        self.earconLevel = earconLevel
        self.vad = vad
        self.preRoll = preRoll
        self.wake = wake
        self.stopWord = stopWord
        self.timers = timers
        self.media = media
        self.logTranscripts = logTranscripts
        self.mode = mode
        self.backend = backend
    }
}

/// The opened devices the appliance runs on.
public struct ApplianceDevices: Sendable {
    public var microphone: any Microphone
    public var speaker: any Speaker
    public var indicator: (any Indicator)?
    public var button: (any Button)?
    /// The board's name, for `hark status`.
    public var board: String

    public init(
        microphone: any Microphone,
        speaker: any Speaker,
        indicator: (any Indicator)? = nil,
        button: (any Button)? = nil,
        board: String
    ) {
        self.microphone = microphone
        self.speaker = speaker
        self.indicator = indicator
        self.button = button
        self.board = board
    }
}

/// What the supervisor reads of the world besides its devices: time, and facts for the status and the tools.
public struct SupervisorEnvironment: Sendable {
    /// Times the tick and every rule (idle timeouts, device outages); the supervisor's "now" is the time on it
    /// since the supervisor was made.
    public var clock: any Clock<Duration>
    /// How often time is checked (idle timeouts, device health, status updates).
    public var tick: Duration
    /// The monotonic time in ns on the devices' clock (for the capture-to-wire latency).
    public var monotonicNanoseconds: @Sendable () -> UInt64
    /// Seconds since 1970.
    public var wallClock: @Sendable () -> Double
    /// The process id, for the status file.
    public var processID: Int32
    /// When the process started (`/proc/self/stat`'s start time, in clock ticks after boot), for the status file.
    public var processStartTicks: UInt64?
    /// Facts the `get_device_status` tool reports besides the appliance's own (firmware version, OS, network).
    public var deviceFacts: @Sendable () -> [String: JSONValue]
    /// Each MCP server's standing for `hark status`, one line each (none without servers).
    public var toolServers: @Sendable () -> [String]
    /// What the music and radio player plays, one line for `hark status` (nil: nothing was asked).
    public var media: @Sendable () -> String?

    public init(
        clock: any Clock<Duration>,
        tick: Duration = .milliseconds(250),
        monotonicNanoseconds: @escaping @Sendable () -> UInt64,
        wallClock: @escaping @Sendable () -> Double,
        processID: Int32 = 0,
        deviceFacts: @escaping @Sendable () -> [String: JSONValue] = { [:] },
        processStartTicks: UInt64? = nil,
        toolServers: @escaping @Sendable () -> [String] = { [] },
        media: @escaping @Sendable () -> String? = { nil }
    ) {
        self.toolServers = toolServers
        self.media = media
        self.clock = clock
        self.tick = tick
        self.monotonicNanoseconds = monotonicNanoseconds
        self.wallClock = wallClock
        self.processID = processID
        self.deviceFacts = deviceFacts
        self.processStartTicks = processStartTicks
    }
}
