/// The health gate after an upgrade, as a value: observations of the service (systemd's view and the daemon's own)
/// go in with the time, a verdict comes out. The new release is kept once it stayed healthy for `healthFor`; it
/// fails when it crashes or restarts (systemd's `NRestarts` or its start time change), does not reach `READY=1`
/// in time, stops pinging the watchdog, gives up (`fatal`), or shows a rejected key or configuration that the
/// release before it did not show. `hark update gate` keeps it in a file between observations, so the gate
/// outlives the updater's process (and is judged by the release installed before the one on trial).
public struct UpdateGate: Codable, Sendable, Hashable {
    /// What systemd says of `hark.service` (`systemctl show -p ActiveState,NRestarts,ExecMainStartTimestampMonotonic`).
    public struct Unit: Codable, Sendable, Hashable {
        /// `active`, `activating`, `failed`, `inactive`, ...
        public var activeState: String
        /// Restarts systemd made since the unit was loaded.
        public var restarts: Int
        /// When the main process started (monotonic microseconds); 0 when it has none.
        public var mainStart: UInt64

        /// systemd's view.
        public init(activeState: String, restarts: Int, mainStart: UInt64) {
            self.activeState = activeState
            self.restarts = restarts
            self.mainStart = mainStart
        }

        /// Reads `systemctl show` output (`KEY=VALUE` lines); unknown keys are ignored, missing ones are empty.
        public init(systemctlShow text: String) {
            var values: [Substring: Substring] = [:]
            for line in text.split(separator: "\n").prefix(64) {
                guard let equals = line.firstIndex(of: "=") else { continue }
                values[line[..<equals]] = line[line.index(after: equals)...]
            }
            self.init(
                activeState: String((values["ActiveState"] ?? "").prefix(32)),
                restarts: values["NRestarts"].flatMap { Int($0) }.map { min(max($0, 0), 1_000_000) } ?? 0,
                mainStart: values["ExecMainStartTimestampMonotonic"].flatMap { UInt64($0) } ?? 0
            )
        }
    }

    /// What the daemon says of itself over the control socket (its `status`), or nil when it did not answer.
    public struct Daemon: Codable, Sendable, Hashable {
        /// The state shown (`booting`, `idle`, `offline`, `error`, `fatal`, ...).
        public var state: String
        /// The overlays in force.
        public var overlays: [String]
        /// Watchdog pings sent since it started.
        public var watchdogPings: Int

        /// The daemon's view.
        public init(state: String, overlays: [String], watchdogPings: Int) {
            self.state = state
            self.overlays = overlays
            self.watchdogPings = watchdogPings
        }

        /// From the status it reports.
        public init(_ status: ApplianceStatus) {
            self.init(state: status.state, overlays: status.overlays, watchdogPings: status.watchdogPings)
        }

        /// A key or the configuration rejected by the service (the `error` overlay).
        public var rejected: Bool { state == "error" || overlays.contains("error") }
    }

    /// What the gate says after an observation.
    public enum Verdict: Sendable, Hashable, CustomStringConvertible {
        /// Not decided yet: why it waits.
        case watching(String)
        /// Healthy for the whole time: keep the release.
        case healthy
        /// Roll back: why.
        case failed(String)

        public var description: String {
            switch self {
            case .watching(let why): "watching: \(why)"
            case .healthy: "healthy"
            case .failed(let why): "failed: \(why)"
            }
        }
    }

