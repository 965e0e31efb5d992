import HarkCore

/// A day of the week, as the C library counts them (0 is Sunday).
public enum Weekday: Int, Sendable, Hashable, CaseIterable, Codable, Comparable {
    case sunday, monday, tuesday, wednesday, thursday, friday, saturday

    /// Its three-letter name: `mon`.
    public var name: String { ["sun", "mon", "tue", "wed", "thu", "fri", "sat"][rawValue] }

    /// The day named `name` (`mon`, `monday`, `Mon`), or nil.
    public init?(name: String) {
        let lowered = name.lowercased()
        guard lowered.count >= 3, let day = Self.allCases.first(where: { lowered.hasPrefix($0.name) }) else {
            return nil
        }
        guard lowered.count == 3 || day.fullName.lowercased() == lowered else { return nil }
        self = day
    }

    /// `Monday`.
    public var fullName: String {
        ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"][rawValue]
    }

    public static func < (lhs: Weekday, rhs: Weekday) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// The timers and alarms of the device, as a value: set, list, cancel, add time, snooze, stop; what rings now and
/// what rings next. Instants are seconds since 1970 on the wall clock (a timer keeps its deadline across a
/// restart); alarms follow the local time of an injected ``LocalCalendar`` (time zone and daylight saving). The
/// owner stores it after every change (``TimerStore``), calls ``advance(now:calendar:)`` as time goes on and rings
/// what it says.
public struct TimerBook: Sendable, Hashable, Codable {
    /// At most this many timers, and this many alarms.
    public static let limit = 32
    /// A timer lasts from 1 s to 24 h.
    public static let durations = 1...86_400
    /// Labels are at most this many characters.
    public static let labelLimit = 64
    /// A snooze lasts 1 to 60 minutes.
    public static let snoozes = 1...60

    /// A countdown to a wall-clock deadline.
    public struct Timer: Sendable, Hashable, Codable {
        /// Its label (`pasta`), or a name made from its length (`5 minute timer`).
        public var label: String
        /// When it rings, seconds since 1970.
        public var deadline: Double
        /// How long it was set for, seconds (with time added).
        public var seconds: Int
    }

    /// A local time of day that rings once, or on the given weekdays.
    public struct Alarm: Sendable, Hashable, Codable {
        /// Its label (`wake up`), or `alarm HH:MM`.
        public var label: String
        /// The local hour, 0–23.
        public var hour: Int
        /// The local minute, 0–59.
        public var minute: Int
        /// The weekdays it repeats on; empty: once.
        public var days: [Weekday]
        /// When it rings next, seconds since 1970 (a snooze's end when it is snoozed).
        public var next: Double
        /// True while ``next`` is a snooze's end rather than the alarm's own time.
        public var snoozed: Bool

        /// `07:30`.
        public var time: String {
            (hour < 10 ? "0" : "") + "\(hour):" + (minute < 10 ? "0" : "") + "\(minute)"
        }
    }

    /// Something ringing.
    public struct Ringing: Sendable, Hashable, Codable {
        /// A timer or an alarm.
        public enum Kind: String, Sendable, Hashable, Codable { case timer, alarm }

        public var kind: Kind
        public var label: String
        /// When it began to ring, seconds since 1970.
        public var since: Double
        /// When it was due (it rang late when the device was off at that time).
        public var due: Double
        /// True when it rings late: its time passed while the device was off.
        public var missed: Bool
        /// For an alarm, the alarm as it was (a snooze sets it again).
        public var alarm: Alarm?

        /// How it is said: `pasta timer`.
        public var name: String { TimerBook.name(label, kind) }
    }

    /// How a label is said: `pasta timer` for a timer labelled `pasta`, the label itself when it names its kind.
    public static func name(_ label: String, _ kind: Ringing.Kind) -> String {
        label.lowercased().contains(kind.rawValue) ? label : "\(label) \(kind.rawValue)"
    }

