import HarkCore
import HarkLiveKitWire

/// What an agent's `lk.agent.state` means for the appliance.
public enum LiveKitAgentState {
    /// The appliance's conversation state for the agent's state; nil for a state it does not know. While the agent
    /// starts (`initializing`), the device is listening: what the user says is kept for the agent.
    public static func conversation(_ state: String) -> ConversationState? {
        switch state {
        case "initializing", "listening": .listening
        case "thinking": .thinking
        case "speaking": .speaking
        case "idle": .idle
        default: nil
        }
    }
}

/// The LiveKit session's decisions as a value: the microphone's input and the room's events (as the helper reports
/// them) go in; what to send to the room, what to tell the appliance and how the connection ends come out. No I/O
/// and no clock: the owner performs the actions, in order.
///
/// The rules: what the user says before the agent is in the room is kept (``PreConnectBuffer``) and sent to the
/// agent as a pre-connect byte stream when it arrives; after that the microphone goes to the room. Typed input waits
/// until the agent is there and past `initializing`. The agent's `lk.agent.state` becomes the conversation state;
/// the end of `speaking` ends the turn. An interruption while the agent speaks drops its audio until its turn ends.
/// Push-to-talk: the microphone goes to the room only while the button is held, and the track is muted between. Only
/// the agent's audio tracks are played, and silence on them between answers is not answer audio. A full rejoin
/// reports the agent as gone: it comes back with the room. The agent leaving or the room ending ends the session.
public struct LiveKitSessionMachine: Sendable {
    /// What the owner must do.
    public enum Action: Sendable, Hashable {
        /// Deliver an event to the session's consumer.
        case emit(SessionEvent)
        /// Send a command to the helper.
        case send(LiveKitCommand)
        /// Send microphone audio to the room (paced by the helper's acknowledgements).
        case capture(AudioChunk)
        /// Microphone audio was taken and kept for the agent (or, with pre-connect audio off, let go).
        case heldForAgent(samples: Int)
        /// The microphone paused: send silence (the agent hears the end of the user's speech in it).
        case sendSilence
        /// Push-to-talk was released: mute the track once no audio waits to be sent.
        case muteWhenQuiet
        /// Send the audio kept for the agent as its pre-connect byte stream.
        case sendPreConnect(samples: [Int16], to: String, attributes: [String: String])
        /// Write a line to the log.
        case log(LogLine)
        /// Write a line to the log at debug level.
        case debug(String)
        /// Write `message` to the log the first time `kind` comes up (the runtime's bounded set).
        case noteOnce(kind: String, message: String)
        /// The service ended the conversation: no reconnect follows.
        case endSession
        /// The connection ended.
        case endConnection(ConnectionEnd)
    }

    /// What the machine is told once.
    public struct Settings: Sendable, Hashable {
        /// The rate of the microphone track.
        public var microphoneRate = 16_000
        /// Whether what the user says before the agent arrives is kept for it.
        public var preConnectAudio = true
        /// The most of it kept.
        public var preConnectLimit: Duration = .seconds(10)
        /// Push-to-talk: the microphone goes to the room only while the button is held.
        public var manualActivity = false
        /// The device's identity (named when another participant takes it).
        public var identity = "hark-device"

        public init() {}
    }

    /// The topic of typed input.
    public static let chatTopic = "lk.chat"
    /// The topic of transcripts.
    public static let transcriptTopic = "lk.transcription"
    /// The topic of the pre-connect audio byte stream.
    public static let preConnectTopic = "lk.agent.pre-connect-audio-buffer"
    /// The agent's state attribute.
    public static let stateAttribute = "lk.agent.state"
    /// The longest transcript segment kept, in characters.
    public static let transcriptLimit = 4096
    /// The most transcript streams open at once, typed inputs waiting and tracks played (past them: refused).
    public static let openStreamLimit = 32
    public static let pendingTextLimit = 16
    public static let playedTrackLimit = 8

    public let settings: Settings

