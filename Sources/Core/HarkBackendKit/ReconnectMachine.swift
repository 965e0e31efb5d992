import HarkCore

/// How one connection of a session ended, as its backend classifies it.
public enum ConnectionEnd: Sendable, Hashable {
    /// Nothing more to do: ``VoiceSession/finish()`` was called, or the service ended the conversation.
    case finished
    /// The connection was left on purpose (Gemini's goAway, the connection-lifetime close): resume at once.
    case switched
    /// The service refused to continue the earlier conversation before the connection became ready: forget
    /// what was kept of it and start a fresh one.
    case resumptionRefused(SessionFailure)
    /// The connection could not be made, or was lost; `healthy` when it had been working (ready) first.
    case failed(SessionFailure, healthy: Bool)
}

/// The one reconnect loop every backend runs, as a value: connect → serve → classify the end → back off →
/// resume. It decides; ``SessionRuntime/runConnections(machine:connect:)`` connects, sleeps, logs and emits
/// what it decides. Transient failures back off with jitter (``ReconnectPolicy``), rejections wait the slow
/// retry delay or end a one-shot run, a switch resumes at once, and a refused resumption starts a fresh
/// conversation (waiting a backoff delay when the service keeps refusing).
public struct ReconnectMachine: Sendable {
    /// What to do next.
    public enum Step: Sendable, Hashable {
        /// Show `link` (when given), log `log` (when given), wait `after`, then open connection number `attempt`.
        case connect(attempt: Int, after: Duration, link: LinkState?, log: LogLine?)
        /// Forget what was kept of the earlier conversation, then connect as `.connect` says.
        case startFresh(attempt: Int, after: Duration, log: LogLine)
        /// The session is over.
        case stop
        /// The session cannot go on: show `link`, log `log`, and end the run with `failure`.
        case giveUp(SessionFailure, link: LinkState, log: LogLine)
    }

    /// The backoff and rejection rules.
    public private(set) var policy: ReconnectPolicy
    /// Connections attempted so far.
    public private(set) var attempts = 0
    /// Refused resumptions in a row.
    public private(set) var refusalsInARow = 0
    /// Refused resumptions in a row beyond which a fresh start waits a backoff delay.
    public var refusalsBeforeBackoff = 3

    public init(policy: ReconnectPolicy) {
        self.policy = policy
    }

    /// The first connection.
    public mutating func start() -> Step {
        attempts = 1
        return .connect(attempt: 1, after: .zero, link: nil, log: nil)
    }

    /// The connection ended as `end` says.
    public mutating func ended(_ end: ConnectionEnd) -> Step {
        switch end {
        case .finished:
            return .stop
        case .switched:
            policy.connected()
            refusalsInARow = 0
            return next(after: .zero, link: nil, log: LogLine(.info, "switching to a new connection (resuming)"))
        case .resumptionRefused(let failure):
            refusalsInARow += 1
            let wait = refusalsInARow > refusalsBeforeBackoff ? policy.nextDelay() : .zero
            attempts += 1
            return .startFresh(
                attempt: attempts,
                after: wait,
                log: LogLine(.notice, "resumption refused (\(failure.message)); starting a fresh session")
            )
        case .failed(let failure, let healthy):
            if healthy { refusalsInARow = 0 }
            switch policy.failed(failure, healthy: healthy) {
            case .giveUp(let link, let message):
                return .giveUp(failure, link: link, log: LogLine(.error, message))
            case .retry(let delay, let link, let message):
                return next(
                    after: delay,
                    link: link,
                    log: LogLine(failure.kind == .transient ? .warning : .error, message)
                )
            }
        }
    }

    private mutating func next(after: Duration, link: LinkState?, log: LogLine?) -> Step {
        attempts += 1
        return .connect(attempt: attempts, after: after, link: link, log: log)
    }
}
