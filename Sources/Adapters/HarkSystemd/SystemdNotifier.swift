import CSystemd
import HarkCore
import HarkPlatform

#if canImport(Glibc)
    import Glibc
#endif

/// ``ServiceNotifier`` through libsystemd: each call is one `sd_notify(3)` datagram to `$NOTIFY_SOCKET`
/// (nothing is sent when the variable is unset, so the daemon runs the same outside systemd).
public struct SystemdNotifier: ServiceNotifier {
    public init() {}

    public func ready(status: String) { notify("READY=1\nSTATUS=\(Self.oneLine(status))") }

    public func status(_ text: String) { notify("STATUS=\(Self.oneLine(text))") }

    public func watchdog() { notify("WATCHDOG=1") }

    public func stopping() { notify("STOPPING=1\nSTATUS=stopping") }

    public func reloading() {
        // systemd 253+ wants the monotonic time with RELOADING=1 (Type=notify-reload); older ones ignore it.
        let microseconds = MonotonicClock.nanoseconds() / 1000
        notify("RELOADING=1\nMONOTONIC_USEC=\(microseconds)\nSTATUS=reloading the configuration")
    }

    /// Half of `WatchdogSec=` (`sd_watchdog_enabled(3)`), so a ping is never late; nil without a watchdog.
    public var watchdogInterval: Duration? {
        var microseconds: UInt64 = 0
        guard sd_watchdog_enabled(0, &microseconds) > 0, microseconds > 0 else { return nil }
        return .microseconds(Int64(microseconds / 2))
    }

    /// Stands for `sd_notify(0, state)`.
    private func notify(_ state: String) {
        _ = sd_notify(0, state)
    }

    /// A status is one line: newlines would start new assignments.
    static func oneLine(_ text: String) -> String {
        String(text.map { $0.isNewline ? " " : $0 })
    }
}
