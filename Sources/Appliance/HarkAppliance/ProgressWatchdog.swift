/// Decides when the service manager's watchdog may be fed: only when every service has shown progress
/// since the last ping. A timer that feeds the watchdog proves only that the timer runs; this proves the
/// capture loop read frames, the speaker took samples (or is idle by design), the session was heard
/// from (or is deliberately offline), the LEDs rendered, the button thread turned.
public struct ProgressWatchdog: Sendable {
    /// One service's progress as the supervisor reads it.
    public struct Reading: Sendable, Hashable {
        /// A counter that grows while the service works (frames, iterations, messages).
        public var counter: Int
        /// True when the service has nothing to do by design (no session open, no LEDs): it counts as progress.
        public var idleByDesign: Bool

        public init(counter: Int, idleByDesign: Bool = false) {
            self.counter = counter
            self.idleByDesign = idleByDesign
        }
    }

    /// The verdict of one check.
    public enum Verdict: Sendable, Hashable {
        /// Every service progressed: ping.
        case ping
        /// These services showed no progress since the last check: hold the ping back.
        case stalled([String])
    }

    private var last: [String: Int] = [:]

    public init() {}

    /// Compares `readings` with those of the previous check.
    public mutating func check(_ readings: [String: Reading]) -> Verdict {
        var stalled: [String] = []
        for (name, reading) in readings.sorted(by: { $0.key < $1.key }) {
            let previous = last[name]
            if !reading.idleByDesign, let previous, reading.counter <= previous { stalled.append(name) }
            last[name] = reading.counter
        }
        return stalled.isEmpty ? .ping : .stalled(stalled)
    }
}

/// Counts local failures (a device that will not reopen, a crashed part) in a sliding window; past the
/// limit the supervisor gives up so the service manager restarts the process. Network and service
/// failures are never recorded here: a reconnecting session is progress.
public struct FailureBudget: Sendable, Hashable {
    /// How many failures the window tolerates.
    public var limit: Int
    /// The window.
    public var window: Duration
    private var times: [Duration] = []

    public init(limit: Int = 5, window: Duration = .seconds(60)) {
        self.limit = limit
        self.window = window
    }

    /// Records a failure at `now`; true when the budget is spent (give up).
    public mutating func record(at now: Duration) -> Bool {
        times.append(now)
        times.removeAll { now - $0 > window }
        return times.count > limit
    }

    /// Failures within the window at `now`.
    public func count(at now: Duration) -> Int { times.filter { now - $0 <= window }.count }
}