    /// In a room (joined, and not yet ended).
    public private(set) var connected = false
    /// The library is getting a dropped connection back (a full rejoin reports every participant as gone).
    public private(set) var reconnecting = false
    /// The room's name, this device's identity there and its microphone track.
    public private(set) var room = ""
    public private(set) var localIdentity = ""
    public private(set) var microphoneTrack = ""
    /// The agent in the room, once it is there.
    public private(set) var agent: String?
    /// The agent's last state, as it said it.
    public private(set) var agentState: String?
    /// The conversation state last shown.
    public private(set) var conversation: ConversationState?
    /// The user cancelled the answer: its audio is dropped until the agent's turn ends.
    public private(set) var droppingAnswer = false
    /// Push-to-talk: the button is held (always true otherwise).
    public private(set) var held: Bool
    /// Audio for the agent before it arrives.
    public private(set) var preConnect: PreConnectBuffer
    /// Typed input waiting for the agent.
    public private(set) var pendingTexts: [String] = []
    /// The tracks being played.
    public private(set) var playing: Set<String> = []

    private struct TextStream: Sendable {
        var role: Transcript.Role
        var segment: String
        var markedFinal: Bool
        var text = ""
        var characters = 0
    }

    private var streams: [UInt32: TextStream] = [:]

    public init(settings: Settings = Settings()) {
        self.settings = settings
        held = !settings.manualActivity
        preConnect = PreConnectBuffer(sampleRate: settings.microphoneRate, limit: settings.preConnectLimit)
    }

    /// The agent is in the room (what the microphone says goes to it).
    public var agentPresent: Bool { agent != nil }

    // MARK: - The connection

    /// The helper joined the room. `waiting`: microphone audio that waited for it (the start of what the user said:
    /// it is for the agent's pre-connect buffer).
    public mutating func joined(_ joined: LiveKitJoined, waiting: [AudioChunk] = []) -> [Action] {
        connected = true
        room = joined.room
        localIdentity = joined.localIdentity
        microphoneTrack = joined.microphoneTrack
        var actions: [Action] = [
            .emit(.link(.connected)),
            .log(LogLine(.info, "in the LiveKit room \(room) (microphone track \(microphoneTrack))")),
        ]
        if settings.manualActivity { actions.append(.send(.setMuted(true))) }
        for chunk in waiting { actions += keep(chunk) }
        if let present = joined.participants.first(where: \.isAgent) { actions += agentArrived(present) }
        return actions
    }

    /// The connection ended, however: what belonged to it is forgotten; what the user said and typed is kept.
    public mutating func connectionEnded() {
        connected = false
        reconnecting = false
        room = ""
        localIdentity = ""
        microphoneTrack = ""
        agent = nil
        playing = []
        streams = [:]
    }

    /// The agent has not come within the wait: say so (the likely causes: no agent runs, or none is dispatched).
    public func agentWaitElapsed(_ wait: Duration) -> [Action] {
        guard connected, agent == nil else { return [] }
        return [
            .log(
                LogLine(
                    .warning,
                    "no agent has joined the LiveKit room \(room) in \(wait.humanDescription): is an agent running, "
                        + "and dispatched to this room (livekit.agent_name)?"
                )
            )
        ]
    }

    // MARK: - The microphone and the appliance

    /// One input from the appliance.
    public mutating func input(_ input: SessionInput) -> [Action] {
        switch input {
        case .audio(let chunk):
            guard held else { return [] }
            guard chunk.sampleRate == settings.microphoneRate else {
                return [
                    .noteOnce(
                        kind: "rate",
                        message: "microphone audio at \(chunk.sampleRate) Hz skipped (the track takes "
                            + "\(settings.microphoneRate) Hz)"
                    )
                ]
            }
            return agent == nil ? keep(chunk) : [.capture(chunk)]
        case .audioStreamEnd:
            return [.sendSilence]
        case .activityStart:
            held = true
            return settings.manualActivity ? [.send(.setMuted(false))] : []
        case .activityEnd:
            // Push-to-talk: the release ends what the agent hears; its own turn detection ends the turn in the
            // silence that follows, then the track is muted until the next press.
            guard settings.manualActivity else { return [] }
            held = false
            return [.sendSilence, .muteWhenQuiet]
        case .text(let text):
            if agentReady { return [.send(.sendText(topic: Self.chatTopic, text: text))] }
            pendingTexts.append(text)
            if pendingTexts.count > Self.pendingTextLimit {
                pendingTexts.removeFirst()
                return [.noteOnce(kind: "typed", message: "typed input waits for the agent; the oldest is dropped")]
            }
            return []
        case .interrupt:
            guard conversation == .speaking else { return [] }
            droppingAnswer = true
            return [.emit(.interrupted)]
        }
    }

