#if canImport(Glibc)
    import Glibc
#endif

/// When a process started, from `/proc/PID/stat`: the daemon records its own start time in the status file
/// (``ApplianceStatus/processStartTicks``), so a process that later took its id is told apart from it.
enum DaemonProcess {
    /// This process's start time, as ``startTicks(of:)`` reads it.
    static var ownStartTicks: UInt64? { startTicks(of: getpid()) }

    /// When `pid` started: the 22nd field of `/proc/PID/stat` (clock ticks after boot), or nil.
    static func startTicks(of pid: Int32) -> UInt64? {
        let fd = open("/proc/\(pid)/stat", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = read(fd, &buffer, buffer.count)
        guard count > 0 else { return nil }
        return startTicks(stat: String(decoding: buffer[0..<count], as: UTF8.self))
    }

    /// The start time in a `/proc/PID/stat` line: the 22nd field, counted after the command's closing parenthesis
    /// (the command itself may hold spaces and parentheses).
    static func startTicks(stat line: String) -> UInt64? {
        guard let close = line.lastIndex(of: ")") else { return nil }
        // Fields 3 onward follow the command; the start time is field 22.
        let fields = line[line.index(after: close)...].split(separator: " ", omittingEmptySubsequences: true)
        guard fields.count >= 20 else { return nil }
        return UInt64(fields[19])
    }
}