    /// How long the release must stay healthy, in seconds.
    public var healthFor: Double
    /// How long it may take to reach `READY=1` (and answer on its socket), in seconds.
    public var readyWithin: Double
    /// How long the watchdog pings may stand still, in seconds (systemd's `WatchdogSec` is shorter: a stalled
    /// daemon is restarted, which fails the gate first).
    public var pingsWithin: Double
    /// Whether the release before it showed a rejected key or configuration (then this one may too).
    public var rejectedBefore: Bool
    /// When the gate began (the time the observations are given in, seconds).
    public var began: Double
    /// systemd's restarts and start time at the first observation of the running service.
    public private(set) var baseline: Unit?
    /// systemd's restart count at the first observation, whatever the state: a release that crashes before it
    /// ever becomes ready fails at its first restart, not only once the time to become ready is over.
    public private(set) var firstRestarts: Int?
    /// Since when every observation was healthy.
    public private(set) var healthySince: Double?
    /// The last watchdog count seen, and when it last grew.
    public private(set) var pingCount: Int?
    /// When ``pingCount`` last grew.
    public private(set) var pingTime: Double?
    /// The verdict once decided (it does not change after).
    public private(set) var decided: String?

    /// A gate that begins at `now` (right after the new release was installed).
    public init(
        healthFor: Double,
        readyWithin: Double = 180,
        pingsWithin: Double = 120,
        rejectedBefore: Bool,
        now: Double
    ) {
        self.healthFor = max(1, healthFor)
        self.readyWithin = max(1, readyWithin)
        self.pingsWithin = max(1, pingsWithin)
        self.rejectedBefore = rejectedBefore
        self.began = now
    }

    /// Takes one observation at `now` and says what it means. A failure or success is final.
    public mutating func observe(unit: Unit, daemon: Daemon?, now: Double) -> Verdict {
        if let decided { return decided == "healthy" ? .healthy : .failed(decided) }
        let verdict = judge(unit: unit, daemon: daemon, now: now)
        switch verdict {
        case .healthy: decided = "healthy"
        case .failed(let why): decided = why
        case .watching: break
        }
        return verdict
    }

    private mutating func judge(unit: Unit, daemon: Daemon?, now: Double) -> Verdict {
        let elapsed = now - began
        if unit.activeState == "failed" { return .failed("the service failed (systemd: failed)") }
        let first = firstRestarts ?? unit.restarts
        firstRestarts = first
        if baseline == nil, unit.restarts > first {
            return .failed("the service restarted \(unit.restarts - first) time(s) before it became ready")
        }
        if let baseline {
            if unit.restarts > baseline.restarts {
                return .failed("the service restarted \(unit.restarts - baseline.restarts) time(s)")
            }
            if unit.mainStart != baseline.mainStart {
                return .failed("the service's process started again")
            }
        }
        guard unit.activeState == "active", unit.mainStart > 0 else {
            healthySince = nil
            if baseline != nil { return .failed("the service stopped (systemd: \(unit.activeState))") }
            if elapsed > readyWithin {
                return .failed("not ready within \(Int(readyWithin)) s (systemd: \(unit.activeState))")
            }
            return .watching("waiting for READY=1 (systemd: \(unit.activeState))")
        }
        if baseline == nil { baseline = unit }
        guard let daemon else {
            healthySince = nil
            if elapsed > readyWithin { return .failed("no answer on the control socket within \(Int(readyWithin)) s") }
            return .watching("waiting for the daemon to answer")
        }
        if daemon.state == "fatal" { return .failed("the daemon gave up (fatal)") }
        if daemon.rejected && !rejectedBefore {
            return .failed("the service rejected its key or configuration, which the release before did not")
        }
        if daemon.state == "booting" {
            healthySince = nil
            if elapsed > readyWithin { return .failed("still booting after \(Int(readyWithin)) s") }
            return .watching("booting")
        }
        if let pingCount, let pingTime, daemon.watchdogPings <= pingCount {
            if now - pingTime > pingsWithin { return .failed("no watchdog ping for \(Int(now - pingTime)) s") }
        } else {
            pingCount = daemon.watchdogPings
            pingTime = now
        }
        let since = healthySince ?? now
        healthySince = since
        if now - since >= healthFor { return .healthy }
        return .watching("healthy for \(Int(now - since)) of \(Int(healthFor)) s")
    }
}