    /// The agent is there and past starting (typed input before that would be lost).
    private var agentReady: Bool { agent != nil && agentState.map { $0 != "initializing" } == true }

    private mutating func keep(_ chunk: AudioChunk) -> [Action] {
        if settings.preConnectAudio, chunk.sampleRate == settings.microphoneRate { preConnect.append(chunk.samples) }
        return [.heldForAgent(samples: chunk.samples.count)]
    }

    // MARK: - The room

    /// One event of the room, as the helper reported it.
    public mutating func event(_ event: LiveKitEvent) -> [Action] {
        switch event {
        case .participantJoined(let peer):
            return peer.isAgent ? agentArrived(peer) : []
        case .attributesChanged(let identity, let attributes):
            guard identity == agent, let value = attributes[Self.stateAttribute] else { return [] }
            return agentStateChanged(value)
        case .trackSubscribed(let sid, let participant):
            guard participant != localIdentity, agent == nil || agent == participant else { return [] }
            guard playing.count < Self.playedTrackLimit || playing.contains(sid) else {
                return [.noteOnce(kind: "tracks", message: "too many audio tracks to play; track \(sid) is not")]
            }
            playing.insert(sid)
            return [
                .send(.play(trackSid: sid)),
                .log(LogLine(.info, "playing the agent's audio track \(RemoteText.printable(sid, limit: 100))")),
            ]
        case .trackUnsubscribed(let sid):
            playing.remove(sid)
            return []
        case .localTrackPublished(let sid):
            microphoneTrack = sid
            return []
        case .audio(let audio):
            return agentAudio(audio)
        case .participantLeft(let identity, let reason):
            guard identity == agent else { return [] }
            agent = nil
            // Part of a full rejoin: the agent comes back with the room.
            if reconnecting { return [] }
            return [
                .log(LogLine(.notice, "the agent left the room (\(reason)): the session ends")),
                .emit(.notice("the agent left the room")), .endSession,
            ]
        case .textOpened(let id, let sender, let attributes):
            return textOpened(id, sender: sender, attributes: attributes)
        case .textChunk(let id, let text):
            return textChunk(id, text)
        case .textClosed(let id, let error):
            return textClosed(id, error: error)
        case .reconnecting:
            reconnecting = true
            return [
                .log(LogLine(.notice, "the LiveKit connection dropped; the library is getting it back")),
                .emit(.link(.connecting(attempt: 2))),
            ]
        case .reconnected:
            reconnecting = false
            return [.log(LogLine(.info, "the LiveKit connection is back")), .emit(.link(.connected))]
        case .disconnected(let reason):
            return disconnected(reason)
        case .failed(let kind, let message):
            return [.endConnection(.failed(SessionFailure(kind, message), healthy: true))]
        case .hello, .joined, .captured, .log:
            return []
        }
    }

    /// The agent is in the room: the user's first words go to it, then the microphone's track carries on.
    private mutating func agentArrived(_ peer: LiveKitPeer) -> [Action] {
        guard agent == nil else { return [] }
        agent = peer.identity
        var actions: [Action] = [
            .log(LogLine(.info, "the agent \(RemoteText.printable(peer.identity, limit: 100)) is in the room"))
        ]
        if let value = peer.attributes[Self.stateAttribute] { actions += agentStateChanged(value) }
        guard settings.preConnectAudio else { return actions }
        let (samples, dropped) = preConnect.take()
        if dropped > 0 {
            actions.append(
                .log(
                    LogLine(
                        .notice,
                        "the agent came late: the oldest \(dropped / settings.microphoneRate) s of what the user said "
                            + "were dropped"
                    )
                )
            )
        }
        let attributes = ["trackId": microphoneTrack, "sampleRate": String(settings.microphoneRate), "channels": "1"]
        actions.append(.sendPreConnect(samples: samples, to: peer.identity, attributes: attributes))
        return actions
    }

