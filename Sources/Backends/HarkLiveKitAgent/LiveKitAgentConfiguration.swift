import HarkCore

/// How a LiveKit session joins and what it keeps.
public struct LiveKitAgentConfiguration: Sendable {
    /// The helper that does the session's work, found when the backend was made.
    public var helper: LiveKitHelperProgram
    /// Where the server's URL and the token come from.
    public var tokens: LiveKitTokenSource
    /// The room to join; nil: a new room for each session.
    public var room: String?
    /// Each session joins a new room, also when ``room`` names one (the kiosk: one room per visitor).
    public var newRoomEachSession = false
    /// The device's identity in the room.
    public var identity = "hark-device"
    /// Its display name.
    public var participantName = "Hark"
    /// The agent to dispatch, or nil.
    public var agentName: String?
    /// Whether what the user says before the agent has joined is sent to it when it arrives.
    public var preConnectAudio = true
    /// The most audio kept for the agent before it arrives (the oldest goes beyond).
    public var preConnectLimit: Duration = .seconds(10)
    /// The rate of the microphone track (the appliance's rate).
    public var microphoneRate = 16_000
    /// Microphone audio goes to the helper in pieces of at least this much (as the Gemini session's): each piece
    /// crosses the socket, LiveKit's library and back as an acknowledgement once, so 20 ms frames would cost three
    /// times as many wake-ups on both sides.
    public var microphoneChunk: Duration = .milliseconds(60)
    /// How much of the agent's audio one message from the helper carries: fewer, larger frames cost less (each
    /// crosses LiveKit's library and the socket once; the library's default is 10 ms); the first words of an answer
    /// wait for one frame, which the speaker's 60 ms prebuffer waits for anyway.
    public var outputFrame: Duration = .milliseconds(60)
    /// The longest a join (token, signalling, media) may take.
    public var joinTimeout: Duration = .seconds(20)
    /// The longest the helper may take to start (load LiveKit's library) and greet.
    public var helperStartTimeout: Duration = .seconds(10)
    /// After this long in the room without an agent, say so in the log.
    public var agentWait: Duration = .seconds(20)
    /// Plain `ws://` / `http://` to another host is allowed.
    public var allowInsecure = false
    /// Microphone audio held while no room takes it.
    public var inputBound: Duration = .seconds(30)
    /// Push-to-talk: the microphone goes to the agent only while the button is held.
    public var manualActivity = false
    /// Silence sent after the microphone pauses (the agent hears the end of the user's speech in it).
    public var silenceAfterInput: Duration = .seconds(2)
    /// How the session joins again after a connection that ended (the library gave up, the helper ended).
    public var link = LinkSettings()

    /// The rate the agent's audio is asked for.
    public static let outputRate = 24_000
    /// The longest a sender waits for the helper to take microphone audio before the connection counts as stalled.
    public static let captureTimeout: Duration = .seconds(5)

    public init(helper: LiveKitHelperProgram, tokens: LiveKitTokenSource) {
        self.helper = helper
        self.tokens = tokens
    }

    /// The machine's settings.
    var machineSettings: LiveKitSessionMachine.Settings {
        var settings = LiveKitSessionMachine.Settings()
        settings.microphoneRate = microphoneRate
        settings.preConnectAudio = preConnectAudio
        settings.preConnectLimit = preConnectLimit
        settings.manualActivity = manualActivity
        settings.identity = identity
        return settings
    }
}