    /// What ``advance(now:calendar:)`` changed.
    public struct Change: Sendable, Hashable {
        /// What began to ring.
        public var started: [Ringing] = []
        /// What rang for the whole ring time unheard and stopped by itself (reported as missed).
        public var timedOut: [Ringing] = []

        /// True when nothing changed.
        public var isEmpty: Bool { started.isEmpty && timedOut.isEmpty }
    }

    /// Why a request was refused: one sentence the model or a person can read.
    public struct Refusal: Error, Sendable, Hashable, CustomStringConvertible {
        public var description: String

        public init(_ description: String) { self.description = description }
    }

    /// The timers, soonest first.
    public private(set) var timers: [Timer] = []
    /// The alarms, soonest first.
    public private(set) var alarms: [Alarm] = []
    /// What rings now, oldest first.
    public private(set) var ringing: [Ringing] = []
    /// How long something rings before it stops by itself, seconds.
    public var ringFor: Double

    /// An empty book whose rings last `ringFor` (5 minutes by default).
    public init(ringFor: Duration = .seconds(300)) {
        self.ringFor = max(1, Double(ringFor.components.seconds))
    }

    /// True when nothing is set and nothing rings.
    public var isEmpty: Bool { timers.isEmpty && alarms.isEmpty && ringing.isEmpty }

    /// The labels of what rings, one after the other.
    public var ringingLabels: [String] { ringing.map(\.label) }

    /// When something is due next (a timer, an alarm, or the end of a ring), seconds since 1970.
    public var nextDue: Double? {
        let ends = ringing.map { $0.since + ringFor }
        return (timers.map(\.deadline) + alarms.map(\.next) + ends).min()
    }

    // MARK: Timers

    /// Sets a timer of `seconds` (1 s … 24 h) from `now`, labelled `label` (printable, at most 64 characters; a
    /// name from its length when nil or blank).
    @discardableResult
    public mutating func setTimer(seconds: Int, label: String?, now: Double) throws(Refusal) -> Timer {
        guard Self.durations.contains(seconds) else {
            throw Refusal("a timer lasts from 1 second to 24 hours, not \(Self.spoken(seconds: seconds))")
        }
        guard timers.count < Self.limit else {
            throw Refusal("there are already \(Self.limit) timers; cancel one first")
        }
        let name = try Self.label(label) ?? "\(Self.spoken(seconds: seconds)) timer"
        let timer = Timer(label: name, deadline: now + Double(seconds), seconds: seconds)
        timers.append(timer)
        timers.sort { $0.deadline < $1.deadline }
        return timer
    }

    /// Cancels the timers labelled `label` (case-insensitive), or all when nil; returns what was cancelled (none
    /// is a refusal that says which timers there are).
    @discardableResult
    public mutating func cancelTimers(label: String?) throws(Refusal) -> [Timer] {
        let matching = try Self.matching(timers, label: label, kind: "timer", name: \.label)
        timers.removeAll { timer in matching.contains(timer) }
        return matching
    }

    /// Adds `seconds` (may be negative, the result at least 1 s from `now` and at most 24 h long) to the timer
    /// labelled `label`, or to the only one (or the soonest) when nil.
    @discardableResult
    public mutating func addTime(seconds: Int, label: String?, now: Double) throws(Refusal) -> Timer {
        guard seconds != 0, abs(seconds) <= Self.durations.upperBound else {
            throw Refusal("the time to add must be from -24 hours to 24 hours and not zero")
        }
        let matching = try Self.matching(timers, label: label, kind: "timer", name: \.label)
        guard let first = matching.min(by: { $0.deadline < $1.deadline }),
            let index = timers.firstIndex(of: first)
        else { throw Refusal("there is no timer") }
        var timer = timers[index]
        let total = timer.seconds + seconds
        let deadline = timer.deadline + Double(seconds)
        guard total <= Self.durations.upperBound else { throw Refusal("a timer lasts at most 24 hours") }
        guard deadline >= now + 1 else { throw Refusal("that would leave the \(timer.label) less than a second") }
        timer.seconds = total
        timer.deadline = deadline
        timers[index] = timer
        timers.sort { $0.deadline < $1.deadline }
        return timer
    }

