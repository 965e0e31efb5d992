import Logging
import Synchronization

/// Captures log lines (level, message, metadata) so a test can check what reaches the logs — and what must
/// never reach them, such as a key.
public final class LogCapture: Sendable {
    private let lines = Mutex<[String]>([])

    public init() {}

    /// Every line so far, in order.
    public var all: [String] { lines.withLock { $0 } }

    /// A logger at trace level whose lines land here.
    public func logger(_ label: String = "test") -> Logger {
        var logger = Logger(label: label) { _ in CapturingHandler(capture: self) }
        logger.logLevel = .trace
        return logger
    }

    func append(_ line: String) { lines.withLock { $0.append(line) } }

    struct CapturingHandler: LogHandler {
        let capture: LogCapture
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            capture.append("\(event.level) \(event.message) \(event.metadata ?? [:]) \(self.metadata)")
        }
    }
}
