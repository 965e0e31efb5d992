import HarkCore
import HarkLiveKit
import Logging
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// How a LiveKit session joins and what it keeps.
public struct LiveKitAgentConfiguration: Sendable {
    /// LiveKit's library, found when the backend was made.
    public var library: LiveKitLibrary
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
    /// The longest a join (token, signalling, media) may take.
    public var joinTimeout: Duration = .seconds(20)
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
    /// How the session joins again after a connection the library gave up on.
    public var link = LinkSettings()

    /// The rate the agent's audio is asked for (the library resamples).
    public static let outputRate = 24_000
    /// The topic of the pre-connect audio byte stream.
    public static let preConnectTopic = "lk.agent.pre-connect-audio-buffer"
    /// The longest transcript segment kept, in characters.
    public static let transcriptLimit = 4096

    public init(library: LiveKitLibrary, tokens: LiveKitTokenSource) {
        self.library = library
        self.tokens = tokens
    }
}

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

/// A conversation with a LiveKit agent: the session joins a room (a token from the configured source), publishes
/// the microphone, plays the agent's audio track, follows its state and its transcripts. What the user says before
/// the agent is in the room is kept and sent to it as a pre-connect audio byte stream when it arrives. The library
/// resumes or rejoins a dropped connection by itself; a connection it gives up on is joined again with backoff. The
/// agent leaving, or the room being deleted, ends the session.
public final class LiveKitAgentSession: RuntimeSession {
    public let runtime: SessionRuntime
    private let configuration: LiveKitAgentConfiguration
    private let http: any HTTPClient
    private let state = Mutex(State())
    /// The room of this session when the configuration names none.
    private let sessionRoom: String
    private var logger: Logger { runtime.logger }

    private struct State {
        var connected = false
        /// The library is getting a dropped connection back (a full rejoin reports every participant as gone).
        var reconnecting = false
        /// The microphone track's id in the room (a full rejoin publishes it again, under a new id).
        var microphoneTrack: String?
        /// Typed input that waits for the agent to be in the room and past starting (it would be lost before).
        var pendingTexts: [String] = []
        /// The room of the current connection.
        var room: LiveKitRoom?
        /// The agent in the current room, once it is there.
        var agent: String?
        var agentState: String?
        var conversation: ConversationState?
        /// The user cancelled the answer: its audio is dropped until the agent's turn ends.
        var dropAnswer = false
        /// Audio for the agent before it arrived (pre-connect), and how much of it was dropped.
        var preConnect: [Int16] = []
        var preConnectDropped = 0
        /// Tasks reading the agent's audio tracks, by track id; and the transcripts being read.
        var audioReaders: [String: Task<Void, Never>] = [:]
        var otherTasks: [Task<Void, Never>] = []
        var loggedKinds: Set<String> = []
    }

    public init(
        configuration: LiveKitAgentConfiguration,
        http: any HTTPClient,
        clock: any Clock<Duration> = ContinuousClock(),
        logger: Logger,
        audioSent: (@Sendable (AudioChunk) -> Void)? = nil
    ) {
        self.configuration = configuration
        self.http = http
        runtime = SessionRuntime(
            inputBound: configuration.inputBound,
            clock: clock,
            logger: logger,
            audioSent: audioSent
        )
        var random = SystemRandomNumberGenerator()
        let suffix = String(random.next() & 0xFF_FFFF_FFFF, radix: 16)
        // A conversation that must not carry over (the kiosk's next visitor) gets a room of its own even when the
        // configuration names one: the configured name, then a suffix.
        switch (configuration.room, configuration.newRoomEachSession) {
        case (let room?, false): sessionRoom = room
        case (let room?, true): sessionRoom = "\(room)-\(suffix)"
        case (nil, _): sessionRoom = "\(configuration.identity)-\(suffix)"
        }
    }

    public func finish() {
        runtime.finish(connected: state.withLock { $0.connected })
    }

