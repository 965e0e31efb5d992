/// What a session does after a connection failed — the one reconnect rule every backend follows: transient
/// failures back off exponentially with jitter, rejections (authentication, configuration) wait the slow
/// retry delay or end a one-shot run, and a run with a limit gives up after that many failures in a row.
/// A pure value: the session sleeps, logs and emits what the decision says.
public struct ReconnectPolicy: Sendable {
    /// The decision after one failure.
    public enum Decision: Sendable, Hashable {
        /// Show `link`, wait `delay`, try again. `message` is the log line.
        case retry(after: Duration, link: LinkState, message: String)
        /// Show `link` and stop: the session's `run()` throws the failure. `message` is the log line.
        case giveUp(link: LinkState, message: String)
    }

    public private(set) var backoff: Backoff
    /// The wait after an authentication or configuration rejection.
    public var rejectedRetryDelay: Duration
    /// End the run on a rejection instead of retrying slowly (a one-shot command).
    public var giveUpOnRejection: Bool
    /// Give up after this many failures in a row (nil: never).
    public var maxConsecutiveFailures: Int?
    /// Failures since the last healthy connection.
    public private(set) var consecutiveFailures = 0
    private var random: SeededRandom

    public init(
        backoff: Backoff,
        rejectedRetryDelay: Duration,
        giveUpOnRejection: Bool,
        maxConsecutiveFailures: Int?,
        seed: UInt64
    ) {
        self.backoff = backoff
        self.rejectedRetryDelay = rejectedRetryDelay
        self.giveUpOnRejection = giveUpOnRejection
        self.maxConsecutiveFailures = maxConsecutiveFailures
        self.random = SeededRandom(seed: seed)
    }

    /// A connection proved healthy (or was left on purpose): the next failure starts the backoff afresh.
    public mutating func connected() {
        consecutiveFailures = 0
        backoff.reset()
    }

    /// The next backoff delay, for waits that are not failures of their own (repeated refused resumptions).
    public mutating func nextDelay() -> Duration {
        backoff.next(using: &random)
    }

    /// Records a failure; `healthy` when the connection had been working before it failed.
    public mutating func failed(_ failure: SessionFailure, healthy: Bool) -> Decision {
        if healthy { connected() }
        consecutiveFailures += 1
        if let limit = maxConsecutiveFailures, consecutiveFailures >= limit {
            return .giveUp(
                link: .rejected(failure, retryIn: nil),
                message: "giving up after \(consecutiveFailures) failed attempts: \(failure.message)"
            )
        }
        switch failure.kind {
        case .transient:
            let delay = nextDelay()
            return .retry(
                after: delay,
                link: .offline(reason: failure.message, retryIn: delay),
                message: "offline: \(failure.message); retrying in \(delay.humanDescription)"
            )
        case .authentication, .configuration, .untrusted:
            if giveUpOnRejection { return .giveUp(link: .rejected(failure, retryIn: nil), message: failure.message) }
            return .retry(
                after: rejectedRetryDelay,
                link: .rejected(failure, retryIn: rejectedRetryDelay),
                message: "\(failure.message); retrying in \(rejectedRetryDelay.humanDescription)"
            )
        }
    }
}

/// A backend's reconnect settings (its configuration adopts this), from which its session makes its
/// ``ReconnectMachine``.
public protocol ReconnectSettings: Sendable {
    /// Backoff for transient failures.
    var backoff: Backoff { get }
    /// The wait after an authentication or configuration rejection (slow retry).
    var rejectedRetryDelay: Duration { get }
    /// End the run on a rejection instead of retrying slowly (a one-shot command).
    var giveUpOnRejection: Bool { get }
    /// Give up after this many failed attempts in a row (nil: never).
    var maxConsecutiveFailures: Int? { get }
    /// Seed for the backoff jitter (nil: random).
    var randomSeed: UInt64? { get }
}

extension ReconnectSettings {
    /// The reconnect loop these settings describe.
    public func reconnectMachine() -> ReconnectMachine {
        var seedSource = SystemRandomNumberGenerator()
        return ReconnectMachine(
            policy: ReconnectPolicy(
                backoff: backoff,
                rejectedRetryDelay: rejectedRetryDelay,
                giveUpOnRejection: giveUpOnRejection,
                maxConsecutiveFailures: maxConsecutiveFailures,
                seed: randomSeed ?? seedSource.next()
            )
        )
    }
}
