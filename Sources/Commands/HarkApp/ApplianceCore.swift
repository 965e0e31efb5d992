import HarkAppliance
import HarkAudio
import HarkBoardIO
import HarkCore
import HarkIndicators
import Logging
import ServiceLifecycle

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// A session the appliance opened, with a way to read its counters whatever the backend.
struct OpenedSession: Sendable {
    var session: any VoiceSession
    /// (connections that completed setup, audio samples sent, input samples dropped, audio samples sent
    /// again on a new connection)
    var counters: @Sendable () -> (connections: Int, samplesSent: Int, dropped: Int, resent: Int)
}

/// What changes on a configuration reload without reopening the devices.
struct ApplianceBehaviour: Sendable {
    var settings: ApplianceMachine.Settings
    /// Opens a session (`fresh`: a new conversation) declaring `tools`; the session calls `audioSent` with
    /// each message of microphone audio it puts on the wire (see ``GeminiLiveConfiguration/audioSent``).
    var makeSession:
        @Sendable (_ fresh: Bool, _ tools: ToolRegistry, _ audioSent: @escaping @Sendable (AudioChunk) -> Void) ->
            OpenedSession
    /// Drops the stored resumption handle.
    var forgetConversation: @Sendable () -> Void
    var tools: DeviceToolSet
    /// Earcon loudness, 0–1 of full scale (before the playback volume).
    var earconLevel: Double
    var vad: EnergyVAD
    var preRoll: Duration
    var logTranscripts: Bool
    /// Names for `hark status`.
    var mode: String
    var backend: String
}

/// The opened hardware the appliance runs on.
struct ApplianceDevices: Sendable {
    var capture: AudioCapture
    var playback: AudioPlayback
    var leds: LEDDriver?
    var button: ButtonReader?
    var board: String
}

