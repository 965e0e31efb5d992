import HarkCore

/// A request on the timers and alarms, from a device tool or the control socket.
public enum TimerRequest: Sendable, Hashable {
    /// What is set and what rings.
    case list
    /// A timer of `seconds`, labelled `label`.
    case setTimer(seconds: Int, label: String?)
    /// Cancel the timers labelled `label`, or all.
    case cancelTimers(label: String?)
    /// Add `seconds` to the timer labelled `label` (or the soonest).
    case addTime(seconds: Int, label: String?)
    /// An alarm at local `hour`:`minute`, on `days` (none: once).
    case setAlarm(hour: Int, minute: Int, days: Set<Weekday>, label: String?)
    /// Cancel the alarms labelled `label`, or all.
    case cancelAlarms(label: String?)
    /// Snooze the ringing alarm labelled `label` (or all that ring) for `minutes`.
    case snooze(label: String?, minutes: Int)
    /// Stop what rings.
    case stopRinging
}

/// What a ``TimerRequest`` did: a sentence to say or print, and the facts as JSON.
public struct TimerOutcome: Sendable, Hashable {
    /// False when the request was refused (``message`` says why).
    public var ok: Bool
    /// One sentence a model can speak and a person can read.
    public var message: String
    /// The facts: the listing (``TimerBook/listing(now:calendar:)``) after the request.
    public var data: JSONValue

    public init(ok: Bool, message: String, data: JSONValue) {
        self.ok = ok
        self.message = message
        self.data = data
    }

    /// As a tool's result: `{"result": message, ...data}` or `{"error": message}`.
    public var toolResult: JSONValue {
        guard ok else { return ["error": .string(message)] }
        var members: [String: JSONValue] = ["result": .string(message)]
        if case .object(let facts) = data { members.merge(facts) { first, _ in first } }
        return .object(members)
    }
}

/// The timers and alarms as the device tools and the control socket reach them.
public protocol TimerControls: Sendable {
    /// Performs `request` (the book is stored before it returns).
    func timers(_ request: TimerRequest) async -> TimerOutcome
}

extension TimerBook {
    /// Performs `request` at `now`; the outcome's data is the listing after it.
    public mutating func perform(_ request: TimerRequest, now: Double, calendar: any LocalCalendar) -> TimerOutcome {
        let message: String
        do {
            switch request {
            case .list:
                message = summary(now: now, calendar: calendar)
            case .setTimer(let seconds, let label):
                let timer = try setTimer(seconds: seconds, label: label, now: now)
                message =
                    "The \(Self.name(timer.label, .timer)) is set for \(Self.spoken(seconds: seconds)); it rings at \(Self.clock(timer.deadline, calendar))."
            case .cancelTimers(let label):
                let cancelled = try cancelTimers(label: label)
                message = "Cancelled \(Self.names(cancelled.map { Self.name($0.label, .timer) }))."
            case .addTime(let seconds, let label):
                let timer = try addTime(seconds: seconds, label: label, now: now)
                message =
                    "The \(Self.name(timer.label, .timer)) now rings at \(Self.clock(timer.deadline, calendar)), in \(Self.spoken(seconds: Self.remaining(timer, now: now)))."
            case .setAlarm(let hour, let minute, let days, let label):
                let alarm = try setAlarm(
                    hour: hour,
                    minute: minute,
                    days: days,
                    label: label,
                    now: now,
                    calendar: calendar
                )
                message = "The \(Self.name(alarm.label, .alarm)) is set for \(Self.when(alarm, calendar))."
            case .cancelAlarms(let label):
                let cancelled = try cancelAlarms(label: label)
                message = "Cancelled \(Self.names(cancelled.map { Self.name($0.label, .alarm) }))."
            case .snooze(let label, let minutes):
                let labels = ringing.filter { $0.kind == .alarm }.map { Self.name($0.label, .alarm) }
                let until = try snooze(label: label, minutes: minutes, now: now)
                let chosen = label.map { [Self.name($0, .alarm)] } ?? labels
                message = "Snoozed \(Self.names(chosen)) until \(Self.clock(until, calendar))."
            case .stopRinging:
                let stopped = stopRinging()
                message = stopped.isEmpty ? "Nothing is ringing." : "Stopped \(Self.names(stopped.map(\.name)))."
            }
        } catch {
            return TimerOutcome(ok: false, message: Self.sentence(error.description), data: listing(now: now))
        }
        return TimerOutcome(ok: true, message: message, data: listing(now: now))
    }

