import Glibc
import HarkCore
import Synchronization

/// The device's local time through the C library: `localtime_r` and `mktime` with the time zone of `TZ` (or
/// `/etc/localtime`), daylight-saving changes included.
public struct SystemCalendar: LocalCalendar {
    /// A time zone name (`Europe/Berlin`) to use instead of the process's; nil: the process's own.
    public let zone: String?

    /// The C library's time functions read the environment's `TZ`: one call at a time sets it and reads it back.
    private static let lock = Mutex(())

    /// The process's own time zone, or `zone` (a name under /usr/share/zoneinfo) for this calendar's calls.
    public init(zone: String? = nil) {
        self.zone = zone
    }

    /// Stands for `localtime_r`.
    public func local(_ instant: Int64) -> LocalTime {
        withZone {
            var seconds = time_t(instant)
            var parts = tm()
            guard localtime_r(&seconds, &parts) != nil else { return UTCCalendar().local(instant) }
            return LocalTime(
                year: Int(parts.tm_year) + 1900,
                month: Int(parts.tm_mon) + 1,
                day: Int(parts.tm_mday),
                hour: Int(parts.tm_hour),
                minute: Int(parts.tm_min),
                second: Int(parts.tm_sec),
                weekday: Int(parts.tm_wday),
                offset: parts.tm_gmtoff
            )
        }
    }

    /// Stands for `mktime` with `tm_isdst` -1 (the C library decides whether daylight saving applies).
    public func instant(_ time: LocalTime) -> Int64? {
        guard (1...9999).contains(time.year), (1...12).contains(time.month), (1...400).contains(time.day),
            (0...23).contains(time.hour), (0...59).contains(time.minute), (0...60).contains(time.second)
        else { return nil }
        return withZone {
            var parts = tm()
            parts.tm_year = Int32(time.year - 1900)
            parts.tm_mon = Int32(time.month - 1)
            parts.tm_mday = Int32(time.day)
            parts.tm_hour = Int32(time.hour)
            parts.tm_min = Int32(time.minute)
            parts.tm_sec = Int32(time.second)
            parts.tm_isdst = -1
            let result = mktime(&parts)
            return result == -1 ? nil : Int64(result)
        }
    }

    /// Runs `body` with ``zone`` as `TZ` (the environment restored after), one call at a time.
    private func withZone<T>(_ body: () -> T) -> T {
        Self.lock.withLock { _ in
            guard let zone else {
                tzset()
                return body()
            }
            let saved = getenv("TZ").map { String(cString: $0) }
            setenv("TZ", zone, 1)
            tzset()
            defer {
                if let saved { setenv("TZ", saved, 1) } else { unsetenv("TZ") }
                tzset()
            }
            return body()
        }
    }
}
