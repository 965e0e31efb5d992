import HarkCore

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

/// How a backend's sessions keep their link: the settings of the one reconnect rule (``ReconnectPolicy``), made
/// once from how the sessions are used (``init(usage:)``) and held by each backend's configuration as `link`.
public struct LinkSettings: Sendable, Hashable {
    /// Backoff for transient failures.
    public var backoff: Backoff
    /// The wait after an authentication or configuration rejection (slow retry).
    public var rejectedRetryDelay: Duration
    /// End the run on a rejection instead of retrying slowly (a one-shot command).
    public var giveUpOnRejection: Bool
    /// Give up after this many failed attempts in a row (nil: never).
    public var maxConsecutiveFailures: Int?
    /// Seed for the backoff jitter (nil: random).
    public var randomSeed: UInt64?

    /// The daemon's settings unless told otherwise: reconnect for ever with the standard backoff, retry a rejection
    /// every five minutes.
    public init(
        backoff: Backoff = Backoff(),
        rejectedRetryDelay: Duration = .seconds(300),
        giveUpOnRejection: Bool = false,
        maxConsecutiveFailures: Int? = nil,
        randomSeed: UInt64? = nil
    ) {
        self.backoff = backoff
        self.rejectedRetryDelay = rejectedRetryDelay
        self.giveUpOnRejection = giveUpOnRejection
        self.maxConsecutiveFailures = maxConsecutiveFailures
        self.randomSeed = randomSeed
    }

    /// The settings for sessions used as `usage` says: the daemon reconnects for ever and retries a rejection
    /// slowly; a one-shot command gives up on a rejection, and after its `maxRetries` failures in a row.
    public init(usage: BackendUsage) {
        switch usage {
        case .daemon:
            self.init()
        case .oneShot(let maxRetries, _):
            self.init(giveUpOnRejection: true, maxConsecutiveFailures: maxRetries)
        }
    }

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