    /// What is set, as the control socket's `timers.list` gives it: `{"timers": [{"label", "remaining_s",
    /// "deadline"}], "alarms": [{"label", "time", "days", "next"}], "ringing": [labels]}`.
    public func listing(now: Double) -> JSONValue {
        [
            "timers": .array(
                timers.map { timer in
                    [
                        "label": .string(timer.label),
                        "remaining_s": .number(Double(Self.remaining(timer, now: now))),
                        "deadline": .number(timer.deadline.rounded()),
                    ]
                }
            ),
            "alarms": .array(
                alarms.map { alarm in
                    [
                        "label": .string(alarm.label),
                        "time": .string(alarm.time),
                        "days": .array(alarm.days.map { .string($0.name) }),
                        "next": .number(alarm.next.rounded()),
                    ]
                }
            ),
            "ringing": .array(ringing.map { .string($0.label) }),
        ]
    }

    /// One sentence of what is set: `The pasta timer rings in 4 minutes 10 seconds. The alarm 07:00 rings at
    /// 07:00 on Monday, Tuesday.`
    public func summary(now: Double, calendar: any LocalCalendar) -> String {
        var parts: [String] = []
        if !ringing.isEmpty { parts.append("Ringing now: \(Self.names(ringing.map(\.name))).") }
        for timer in timers {
            parts.append(
                "The \(Self.name(timer.label, .timer)) rings in \(Self.spoken(seconds: Self.remaining(timer, now: now)))."
            )
        }
        for alarm in alarms {
            parts.append(
                "The \(Self.name(alarm.label, .alarm)) rings \(alarm.snoozed ? "again " : "")at \(Self.clock(alarm.next, calendar))"
                    + (alarm.days.isEmpty ? "." : " and then \(Self.days(alarm.days)).")
            )
        }
        return parts.isEmpty ? "No timer or alarm is set." : parts.joined(separator: " ")
    }

    /// `07:30` local time of `instant`.
    static func clock(_ instant: Double, _ calendar: any LocalCalendar) -> String {
        let local = calendar.local(Int64(instant.rounded()))
        return (local.hour < 10 ? "0" : "") + "\(local.hour):" + (local.minute < 10 ? "0" : "") + "\(local.minute)"
    }

    /// `07:30 on Monday, Friday` or `07:30 (Tuesday)` for a one-off alarm.
    static func when(_ alarm: Alarm, _ calendar: any LocalCalendar) -> String {
        let weekday = Weekday(rawValue: calendar.local(Int64(alarm.next)).weekday)?.fullName ?? ""
        guard !alarm.days.isEmpty else { return "\(alarm.time) on \(weekday), once" }
        return "\(alarm.time) \(days(alarm.days)), next on \(weekday)"
    }

    /// `every day`, `on Monday, Friday`.
    static func days(_ days: [Weekday]) -> String {
        days.count == 7 ? "every day" : "on " + days.map(\.fullName).joined(separator: ", ")
    }

    /// `the pasta timer and the alarm 07:00`.
    static func names(_ labels: [String]) -> String {
        let named = labels.map { "the \($0)" }
        guard named.count > 1 else { return named.first ?? "nothing" }
        return named.dropLast().joined(separator: ", ") + " and " + named[named.count - 1]
    }

    /// `There is no timer.` from a refusal's text.
    static func sentence(_ text: String) -> String {
        guard let first = text.first else { return text }
        return first.uppercased() + text.dropFirst() + (text.hasSuffix(".") ? "" : ".")
    }
}
