import HarkCore
import Logging

/// The appliance's supervisor: one loop that owns the mode machine and performs its actions. Microphone frames,
/// button actions, session events and ticks arrive through ``ApplianceInputs`` (frames in a bounded lane of
/// their own), so there is no shared state to race on. The devices run on their own threads; the supervisor
/// sees them through the core's protocols, so tests drive it with scripted devices and a manual clock. Its
/// jobs are split by kind: the gates before a session (``VoiceGate``, ``WakeGate``), the session slot
/// (``SessionSlot``), the device rules (``DeviceSupervisor``), what is shown (``StatusPublisher``), what is said
/// of a session (``SessionLog``), the watchdog's readings. Everything that runs beside the loop — the microphone's
/// reader, the ticks, each session and its events, each wait for the speaker to drain — is a child of ``run()``'s
/// task group, one child per stream.
public actor Supervisor {
    /// Why the appliance gave up (the service manager restarts it).
    public struct GaveUp: Error, CustomStringConvertible {
        public var description: String
    }

    /// Where every input arrives.
    public nonisolated let inputs: ApplianceInputs
    let devices: ApplianceDevices
    let environment: SupervisorEnvironment
    let logger: Logger
    private let elapsed: @Sendable () -> Duration
    /// Stop once this many answers have been played to their end (demos, tests).
    private let stopAfterTurns: Int?
    private var answersPlayed = 0
    private(set) var behaviour: ApplianceBehaviour
    var machine: ApplianceMachine
    private var voice: VoiceGate?
    /// The voice detector hears speech (between its start and its end).
    private var userSpeaking = false
    var wake: WakeGate?
    /// What ducks the speaker's media lane on the supervisor's side: the wake word, the user's speech.
    var mediaDucking = MediaDucking()
    /// When the stop word listens, and what its detections stop.
    var stopWord = StopWordGate()
    private(set) var slot = SessionSlot()
    /// Children to start, taken by the loop after each input.
    var children: [SupervisorChild] = []
    /// The timers and alarms, and what rings.
    var timerDesk = TimerDesk()
    /// Announcements waiting for the agent's answer to end (with a chime or not).
    var announcements: [(AudioChunk, Bool)] = []
    private var playbackTurn = 0
    private var deviceRules: DeviceSupervisor
    private(set) var publisher: StatusPublisher
    private var fatal: String?
    private var ready = false
    var lastError: String?
    private(set) var framesHandled = 0
    private(set) var loopTurns = 0
    /// Ticks handled so far: the supervisor's own time has moved this often (a test's handle on the clock).
    public private(set) var ticksHandled = 0
    private(set) var sessionEvents = 0
    private(set) var pings = 0
    /// The latest frames' capture-to-queue latencies (ns), for `hark status`.
    private(set) var latencies = [UInt64](repeating: 0, count: 256)
    /// Capture to wire, received to speaker: for `hark status`.
    let pipeline: PipelineLatencies

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
        elapsed = environment.clock.stopwatch()
        pipeline = PipelineLatencies(frameSamples: devices.microphone.frameSize, pace: devices.microphone.pace)
        machine = ApplianceMachine(settings: behaviour.settings, now: .zero)
        voice = Self.voiceGate(for: behaviour)
        wake = behaviour.wake.map(WakeGate.init)
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

    private static func voiceGate(for behaviour: ApplianceBehaviour) -> VoiceGate? {
        behaviour.settings.mode == .pushToTalk ? nil : VoiceGate(vad: behaviour.vad, preRoll: behaviour.preRoll)
    }

    func now() -> Duration { elapsed() }

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
        startTimers()
        scheduleTimerWake()
        ready = true
        publish(force: true)
        publisher.notifier.ready(status: publisher.status.line)
        logger.info(
            "ready: \(publisher.status.line) (mode \(behaviour.mode), \(behaviour.backend), board \(devices.board))"
        )
        let microphone = devices.microphone
        let speaker = devices.speaker
        let clock = environment.clock
        let tick = environment.tick
        let gaveUp = await withDiscardingTaskGroup { group -> GaveUp? in
            group.addTask {
                while let frame = await microphone.next() { await inputs.deliver(frame: frame) }
            }
            group.addTask {
                while (try? await clock.sleep(for: tick)) != nil { inputs.post(.event(.tick)) }
            }
            defer { group.cancelAll() }
            do {
                while true {
                    let input = await inputs.next()
                    if case .control(.stop) = input { break }
                    try handle(input)
                    paceMicrophone()
                    for child in takeChildren() {
                        group.addTask { await child.run(inputs: inputs, speaker: speaker) }
                    }
                }
            } catch {
                stopInputs()
                stopSpeaker()
                return error as? GaveUp ?? GaveUp(description: "\(error)")
            }
            await closeSessions()
            stopSpeaker()
            return nil
        }
        if let gaveUp { throw gaveUp }
        publisher.stopped { fillCounters(&$0) }
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
            publish(frame: true)
            return
        case .control(.event(.tick)):
            ticksHandled += 1
            try checkDevices()
            checkWakeWord()
            checkStopWord()
            advanceTimers()
            scheduleTimerWake()
            apply(machine.handle(.tick, now: now()))
        case .control(.timerDue):
            timerWake()
        case .control(.event(.wakeWord(let detection))):
            wakeWordHeard(detection)
        case .control(.event(.stopWord(let detection))):
            stopWordHeard(detection)
        case .control(.event(let event)):
            if case .button(let action) = event {
                logger.debug("button: \(action.rawValue)")
                if buttonStopsRinging(action) { break }
            }
            apply(machine.handle(event, now: now()))
        case .control(.session(let number, let event)):
            guard slot.isCurrent(number) else { return }
            sessionEvents += 1
            sessionEvent(event)
        case .control(.sessionEnded(let number, let failure)):
            if let failure { logger.warning("session ended: \(RemoteText.printable(failure.message))") }
            guard slot.runEnded(number) else { return }
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
        case .control(.settled(let done)):
            done()
        case .control(.stop):
            break
        }
        playAnnouncements()
        publish()
    }

    /// A microphone frame through the gates: the voice detector, the wake word, then to the session when the
    /// microphone is live (unless it went already, as the end of a pre-roll).
    private func handleFrame(_ frame: CapturedFrame) {
        latencies[framesHandled % latencies.count] = frame.enqueuedAt &- frame.readAt
        framesHandled += 1
        let chunk = frame.chunk
        var preRollSent = false
        if var gate = voice {
            let result = gate.process(chunk)
            voice = gate
            switch result.event {
            case .speechStarted?:
                userSpeaking = true
                preRollSent = apply(machine.handle(.voiceStarted, now: now()), preRoll: result.frames)
            case .speechEnded?:
                userSpeaking = false
                apply(machine.handle(.voiceEnded, now: now()))
            case nil:
                break
            }
        }
        if var gate = wake, let spotter = behaviour.wake?.spotter {
            let verdict = gate.frame(chunk, loud: voice?.vad.lastFrameLoud)
            wake = gate
            spotter.feed(chunk.samples, at: verdict.start)
            if let word = verdict.falseStart {
                let name = RemoteText.printable(word, limit: SessionLog.nameLimit)
                logger.info("wake word \(name): nothing was said after it (a false start)")
            }
        }
        if let spotter = behaviour.stopWord?.spotter,
            // Heard only while it can stop something: the answer playing, what rings.
            let start = stopWord.heard(
                chunk.samples.count,
                while: StoppableActivity(machine.playing ? [.agentSpeaking] : []).union(isRinging ? [.ringing] : [])
            )
        {
            spotter.feed(chunk.samples, at: start)
        }
        if machine.forwarding, !preRollSent, let session = slot.session {
            session.send(.audio(chunk))
        }
    }

    /// Logs what a session says and feeds the mode machine.
    private func sessionEvent(_ event: SessionEvent) {
        let event = SessionLog.printable(event)
        if case .audio(let chunk) = event { devices.speaker.enqueue(chunk) }
        let said = SessionLog.said(event, transcripts: behaviour.logTranscripts)
        for line in said.lines { logger.log(level: line.level, "\(line.message)") }
        if let error = said.lastError { lastError = error }
        apply(machine.handle(.session(event), now: now()))
    }

    // MARK: - Actions

    /// Performs the mode machine's `actions`; `preRoll` is the audio that goes first when the microphone opens with
    /// it. True when the pre-roll was sent.
    @discardableResult
    func apply(_ actions: [ApplianceAction], preRoll: [AudioChunk] = []) -> Bool {
        var preRollSent = false
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
                guard on, withPreRoll, !preRoll.isEmpty, let session = slot.session else { break }
                for chunk in preRoll { session.send(.audio(chunk)) }
                preRollSent = true
            case .muteCapture(let muted):
                devices.microphone.isMuted = muted
                logger.info(muted ? "microphone muted" : "microphone unmuted")
            case .interruptPlayback:
                playbackTurn += 1
                devices.speaker.interrupt()
                logger.info("playback interrupted")
            case .awaitPlaybackDrain:
                // Ends when the last sample has played, or at an interruption or stop.
                children.append(.drain(turn: playbackTurn))
            case .earcon(let earcon):
                guard !isRinging else { break }  // what rings is heard over any earcon
                devices.speaker.enqueue(earcon.chunk(sampleRate: 24_000, level: behaviour.earconLevel))
                if !machine.playing { children.append(.drain(turn: nil)) }
            case .adjustVolume(let percent):
                devices.speaker.volume += Float(percent) / 100
                logger.info("volume \(Int((devices.speaker.volume * 100).rounded()))%")
            case .forgetConversation:
                behaviour.forgetConversation()
            }
        }
        return preRollSent
    }

    private func openSession(fresh: Bool) {
        let tools = ToolRegistry(
            DeviceTools.make(
                behaviour.tools,
                controls: controls,
                timers: behaviour.timers == nil ? nil : timerControls,
                behaviors: behaviour.toolBehaviors
            )
        )
        let pipeline = self.pipeline
        let clock = environment.monotonicNanoseconds
        let session = behaviour.makeSession(fresh, tools) { pipeline.sent($0, now: clock()) }
        let number = slot.open(session)
        logger.info(fresh ? "opening a new conversation" : "opening a session")
        // When a session ends is the supervisor's decision: it finishes a session it closes and leaves its run to
        // return (its events, of an old generation, are ignored meanwhile); a stop gives it two seconds more.
        children += [.session(session, generation: number), .events(session.events, generation: number)]
    }

    private func takeChildren() -> [SupervisorChild] {
        defer { children = [] }
        return children
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
        if let timers = new.timers {
            timerDesk.book.ringFor = TimerBook(ringFor: timers.ringFor).ringFor
        } else if isRinging {
            stopRinging("timers turned off")
        }
        machine = ApplianceMachine(settings: new.settings, now: now())
        voice = Self.voiceGate(for: new)
        userSpeaking = false
        if muted { apply(machine.handle(.setMuted(true), now: now())) }
        if let newWake = new.wake, newWake.spotter === oldSpotter, var gate = wake {
            // The same detector: its count and what it heard go on.
            gate.sendWakeWord = newWake.sendWakeWord
            gate.falseStartWindow = newWake.falseStartWindow
            wake = gate
        } else {
            wake = new.wake.map(WakeGate.init)
            startWakeWord()
        }
        if new.stopWord?.spotter !== oldStop {
            stopWord = StopWordGate()
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
        for line in verdict.lines { logger.log(line) }
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
        if isRinging { overlays.insert(.alert) }
        if var gate = wake {
            if gate.isShown(now: now()) { overlays.insert(.wake) }
            wake = gate
        }
        let level = Double(max(0, min(1, (devices.microphone.level + 60) / 60)))
        return IndicatorInput(
            conversation: machine.conversation,
            overlays: overlays,
            microphoneLive: machine.microphoneLive,
            level: machine.conversation == .speaking ? 0.6 : level
        )
    }

    /// Shows the state: after a `frame` only the LEDs (their level follows the voice), unless what they show
    /// changed; else the status line and file too.
    func publish(force: Bool = false, frame: Bool = false) {
        let input = indicator()
        let changes = mediaDucking.update(
            wakeShown: input.overlays.contains(.wake),
            userSpeaking: userSpeaking,
            buttonHeld: input.overlays.contains(.buttonHeld),
            conversation: input.conversation
        )
        for (reason, active) in changes { devices.speaker.setDuck(reason, active) }
        if frame, !publisher.changes(input) {
            publisher.show(input)
            return
        }
        let line = ApplianceStatus.line(indicator: input, link: machine.link, fatal: fatal)
        publisher.publish(input, line: line, now: now(), force: force) { fillCounters(&$0) }
    }

    // MARK: - Stopping

    /// Finishes the open session and gives every session still running two seconds (on the clock) to end
    /// politely; the task group then cancels what is left.
    private func closeSessions() async {
        publisher.notifier.stopping()
        logger.info("stopping")
        if let session = slot.session {
            session.finish()
            slot.close()
        }
        stopInputs()
        let deadline = now() + .seconds(2)
        // The ticks go on meanwhile: each is a look at the time.
        while !slot.running.isEmpty, now() < deadline, !Task.isCancelled {
            if case .control(.sessionEnded(let number, _)) = await inputs.next() { _ = slot.runEnded(number) }
        }
    }

    /// Stops what feeds the loop: the button, the microphone (its reader ends), the wake-word detector.
    private func stopInputs() {
        devices.button?.stop()
        devices.microphone.stop()
        behaviour.wake?.spotter.stop()
        behaviour.stopWord?.spotter.stop()
    }

    /// Silences and stops the speaker (every wait for it to drain ends).
    private func stopSpeaker() {
        devices.speaker.interrupt()
        devices.speaker.stop()
    }

    /// Counts a watchdog ping (shown in `hark status`).
    public func pinged() { pings += 1 }
}