    public func run() async throws {
        let started = Mutex(false)
        do {
            try await withClient { client in
                started.withLock { $0 = true }
                try await self.runtime.runConnections(machine: self.configuration.link.reconnectMachine()) {
                    [self] attempt in
                    await connectOnce(client, attempt: attempt)
                }
            }
        } catch let error as LiveKitError where !started.withLock({ $0 }) {
            // The library did not start: every attempt would fail the same way (an error to show, retried slowly).
            let failure = SessionFailure(.configuration, "LiveKit's library: \(error)")
            try await runtime.runConnections(machine: configuration.link.reconnectMachine()) { _ in
                .failed(failure, healthy: false)
            }
        }
    }

    /// Runs `body` with the process's LiveKit client. The library has one client per process: a session that
    /// starts while the last one is still ending waits for it (up to 15 s).
    private func withClient(_ body: (LiveKitClient) async throws -> Void) async throws {
        var waited = Duration.zero
        while true {
            do {
                try await LiveKitClient.withClient(library: configuration.library, logger: logger, body)
                return
            } catch let error as LiveKitError where error.isBusy && waited < .seconds(15) && !runtime.isFinishing {
                try await Task.sleep(for: .milliseconds(100))
                waited += .milliseconds(100)
            }
        }
    }

    // MARK: - One connection

    private func connectOnce(_ client: LiveKitClient, attempt: Int) async -> ConnectionEnd {
        let join = LiveKitJoin(
            room: sessionRoom,
            identity: configuration.identity,
            name: configuration.participantName,
            agentName: configuration.agentName
        )
        let details: (url: String, token: Secret)
        do {
            details = try await configuration.tokens.fetch(join, http: http, allowInsecure: configuration.allowInsecure)
        } catch let failure as SessionFailure {
            return .failed(failure, healthy: false)
        } catch {
            return .failed(SessionFailure(.transient, "LiveKit token: \(error)"), healthy: false)
        }
        runtime.count { $0.connections += 1 }
        logger.info(
            "joining the LiveKit room \(join.room) at \(URLRedaction.redact(details.url)) as \(join.identity)"
        )
        var options = LiveKitRoomOptions()
        options.timeout = configuration.joinTimeout
        let room: LiveKitRoom
        do {
            room = try await client.connect(url: details.url, token: details.token, options: options)
        } catch let error as LiveKitError {
            if error.isAuthentication {
                return .failed(SessionFailure(.authentication, "LiveKit refused the token: \(error)"), healthy: false)
            }
            return .failed(SessionFailure(.transient, "\(error)"), healthy: false)
        } catch {
            return .failed(SessionFailure(.transient, "joining the LiveKit room: \(error)"), healthy: false)
        }
        let end = await serve(client, room)
        await room.disconnect()
        let readers = state.withLock { state in
            defer {
                state.connected = false
                state.reconnecting = false
                state.room = nil
                state.microphoneTrack = nil
                state.agent = nil
                state.audioReaders = [:]
                state.otherTasks = []
            }
            return Array(state.audioReaders.values) + state.otherTasks
        }
        for task in readers { task.cancel() }
        return end
    }

