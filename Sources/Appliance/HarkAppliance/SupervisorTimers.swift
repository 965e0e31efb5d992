import HarkCore
import Logging

/// How the timers and alarms behave (the `timers:` section).
public struct TimerBehaviour: Sendable {
    /// How long something rings unheard before it stops by itself and is reported missed.
    public var ringFor: Duration
    /// The alert's loudness, 0–1 of full scale (before the playback volume).
    public var level: Double
    /// Where the book is kept (nil: in memory only).
    public var store: TimerStore?
    /// The device's local time zone, for alarms.
    public var calendar: any LocalCalendar

    public init(
        ringFor: Duration = .seconds(300),
        level: Double = 0.5,
        store: TimerStore? = nil,
        calendar: any LocalCalendar = UTCCalendar()
    ) {
        self.ringFor = ringFor
        self.level = level
        self.store = store
        self.calendar = calendar
    }
}

/// The supervisor's timer desk: the book, what rings, and what the supervisor owes the speaker and the LEDs.
struct TimerDesk {
    var book = TimerBook()
    /// True while the speaker loops the alert.
    var sounding = false
    /// The push-to-talk release that follows a press that stopped a ring (swallowed too).
    var swallowTalkEnd = false
    /// When a wake-up is set for the next due time (wall clock), so it rings on time rather than on a tick.
    var wakeAt: Double?
    /// What rang unheard or late, newest last (at most 8), for `hark status`.
    var missed: [String] = []
    /// A save failure, said once until a save works again.
    var saveFailing = false
}

/// The timers and alarms on the supervisor: loaded at start, brought up to time on every tick (and at each due
/// time), rung through the speaker path with the `alert` overlay, stopped by the button, the wake word, the stop
/// word, the `stop_ringing` tool and `timers.stop`; a session that is open hears of a ring as a user-role text turn
/// (its backend's own way: Gemini Live `clientContent`, the cascade's next user turn, LiveKit's chat).
extension Supervisor {
    /// The timers and alarms as the device tools and the control socket reach them.
    public nonisolated var timerControls: any TimerControls { TimerAccess(supervisor: self) }

    /// The control socket's timer and alarm operations (`timers.*`, `alarms.*`).
    public nonisolated var timerService: any ControlService { TimerControlService(timers: timerControls) }

    struct TimerAccess: TimerControls {
        let supervisor: Supervisor
        func timers(_ request: TimerRequest) async -> TimerOutcome { await supervisor.performTimers(request) }
    }

    /// Loads the stored book; what came due while the device was off rings now, once, as missed.
    func startTimers() {
        guard let settings = behaviour.timers else { return }
        if let store = settings.store {
            let loaded = store.load(ringFor: settings.ringFor)
            if let problem = loaded.problem {
                logger.error("\(problem)")
                lastError = "the stored timers and alarms were damaged"
            }
            timerDesk.book = loaded.book
            let book = timerDesk.book
            if !book.isEmpty {
                logger.info("\(book.timers.count) timer(s) and \(book.alarms.count) alarm(s) kept across the restart")
            }
        } else {
            timerDesk.book.ringFor = TimerBook(ringFor: settings.ringFor).ringFor
        }
        advanceTimers(resuming: true)
    }

    /// Brings the book to now: rings what is due, stops what rang its time, stores the book when it changed.
    func advanceTimers(resuming: Bool = false) {
        guard let settings = behaviour.timers else { return }
        let now = environment.wallClock()
        let change = timerDesk.book.advance(now: now, calendar: settings.calendar, resuming: resuming)
        for ring in change.started {
            let what = "the \(ring.name)"
            if ring.missed {
                let due = TimerBook.clock(ring.due, settings.calendar)
                logger.warning("\(what) rings late: it was due at \(due) while the device was off (missed)")
                noteMissed("\(ring.name) (due \(due), rang late)")
            } else {
                logger.notice("\(what) rings")
            }
        }
        for ring in change.timedOut {
            logger.warning(
                "the \(ring.name) rang for \(TimerBook.spoken(seconds: Int(timerDesk.book.ringFor))) unheard and stopped (missed)"
            )
            noteMissed("\(ring.name) (rang unheard)")
        }
        if !change.started.isEmpty, let session = slot.session {
            let names = TimerBook.names(change.started.map(\.name))
            let verb = change.started.count == 1 ? "is" : "are"
            session.send(
                .text(
                    "[Device event, not said by the user] \(names) \(verb) ringing now on this device. Tell the user briefly; they can say stop."
                )
            )
        }
        if !change.isEmpty { saveTimers() }
        soundRinging()
    }

    /// Starts or stops the alert to match what rings.
    func soundRinging() {
        let ringing = !timerDesk.book.ringing.isEmpty
        guard ringing != timerDesk.sounding else { return }
        timerDesk.sounding = ringing
        if ringing, let settings = behaviour.timers {
            let names = timerDesk.book.ringing.map { RemoteText.printable($0.name) }.joined(separator: ", then ")
            logger.info("ringing: \(names)")
            devices.speaker.setAlert(Earcon.alert(sampleRate: 24_000, level: settings.level))
        } else {
            devices.speaker.setAlert(nil)
        }
        publish(force: true)
    }

