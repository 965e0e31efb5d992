import Glibc
import Synchronization

/// A helper program started by this process with one end of a socket pair as its descriptor 3 (``SocketLink`` serves
/// this side's end): `posix_spawn` with standard input and output on `/dev/null`, standard error shared (a crash's
/// message reaches the same journal), the signals' dispositions and mask reset, and only the environment given. The
/// child is reaped on the link's thread once the link has ended; ``waitForExit(within:clock:)`` waits for that and
/// kills a child that outlives its grace. A child whose socket this side closes sees its end and is expected to
/// end.
public final class HelperProcess: Sendable {
    /// How a child ended.
    public enum Exit: Sendable, Hashable, CustomStringConvertible {
        /// It exited with this status.
        case exited(Int32)
        /// A signal ended it.
        case signalled(Int32)
        /// Its status could not be read (it was reaped elsewhere).
        case unknown

        public var description: String {
            switch self {
            case .exited(let code): "exited with status \(code)"
            case .signalled(let signal): "ended by signal \(signal)"
            case .unknown: "ended"
            }
        }
    }

    /// The child's process id.
    public let pid: pid_t
    /// The link to it.
    public let link: SocketLink
    private let exit: ExitState

    /// The descriptor the child finds its end of the socket pair on.
    public static let childDescriptor: Int32 = 3

    /// How the child ended, once it was reaped, and who waits for that.
    private final class ExitState: Sendable {
        let state = Mutex<(status: Exit?, waiters: [CheckedContinuation<Exit, Never>])>((nil, []))

        func reaped(_ status: Exit) {
            let waiters = state.withLock { state in
                state.status = status
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume(returning: status) }
        }
    }

    private init(pid: pid_t, link: SocketLink, exit: ExitState) {
        self.pid = pid
        self.link = link
        self.exit = exit
    }

    /// Starts `executable` (a path) with `arguments` and exactly `environment`; `receive` gets what it sends (see
    /// ``SocketLink``), on a thread named `name`. With `standardStreams` the child finds its end of the socket pair
    /// as its standard input and output (a program that speaks over stdio), else as descriptor 3. Throws when the
    /// socket pair, the thread or the process cannot be made (a missing or non-executable program: `posix_spawn`'s
    /// error).
    public static func spawn(
        _ executable: String,
        arguments: [String] = [],
        environment: [String: String] = [:],
        standardStreams: Bool = false,
        name: String,
        receive: @escaping @Sendable (SocketLink.Incoming) -> Void
    ) throws(HelperProcessError) -> HelperProcess {
        var ends: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
            throw HelperProcessError("socketpair", code: errno)
        }
        var childEnd = ends[1]
        if childEnd == childDescriptor {
            // dup2 onto itself would leave close-on-exec set: move it out of the way first.
            childEnd = fcntl(ends[1], F_DUPFD_CLOEXEC, 10)
            Glibc.close(ends[1])
        }
        defer { Glibc.close(childEnd) }
        let pid: pid_t
        do {
            pid = try start(
                executable,
                arguments: arguments,
                environment: environment,
                childEnd: childEnd,
                standardStreams: standardStreams
            )
        } catch {
            Glibc.close(ends[0])
            throw error
        }
        let exit = ExitState()
        let link: SocketLink
        do {
            link = try SocketLink(descriptor: ends[0], name: name, receive: receive) { exit.reaped(reap(pid)) }
        } catch {
            kill(pid, SIGKILL)
            _ = reap(pid)
            throw error
        }
        return HelperProcess(pid: pid, link: link, exit: exit)
    }

    private static func start(
        _ executable: String,
        arguments: [String],
        environment: [String: String],
        childEnd: Int32,
        standardStreams: Bool
    ) throws(HelperProcessError) -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if standardStreams {
            posix_spawn_file_actions_adddup2(&actions, childEnd, 0)
            posix_spawn_file_actions_adddup2(&actions, childEnd, 1)
        } else {
            posix_spawn_file_actions_adddup2(&actions, childEnd, childDescriptor)
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var mask = sigset_t()
        sigemptyset(&mask)
        posix_spawnattr_setsigmask(&attributes, &mask)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD] {
            sigaddset(&defaults, signal)
        }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.sorted { $0.key < $1.key }.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard result == 0 else { throw HelperProcessError("posix_spawn \(executable)", code: result) }
        return pid
    }

    /// Waits for the child (`waitpid`): how it ended.
    private static func reap(_ pid: pid_t) -> Exit {
        var status: Int32 = 0
        while true {
            let result = waitpid(pid, &status, 0)
            if result == pid { break }
            if result < 0, errno == EINTR { continue }
            return .unknown
        }
        // WIFEXITED / WEXITSTATUS / WTERMSIG are macros: the status's low 7 bits are the signal, 0 for an exit.
        let signal = status & 0x7F
        return signal == 0 ? .exited((status >> 8) & 0xFF) : .signalled(signal)
    }

    /// How the child ended, once it has and was reaped.
    public var exitStatus: Exit? { exit.state.withLock { $0.status } }

    /// Waits for the child to end (its link ends first: close it, or let the child close it); past `grace` it is
    /// killed (`SIGKILL`). Returns how it ended.
    public func waitForExit(within grace: Duration, clock: any Clock<Duration> = ContinuousClock()) async -> Exit {
        let pid = self.pid
        return await withTaskGroup(of: Exit?.self) { group in
            group.addTask { await self.exited() }
            group.addTask {
                try? await clock.sleep(for: grace)
                return nil
            }
            let first = await group.next() ?? nil
            if let first {
                group.cancelAll()
                return first
            }
            kill(pid, SIGKILL)
            link.close()
            let exit = await group.next() ?? nil
            return exit ?? .unknown
        }
    }

    private func exited() async -> Exit {
        await withCheckedContinuation { continuation in
            let status = exit.state.withLock { state -> Exit? in
                if let status = state.status { return status }
                state.waiters.append(continuation)
                return nil
            }
            if let status { continuation.resume(returning: status) }
        }
    }
}

/// Where a helper program of Hark is: a program installed beside the `hark` that runs it (a checkout's build
/// folder), or in Hark's library folder (`/usr/lib/hark`, where the package puts programs that are not for a person
/// to run), or where an environment variable names it.
public enum HelperProgram {
    /// The folders looked in, in order, unless `variable` names a file: the folder of `executable` (default: this
    /// process's), then `/usr/lib/hark`.
    public static func candidates(_ name: String, executable: String? = nil) -> [String] {
        var folders: [String] = []
        if let executable = executable ?? selfExecutable(), let slash = executable.lastIndex(of: "/") {
            folders.append(String(executable[..<slash]))
        }
        folders.append("/usr/lib/hark")
        return folders.map { $0 + "/" + name }
    }

    /// The program `name`: the path `environment[variable]` names when set, else the first of ``candidates(_:executable:)``
    /// that is an executable file; nil when none is.
    public static func locate(
        _ name: String,
        variable: String,
        environment: [String: String],
        executable: String? = nil
    ) -> String? {
        if let path = environment[variable], !path.isEmpty { return isExecutable(path) ? path : nil }
        return candidates(name, executable: executable).first(where: isExecutable)
    }

    /// True for a regular file this process may execute.
    public static func isExecutable(_ path: String) -> Bool {
        var status = stat()
        return stat(path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFREG && access(path, X_OK) == 0
    }

    /// This process's executable (`readlink /proc/self/exe`), or nil.
    private static func selfExecutable() -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