    private func serve(_ client: LiveKitClient, _ room: LiveKitRoom) async -> ConnectionEnd {
        let source: LiveKitAudioSource
        let trackID: String
        do {
            source = try client.makeAudioSource(
                sampleRate: configuration.microphoneRate,
                channels: 1,
                queueDuration: .milliseconds(200)
            )
            trackID = try await room.publish(
                source,
                preConnectBuffer: configuration.preConnectAudio,
                timeout: configuration.joinTimeout
            )
        } catch {
            return .failed(SessionFailure(.transient, "publishing the microphone: \(error)"), healthy: false)
        }
        runtime.count { $0.readies += 1 }
        state.withLock {
            $0.connected = true
            $0.microphoneTrack = trackID
            $0.room = room
        }
        runtime.emit(.link(.connected))
        logger.info("in the LiveKit room \(room.name) (microphone track \(trackID))")
        // What waited for the room is the start of what the user said: it is for the agent's pre-connect buffer.
        let waiting = runtime.input.removeAll()
        var controls: [SessionInput] = []
        for input in waiting {
            if case .audio(let chunk) = input {
                runtime.count { $0.audioSamplesSent += chunk.samples.count }
                keepForAgent(chunk)
            } else {
                controls.append(input)
            }
        }
        runtime.input.pushFront(controls)
        if let agent = room.remoteParticipants.first(where: { $0.kind == .agent }) {
            agentArrived(agent, room: room)
        } else {
            watchForAgent(room)
        }
        return await withTaskGroup(of: ConnectionEnd.self) { group in
            group.addTask { await self.pumpInput(room, source) }
            group.addTask { await self.pumpRoom(client, room) }
            let end = await group.next() ?? .finished
            group.cancelAll()
            return end
        }
    }

    // MARK: - The microphone

    private func pumpInput(_ room: LiveKitRoom, _ source: LiveKitAudioSource) async -> ConnectionEnd {
        let rate = configuration.microphoneRate
        // Push-to-talk: the microphone goes to the agent only while the button is held (the track is muted between).
        var held = !configuration.manualActivity
        if configuration.manualActivity { setMuted(true, room) }
        while let input = await runtime.input.next(maxAudio: rate / 10) {
            switch input {
            case .audio(let chunk):
                guard held else { continue }
                guard chunk.sampleRate == rate else {
                    logOnce("rate", "microphone audio at \(chunk.sampleRate) Hz skipped (the track takes \(rate) Hz)")
                    continue
                }
                guard state.withLock({ $0.agent != nil }) else {
                    // Sent with the pre-connect buffer when the agent arrives.
                    runtime.count { $0.audioSamplesSent += chunk.samples.count }
                    keepForAgent(chunk)
                    continue
                }
                do {
                    try await source.capture(chunk.samples, timeout: .seconds(5))
                } catch {
                    if runtime.isFinishing { return .finished }
                    return .failed(SessionFailure(.transient, "sending the microphone: \(error)"), healthy: true)
                }
                runtime.sentAudio(chunk)
            case .audioStreamEnd:
                await sendSilence(source)
            case .activityStart:
                held = true
                if configuration.manualActivity { setMuted(false, room) }
            case .activityEnd:
                // Push-to-talk: the button's release ends what the agent hears; its own turn detection ends the
                // turn in the silence that follows, then the track is muted until the next press.
                if configuration.manualActivity {
                    held = false
                    await sendSilence(source)
                    if runtime.input.queuedSamples == 0 { setMuted(true, room) }
                }
            case .text(let text):
                let ready = state.withLock { state -> Bool in
                    let ready = state.agent != nil && state.agentState.map { $0 != "initializing" } == true
                    if !ready { state.pendingTexts.append(text) }
                    return ready
                }
                if ready { await sendTyped(text, room) }
            case .interrupt:
                let speaking = state.withLock { state -> Bool in
                    guard state.conversation == .speaking else { return false }
                    state.dropAnswer = true
                    return true
                }
                if speaking { runtime.emit(.interrupted) }
            }
        }
        return .finished
    }

    /// Sends typed input to the agent (`lk.chat`); a failure is logged.
    private func sendTyped(_ text: String, _ room: LiveKitRoom) async {
        do {
            _ = try await room.sendText(text, topic: "lk.chat", timeout: .seconds(10))
        } catch {
            logger.warning("sending typed input to the agent: \(error)")
        }
    }

    /// Mutes or unmutes the microphone track (push-to-talk); a failure is logged, and the audio gate still holds.
    private func setMuted(_ muted: Bool, _ room: LiveKitRoom) {
        do {
            try room.setMicrophoneMuted(muted)
        } catch {
            logOnce("mute", "the microphone track cannot be \(muted ? "muted" : "unmuted"): \(error)")
        }
    }

