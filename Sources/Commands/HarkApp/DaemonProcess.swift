#if canImport(Glibc)
    import Glibc
#endif

/// Tells whether a process id names the running hark daemon before `hark reload` signals it. The id comes from the
/// status file, which the service's own user writes: taken on trust, `sudo hark reload` would send SIGHUP (whose
/// default action ends a process) to any process an attacker named there. So the process must run a hark
/// executable (this one, or a file named `hark`), and when the status file records the daemon's start time
/// (``ApplianceStatus/processStartTicks``) it must have started then: a process that took a dead daemon's id has
/// another start time.
enum DaemonProcess {
    /// Why a process is not signalled.
    struct Refusal: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// This process's start time, as ``startTicks(of:)`` reads it.
    static var ownStartTicks: UInt64? { startTicks(of: getpid()) }

    /// Throws a ``Refusal`` that says why, unless `pid` is the hark daemon the status file describes (its start
    /// time `recordedStart`, when the file records one for this pid).
    static func verify(_ pid: Int32, recordedStart: UInt64?) throws(Refusal) {
        guard pid > 1 else {
            throw Refusal("no daemon: process id \(pid) cannot be the daemon's (is it running? systemctl status hark)")
        }
        guard let executable = executable(of: pid) else {
            let reason = errno
            if reason == ENOENT || reason == ESRCH {
                throw Refusal("no process with id \(pid): is the daemon running? (systemctl status hark)")
            }
            throw Refusal(
                "cannot tell whether process \(pid) is the hark daemon (/proc/\(pid)/exe: "
                    + "\(String(cString: strerror(reason)))): run hark reload as root or as the service's user"
            )
        }
        let running = executable.hasSuffix(" (deleted)") ? String(executable.dropLast(" (deleted)".count)) : executable
        let own = self.executable(of: getpid())
        let name = running.split(separator: "/").last.map(String.init) ?? running
        guard running == own || name == "hark" else {
            throw Refusal(
                "process \(pid) is not the hark daemon (it runs \(running)): not signalled; "
                    + "the status file may be stale or forged"
            )
        }
        if let recordedStart {
            guard let started = startTicks(of: pid) else {
                throw Refusal("no process with id \(pid): is the daemon running? (systemctl status hark)")
            }
            guard started == recordedStart else {
                throw Refusal(
                    "process \(pid) is not the hark daemon the status file describes (it started at another "
                        + "time): not signalled"
                )
            }
        }
    }

    /// The executable of `pid` (`readlink /proc/PID/exe`), or nil with `errno` set.
    static func executable(of pid: Int32) -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("/proc/\(pid)/exe", &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

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
