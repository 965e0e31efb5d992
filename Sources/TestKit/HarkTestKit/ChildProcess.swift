import Dispatch

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// Runs blocking `work` (a `wait4`, a `poll`) on a thread of its own and awaits its result: the task pool has only as
/// many threads as cores, and a test that blocks one of them stalls every other test's deadlines. (A queue of its
/// own, not a global one: those are as narrow as the task pool; a private serial queue gets a new thread when the
/// others are blocked.)
public func offThePool<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        DispatchQueue(label: "hark.test.blocking").async { continuation.resume(returning: work()) }
    }
}

/// A child process run to its end, with what only `wait4` tells: how it ended and its own peak memory (not the
/// largest of every child the test process ever had, as `getrusage(RUSAGE_CHILDREN)` would say). Waiting for it
/// blocks no thread of the task pool.
public struct ChildProcess: Sendable {
    /// The exit status, or nil when a signal ended it.
    public var exitStatus: Int32?
    /// The signal that ended it, or nil.
    public var signal: Int32?
    /// Its peak resident memory, in KiB.
    public var peakKiB: Int
    /// What it wrote to standard output (and to standard error, unless they were kept apart).
    public var output: Data
    /// What it wrote to standard error when kept apart from the output.
    public var errors: Data

    /// This process's environment but systemd's notify and watchdog variables: a notifier test may have set them
    /// for this process alone, and a child must not send to its socket.
    public static var inheritedEnvironment: [String: String] {
        ProcessInfo.processInfo.environment.filter {
            !["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"].contains($0.key)
        }
    }

    /// The exit status, or 128 + the signal (as a shell shows it).
    public var status: Int32 { exitStatus ?? 128 + (signal ?? 0) }
    /// The output as text.
    public var text: String { String(decoding: output, as: UTF8.self) }
    /// Standard error as text.
    public var errorText: String { String(decoding: errors, as: UTF8.self) }

    /// Runs `path` with `arguments`, in `directory` (else this process's), with `environment` (else this
    /// process's but systemd's notify and watchdog variables), its standard input `/dev/null`, its output through temporary files (no pipe can fill up), and
    /// waits for it.
    public static func run(
        _ path: String,
        _ arguments: [String],
        environment: [String: String]? = nil,
        directory: String? = nil,
        separateErrors: Bool = false
    ) async throws -> ChildProcess {
        let base = FileManager.default.temporaryDirectory.path + "/hark-child-\(UUID().uuidString)"
        let (outputPath, errorPath) = (base + ".out", base + ".err")
        defer {
            unlink(outputPath)
            unlink(errorPath)
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        if separateErrors {
            posix_spawn_file_actions_addopen(&actions, 2, errorPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        } else {
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        }
        let variables = environment ?? inheritedEnvironment
        // In another folder through the shell (glibc's addchdir is not visible to Swift): cd, then exec.
        let command = directory.map { ["/bin/sh", "-c", #"cd "$0" && exec "$@""#, $0, path] } ?? [path]
        let argv = (command + arguments).map { strdup($0) } + [nil]
        let envp = variables.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, command[0], &actions, nil, argv, envp)
        guard spawned == 0 else {
            throw ChildProcessError("cannot start \(path): \(String(cString: strerror(spawned)))")
        }
        let child = pid
        let (status, usage) = await offThePool {
            var status: Int32 = 0
            var usage = rusage()
            while wait4(child, &status, 0, &usage) < 0, errno == EINTR {}
            return (status, usage)
        }
        let signalled = status & 0x7F
        return ChildProcess(
            exitStatus: signalled == 0 ? (status >> 8) & 0xFF : nil,
            signal: signalled == 0 ? nil : signalled,
            peakKiB: usage.ru_maxrss,
            output: FileManager.default.contents(atPath: outputPath) ?? Data(),
            errors: FileManager.default.contents(atPath: errorPath) ?? Data()
        )
    }
}

/// A child process could not be started.
public struct ChildProcessError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}