    /// The agent finds the end of the user's speech in silence: the track carries some (paced by the source's
    /// queue) unless the microphone comes back first.
    private func sendSilence(_ source: LiveKitAudioSource) async {
        let frame = [Int16](repeating: 0, count: configuration.microphoneRate / 50)
        var sent = Duration.zero
        while sent < configuration.silenceAfterInput, runtime.input.queuedSamples == 0, !runtime.isFinishing,
            state.withLock({ $0.agent != nil })
        {
            do {
                try await source.capture(frame, timeout: .seconds(5))
            } catch {
                return
            }
            sent += .milliseconds(20)
        }
    }

    /// Keeps `chunk` for the agent's pre-connect buffer (when that is on), up to its limit.
    private func keepForAgent(_ chunk: AudioChunk) {
        guard configuration.preConnectAudio, chunk.sampleRate == configuration.microphoneRate else { return }
        let limit = Int(configuration.preConnectLimit.seconds * Double(chunk.sampleRate))
        state.withLock { state in
            state.preConnect += chunk.samples
            if state.preConnect.count > limit {
                let excess = state.preConnect.count - limit
                state.preConnect.removeFirst(excess)
                state.preConnectDropped += excess
            }
        }
    }

    // MARK: - The agent

    /// The agent is in the room: the user's first words go to it, then the microphone's track carries on.
    private func agentArrived(_ agent: LiveKitParticipant, room: LiveKitRoom) {
        let (first, buffered, dropped, trackID) = state.withLock { state -> (Bool, [Int16], Int, String) in
            let first = state.agent == nil
            state.agent = agent.identity
            defer {
                state.preConnect = []
                state.preConnectDropped = 0
            }
            return (first, state.preConnect, state.preConnectDropped, state.microphoneTrack ?? "")
        }
        guard first else { return }
        logger.info("the agent \(RemoteText.printable(agent.identity, limit: 100)) is in the room")
        if let value = agent.attributes["lk.agent.state"] { agentStateChanged(value) }
        guard configuration.preConnectAudio else { return }
        let rate = configuration.microphoneRate
        if dropped > 0 {
            logger.notice("the agent came late: the oldest \(dropped / rate) s of what the user said were dropped")
        }
        let bytes = [UInt8](PCM16.bytes(buffered))  // little-endian, whatever the host's order
        let identity = agent.identity
        let task = Task {
            do {
                _ = try await room.sendBytes(
                    bytes,
                    topic: LiveKitAgentConfiguration.preConnectTopic,
                    name: "pre-connect-audio",
                    mimeType: "audio/pcm",
                    attributes: ["trackId": trackID, "sampleRate": String(rate), "channels": "1"],
                    to: [identity],
                    timeout: .seconds(10)
                )
                self.logger.debug(
                    "sent the agent \(Double(buffered.count) / Double(rate)) s of audio from before it joined"
                )
            } catch {
                self.logger.warning("sending the audio from before the agent joined: \(error)")
            }
        }
        state.withLock { $0.otherTasks.append(task) }
    }

    /// Says so in the log when no agent has come after a while (the likely causes: no agent runs, or none is
    /// dispatched to this room).
    private func watchForAgent(_ room: LiveKitRoom) {
        let wait = configuration.agentWait
        let name = room.name
        let task = Task {
            guard (try? await runtime.clock.sleep(for: wait)) != nil else { return }
            if state.withLock({ $0.agent == nil && $0.connected }) {
                let message =
                    "no agent has joined the LiveKit room \(name) in \(wait.humanDescription): is an agent running, "
                    + "and dispatched to this room (livekit.agent_name)?"
                logger.warning("\(message)")
            }
        }
        state.withLock { $0.otherTasks.append(task) }
    }

