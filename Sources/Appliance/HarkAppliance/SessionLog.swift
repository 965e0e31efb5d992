import HarkCore
import Logging

/// What the supervisor says of a session's events: the lines it logs (the service's and the model's words made
/// printable and bounded) and the problem `hark status` keeps. A value: the supervisor logs what it returns.
enum SessionLog {
    /// The most of a transcript a log line quotes, in Unicode scalars: a segment's bound
    /// (``TranscriptSegments``), so only escapes can make a line cut.
    static let transcriptLimit = 8192
    /// The most of a tool name (or a wake word's) a log line quotes, in Unicode scalars.
    static let nameLimit = 80

    /// A line to log.
    struct Line: Sendable, Hashable {
        var level: Logger.Level
        var message: String

        init(_ level: Logger.Level, _ message: String) {
            self.level = level
            self.message = message
        }
    }

    /// What one event makes said.
    struct Said: Sendable, Hashable {
        /// Lines to log, in order.
        var lines: [Line] = []
        /// The newest problem, for `hark status` (nil: no news).
        var lastError: String?
    }

    /// `event` with the words of a link change (a failure, often quoting the service) printable and bounded:
    /// they reach the log, the state line, `STATUS=` and the status file.
    static func printable(_ event: SessionEvent) -> SessionEvent {
        switch event {
        case .link(.offline(let reason, let retryIn)):
            return .link(.offline(reason: RemoteText.printable(reason), retryIn: retryIn))
        case .link(.rejected(var failure, let retryIn)):
            failure.message = RemoteText.printable(failure.message)
            return .link(.rejected(failure, retryIn: retryIn))
        default:
            return event
        }
    }

    /// What `event` (made ``printable(_:)``) makes said; transcripts' words only when `transcripts` (privacy).
    static func said(_ event: SessionEvent, transcripts: Bool) -> Said {
        var said = Said()
        switch event {
        case .link(let link):
            switch link {
            case .connected: said.lines.append(Line(.info, "session connected"))
            case .connecting(let attempt):
                if attempt > 1 { said.lines.append(Line(.info, "session reconnecting (attempt \(attempt))")) }
            case .offline(let reason, _):
                // The session logs the failure and the state line says it: no third line.
                said.lastError = reason
            case .rejected(let failure, _):
                said.lines.append(
                    Line(
                        .error,
                        failure.kind == .untrusted
                            ? "not connecting to a server that cannot be verified: \(failure.message)"
                            : "the service refused the device: \(failure.message)"
                    )
                )
                said.lastError = failure.message
            case .ended: said.lines.append(Line(.info, "session ended"))
            }
        case .transcript(let transcript) where transcript.isFinal:
            if transcripts {
                let text = RemoteText.printable(transcript.text, limit: transcriptLimit)
                said.lines.append(Line(.info, "\(transcript.role.rawValue): \(text)"))
            } else {
                said.lines.append(
                    Line(.debug, "\(transcript.role.rawValue) spoke (\(transcript.text.count) characters)")
                )
            }
        case .tool(.started(_, let name)):
            said.lines.append(Line(.info, "tool call: \(RemoteText.printable(name, limit: nameLimit))"))
        case .tool(.finished(_, let name, let succeeded)) where !succeeded:
            said.lines.append(Line(.warning, "tool call failed: \(RemoteText.printable(name, limit: nameLimit))"))
        case .notice(let text):
            said.lines.append(Line(.debug, "session notice: \(RemoteText.printable(text))"))
        case .answerFailed(let why):
            said.lines.append(Line(.warning, "the answer failed: \(RemoteText.printable(why))"))
        default:
            break
        }
        return said
    }
}

extension Logger {
    /// Logs a line of the appliance's rules (``DeviceSupervisor``).
    func log(_ line: LogLine) {
        switch line.level {
        case .info: info("\(line.message)")
        case .notice: notice("\(line.message)")
        case .warning: warning("\(line.message)")
        case .error: error("\(line.message)")
        }
    }
}
