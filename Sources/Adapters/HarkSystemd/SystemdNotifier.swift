import CSystemd
import HarkCore
import HarkPlatform
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// ``ServiceNotifier`` through libsystemd: each call is one `sd_notify(3)` datagram to `$NOTIFY_SOCKET`
/// (nothing is sent when the variable is unset, so the daemon runs the same outside systemd). `sd_notify` blocks
/// once the manager's socket holds as many unread datagrams as it queues (`net.unix.max_dgram_qlen`, 10 here): the
/// datagrams are sent by a thread of their own (``NotifySender``), so a slow reader never stalls the caller, and a
/// newer status line replaces one not yet sent. ``stopping()`` waits (at most a second) until all is sent.
public struct SystemdNotifier: ServiceNotifier {
    public init() {}

    public func ready(status: String) { notify("READY=1\nSTATUS=\(Self.oneLine(status))") }

    public func status(_ text: String) { notify("STATUS=\(Self.oneLine(text))") }

    public func watchdog() { notify("WATCHDOG=1") }

    public func stopping() {
        notify("STOPPING=1\nSTATUS=stopping")
        NotifySender.shared.flush(within: .seconds(1))
    }

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

    /// Stands for `sd_notify(0, state)`, sent by the sender's thread.
    private func notify(_ state: String) {
        NotifySender.shared.post(state)
    }

    /// A status is one line: newlines would start new assignments.
    static func oneLine(_ text: String) -> String {
        String(text.map { $0.isNewline ? " " : $0 })
    }
}

/// The thread that sends the notifier's datagrams, in the order posted. What waits is bounded: a status line replaces
/// the status line not yet sent, a watchdog ping one not yet sent, and beyond ``limit`` the oldest message goes.
final class NotifySender: Sendable {
    static let shared = NotifySender()
    /// The most messages waiting (the rare ones, READY, STOPPING and RELOADING, never come near it).
    static let limit = 16

    private struct State {
        var waiting: [String] = []
        var sending = false
        var started = false
        var thread: DeviceThread?
        var failed = false
    }

    private let state = Mutex(State())
    private let work = Wakeup()
    private let idle = Wakeup()

    /// Queues `message` (sent inline when the thread cannot be made).
    func post(_ message: String) {
        let inline = state.withLock { state -> Bool in
            if state.failed { return true }
            if message.hasPrefix("STATUS=") || message == "WATCHDOG=1" {
                state.waiting.removeAll { $0 == message || message.hasPrefix("STATUS=") && $0.hasPrefix("STATUS=") }
            }
            state.waiting.append(message)
            if state.waiting.count > Self.limit { state.waiting.removeFirst() }
            return false
        }
        if inline {
            _ = sd_notify(0, message)
            return
        }
        startIfNeeded()
        work.signal()
    }

    /// Waits until everything posted has been sent, at most `limit`.
    func flush(within limit: Duration) {
        let deadline = MonotonicClock.nanoseconds() + UInt64(max(0, limit.components.seconds)) * 1_000_000_000
        while state.withLock({ !$0.waiting.isEmpty || $0.sending }) {
            let now = MonotonicClock.nanoseconds()
            guard now < deadline else { return }
            _ = idle.wait(nanoseconds: min(deadline - now, 50_000_000))
        }
    }

    private func startIfNeeded() {
        let start = state.withLock { state -> Bool in
            guard !state.started else { return false }
            state.started = true
            return true
        }
        guard start else { return }
        do {
            let thread = try DeviceThread(name: "hark-notify") { [self] in run() }
            state.withLock { $0.thread = thread }
        } catch {
            let left = state.withLock { state -> [String] in
                state.failed = true
                defer { state.waiting = [] }
                return state.waiting
            }
            for message in left { _ = sd_notify(0, message) }
        }
    }

    private func run() {
        while true {
            work.wait()
            while let message = state.withLock({ state -> String? in
                guard !state.waiting.isEmpty else {
                    state.sending = false
                    return nil
                }
                state.sending = true
                return state.waiting.removeFirst()
            }) {
                _ = sd_notify(0, message)
            }
            idle.signal()
        }
    }
}