    private func agentStateChanged(_ value: String) {
        let value = RemoteText.printable(value, limit: 40)
        guard let conversation = LiveKitAgentState.conversation(value) else {
            logOnce("state \(value)", "the agent's state \(value) is not one this device knows; ignored")
            return
        }
        let (changed, turnEnded, pending, room) = state.withLock { state -> (Bool, Bool, [String], LiveKitRoom?) in
            state.agentState = value
            var pending: [String] = []
            if value != "initializing", state.agent != nil {
                pending = state.pendingTexts
                state.pendingTexts = []
            }
            guard state.conversation != conversation else { return (false, false, pending, state.room) }
            let wasSpeaking = state.conversation == .speaking
            state.conversation = conversation
            if wasSpeaking { state.dropAnswer = false }
            return (true, wasSpeaking, pending, state.room)
        }
        if let room, !pending.isEmpty {
            let task = Task { for text in pending { await sendTyped(text, room) } }
            state.withLock { $0.otherTasks.append(task) }
        }
        guard changed else { return }
        if turnEnded { runtime.emit(.turnComplete) }
        runtime.emit(.conversation(conversation))
    }

    // MARK: - The room's events

    private func pumpRoom(_ client: LiveKitClient, _ room: LiveKitRoom) async -> ConnectionEnd {
        let localIdentity = room.localParticipant.identity
        for await event in room.events {
            logger.debug("room event: \(String(describing: event).prefix(200))")
            switch event {
            case .participantConnected(let participant):
                if participant.kind == .agent { agentArrived(participant, room: room) }
            case .participantAttributesChanged(let identity, let attributes, _):
                let agent = state.withLock { $0.agent }
                if identity == agent, let value = attributes["lk.agent.state"] { agentStateChanged(value) }
            case .trackSubscribed(let track):
                guard track.isAudio, track.participantIdentity != localIdentity else { break }
                let agent = state.withLock { $0.agent }
                if let agent, agent != track.participantIdentity { break }
                startAudio(client, track)
            case .localTrackPublished(let trackSid):
                state.withLock { $0.microphoneTrack = trackSid }
            case .trackUnsubscribed(_, let trackSid):
                let reader = state.withLock { $0.audioReaders.removeValue(forKey: trackSid) }
                reader?.cancel()
            case .participantDisconnected(let identity, let reason):
                let (agent, reconnecting) = state.withLock { ($0.agent, $0.reconnecting) }
                guard identity == agent else { break }
                if reconnecting {
                    // Part of a full rejoin: the agent comes back with the room.
                    state.withLock { $0.agent = nil }
                    break
                }
                logger.notice("the agent left the room (\(reason)): the session ends")
                runtime.emit(.notice("the agent left the room"))
                runtime.conversationEnded()
                return .finished
            case .textStreamOpened(let reader):
                guard reader.info.topic == "lk.transcription" else { break }
                let role: Transcript.Role = reader.sender == localIdentity ? .user : .agent
                let task = Task { await self.readTranscript(reader, role: role) }
                state.withLock { $0.otherTasks.append(task) }
            case .reconnecting:
                state.withLock { $0.reconnecting = true }
                logger.notice("the LiveKit connection dropped; the library is getting it back")
                runtime.emit(.link(.connecting(attempt: 2)))
            case .reconnected:
                state.withLock { $0.reconnecting = false }
                logger.info("the LiveKit connection is back")
                runtime.emit(.link(.connected))
            case .disconnected(let reason):
                return disconnected(reason)
            case .ended:
                if runtime.isFinishing { return .finished }
                return .failed(SessionFailure(.transient, "the LiveKit room's events ended"), healthy: true)
            default:
                break
            }
        }
        if runtime.isFinishing { return .finished }
        return .failed(SessionFailure(.transient, "the LiveKit room's events ended"), healthy: true)
    }