    // MARK: Alarms

    /// Sets an alarm at local `hour`:`minute`, on `days` (empty: once, at the next such time), labelled `label`.
    @discardableResult
    public mutating func setAlarm(
        hour: Int,
        minute: Int,
        days: Set<Weekday> = [],
        label: String?,
        now: Double,
        calendar: any LocalCalendar
    ) throws(Refusal) -> Alarm {
        guard (0...23).contains(hour), (0...59).contains(minute) else {
            throw Refusal("an alarm's time is from 00:00 to 23:59")
        }
        guard alarms.count < Self.limit else {
            throw Refusal("there are already \(Self.limit) alarms; cancel one first")
        }
        var alarm = Alarm(label: "", hour: hour, minute: minute, days: days.sorted(), next: 0, snoozed: false)
        alarm.label = try Self.label(label) ?? "alarm \(alarm.time)"
        guard let next = Self.occurrence(of: alarm, after: now, calendar: calendar) else {
            throw Refusal("the time \(alarm.time) cannot be found on this device's calendar")
        }
        alarm.next = next
        alarms.append(alarm)
        alarms.sort { $0.next < $1.next }
        return alarm
    }

    /// Cancels the alarms labelled `label` (case-insensitive), or all when nil (a ringing alarm of that label stops
    /// too).
    @discardableResult
    public mutating func cancelAlarms(label: String?) throws(Refusal) -> [Alarm] {
        let ringingAlarms = ringing.compactMap(\.alarm)
        let all = alarms + ringingAlarms
        let matching = try Self.matching(all, label: label, kind: "alarm", name: \.label)
        alarms.removeAll { matching.contains($0) }
        ringing.removeAll { ring in ring.alarm.map { matching.contains($0) } ?? false }
        return matching
    }

    /// Snoozes the ringing alarm labelled `label` (or every ringing alarm when nil) for `minutes`: it stops and
    /// rings again then. Returns when it rings again.
    @discardableResult
    public mutating func snooze(label: String?, minutes: Int, now: Double) throws(Refusal) -> Double {
        guard Self.snoozes.contains(minutes) else { throw Refusal("a snooze lasts from 1 to 60 minutes") }
        let rings = ringing.filter { $0.kind == .alarm }
        let chosen = try Self.matching(rings, label: label, kind: "ringing alarm", name: \.label)
        let until = now + Double(minutes * 60)
        for ring in chosen {
            ringing.removeAll { $0 == ring }
            guard var alarm = ring.alarm else { continue }
            guard alarms.count < Self.limit else { continue }
            alarms.removeAll { $0.label == alarm.label && $0.hour == alarm.hour && $0.minute == alarm.minute }
            alarm.next = until
            alarm.snoozed = true
            alarms.append(alarm)
        }
        alarms.sort { $0.next < $1.next }
        return until
    }

    // MARK: Time going on

    /// Stops everything ringing; returns what was stopped.
    @discardableResult
    public mutating func stopRinging() -> [Ringing] {
        defer { ringing = [] }
        return ringing
    }

    /// Brings the book to `now`: timers and alarms due begin to ring (an alarm that repeats is set for its next
    /// day, a one-off one is removed), rings older than ``ringFor`` stop. Call it at start with `resuming` true:
    /// what came due while the device was off rings then, once, marked missed.
    public mutating func advance(now: Double, calendar: any LocalCalendar, resuming: Bool = false) -> Change {
        var change = Change()
        let late = { (due: Double) in resuming && now - due > 1 }
        while let timer = timers.first, timer.deadline <= now {
            timers.removeFirst()
            change.started.append(
                Ringing(kind: .timer, label: timer.label, since: now, due: timer.deadline, missed: late(timer.deadline))
            )
        }
        var kept: [Alarm] = []
        for alarm in alarms {
            guard alarm.next <= now else {
                kept.append(alarm)
                continue
            }
            var original = alarm
            original.snoozed = false
            change.started.append(
                Ringing(
                    kind: .alarm,
                    label: alarm.label,
                    since: now,
                    due: alarm.next,
                    missed: late(alarm.next),
                    alarm: original
                )
            )
            // Rings once however many of its times passed; repeats from its next time after now.
            if !original.days.isEmpty, let next = Self.occurrence(of: original, after: now, calendar: calendar) {
                original.next = next
                kept.append(original)
            }
        }
        alarms = kept.sorted { $0.next < $1.next }
        for ring in ringing where now - ring.since >= ringFor {
            change.timedOut.append(ring)
        }
        ringing.removeAll { change.timedOut.contains($0) }
        ringing += change.started
        return change
    }