/// The appliance's heart: one loop that owns the mode machine and performs its actions. Microphone
/// frames, button actions, session events and timer ticks all arrive on one bounded stream, in order,
/// so there is no shared state to race on. Devices run on their own threads (HarkAudio, HarkBoardIO).
actor ApplianceCore {
    enum Input: Sendable {
        case frame(CapturedFrame)
        case event(ApplianceEvent)
        case session(generation: Int, SessionEvent)
        case sessionEnded(generation: Int, SessionFailure?)
        case drained(turn: Int)
        case reload(ApplianceBehaviour)
        case stop
    }

    /// Why the appliance gave up (the service manager restarts it).
    struct GaveUp: Error, CustomStringConvertible {
        var description: String
    }

    nonisolated let inputs: AsyncStream<Input>
    nonisolated let post: AsyncStream<Input>.Continuation
    let devices: ApplianceDevices
    let notifier: any ServiceNotifier
    let logger: Logger
    let statusFile: String?
    /// Observes each change of what the LEDs show (tests record the sequence).
    let onShown: @Sendable (ShownState) -> Void
    private let now: @Sendable () -> Duration
    private let tick: Duration
    /// What the tick sleeps on.
    private let timer: any Clock<Duration>
    /// Stop once this many answers have been played to their end (demos, tests).
    private let stopAfterTurns: Int?
    private var answersPlayed = 0
    private var behaviour: ApplianceBehaviour
    private var machine: ApplianceMachine
    private var gate: VoiceGate?
    private var preRoll: [[Int16]] = []
    private var preRollSent = false
    private var session: OpenedSession?
    private var generation = 0
    /// The open session's `run()`, and those of sessions closing politely (the newest few).
    private var sessionRun: Task<Void, Never>?
    private var finishing: [Task<Void, Never>] = []
    private var playbackTurn = 0
    private var budget = FailureBudget(limit: 5, window: .seconds(120))
    private var seenOutages = 0
    /// The audio devices in an outage when last checked (for the log lines of their going and coming back).
    private var failingDevices: Set<String> = []
    /// Since when the speaker has been in an outage with audio to play (an idle one owes nothing, and a
    /// reopened one shows it works only once it has played).
    private var speakerOwingSince: Duration?
    private var fatal: String?
    private var ready = false
    private var status: ApplianceStatus
    private var lastShown: ShownState?
    private var lastWritten: Duration = .zero
    private var framesHandled = 0
    private var loopTurns = 0
    private var sessionEvents = 0
    private var sessionsOpened = 0
    private var connectionsBefore = 0
    private var droppedBefore = 0
    private var resentBefore = 0
    private var pings = 0
    private var lastError: String?
    /// The last status file write failed (and was warned about): the next failure is not warned again.
    private var statusWriteFailed = false
    private var transcripts: [Transcript.Role: String] = [:]
    /// The latest frames' capture-to-queue latencies (ns), for `hark status`.
    private var latencies = [UInt64](repeating: 0, count: 256)
    /// Capture to wire, received to speaker: for `hark status`.
    private let pipeline: PipelineLatencies
    private var buttonErrors = 0
    /// How long an audio device may stay gone (the speaker: while it has audio to play) before the
    /// appliance gives up.
    private let deviceGiveUp: Duration

    init(
        devices: ApplianceDevices,
        behaviour: ApplianceBehaviour,
        notifier: any ServiceNotifier,
        statusFile: String?,
        logger: Logger,
        stopAfterTurns: Int? = nil,
        deviceGiveUp: Duration = .seconds(20),
        tick: Duration = .milliseconds(250),
        timer: any Clock<Duration> = ContinuousClock(),
        now: @escaping @Sendable () -> Duration = MonotonicClock.now,
        onShown: @escaping @Sendable (ShownState) -> Void = { _ in }
    ) {
        (inputs, post) = AsyncStream.makeStream(of: Input.self, bufferingPolicy: .bufferingNewest(4096))
        self.devices = devices
        // A sound card delivers in real time; a file device at its pace, or as fast as it is read (0).
        let capture = devices.capture.configuration
        pipeline = PipelineLatencies(
            frameSamples: devices.capture.frameSize,
            pace: capture.pace > 0 ? capture.pace : (capture.backpressure ? 0 : 1)
        )
        self.behaviour = behaviour
        self.notifier = notifier
        self.statusFile = statusFile
        self.logger = logger
        self.tick = tick
        self.timer = timer
        self.stopAfterTurns = stopAfterTurns
        self.deviceGiveUp = deviceGiveUp
        self.now = now
        self.onShown = onShown
        machine = ApplianceMachine(settings: behaviour.settings, now: now())
        gate = Self.gate(for: behaviour)
        var status = ApplianceStatus(mode: behaviour.mode, backend: behaviour.backend, board: devices.board)
        status.pid = getpid()
        status.startedAt = Date().timeIntervalSince1970
        self.status = status
    }

    private static func gate(for behaviour: ApplianceBehaviour) -> VoiceGate? {
        behaviour.settings.mode == .pushToTalk ? nil : VoiceGate(vad: behaviour.vad, preRoll: behaviour.preRoll)
    }

    /// The device tools' view of the appliance.
    nonisolated var controls: any DeviceControls { Controls(core: self) }

    /// Runs until ``stop()`` (or a graceful shutdown of the service group); throws ``GaveUp`` after repeated
    /// local failures.
    func run() async throws {
        publish(force: true)  // booting, until the button and the loop run
        devices.button?.start { [post] action in post.yield(.event(.button(action))) }
        ready = true
        publish(force: true)
        notifier.ready(status: status.line)
        logger.info("ready: \(status.line) (mode \(behaviour.mode), \(behaviour.backend), board \(devices.board))")
        let capture = devices.capture
        let post = self.post
        let tick = self.tick
        let timer = self.timer
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                while let frame = await capture.next() { post.yield(.frame(frame)) }
            }
            group.addTask {
                while !Task.isCancelled {
                    try await timer.sleep(for: tick)
                    post.yield(.event(.tick))
                }
            }
            defer { group.cancelAll() }
            try await withGracefulShutdownHandler {
                for await input in inputs {
                    if case .stop = input { break }
                    try handle(input)
                }
            } onGracefulShutdown: {
                post.yield(.stop)
            }
        }
        await shutDown()
    }

    /// Asks the loop to end politely (as SIGTERM does).
    nonisolated func stop() { post.yield(.stop) }

    // MARK: - Inputs

    private func handle(_ input: Input) throws {
        loopTurns += 1  // the loop's heartbeat: every input, frames included (50 a second)
        switch input {
        case .frame(let frame):
            handleFrame(frame)
        case .event(.tick):
            try checkDevices()
            apply(machine.handle(.tick, now: now()))
        case .event(let event):
            if case .button(let action) = event { logger.debug("button: \(action.rawValue)") }
            apply(machine.handle(event, now: now()))
        case .session(let number, let event):
            guard number == generation, session != nil else { return }
            sessionEvents += 1
            sessionEvent(event)
        case .sessionEnded(let number, let failure):
            if let failure { logger.warning("session ended: \(failure.message)") }
            guard number == generation, session != nil else { return }
            endSession()
            apply(machine.handle(.sessionEnded(failure: failure), now: now()))
        case .drained(let turn):
            guard turn == playbackTurn else { return }
            apply(machine.handle(.playbackDrained, now: now()))
            answersPlayed += 1
            if let stopAfterTurns, answersPlayed >= stopAfterTurns {
                logger.info("\(answersPlayed) answer(s) played; stopping as asked")
                stop()
            }
        case .reload(let behaviour):
            reload(behaviour)
        case .stop:
            break
        }
        publish()
    }

    private func handleFrame(_ frame: CapturedFrame) {
        latencies[framesHandled % latencies.count] = frame.enqueuedAt &- frame.readAt
        framesHandled += 1
        preRollSent = false
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
        }
        if machine.forwarding, !preRollSent, let session {
            session.session.send(.audio(frame.chunk))
        }
    }

    private func sessionEvent(_ event: SessionEvent) {
        switch event {
        case .audio(let chunk):
            devices.playback.enqueue(chunk)
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
        case .transcript(let transcript):
            // Pieces are gathered per turn and logged whole (and only when asked: privacy).
            if transcript.isFinal {
                transcripts[transcript.role] = transcript.text
            } else {
                transcripts[transcript.role, default: ""] += transcript.text
            }
        case .turnComplete, .interrupted:
            for role in [Transcript.Role.user, .agent] {
                guard let text = transcripts[role], !text.isEmpty else { continue }
                if behaviour.logTranscripts {
                    logger.info("\(role.rawValue): \(text)")
                } else {
                    logger.debug("\(role.rawValue) spoke (\(text.count) characters)")
                }
            }
            transcripts = [:]
        case .tool(.started(_, let name)):
            logger.info("tool call: \(name)")
        case .tool(.finished(_, let name, let succeeded)) where !succeeded:
            logger.warning("tool call failed: \(name)")
        case .notice(let text):
            logger.debug("session notice: \(text)")
        default:
            break
        }
        apply(machine.handle(.session(event), now: now()))
    }

    // MARK: - Actions

    private func apply(_ actions: [ApplianceAction]) {
        for action in actions {
            switch action {
            case .openSession(let fresh):
                openSession(fresh: fresh)
            case .closeSession:
                closeSession()
            case .send(let input):
                session?.session.send(input)
            case .forwardMicrophone(let on, let withPreRoll):
                guard on, withPreRoll, let session else { break }
                for frame in preRoll { session.session.send(.audio(AudioChunk(samples: frame, sampleRate: 16_000))) }
                preRollSent = !preRoll.isEmpty
            case .muteCapture(let muted):
                devices.capture.isMuted = muted
                logger.info(muted ? "microphone muted" : "microphone unmuted")
            case .interruptPlayback:
                playbackTurn += 1
                devices.playback.interrupt()
                logger.info("playback interrupted")
            case .awaitPlaybackDrain:
                let turn = playbackTurn
                let playback = devices.playback
                let post = self.post
                // Ends when the last sample has played, or at an interruption or stop.
                Task {
                    _ = await playback.finishTurn()
                    post.yield(.drained(turn: turn))
                }
            case .earcon(let earcon):
                devices.playback.enqueue(earcon.chunk(sampleRate: 24_000, level: behaviour.earconLevel))
                if !machine.playing {
                    let playback = devices.playback
                    Task { _ = await playback.finishTurn() }
                }
            case .adjustVolume(let percent):
                let volume = devices.playback.volume + Float(percent) / 100
                devices.playback.volume = volume
                logger.info("volume \(Int((devices.playback.volume * 100).rounded()))%")
            case .forgetConversation:
                behaviour.forgetConversation()
            }
        }
    }

    private func openSession(fresh: Bool) {
        generation += 1
        let number = generation
        let tools = ToolRegistry(DeviceTools.make(behaviour.tools, controls: controls))
        let pipeline = self.pipeline
        let opened = behaviour.makeSession(fresh, tools) { pipeline.sent($0, now: monotonicNanoseconds()) }
        session = opened
        sessionsOpened += 1
        logger.info(fresh ? "opening a new conversation" : "opening a session")
        let post = self.post
        let events = opened.session.events
        let runner = opened.session
        // The event stream ends when the session does. Both tasks are detached: when a session ends is the
        // core's decision (finish, then a grace period). Inheriting the service group's graceful shutdown
        // would let the WebSocket layer close every connection the moment it begins, and the session would
        // take that for the service's lifetime close and resume on a new connection, again and again.
        Task.detached {
            for await event in events { post.yield(.session(generation: number, event)) }
        }
        sessionRun = Task.detached {
            do {
                try await runner.run()
                post.yield(.sessionEnded(generation: number, nil))
            } catch let failure as SessionFailure {
                post.yield(.sessionEnded(generation: number, failure))
            } catch {
                post.yield(.sessionEnded(generation: number, SessionFailure(.transient, "\(error)")))
            }
        }
    }

    private func closeSession() {
        guard let session else { return }
        logger.info("closing the session (nobody talking)")
        session.session.finish()
        endSession()
    }

    /// Folds the ending session's counters into the totals.
    private func endSession() {
        guard let session else { return }
        let counters = session.counters()
        connectionsBefore += max(0, counters.connections - 1)
        droppedBefore += counters.dropped / 320
        resentBefore += counters.resent
        self.session = nil
        generation += 1
        if let sessionRun { finishing = Array((finishing + [sessionRun]).suffix(4)) }
        sessionRun = nil
    }

    private func reload(_ new: ApplianceBehaviour) {
        notifier.reloading()
        logger.notice("reloading the configuration (mode \(new.mode), \(new.backend))")
        if session != nil {
            closeSession()
            apply(machine.handle(.sessionEnded(failure: nil), now: now()))
        }
        let muted = machine.muted
        behaviour = new
        machine = ApplianceMachine(settings: new.settings, now: now())
        gate = Self.gate(for: new)
        if muted { apply(machine.handle(.setMuted(true), now: now())) }
        status.mode = new.mode
        status.backend = new.backend
        publish(force: true)
        notifier.ready(status: status.line)
    }

    /// Device outages are local failures: too many within the window, or one that lasts, and the appliance
    /// gives up.
    private func checkDevices() throws {
        if let button = devices.button, button.errorCount > buttonErrors {
            buttonErrors = button.errorCount
            lastError = "the button could not be read"
            if budget.record(at: now()) {
                fatal = "the button keeps failing"
                publish(force: true)
                throw GaveUp(description: fatal!)
            }
        }
        let capture = devices.capture.statistics
        let playback = devices.playback.statistics
        let parts = [
            ("microphone", capture.failingFor, capture.lastError),
            ("speaker", playback.failingFor, playback.lastError),
        ]
        for (name, failingFor, error) in parts {
            if failingFor != nil, failingDevices.insert(name).inserted {
                logger.warning("audio device failed: the \(name) (\(error ?? "no detail")); reopening it with backoff")
                lastError = error
            } else if failingFor == nil, failingDevices.remove(name) != nil {
                logger.info("audio device back: the \(name) works again")
            }
        }
        // A device that stays gone: give up cleanly, so the service manager restarts the process (which may
        // find the device again). An idle speaker owes nothing: it counts only while it has audio to play.
        let owing = playback.failingFor != nil && devices.playback.buffered > .zero
        speakerOwingSince = owing ? speakerOwingSince ?? now() : nil
        if let gone = capture.failingFor, gone >= deviceGiveUp {
            fatal = "the microphone stopped and will not reopen (\(capture.lastError ?? "no detail"))"
        } else if let since = speakerOwingSince, now() - since >= deviceGiveUp {
            fatal = "the speaker stopped and will not reopen (\(playback.lastError ?? "no detail"))"
        }
        if let fatal {
            publish(force: true)
            throw GaveUp(description: fatal)
        }
        // Devices that keep going away and coming back spend the failure budget, one outage at a time.
        let outages = capture.outages + playback.outages
        guard outages > seenOutages else { return }
        for _ in seenOutages..<outages where budget.record(at: now()) {
            let problem = capture.lastError ?? playback.lastError ?? "an audio device went away"
            fatal = "audio devices keep failing (\(problem))"
            publish(force: true)
            throw GaveUp(description: fatal!)
        }
        seenOutages = outages
    }

    // MARK: - What is shown

    private func indicator() -> IndicatorInput {
        var overlays = machine.overlays
        if !ready { overlays.insert(.booting) }
        if fatal != nil { overlays.insert(.fatal) }
        let level = Double(max(0, min(1, (devices.capture.level + 60) / 60)))
        return IndicatorInput(
            conversation: machine.conversation,
            overlays: overlays,
            microphoneLive: machine.microphoneLive,
            level: machine.conversation == .speaking ? 0.6 : level
        )
    }

    private func publish(force: Bool = false) {
        let input = indicator()
        devices.leds?.update(input)
        let shown = input.shown
        let changed = shown != lastShown
        if changed {
            lastShown = shown
            onShown(shown)
        }
        let line = ApplianceStatus.line(indicator: input, link: machine.link, fatal: fatal)
        if line != status.line {
            status.line = line
            notifier.status(line)
            logger.info("state: \(line)")
        }
        let time = now()
        guard force || changed || time - lastWritten >= .seconds(5) else { return }
        lastWritten = time
        writeStatus(input)
    }

    private func writeStatus(_ input: IndicatorInput) {
        guard let statusFile else { return }
        let capture = devices.capture.statistics
        let playback = devices.playback.statistics
        let counters = session?.counters()
        status.state = input.shown.name
        status.conversation = input.conversation.rawValue
        status.overlays = input.overlays.sorted().map(\.rawValue)
        status.updatedAt = Date().timeIntervalSince1970
        status.sessions = sessionsOpened
        status.reconnects = connectionsBefore + max(0, (counters?.connections ?? 0) - 1)
        status.droppedFrames = capture.dropped + droppedBefore + (counters?.dropped ?? 0) / 320
        status.resentSamples = resentBefore + (counters?.resent ?? 0)
        status.xruns = capture.overruns + playback.deviceUnderruns
        status.underruns = playback.underruns
        status.watchdogPings = pings
        if playback.interrupts > 0 { status.lastInterruptMilliseconds = Double(playback.lastInterruptLatency) / 1e6 }
        if framesHandled > 0 {
            let recent = latencies.prefix(min(framesHandled, latencies.count)).sorted()
            status.captureLatencyMicroseconds = Double(recent[recent.count / 2]) / 1000
        }
        pipeline.collect(from: devices.playback)
        status.captureToWire = pipeline.captureToWire
        status.receivedToSpeaker = pipeline.receivedToSpeaker
        status.lastError = lastError
        do {
            try status.write(to: statusFile)
            statusWriteFailed = false
        } catch {
            // Once, and again only after a write worked in between: hark status cannot show this daemon.
            if !statusWriteFailed { logger.warning("\(error); hark status will not show this daemon") }
            statusWriteFailed = true
        }
    }

    private func shutDown() async {
        notifier.stopping()
        logger.info("stopping")
        if let session {
            session.session.finish()
            endSession()
        }
        devices.button?.stop()
        devices.capture.stop()
        // Give the sessions two seconds to close politely, then cancel them and silence the speaker.
        let pending = finishing
        finishing = []
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for task in pending { await task.value }
            }
            group.addTask { try? await Task.sleep(for: .seconds(2)) }
            _ = await group.next()
            group.cancelAll()
        }
        for task in pending { task.cancel() }
        devices.playback.interrupt()
        devices.playback.stop()
        status.line = "stopped"
        status.state = "stopped"
        writeStatus(IndicatorInput())
    }

    // MARK: - Supervision

    /// Each service's progress, for the watchdog.
    func readings() -> [String: ProgressWatchdog.Reading] {
        let capture = devices.capture.statistics
        let playback = devices.playback.statistics
        let counters = session?.counters()
        var readings: [String: ProgressWatchdog.Reading] = [
            "capture": .init(counter: capture.frames),
            "playback": .init(
                counter: playback.framesWritten + playback.silenceFrames,
                idleByDesign: !machine.playing && devices.playback.buffered == .zero
            ),
            "supervisor": .init(counter: loopTurns),
            "session": .init(
                counter: sessionEvents + (counters?.samplesSent ?? 0),
                idleByDesign: session == nil || !machine.forwarding || machine.link != .connected
            ),
        ]
        if let leds = devices.leds {
            readings["leds"] = .init(counter: leds.framesRendered, idleByDesign: leds.isResting)
        }
        if let button = devices.button { readings["button"] = .init(counter: button.turns) }
        return readings
    }

    /// Counts a watchdog ping (shown in `hark status`).
    func pinged() { pings += 1 }

    /// Mutes or unmutes (a device tool).
    func setMuted(_ muted: Bool) { post.yield(.event(.setMuted(muted))) }

    var isMuted: Bool { machine.muted }

    /// The device's condition for the `get_device_status` tool.
    func deviceStatus() -> JSONValue {
        let uptime = Date().timeIntervalSince1970 - status.startedAt
        return [
            "state": .string(status.line),
            "uptime_seconds": .number(uptime.rounded()),
            "firmware_version": .string(HarkVersion.current),
            "operating_system": .string(HarkVersion.operatingSystem()),
            "network": .string(HarkVersion.networkSummary()),
            "volume_percent": .number(Double(Int((devices.playback.volume * 100).rounded()))),
            "microphone_muted": .bool(machine.muted),
            "board": .string(devices.board),
        ]
    }

    /// ``DeviceControls`` over the core.
    struct Controls: DeviceControls {
        let core: ApplianceCore
        func volume() async -> Int { Int((core.devices.playback.volume * 100).rounded()) }
        func setVolume(_ percent: Int) async -> Int {
            core.devices.playback.volume = Float(max(0, min(100, percent))) / 100
            return await volume()
        }
        func isMuted() async -> Bool { await core.isMuted }
        func setMuted(_ muted: Bool) async { await core.setMuted(muted) }
        func status() async -> JSONValue { await core.deviceStatus() }
    }
}