    private mutating func agentStateChanged(_ value: String) -> [Action] {
        let value = RemoteText.printable(value, limit: 40)
        guard let state = LiveKitAgentState.conversation(value) else {
            return [
                .noteOnce(
                    kind: "state \(value)",
                    message: "the agent's state \(value) is not one this device knows; ignored"
                )
            ]
        }
        agentState = value
        var actions: [Action] = []
        if agentReady {
            actions += pendingTexts.map { .send(.sendText(topic: Self.chatTopic, text: $0)) }
            pendingTexts = []
        }
        guard conversation != state else { return actions }
        let wasSpeaking = conversation == .speaking
        conversation = state
        if wasSpeaking {
            droppingAnswer = false
            actions.append(.emit(.turnComplete))
        }
        return actions + [.emit(.conversation(state))]
    }

    /// A frame of a played track: answer audio, unless the user cancelled the answer it belongs to. The track carries
    /// silence between answers (the agent's source fills its gaps): that is not answer audio. Sound is, whatever the
    /// state says (the state may come a moment after the first words).
    private func agentAudio(_ audio: LiveKitTrackAudio) -> [Action] {
        guard playing.contains(audio.trackSid), audio.channels == 1, !audio.samples.isEmpty else { return [] }
        if droppingAnswer || conversation != .speaking && Self.isSilent(audio.samples) { return [] }
        return [.emit(.audio(AudioChunk(samples: audio.samples, sampleRate: Int(audio.sampleRate))))]
    }

    /// The loudest sample at most −66 dBFS.
    static func isSilent(_ samples: [Int16]) -> Bool {
        samples.allSatisfy { $0 >= -16 && $0 <= 16 }
    }

    /// The room was left: ended by the service (deleted, closed, removed), or lost (joined again with backoff).
    private func disconnected(_ reason: String) -> [Action] {
        let reason = RemoteText.printable(reason, limit: 60)
        switch reason {
        case "ROOM_DELETED", "ROOM_CLOSED", "PARTICIPANT_REMOVED", "CLIENT_INITIATED":
            return [
                .log(LogLine(.notice, "the LiveKit room was left (\(reason)): the session ends")),
                .emit(.notice("the room ended (\(reason))")), .endSession,
            ]
        case "DUPLICATE_IDENTITY":
            let failure = SessionFailure(
                .configuration,
                "another participant joined the room as \(settings.identity) (livekit.identity)"
            )
            return [.endConnection(.failed(failure, healthy: true))]
        default:
            let failure = SessionFailure(.transient, "the LiveKit room was lost (\(reason))")
            return [.endConnection(.failed(failure, healthy: true))]
        }
    }

    // MARK: - Transcripts

    /// A transcript stream opened: the agent's come word by word (one stream per segment, final when it ends); the
    /// user's (sent from this device's identity) come as whole texts, interim and final (`lk.transcription_final`).
    private mutating func textOpened(_ id: UInt32, sender: String, attributes: [String: String]) -> [Action] {
        guard streams.count < Self.openStreamLimit else {
            return [.noteOnce(kind: "streams", message: "too many transcript streams open at once; some are not read")]
        }
        streams[id] = TextStream(
            role: sender == localIdentity ? .user : .agent,
            segment: RemoteText.printable(attributes["lk.segment_id"] ?? "stream-\(id)", limit: 100),
            markedFinal: attributes["lk.transcription_final"] == "true"
        )
        return []
    }

    private mutating func textChunk(_ id: UInt32, _ chunk: String) -> [Action] {
        guard var stream = streams[id], stream.characters < Self.transcriptLimit else { return [] }
        let piece = chunk.prefix(Self.transcriptLimit - stream.characters)
        stream.text += piece
        stream.characters += piece.count
        streams[id] = stream
        return stream.role == .agent ? [transcript(stream, final: false)] : []
    }

    /// What arrived before a stream failed is kept.
    private mutating func textClosed(_ id: UInt32, error: String?) -> [Action] {
        guard let stream = streams.removeValue(forKey: id) else { return [] }
        var actions: [Action] = []
        if let error {
            actions.append(
                .noteOnce(
                    kind: "transcript",
                    message: "a transcript stream ended abnormally; what arrived is kept: \(error)"
                )
            )
        }
        let isFinal = stream.role == .agent || stream.markedFinal
        if !stream.text.isEmpty || isFinal { actions.append(transcript(stream, final: isFinal)) }
        return actions
    }

    private func transcript(_ stream: TextStream, final: Bool) -> Action {
        let text = RemoteText.printable(stream.text, limit: Self.transcriptLimit)
        return .emit(.transcript(Transcript(role: stream.role, segment: stream.segment, text: text, isFinal: final)))
    }
}
