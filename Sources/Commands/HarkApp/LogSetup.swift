import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One log line per event on standard error. Under systemd (`JOURNAL_STREAM` set) each line starts
/// with the syslog priority prefix (`<3>`), which journald turns into the entry's level; elsewhere
/// the level is spelled out.
public struct HarkLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level
    private let label: String
    private let journal: Bool

    public init(label: String, level: Logger.Level, journal: Bool) {
        self.label = label
        self.logLevel = level
        self.journal = journal
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var line = journal ? "<\(Self.priority(event.level))>" : "\(event.level.rawValue.uppercased()) "
        line += label + ": " + event.message.description
        let merged = metadata.merging(event.metadata ?? [:]) { _, new in new }
        if !merged.isEmpty {
            line += " " + merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        }
        line += "\n"
        writeAll(STDERR_FILENO, line)
    }

    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }

    /// Installs the handler process-wide once.
    public static func bootstrap(level: Logger.Level, environment: [String: String]) {
        let journal = environment["JOURNAL_STREAM"] != nil
        LoggingSystem.bootstrap { label in HarkLogHandler(label: label, level: level, journal: journal) }
    }
}

/// Writes a line to standard output immediately (transcripts, ready lines).
func printLine(_ text: String) {
    writeAll(STDOUT_FILENO, text + "\n")
}

/// Writes all of `text` to the file descriptor (`write(2)`, retried on EINTR and short writes).
func writeAll(_ fd: Int32, _ text: String) {
    var text = text
    text.withUTF8 { buffer in
        var offset = 0
        while offset < buffer.count {
            let written = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                return
            }
            offset += written
        }
    }
}
