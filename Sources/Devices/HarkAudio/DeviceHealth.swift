import HarkCore
import HarkPlatform
import Synchronization

/// Whether an audio device works, kept by the thread that drives it and read by whoever watches it.
///
/// An outage begins when opening the device or a transfer fails, and ends only once the device has run for
/// a second again (``RunSinceOpen``): a device that opens and fails at once, over and over, is one outage,
/// during which its reopening backs off further each time instead of starting over.
final class DeviceHealth: Sendable {
    /// When the current outage began (monotonic ns); 0 while the device works.
    private let outageStart = Atomic<UInt64>(0)
    private let outages = Atomic(0)

    /// Opening the device or a transfer failed at `now` (monotonic ns).
    func failed(now: UInt64) {
        guard outageStart.load(ordering: .relaxed) == 0 else { return }
        outageStart.store(max(1, now), ordering: .relaxed)
        outages.add(1, ordering: .relaxed)
    }

    /// The device has run for a second since it was opened: any outage is over.
    func sustained() {
        outageStart.store(0, ordering: .relaxed)
    }

    /// Outages so far.
    var count: Int { outages.load(ordering: .relaxed) }

    /// How long the current outage has lasted at `now`, or nil while the device works.
    func failingFor(now: UInt64) -> Duration? {
        let start = outageStart.load(ordering: .relaxed)
        guard start != 0 else { return nil }
        return .nanoseconds(Int64(now &- start))
    }
}

/// The waits of an audio thread between attempts to (re)open its device: jittered exponential backoff,
/// started afresh only once the device has run for a while (see ``DeviceHealth``).
struct ReopenPacing {
    private var backoff: Backoff
    private var random = SystemRandomNumberGenerator()

    init(_ backoff: Backoff) { self.backoff = backoff }

    /// An attempt failed: waits the next delay on `wakeup`, however often it is signalled, until
    /// `cancelled()` (checked at each signal) turns true.
    mutating func wait(on wakeup: Wakeup, unless cancelled: () -> Bool) {
        let delay = backoff.next(using: &random)
        wakeup.pause(nanoseconds: UInt64(max(0, delay.nanoseconds)), unless: cancelled)
    }

    /// The device ran for a while: the next failure waits the shortest delay again.
    mutating func reset() { backoff.reset() }
}

/// What one open device has transferred, until it has run for a second: then it works (``DeviceHealth``)
/// and its next failure starts the backoff afresh (``ReopenPacing``).
struct RunSinceOpen {
    private let needed: Int
    private var frames = 0
    /// The device has run for a second since it was opened.
    private(set) var sustained = false

    /// For a device of `rate` frames a second.
    init(rate: Int) { needed = max(1, rate) }

    /// Counts `count` frames transferred; the first time they make a second, ends `health`'s outage.
    mutating func transferred(_ count: Int, health: DeviceHealth) {
        guard !sustained else { return }
        frames += count
        if frames >= needed {
            sustained = true
            health.sustained()
        }
    }
}