    /// Stops what rings (`how`: by the button, the wake word, ...); false when nothing rang.
    @discardableResult
    func stopRinging(_ how: String) -> Bool {
        let stopped = timerDesk.book.stopRinging()
        guard !stopped.isEmpty else { return false }
        logger.notice("stopped \(TimerBook.names(stopped.map(\.name))) (\(how))")
        saveTimers()
        soundRinging()
        return true
    }

    /// True while something rings.
    var isRinging: Bool { !timerDesk.book.ringing.isEmpty }

    /// A button action while something rings stops the ring and does nothing else (a push-to-talk press's release
    /// is swallowed too). True when the action was taken.
    func buttonStopsRinging(_ action: ButtonAction) -> Bool {
        if action == .talkEnd, timerDesk.swallowTalkEnd {
            timerDesk.swallowTalkEnd = false
            return true
        }
        guard isRinging, action != .none else { return false }
        timerDesk.swallowTalkEnd = action == .talkStart
        return stopRinging("the button")
    }

    /// Performs a request from a tool or the control socket.
    func performTimers(_ request: TimerRequest) -> TimerOutcome {
        guard let settings = behaviour.timers else {
            return TimerOutcome(ok: false, message: "Timers and alarms are turned off on this device.", data: .null)
        }
        let before = timerDesk.book
        let outcome = timerDesk.book.perform(request, now: environment.wallClock(), calendar: settings.calendar)
        if timerDesk.book != before {
            logger.info("timers: \(RemoteText.printable(outcome.message))")
            saveTimers()
            soundRinging()
            scheduleTimerWake()
        }
        return outcome
    }

    /// Sets a wake-up for the next due time when it comes before the next tick, so a ring starts on time.
    func scheduleTimerWake() {
        guard behaviour.timers != nil, let due = timerDesk.book.nextDue else { return }
        let now = environment.wallClock()
        let delay = due - now
        guard delay < environment.tick.seconds, timerDesk.wakeAt.map({ due < $0 }) ?? true else { return }
        timerDesk.wakeAt = due
        children.append(.wake(after: .nanoseconds(Int64(max(0, delay) * 1e9)), clock: environment.clock))
    }

    /// The wake-up came.
    func timerWake() {
        timerDesk.wakeAt = nil
        advanceTimers()
        scheduleTimerWake()
    }

    private func noteMissed(_ text: String) {
        timerDesk.missed.append(RemoteText.printable(text, limit: 100))
        if timerDesk.missed.count > 8 { timerDesk.missed.removeFirst() }
    }

    private func saveTimers() {
        guard let store = behaviour.timers?.store else { return }
        do {
            try store.save(timerDesk.book)
            timerDesk.saveFailing = false
        } catch {
            if !timerDesk.saveFailing { logger.error("\(error)") }
            timerDesk.saveFailing = true
            lastError = "the timers and alarms cannot be saved"
        }
    }

    /// The timers for the status file.
    func timerStatus() -> TimerStatus? {
        guard behaviour.timers != nil else { return nil }
        let book = timerDesk.book
        return TimerStatus(
            timers: book.timers.map { TimerStatus.Entry(label: $0.label, at: $0.deadline) },
            alarms: book.alarms.map {
                TimerStatus.Entry(label: $0.label, at: $0.next, time: $0.time, days: $0.days.map(\.name))
            },
            ringing: book.ringingLabels,
            missed: timerDesk.missed
        )
    }
}

/// The control socket's timer and alarm operations over ``TimerControls``: `timers.list`, `timers.add`
/// (`seconds`, `label`?), `timers.cancel` (`label`?), `timers.stop`, `alarms.add` (`time`, `label`?, `days`?),
/// `alarms.cancel` (`label`?). Bad arguments and other operations are refused with a clear message.
public struct TimerControlService: ControlService {
    let timers: any TimerControls

    /// The operations over `timers`.
    public init(timers: any TimerControls) {
        self.timers = timers
    }

    public func handle(_ request: ControlRequest) async -> ControlReply {
        let arguments = JSONValue.object(request.args)
        let timerRequest: TimerRequest
        do {
            switch request.op {
            case "timers.list", "alarms.list":
                timerRequest = .list
            case "timers.add":
                timerRequest = .setTimer(
                    seconds: try DeviceTools.integer("seconds", in: arguments, range: TimerBook.durations),
                    label: try DeviceTools.optionalString("label", in: arguments)
                )
            case "timers.cancel":
                timerRequest = .cancelTimers(label: try DeviceTools.optionalString("label", in: arguments))
            case "timers.stop":
                timerRequest = .stopRinging
            case "alarms.add":
                let (hour, minute) = try TimerRequest.time(try DeviceTools.requiredString("time", in: arguments))
                timerRequest = .setAlarm(
                    hour: hour,
                    minute: minute,
                    days: try TimerRequest.days(request.args["days"]),
                    label: try DeviceTools.optionalString("label", in: arguments)
                )
            case "alarms.cancel":
                timerRequest = .cancelAlarms(label: try DeviceTools.optionalString("label", in: arguments))
            default:
                return ControlReply(
                    ok: false,
                    message: "unknown operation \(RemoteText.printable(request.op, limit: 40))"
                )
            }
        } catch {
            return ControlReply(ok: false, message: "\(request.op): \(error)")
        }
        let outcome = await timers.timers(timerRequest)
        return ControlReply(ok: outcome.ok, message: outcome.message, data: outcome.data)
    }
}