    /// Puts what was read from a file in order (timers and alarms soonest first).
    mutating func normalize() {
        timers.sort { $0.deadline < $1.deadline }
        alarms.sort { $0.next < $1.next }
    }

    /// Seconds until the timer rings (0 once due).
    public static func remaining(_ timer: Timer, now: Double) -> Int {
        max(0, Int((timer.deadline - now).rounded(.up)))
    }

    // MARK: Parts

    /// The next instant after `now` at which `alarm`'s local time falls on one of its days (any day when it has
    /// none). Looks up to eight days ahead; a time that does not exist that day (skipped by daylight saving)
    /// rings at the instant the calendar gives for it.
    public static func occurrence(of alarm: Alarm, after now: Double, calendar: any LocalCalendar) -> Double? {
        guard now.isFinite, abs(now) < 1e12 else { return nil }
        let today = calendar.local(Int64(now.rounded(.down)))
        for offset in 0...8 {
            let wanted = LocalTime(
                year: today.year,
                month: today.month,
                day: today.day + offset,
                hour: alarm.hour,
                minute: alarm.minute
            )
            guard let instant = calendar.instant(wanted), Double(instant) > now else { continue }
            let weekday = Weekday(rawValue: calendar.local(instant).weekday) ?? .sunday
            if alarm.days.isEmpty || alarm.days.contains(weekday) { return Double(instant) }
        }
        return nil
    }

    /// A label as given: nil when nil or blank; else printable (control characters replaced), trimmed and at most
    /// ``labelLimit`` characters, or a refusal.
    static func label(_ label: String?) throws(Refusal) -> String? {
        guard let label else { return nil }
        guard label.count <= 4 * labelLimit else { throw Refusal("a label is at most \(labelLimit) characters") }
        let printable = RemoteText.printable(label, limit: labelLimit * 4)
        let trimmed = String(printable.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
        guard !trimmed.isEmpty else { return nil }
        guard trimmed.count <= labelLimit else { throw Refusal("a label is at most \(labelLimit) characters") }
        return trimmed
    }

    /// The entries labelled `label` (case-insensitive), or all when nil; a refusal naming what there is when none.
    private static func matching<T: Equatable>(
        _ entries: [T],
        label: String?,
        kind: String,
        name: KeyPath<T, String>
    ) throws(Refusal) -> [T] {
        guard let wanted = try Self.label(label) else {
            guard !entries.isEmpty else { throw Refusal("there is no \(kind)") }
            return entries
        }
        let found = entries.filter { $0[keyPath: name].lowercased() == wanted.lowercased() }
        guard found.isEmpty else { return found }
        let names = entries.map { $0[keyPath: name] }
        throw Refusal(
            names.isEmpty
                ? "there is no \(kind)"
                : "there is no \(kind) called \(wanted); there is \(names.joined(separator: ", "))"
        )
    }

    /// A duration as words: `5 minutes`, `1 hour 30 minutes`, `45 seconds`.
    public static func spoken(seconds: Int) -> String {
        guard seconds > 0 else { return "\(seconds) seconds" }
        let parts: [(Int, String)] = [
            (seconds / 3600, "hour"), (seconds / 60 % 60, "minute"), (seconds % 60, "second"),
        ]
        return parts.filter { $0.0 > 0 }.map { "\($0.0) \($0.1)\($0.0 == 1 ? "" : "s")" }.joined(separator: " ")
    }
}