    /// The room was left: ended by the service (deleted, closed, removed), or lost (joined again with backoff).
    private func disconnected(_ reason: String) -> ConnectionEnd {
        if runtime.isFinishing { return .finished }
        switch reason {
        case "ROOM_DELETED", "ROOM_CLOSED", "PARTICIPANT_REMOVED", "CLIENT_INITIATED":
            logger.notice("the LiveKit room was left (\(reason)): the session ends")
            runtime.emit(.notice("the room ended (\(reason))"))
            runtime.conversationEnded()
            return .finished
        case "DUPLICATE_IDENTITY":
            return .failed(
                SessionFailure(
                    .configuration,
                    "another participant joined the room as \(configuration.identity) (livekit.identity)"
                ),
                healthy: true
            )
        default:
            return .failed(SessionFailure(.transient, "the LiveKit room was lost (\(reason))"), healthy: true)
        }
    }

    /// Plays the agent's audio track: its frames (asked for at 24 kHz mono) become answer audio, unless the user
    /// cancelled the answer they belong to.
    private func startAudio(_ client: LiveKitClient, _ track: LiveKitRemoteTrack) {
        let stream: LiveKitAudioStream
        do {
            stream = try client.audioStream(of: track, sampleRate: LiveKitAgentConfiguration.outputRate, channels: 1)
        } catch {
            logger.warning("the agent's audio track \(track.sid) cannot be played: \(error)")
            return
        }
        logger.info("playing the agent's audio track \(track.sid)")
        let task = Task {
            for await frame in stream.frames {
                guard frame.channels == 1, !frame.samples.isEmpty else { continue }
                let (drop, speaking) = state.withLock { ($0.dropAnswer, $0.conversation == .speaking) }
                // The track carries silence between answers (the agent's source fills its gaps): that is not answer
                // audio. Sound is, whatever the state says (the state may come a moment after the first words).
                if drop || !speaking && Self.isSilent(frame.samples) { continue }
                runtime.emit(.audio(AudioChunk(samples: frame.samples, sampleRate: frame.sampleRate)))
            }
            withExtendedLifetime(stream) {}
        }
        let earlier = state.withLock { state in
            defer { state.audioReaders[track.sid] = task }
            return state.audioReaders[track.sid]
        }
        earlier?.cancel()
    }

    /// A transcript stream: the agent's comes word by word (one stream per segment, final when it ends); the
    /// user's come as whole texts, interim and final (`lk.transcription_final`). What arrived before a stream
    /// failed is kept.
    private func readTranscript(_ reader: LiveKitTextStreamReader, role: Transcript.Role) async {
        let attributes = reader.info.attributes
        let segment = RemoteText.printable(attributes["lk.segment_id"] ?? reader.info.id, limit: 100)
        let markedFinal = attributes["lk.transcription_final"] == "true"
        let limit = LiveKitAgentConfiguration.transcriptLimit
        var text = ""
        func emit(final: Bool) {
            let shown = RemoteText.printable(text, limit: limit)
            runtime.emit(.transcript(Transcript(role: role, segment: segment, text: shown, isFinal: final)))
        }
        do {
            for try await chunk in try reader.chunks() {
                guard text.count < limit else { continue }
                text += chunk.prefix(limit - text.count)
                if role == .agent { emit(final: false) }
            }
        } catch {
            if Task.isCancelled { return }
            logOnce("transcript", "a transcript stream ended abnormally; what arrived is kept: \(error)")
        }
        if Task.isCancelled { return }
        let isFinal = role == .agent || markedFinal
        guard !text.isEmpty || isFinal else { return }
        emit(final: isFinal)
    }

    /// The loudest sample at most −66 dBFS.
    static func isSilent(_ samples: [Int16]) -> Bool {
        samples.allSatisfy { $0 >= -16 && $0 <= 16 }
    }

    private func logOnce(_ kind: String, _ message: String) {
        let first = state.withLock { $0.loggedKinds.insert(kind).inserted }
        if first { logger.warning("\(message)") }
    }
}
