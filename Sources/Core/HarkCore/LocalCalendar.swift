/// A local date and time on the device's wall clock (the C library's `struct tm`, without its quirks).
public struct LocalTime: Sendable, Hashable, CustomStringConvertible {
    /// The year (2026).
    public var year: Int
    /// The month, 1–12.
    public var month: Int
    /// The day of the month, 1–31 (a later day rolls over into the next month when turned into an instant).
    public var day: Int
    /// The hour, 0–23.
    public var hour: Int
    /// The minute, 0–59.
    public var minute: Int
    /// The second, 0–60.
    public var second: Int
    /// The weekday, 0 (Sunday) to 6 (Saturday); ignored when turned into an instant.
    public var weekday: Int
    /// The offset from UTC in seconds at that time (east positive); ignored when turned into an instant.
    public var offset: Int

    /// A local time; `weekday` and `offset` matter only in what a calendar returns.
    public init(
        year: Int,
        month: Int,
        day: Int,
        hour: Int,
        minute: Int,
        second: Int = 0,
        weekday: Int = 0,
        offset: Int = 0
    ) {
        self.year = year
        self.month = month
        self.day = day
        self.hour = hour
        self.minute = minute
        self.second = second
        self.weekday = weekday
        self.offset = offset
    }

    /// `2026-03-29 07:00:00`.
    public var description: String {
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(year)-\(two(month))-\(two(day)) \(two(hour)):\(two(minute)):\(two(second))"
    }
}

/// The device's local time zone, daylight-saving changes included, as a seam: the platform implements it with the
/// C library (`localtime_r`, `mktime` under `TZ`), tests may pass their own.
public protocol LocalCalendar: Sendable {
    /// The local time at `instant` (seconds since 1970, whole seconds).
    func local(_ instant: Int64) -> LocalTime
    /// The instant of local time `time` (its weekday and offset ignored; a day past the month's end rolls over). A
    /// time that does not exist locally (skipped by a daylight-saving change) comes out as the calendar places it
    /// (the C library: as if the clock had not changed yet); a time that exists twice, as one of them. Nil when it
    /// cannot be represented.
    func instant(_ time: LocalTime) -> Int64?
}

/// Coordinated Universal Time: a calendar without daylight saving (the default where nothing else is known).
public struct UTCCalendar: LocalCalendar {
    public init() {}

    /// The UTC date and time of `instant`.
    public func local(_ instant: Int64) -> LocalTime {
        let days = instant >= 0 ? instant / 86_400 : (instant - 86_399) / 86_400
        let seconds = Int(instant - days * 86_400)
        // Howard Hinnant's civil-from-days.
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = Int(doy - (153 * mp + 2) / 5 + 1)
        let month = Int(mp < 10 ? mp + 3 : mp - 9)
        let year = Int(yoe + era * 400) + (month <= 2 ? 1 : 0)
        let weekday = Int(((days % 7) + 11) % 7)  // 1970-01-01 was a Thursday (4)
        return LocalTime(
            year: year,
            month: month,
            day: day,
            hour: seconds / 3600,
            minute: seconds / 60 % 60,
            second: seconds % 60,
            weekday: weekday
        )
    }

    /// The instant of UTC date and time `time`.
    public func instant(_ time: LocalTime) -> Int64? {
        guard (1...9999).contains(time.year), (1...12).contains(time.month), (1...400).contains(time.day) else {
            return nil
        }
        // Howard Hinnant's days-from-civil, with the day allowed past the month's end.
        let year = Int64(time.month <= 2 ? time.year - 1 : time.year)
        let era = (year >= 0 ? year : year - 399) / 400
        let yoe = year - era * 400
        let month = Int64(time.month)
        let doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + Int64(time.day) - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        return days * 86_400 + Int64(time.hour) * 3600 + Int64(time.minute) * 60 + Int64(time.second)
    }
}
