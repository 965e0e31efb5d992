import HarkCore
import HarkLiveKitWire
import Logging
import Synchronization

/// A conversation with a LiveKit agent: the session joins a room (a token from the configured source), publishes
/// the microphone, plays the agent's audio track, follows its state and its transcripts. The work in the room is the
/// helper's (`hark-livekit`, one per connection, over a socket pair); the decisions are ``LiveKitSessionMachine``'s.
/// The library resumes or rejoins a dropped connection by itself; a connection it gives up on, or a helper that ends
/// mid-session, is joined again with backoff (a new helper). The agent leaving, or the room being deleted, ends the
/// session.
public final class LiveKitAgentSession: RuntimeSession {
    public let runtime: SessionRuntime
    private let configuration: LiveKitAgentConfiguration
    private let http: any HTTPClient
    private let machine: Mutex<LiveKitSessionMachine>
    /// The room of this session when the configuration names none.
    private let sessionRoom: String
    private var logger: Logger { runtime.logger }

    /// How serving a connection ended.
    private enum Outcome: Sendable {
        case end(ConnectionEnd)
        /// The helper's events ended: before it greeted, before it joined, or in the room.
        case helperEnded(Phase)
        /// Nothing to say (a watcher finished).
        case none
    }

    private enum Phase: Sendable { case starting, joining, joined }

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
        machine = Mutex(LiveKitSessionMachine(settings: configuration.machineSettings))
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
        runtime.finish(connected: machine.withLock { $0.connected })
    }

    public func run() async throws {
        try await runtime.runConnections(machine: configuration.link.reconnectMachine()) { [self] _ in
            await connectOnce()
        }
    }

    // MARK: - One connection

    /// Fetches the token, starts a helper, joins through it and serves the room; the helper leaves and ends after.
    private func connectOnce() async -> ConnectionEnd {
        let join = LiveKitJoin(
            room: sessionRoom,
            identity: configuration.identity,
            name: configuration.participantName,
            agentName: configuration.agentName
        )
        let details: (url: String, credential: LiveKitCredential)
        do {
            details = try await configuration.tokens.fetch(join, http: http, allowInsecure: configuration.allowInsecure)
        } catch let failure as SessionFailure {
            return .failed(failure, healthy: false)
        } catch {
            return .failed(SessionFailure(.transient, "LiveKit token: \(error)"), healthy: false)
        }
        runtime.count { $0.connections += 1 }
        logger.info("joining the LiveKit room \(join.room) at \(URLRedaction.redact(details.url)) as \(join.identity)")
        let link: LiveKitHelperLink
        do {
            link = try LiveKitHelperLink.start(configuration.helper)
        } catch {
            let problem = "the LiveKit helper \(configuration.helper.path) cannot be started: \(error)"
            return .failed(SessionFailure(.configuration, problem), healthy: false)
        }
        let request = LiveKitJoinRequest(
            url: details.url,
            credential: details.credential,
            join: join,
            microphoneRate: UInt32(configuration.microphoneRate),
            preConnectBuffer: configuration.preConnectAudio,
            outputRate: UInt32(LiveKitAgentConfiguration.outputRate),
            outputFrameMilliseconds: UInt16(clamping: configuration.outputFrame.milliseconds),
            timeoutMilliseconds: UInt32(clamping: configuration.joinTimeout.milliseconds),
            logLevel: logger.logLevel,
            textTopic: LiveKitSessionMachine.transcriptTopic
        )
        let inFlight = AudioInFlight(limit: configuration.microphoneRate / 5)
        let outcome = await serve(link, request, inFlight)
        inFlight.close()
        let exit = link.send(.leave) ? await link.finish(grace: .seconds(8)) : await link.end(grace: .seconds(2))
        machine.withLock { $0.connectionEnded() }
        switch outcome {
        case .end(let end): return end
        case .none: return .finished
        case .helperEnded(let phase):
            if runtime.isFinishing { return .finished }
            let why = link.failure.map { ": \($0)" } ?? ""
            switch phase {
            case .starting:
                let problem = "the LiveKit helper \(configuration.helper.path) did not start (it \(exit))\(why)"
                return .failed(SessionFailure(.configuration, problem), healthy: false)
            case .joining:
                return .failed(
                    SessionFailure(.transient, "the LiveKit helper \(exit) while joining\(why)"),
                    healthy: false
                )
            case .joined:
                return .failed(
                    SessionFailure(.transient, "the LiveKit helper \(exit) mid-session\(why)"),
                    healthy: true
                )
            }
        }
    }

    /// Waits for the helper's greeting, has it join, then serves the room until the connection ends.
    private func serve(_ link: LiveKitHelperLink, _ request: LiveKitJoinRequest, _ inFlight: AudioInFlight) async
        -> Outcome
    {
        switch await nextEvent(link, within: configuration.helperStartTimeout) {
        case .event(.hello(let library)): logger.debug("the LiveKit helper runs \(RemoteText.printable(library))")
        case .event(let other): return failed(.configuration, "the LiveKit helper greeted with \(other.kind)")
        case .timedOut:
            return failed(.configuration, "the LiveKit helper did not start within \(configuration.helperStartTimeout)")
        case .ended: return .helperEnded(.starting)
        }
        guard link.send(.hello), link.send(.join(request)) else { return .helperEnded(.joining) }
        let joined: LiveKitJoined
        switch await nextEvent(link, within: configuration.joinTimeout + .seconds(5)) {
        case .event(.joined(let room)): joined = room
        case .event(.failed(let kind, let message)): return .end(.failed(SessionFailure(kind, message), healthy: false))
        case .event(let other): return failed(.transient, "the LiveKit helper answered the join with \(other.kind)")
        case .timedOut: return failed(.transient, "no LiveKit room within \(configuration.joinTimeout)")
        case .ended: return .helperEnded(.joining)
        }
        runtime.count { $0.readies += 1 }
        // What waited for the room is the start of what the user said: it is for the agent's pre-connect buffer.
        var waiting: [AudioChunk] = []
        var controls: [SessionInput] = []
        for input in runtime.input.removeAll() {
            if case .audio(let chunk) = input { waiting.append(chunk) } else { controls.append(input) }
        }
        runtime.input.pushFront(controls)
        if let end = await perform(machine.withLock { $0.joined(joined, waiting: waiting) }, link, inFlight) {
            return .end(end)
        }
        return await withTaskGroup(of: Outcome.self) { group in
            group.addTask { await self.pumpInput(link, inFlight) }
            group.addTask { await self.pumpEvents(link, inFlight) }
            group.addTask { await self.watchForAgent(link, inFlight) }
            defer { group.cancelAll() }
            while let outcome = await group.next() {
                if case .none = outcome { continue }
                return outcome
            }
            return .none
        }
    }

    private func failed(_ kind: SessionFailure.Kind, _ message: String) -> Outcome {
        .end(.failed(SessionFailure(kind, message), healthy: false))
    }

    private enum Waited { case event(LiveKitEvent), timedOut, ended }

    /// The helper's next event other than a log line (those are logged), within `timeout`.
    private func nextEvent(_ link: LiveKitHelperLink, within timeout: Duration) async -> Waited {
        await withTaskGroup(of: Waited.self) { group in
            group.addTask {
                for await event in link.events {
                    if case .log(let level, let message) = event {
                        self.log(level, message)
                        continue
                    }
                    return .event(event)
                }
                return .ended
            }
            group.addTask { [clock = runtime.clock] in
                try? await clock.sleep(for: timeout)
                return .timedOut
            }
            defer { group.cancelAll() }
            return await group.next() ?? .ended
        }
    }

    // MARK: - Serving

    private func pumpInput(_ link: LiveKitHelperLink, _ inFlight: AudioInFlight) async -> Outcome {
        let gather = Int(configuration.microphoneChunk.milliseconds) * configuration.microphoneRate / 1000
        while let input = await runtime.input.next(maxAudio: configuration.microphoneRate / 10, minAudio: gather) {
            if let end = await perform(machine.withLock { $0.input(input) }, link, inFlight) { return .end(end) }
            if inFlight.isClosed { return .helperEnded(.joined) }
        }
        return .end(.finished)
    }

    private func pumpEvents(_ link: LiveKitHelperLink, _ inFlight: AudioInFlight) async -> Outcome {
        for await event in link.events {
            switch event {
            case .captured(let count):
                // In the track's queue: on the wire, as far as hark can tell.
                if let chunk = inFlight.acknowledged(Int(count)) { runtime.sentAudio(chunk) }
            case .log(let level, let message):
                log(level, message)
            default:
                if let end = await perform(machine.withLock { $0.event(event) }, link, inFlight) { return .end(end) }
            }
        }
        inFlight.close()
        return runtime.isFinishing ? .end(.finished) : .helperEnded(.joined)
    }

    /// Says so in the log when no agent has come after a while.
    private func watchForAgent(_ link: LiveKitHelperLink, _ inFlight: AudioInFlight) async -> Outcome {
        guard (try? await runtime.clock.sleep(for: configuration.agentWait)) != nil else { return .none }
        _ = await perform(machine.withLock { $0.agentWaitElapsed(configuration.agentWait) }, link, inFlight)
        return .none
    }

    /// Performs the machine's actions in order; how the connection ends, when one says so.
    private func perform(
        _ actions: [LiveKitSessionMachine.Action],
        _ link: LiveKitHelperLink,
        _ inFlight: AudioInFlight
    ) async -> ConnectionEnd? {
        for action in actions {
            switch action {
            case .emit(let event):
                runtime.emit(event)
            case .send(let command):
                link.send(command)
            case .capture(let chunk):
                if let end = await send(chunk.samples, chunk: chunk, link, inFlight) { return end }
            case .heldForAgent(let samples):
                runtime.count { $0.audioSamplesSent += samples }
            case .sendSilence:
                if let end = await sendSilence(link, inFlight) { return end }
            case .muteWhenQuiet:
                if runtime.input.queuedSamples == 0 { link.send(.setMuted(true)) }
            case .sendPreConnect(let samples, let agent, let attributes):
                sendPreConnect(samples, to: agent, attributes: attributes, link)
            case .log(let line):
                log(line)
            case .debug(let message):
                logger.debug("\(message)")
            case .noteOnce(let kind, let message):
                runtime.noteOnce(kind: kind, message)
            case .endSession:
                runtime.conversationEnded()
                return .finished
            case .endConnection(let end):
                return runtime.isFinishing ? .finished : end
            }
        }
        return nil
    }

    /// Sends microphone audio once the helper has room for it (its acknowledgements pace the sender).
    private func send(_ samples: [Int16], chunk: AudioChunk?, _ link: LiveKitHelperLink, _ inFlight: AudioInFlight)
        async -> ConnectionEnd?
    {
        let timeout = LiveKitAgentConfiguration.captureTimeout
        switch await inFlight.reserve(samples.count, chunk: chunk, within: timeout, clock: runtime.clock) {
        case .reserved:
            link.send(.audio(samples))
            return nil
        case .closed:
            return nil
        case .timedOut:
            if runtime.isFinishing { return .finished }
            let problem = "the LiveKit helper took no microphone audio for \(timeout)"
            return .failed(SessionFailure(.transient, problem), healthy: true)
        }
    }

    /// The agent finds the end of the user's speech in silence: the track carries some (paced like the microphone)
    /// unless the microphone comes back first.
    private func sendSilence(_ link: LiveKitHelperLink, _ inFlight: AudioInFlight) async -> ConnectionEnd? {
        let frame = [Int16](repeating: 0, count: configuration.microphoneRate / 50)
        var sent = Duration.zero
        while sent < configuration.silenceAfterInput, runtime.input.queuedSamples == 0, !runtime.isFinishing,
            !inFlight.isClosed, machine.withLock({ $0.agentPresent })
        {
            if let end = await send(frame, chunk: nil, link, inFlight) { return end }
            sent += .milliseconds(20)
        }
        return nil
    }

    /// The audio kept for the agent, as a byte stream of raw 16-bit little-endian PCM sent to it alone.
    private func sendPreConnect(
        _ samples: [Int16],
        to agent: String,
        attributes: [String: String],
        _ link: LiveKitHelperLink
    ) {
        let bytes = [UInt8](PCM16.bytes(samples))
        for start in stride(from: 0, to: bytes.count, by: LiveKitWire.maximumBytesPart) {
            link.send(.bytes(Array(bytes[start..<min(bytes.count, start + LiveKitWire.maximumBytesPart)])))
        }
        let stream = LiveKitByteStream(
            topic: LiveKitSessionMachine.preConnectTopic,
            name: "pre-connect-audio",
            mimeType: "audio/pcm",
            attributes: attributes,
            destinations: [agent]
        )
        link.send(.sendBytes(stream))
        logger.debug("sending the agent \(samples.count) samples of what was said before it joined")
    }

    private func log(_ line: LogLine) {
        let level: [LogLine.Level: Logger.Level] = [.info: .info, .notice: .notice, .warning: .warning, .error: .error]
        logger.log(level: level[line.level] ?? .info, "\(line.message)")
    }

    /// A line of the helper's log (LiveKit's library among it), made printable.
    private func log(_ level: Logger.Level, _ message: String) {
        logger.log(level: level, "livekit: \(RemoteText.printable(message))")
    }
}
