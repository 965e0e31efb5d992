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

    public init(
        clock: any Clock<Duration>,
        tick: Duration = .milliseconds(250),
        monotonicNanoseconds: @escaping @Sendable () -> UInt64,
        wallClock: @escaping @Sendable () -> Double,
        processID: Int32 = 0,
        deviceFacts: @escaping @Sendable () -> [String: JSONValue] = { [:] },
        processStartTicks: UInt64? = nil
    ) {
        self.clock = clock
        self.tick = tick
        self.monotonicNanoseconds = monotonicNanoseconds
        self.wallClock = wallClock
        self.processID = processID
        self.deviceFacts = deviceFacts
        self.processStartTicks = processStartTicks
    }
}

/// The appliance's supervisor: one loop that owns the mode machine and performs its actions. Microphone frames,
/// button actions, session events and ticks arrive through ``ApplianceInputs`` (frames in a bounded lane of
/// their own), so there is no shared state to race on. The devices run on their own threads; the supervisor
/// sees them through the core's protocols, so tests drive it with scripted devices and a manual clock. Its
/// jobs are split by kind: the session slot (``SessionSlot``), the device rules (``DeviceSupervisor``), what
/// is shown (``StatusPublisher``), the watchdog's readings.
public actor Supervisor {
    /// Why the appliance gave up (the service manager restarts it).
    public struct GaveUp: Error, CustomStringConvertible {
        public var description: String
    }

    /// Where every input arrives.
    public nonisolated let inputs: ApplianceInputs
    private let devices: ApplianceDevices
    private let environment: SupervisorEnvironment
    private let logger: Logger
    private let elapsed: @Sendable () -> Duration
    /// Stop once this many answers have been played to their end (demos, tests).
    private let stopAfterTurns: Int?
    private var answersPlayed = 0
    private var behaviour: ApplianceBehaviour
    private var machine: ApplianceMachine
    private var gate: VoiceGate?
    private var preRoll: [[Int16]] = []
    private var preRollSent = false
    /// Microphone samples handled so far: the count the wake-word detector's detections are placed in.
    private var samplesHeard = 0
    /// The last seconds of microphone audio, for what follows a wake word.
    private var recent = RecentAudio(limit: 3 * 16_000)
    private var falseStarts = FalseStartJudge()
    /// The wake animation shows until then.
    private var wakeShownUntil: Duration?
    private var lastWake: WakeDetection?
    private var wakeErrorLogged = false
    /// When the stop word listens, and what its detections stop.
    private var stopGate = StopWordGate()
    private var stopErrorLogged = false
    private var slot = SessionSlot()
    private var playbackTurn = 0
    private var deviceRules: DeviceSupervisor
    private var publisher: StatusPublisher
    private var fatal: String?
    private var ready = false
    private var lastError: String?
    private var framesHandled = 0
    private var loopTurns = 0
    /// Ticks handled so far: the supervisor's own time has moved this often (a test's handle on the clock).
    public private(set) var ticksHandled = 0
    private var sessionEvents = 0
    private var pings = 0
    /// The latest frames' capture-to-queue latencies (ns), for `hark status`.
    private var latencies = [UInt64](repeating: 0, count: 256)
    /// Capture to wire, received to speaker: for `hark status`.
    private let pipeline: PipelineLatencies

    /// - Parameters:
    ///   - statusFile: where `hark status` reads the state (nil: nowhere).
    ///   - deviceGiveUp: how long the microphone, or a speaker owing audio, may stay gone.
    ///   - onShown: sees each change of what the LEDs show, in order.
    public init(
        devices: ApplianceDevices,
        behaviour: ApplianceBehaviour,
        notifier: any ServiceNotifier,
        statusFile: String?,
        logger: Logger,
        environment: SupervisorEnvironment,
        stopAfterTurns: Int? = nil,
        deviceGiveUp: Duration = .seconds(20),
        onShown: @escaping @Sendable (ShownState) -> Void = { _ in }
    ) {
        inputs = ApplianceInputs()
        self.devices = devices
        self.environment = environment
        self.logger = logger
        self.behaviour = behaviour
        self.stopAfterTurns = stopAfterTurns
        elapsed = Self.stopwatch(environment.clock)
        pipeline = PipelineLatencies(frameSamples: devices.microphone.frameSize, pace: devices.microphone.pace)
        machine = ApplianceMachine(settings: behaviour.settings, now: .zero)
        gate = Self.gate(for: behaviour)
        deviceRules = DeviceSupervisor(giveUpAfter: deviceGiveUp)
        var status = ApplianceStatus(mode: behaviour.mode, backend: behaviour.backend, board: devices.board)
        status.pid = environment.processID
        status.processStartTicks = environment.processStartTicks
        status.startedAt = environment.wallClock()
        publisher = StatusPublisher(
            indicator: devices.indicator,
            notifier: notifier,
            statusFile: statusFile,
            logger: logger,
            status: status,
            onShown: onShown
        )
    }

    private static func stopwatch<C: Clock<Duration>>(_ clock: C) -> @Sendable () -> Duration {
        let start = clock.now
        return { start.duration(to: clock.now) }
    }

    private static func gate(for behaviour: ApplianceBehaviour) -> VoiceGate? {
        behaviour.settings.mode == .pushToTalk ? nil : VoiceGate(vad: behaviour.vad, preRoll: behaviour.preRoll)
    }

    private func now() -> Duration { elapsed() }

    /// The device tools' view of the appliance.
    public nonisolated var controls: any DeviceControls { Controls(supervisor: self) }

    /// The `STATUS=` line now.
    public var statusLine: String { publisher.status.line }

    /// Runs until ``stop()``; throws ``GaveUp`` after repeated or lasting local failures.
    public func run() async throws {
        publish(force: true)  // booting, until the button and the loop run
        let inputs = self.inputs
        if let button = devices.button {
            do {
                try button.start { action in inputs.post(.event(.button(action))) }
            } catch {
                logger.error("the button cannot be read: \(error)")
                lastError = "the button cannot be read"
            }
        }
        startWakeWord()
        startStopWord()
        ready = true
        publish(force: true)
        publisher.notifier.ready(status: publisher.status.line)
        logger.info(
            "ready: \(publisher.status.line) (mode \(behaviour.mode), \(behaviour.backend), board \(devices.board))"
        )
        let microphone = devices.microphone
        let clock = environment.clock
        let tick = environment.tick
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                while let frame = await microphone.next() { inputs.post(frame: frame) }
            }
            group.addTask {
                while !Task.isCancelled {
                    try await clock.sleep(for: tick)
                    inputs.post(.event(.tick))
                }
            }
            defer { group.cancelAll() }
            while true {
                let input = await inputs.next()
                if case .control(.stop) = input { break }
                try handle(input)
            }
        }
        await shutDown()
    }

    /// Asks the loop to end politely (as SIGTERM does).
    public nonisolated func stop() { inputs.post(.stop) }

    /// Applies a reloaded configuration.
    public nonisolated func reload(_ behaviour: ApplianceBehaviour) { inputs.post(.reload(behaviour)) }

    /// Counts a reload that could not be applied (the running configuration stays) and says why in the status.
    public nonisolated func reloadFailed(_ why: String) { inputs.post(.reloadFailed(why)) }

    // MARK: - Inputs

    private func handle(_ input: ApplianceInputs.Input) throws {
        loopTurns += 1  // the loop's heartbeat: every input, frames included (50 a second)
        switch input {
        case .frame(let frame):
            handleFrame(frame)
        case .control(.event(.tick)):
            ticksHandled += 1
            try checkDevices()
            checkWakeWord()
            apply(machine.handle(.tick, now: now()))
        case .control(.event(.wakeWord(let detection))):
            wakeWordHeard(detection)
        case .control(.event(.stopWord(let detection))):
            stopWordHeard(detection)
        case .control(.event(let event)):
            if case .button(let action) = event { logger.debug("button: \(action.rawValue)") }
            apply(machine.handle(event, now: now()))
        case .control(.session(let number, let event)):
            guard slot.isCurrent(number) else { return }
            sessionEvents += 1
            sessionEvent(event)
        case .control(.sessionEnded(let number, let failure)):
            if let failure { logger.warning("session ended: \(RemoteText.printable(failure.message))") }
            guard slot.isCurrent(number) else { return }
            slot.close()
            apply(machine.handle(.sessionEnded(failure: failure), now: now()))
        case .control(.drained(let turn)):
            guard turn == playbackTurn else { return }
            apply(machine.handle(.playbackDrained, now: now()))
            answersPlayed += 1
            if let stopAfterTurns, answersPlayed >= stopAfterTurns {
                logger.info("\(answersPlayed) answer(s) played; stopping as asked")
                stop()
            }
        case .control(.reload(let behaviour)):
            reload(applying: behaviour)
        case .control(.reloadFailed(let why)):
            publisher.status.reloads = ReloadStatus(count: (publisher.status.reloads?.count ?? 0) + 1, failure: why)
            publish(force: true)
        case .control(.stop):
            break
        }
        publish()
    }

    private func handleFrame(_ frame: CapturedFrame) {
        latencies[framesHandled % latencies.count] = frame.enqueuedAt &- frame.readAt
        framesHandled += 1
        preRollSent = false
        let start = samplesHeard
        samplesHeard += frame.samples.count
        if let wake = behaviour.wake {
            wake.spotter.feed(frame.samples, at: start)
            recent.append(frame.samples, at: start)
        }
        if let stop = behaviour.stopWord {
            // Heard only while it can stop something: the answer playing (and, later, what rings).
            stopGate.update(machine.playing ? .agentSpeaking : [])
            if stopGate.isListening { stop.spotter.feed(frame.samples, at: start) }
        }
        if var gate {
            let result = gate.process(frame.samples)
            self.gate = gate
            switch result.event {
            case .speechStarted?:
                preRoll = result.frames
                apply(machine.handle(.voiceStarted, now: now()))
                preRoll = []
            case .speechEnded?:
                apply(machine.handle(.voiceEnded, now: now()))
            case nil:
                break
            }
            if falseStarts.frame(start: start, count: frame.samples.count, loud: gate.vad.lastFrameLoud),
                let word = lastWake?.word
            {
                logger.info("wake word \(word): nothing was said after it (a false start)")
            }
        }
        if machine.forwarding, !preRollSent, let session = slot.session {
            session.send(.audio(frame.chunk))
        }
    }

    // MARK: - The wake word

    private func startWakeWord() {
        guard let wake = behaviour.wake else { return }
        let inputs = self.inputs
        do {
            try wake.spotter.start { detection in inputs.post(.event(.wakeWord(detection))) }
            logger.info("listening for the wake word \(wake.spotter.words.joined(separator: ", "))")
        } catch {
            // Never a fallback to opening on any speech: a device set up to wait for its name stays quiet.
            logger.error("the wake-word detector cannot run: \(error); no session opens by voice")
            lastError = "the wake-word detector cannot run"
        }
    }

    /// A detection: the audio after the wake word (or, when asked, the word too) goes first, then live audio.
    private func wakeWordHeard(_ detection: WakeDetection) {
        guard let wake = behaviour.wake else { return }
        let word = RemoteText.printable(detection.word, limit: Self.toolNameLogLimit)
        let score = Double((detection.score * 100).rounded()) / 100
        guard !machine.muted else {
            logger.debug("wake word \(word) (\(score)) while muted: ignored")
            return
        }
        logger.info("wake word \(word) (\(score))")
        lastWake = detection
        wakeShownUntil = now() + .seconds(1)
        let window = Int(clamping: wake.falseStartWindow.milliseconds) * 16  // 16 samples a millisecond
        if falseStarts.detected(at: detection.endSample, window: window) {
            logger.info("the wake word before it was a false start")
        }
        let from =
            wake.sendWakeWord
            ? detection.endSample - 16_000 * 3 / 2
            : recent.wordEnd(detectionEnd: detection.endSample, hint: detection.wordEndSample)
        preRoll = recent.audio(from: from)
        apply(machine.handle(.wakeWord(detection), now: now()))
        preRoll = []
    }

    private func startStopWord() {
        guard let stop = behaviour.stopWord else { return }
        let inputs = self.inputs
        do {
            try stop.spotter.start { detection in inputs.post(.event(.stopWord(detection))) }
            logger.info("the stop word \(stop.spotter.words.joined(separator: ", ")) stops an answer while it plays")
        } catch {
            logger.error("the stop-word detector cannot run: \(error); answers stop by the button or the wake word")
            lastError = "the stop-word detector cannot run"
        }
    }

    /// A stop word: stops the answer that plays (never opens a session); nothing when nothing plays any more.
    private func stopWordHeard(_ detection: WakeDetection) {
        let word = RemoteText.printable(detection.word, limit: Self.toolNameLogLimit)
        let score = Double((detection.score * 100).rounded()) / 100
        switch stopGate.verdict(detection) {
        case .stop(let activity):
            logger.info("stop word \(word) (\(score)): stopping the answer")
            if activity.contains(.agentSpeaking) { apply(machine.handle(.stopWord(detection), now: now())) }
        case .ignore:
            logger.debug("stop word \(word) (\(score)) with nothing to stop: ignored")
        }
    }

    /// The detector's health, on every tick: a failure is said once.
    private func checkWakeWord() {
        if let stop = behaviour.stopWord, !stopErrorLogged, let error = stop.spotter.counters.lastError {
            stopErrorLogged = true
            logger.error("the stop-word detector failed: \(RemoteText.printable(error)); answers stop by the button")
            lastError = "the stop-word detector failed"
        }
        guard let wake = behaviour.wake, !wakeErrorLogged, let error = wake.spotter.counters.lastError else { return }
        wakeErrorLogged = true
        logger.error("the wake-word detector failed: \(RemoteText.printable(error)); no session opens by voice")
        lastError = "the wake-word detector failed"
    }

    /// The most of a transcript a log line quotes, in Unicode scalars: a segment's bound
    /// (``TranscriptSegments``), so only escapes can make a line cut.
    static let transcriptLogLimit = 8192
    /// The most of a tool name a log line quotes, in Unicode scalars.
    static let toolNameLogLimit = 80

    /// Logs what a session says (the service's and the model's words: printable and bounded) and feeds the
    /// mode machine.
    private func sessionEvent(_ event: SessionEvent) {
        let event = Self.printableLink(event)
        switch event {
        case .audio(let chunk):
            devices.speaker.enqueue(chunk)
        case .link(let link):
            switch link {
            case .connected: logger.info("session connected")
            case .connecting(let attempt): if attempt > 1 { logger.info("session reconnecting (attempt \(attempt))") }
            case .offline(let reason, _):
                // The session logs the failure and the state line says it: no third line.
                lastError = reason
            case .rejected(let failure, _):
                if failure.kind == .untrusted {
                    logger.error("not connecting to a server that cannot be verified: \(failure.message)")
                } else {
                    logger.error("the service refused the device: \(failure.message)")
                }
                lastError = failure.message
            case .ended: logger.info("session ended")
            }
        case .transcript(let transcript) where transcript.isFinal:
            // Finished segments only, and their words only when asked (privacy).
            if behaviour.logTranscripts {
                let text = RemoteText.printable(transcript.text, limit: Self.transcriptLogLimit)
                logger.info("\(transcript.role.rawValue): \(text)")
            } else {
                logger.debug("\(transcript.role.rawValue) spoke (\(transcript.text.count) characters)")
            }
        case .tool(.started(_, let name)):
            logger.info("tool call: \(RemoteText.printable(name, limit: Self.toolNameLogLimit))")
        case .tool(.finished(_, let name, let succeeded)) where !succeeded:
            logger.warning("tool call failed: \(RemoteText.printable(name, limit: Self.toolNameLogLimit))")
        case .notice(let text):
            logger.debug("session notice: \(RemoteText.printable(text))")
        case .answerFailed(let why):
            logger.warning("the answer failed: \(RemoteText.printable(why))")
        default:
            break
        }
        apply(machine.handle(.session(event), now: now()))
    }

    /// `event` with the words of a link change (a failure, often quoting the service) printable and bounded:
    /// they reach the log, the state line, `STATUS=` and the status file.
    private static func printableLink(_ event: SessionEvent) -> SessionEvent {
        switch event {
        case .link(.offline(let reason, let retryIn)):
            return .link(.offline(reason: RemoteText.printable(reason), retryIn: retryIn))
        case .link(.rejected(var failure, let retryIn)):
            failure.message = RemoteText.printable(failure.message)
            return .link(.rejected(failure, retryIn: retryIn))
        default:
            return event
        }
    }

    // MARK: - Actions

    private func apply(_ actions: [ApplianceAction]) {
        for action in actions {
            switch action {
            case .openSession(let fresh):
                openSession(fresh: fresh)
            case .closeSession:
                guard let session = slot.session else { break }
                logger.info("closing the session (nobody talking)")
                session.finish()
                slot.close()
            case .send(let input):
                slot.session?.send(input)
            case .forwardMicrophone(let on, let withPreRoll):
                guard on, withPreRoll, let session = slot.session else { break }
                for frame in preRoll { session.send(.audio(AudioChunk(samples: frame, sampleRate: 16_000))) }
                preRollSent = !preRoll.isEmpty
            case .muteCapture(let muted):
                devices.microphone.isMuted = muted
                logger.info(muted ? "microphone muted" : "microphone unmuted")
            case .interruptPlayback:
                playbackTurn += 1
                devices.speaker.interrupt()
                logger.info("playback interrupted")
            case .awaitPlaybackDrain:
                let turn = playbackTurn
                let speaker = devices.speaker
                let inputs = self.inputs
                // Ends when the last sample has played, or at an interruption or stop.
                Task {
                    _ = await speaker.finishTurn()
                    inputs.post(.drained(turn: turn))
                }
            case .earcon(let earcon):
                devices.speaker.enqueue(earcon.chunk(sampleRate: 24_000, level: behaviour.earconLevel))
                if !machine.playing {
                    let speaker = devices.speaker
                    Task { _ = await speaker.finishTurn() }
                }
            case .adjustVolume(let percent):
                devices.speaker.volume += Float(percent) / 100
                logger.info("volume \(Int((devices.speaker.volume * 100).rounded()))%")
            case .forgetConversation:
                behaviour.forgetConversation()
            }
        }
    }

    private func openSession(fresh: Bool) {
        let tools = ToolRegistry(
            DeviceTools.make(behaviour.tools, controls: controls, behaviors: behaviour.toolBehaviors)
        )
        let pipeline = self.pipeline
        let clock = environment.monotonicNanoseconds
        let session = behaviour.makeSession(fresh, tools) { pipeline.sent($0, now: clock()) }
        let number = slot.open(session)
        logger.info(fresh ? "opening a new conversation" : "opening a session")
        let inputs = self.inputs
        // The event stream ends when the session does. Both tasks are detached: when a session ends is the
        // supervisor's decision (finish, then a grace period). Inheriting the service group's graceful shutdown
        // would let the WebSocket layer close every connection the moment it begins, and the session would take
        // that for the service's lifetime close and resume on a new connection, again and again.
        let events = session.events
        Task.detached {
            for await event in events { await inputs.deliver(.session(generation: number, event)) }
        }
        slot.attach(
            Task.detached {
                do {
                    try await session.run()
                    inputs.post(.sessionEnded(generation: number, nil))
                } catch let failure as SessionFailure {
                    inputs.post(.sessionEnded(generation: number, failure))
                } catch {
                    inputs.post(.sessionEnded(generation: number, SessionFailure(.transient, "\(error)")))
                }
            }
        )
    }

    private func reload(applying new: ApplianceBehaviour) {
        publisher.notifier.reloading()
        logger.notice("reloading the configuration (mode \(new.mode), \(new.backend))")
        if let session = slot.session {
            logger.info("closing the session (nobody talking)")
            session.finish()
            slot.close()
            apply(machine.handle(.sessionEnded(failure: nil), now: now()))
        }
        let muted = machine.muted
        let oldSpotter = behaviour.wake?.spotter
        if let oldSpotter, oldSpotter !== new.wake?.spotter { oldSpotter.stop() }
        let oldStop = behaviour.stopWord?.spotter
        if let oldStop, oldStop !== new.stopWord?.spotter { oldStop.stop() }
        if new.settings.mode != behaviour.settings.mode { devices.button?.setMode(new.settings.mode) }
        behaviour = new
        machine = ApplianceMachine(settings: new.settings, now: now())
        gate = Self.gate(for: new)
        if muted { apply(machine.handle(.setMuted(true), now: now())) }
        if new.wake?.spotter !== oldSpotter {
            wakeErrorLogged = false
            startWakeWord()
        }
        if new.stopWord?.spotter !== oldStop {
            stopErrorLogged = false
            stopGate = StopWordGate()
            startStopWord()
        }
        publisher.status.mode = new.mode
        publisher.status.backend = new.backend
        publisher.status.reloads = ReloadStatus(count: (publisher.status.reloads?.count ?? 0) + 1)
        publish(force: true)
        publisher.notifier.ready(status: publisher.status.line)
    }

    /// The device rules, on every tick.
    private func checkDevices() throws {
        let verdict = deviceRules.check(
            microphone: devices.microphone.condition,
            speaker: devices.speaker.condition,
            speakerOwes: devices.speaker.buffered > .zero,
            buttonErrors: devices.button?.errorCount,
            now: now()
        )
        for line in verdict.lines {
            switch line.level {
            case .info: logger.info("\(line.message)")
            case .notice: logger.notice("\(line.message)")
            case .warning: logger.warning("\(line.message)")
            case .error: logger.error("\(line.message)")
            }
        }
        if let error = verdict.lastError { lastError = RemoteText.printable(error) }
        if let fatal = verdict.fatal {
            self.fatal = fatal
            publish(force: true)
            throw GaveUp(description: fatal)
        }
    }

    // MARK: - What is shown

    private func indicator() -> IndicatorInput {
        var overlays = machine.overlays
        if !ready { overlays.insert(.booting) }
        if fatal != nil { overlays.insert(.fatal) }
        if let until = wakeShownUntil {
            if now() < until { overlays.insert(.wake) } else { wakeShownUntil = nil }
        }
        let level = Double(max(0, min(1, (devices.microphone.level + 60) / 60)))
        return IndicatorInput(
            conversation: machine.conversation,
            overlays: overlays,
            microphoneLive: machine.microphoneLive,
            level: machine.conversation == .speaking ? 0.6 : level
        )
    }

    private func publish(force: Bool = false) {
        let input = indicator()
        let line = ApplianceStatus.line(indicator: input, link: machine.link, fatal: fatal)
        publisher.publish(input, line: line, now: now(), force: force) { fillCounters(&$0) }
    }

    private func fillCounters(_ status: inout ApplianceStatus) {
        let microphone = devices.microphone.counters
        let speaker = devices.speaker.counters
        status.updatedAt = environment.wallClock()
        status.sessions = slot.opened
        status.reconnects = slot.reconnects
        status.serviceSession = slot.serviceSession
        status.droppedFrames = microphone.dropped + inputs.droppedFrames + slot.droppedInputSamples / 320
        status.resentSamples = slot.resentSamples
        status.xruns = microphone.overruns + speaker.deviceUnderruns
        status.underruns = speaker.underruns
        status.watchdogPings = pings
        if speaker.interrupts > 0 { status.lastInterruptMilliseconds = Double(speaker.lastInterruptLatency) / 1e6 }
        if framesHandled > 0 {
            let recent = latencies.prefix(min(framesHandled, latencies.count)).sorted()
            status.captureLatencyMicroseconds = Double(recent[recent.count / 2]) / 1000
        }
        pipeline.collect(from: devices.speaker)
        status.captureToWire = pipeline.captureToWire
        status.receivedToSpeaker = pipeline.receivedToSpeaker
        status.lastError = lastError
        if let wake = behaviour.wake {
            let counters = wake.spotter.counters
            status.wake = WakeStatus(
                words: wake.spotter.words,
                detections: counters.detections,
                falseStarts: falseStarts.falseStarts,
                cpuSeconds: Double(counters.cpuNanoseconds) / 1e9,
                audioSeconds: Double(counters.samplesHeard) / 16_000,
                droppedSeconds: Double(counters.droppedSamples) / 16_000
            )
        } else {
            status.wake = nil
        }
    }

    private func shutDown() async {
        publisher.notifier.stopping()
        logger.info("stopping")
        if let session = slot.session {
            session.finish()
            slot.close()
        }
        devices.button?.stop()
        devices.microphone.stop()
        behaviour.wake?.spotter.stop()
        behaviour.stopWord?.spotter.stop()
        // Give the sessions two seconds to close politely, then cancel them and silence the speaker.
        let pending = slot.takeFinishing()
        let clock = environment.clock
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for task in pending { await task.value }
            }
            group.addTask { try? await clock.sleep(for: .seconds(2)) }
            _ = await group.next()
            group.cancelAll()
        }
        for task in pending { task.cancel() }
        devices.speaker.interrupt()
        devices.speaker.stop()
        publisher.stopped { fillCounters(&$0) }
    }

    // MARK: - Supervision

    /// Each part's progress, for the watchdog.
    public func readings() -> [String: ProgressWatchdog.Reading] {
        let speaker = devices.speaker.counters
        var readings: [String: ProgressWatchdog.Reading] = [
            "capture": .init(counter: devices.microphone.counters.frames),
            "playback": .init(
                counter: speaker.framesWritten + speaker.silenceFrames,
                idleByDesign: !machine.playing && devices.speaker.buffered == .zero
            ),
            "supervisor": .init(counter: loopTurns),
            "session": .init(
                counter: sessionEvents + (slot.session?.statistics.audioSamplesSent ?? 0),
                idleByDesign: slot.session == nil || !machine.forwarding || machine.link != .connected
            ),
        ]
        if let indicator = devices.indicator {
            readings["leds"] = .init(counter: indicator.framesRendered, idleByDesign: indicator.isResting)
        }
        if let button = devices.button { readings["button"] = .init(counter: button.turns) }
        if let wake = behaviour.wake {
            // A detector that stopped hearing leaves the device deaf to its name; one that failed says so instead.
            let counters = wake.spotter.counters
            let caughtUp = samplesHeard - counters.samplesHeard - counters.droppedSamples < 16_000 / 2
            readings["wake"] = .init(
                counter: counters.samplesHeard,
                idleByDesign: caughtUp || counters.lastError != nil
            )
        }
        return readings
    }

    /// Counts a watchdog ping (shown in `hark status`).
    public func pinged() { pings += 1 }

    /// Mutes or unmutes (a device tool).
    func setMuted(_ muted: Bool) { inputs.post(.event(.setMuted(muted))) }

    var isMuted: Bool { machine.muted }

    /// The device's condition for the `get_device_status` tool.
    func deviceStatus() -> JSONValue {
        var status: [String: JSONValue] = environment.deviceFacts()
        status["state"] = .string(publisher.status.line)
        status["uptime_seconds"] = .number((environment.wallClock() - publisher.status.startedAt).rounded())
        status["volume_percent"] = .number(Double(Int((devices.speaker.volume * 100).rounded())))
        status["microphone_muted"] = .bool(machine.muted)
        status["board"] = .string(devices.board)
        return .object(status)
    }

    /// ``DeviceControls`` over the supervisor.
    struct Controls: DeviceControls {
        let supervisor: Supervisor
        func volume() async -> Int { await supervisor.volumePercent() }
        func setVolume(_ percent: Int) async -> Int { await supervisor.setVolume(percent) }
        func isMuted() async -> Bool { await supervisor.isMuted }
        func setMuted(_ muted: Bool) async { await supervisor.setMuted(muted) }
        func status() async -> JSONValue { await supervisor.deviceStatus() }
    }

    func volumePercent() -> Int { Int((devices.speaker.volume * 100).rounded()) }

    func setVolume(_ percent: Int) -> Int {
        devices.speaker.volume = Float(max(0, min(100, percent))) / 100
        return volumePercent()
    }
}
