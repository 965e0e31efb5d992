import HarkCore

#if canImport(Glibc)
    import Glibc
#endif

/// Why the control socket cannot be opened or reached, said for a person.
public struct ControlSocketError: Error, CustomStringConvertible, Sendable, Hashable {
    /// What went wrong, by kind.
    public enum Kind: Sendable, Hashable {
        /// No socket at the path (or its folder is missing): no daemon runs there.
        case missing
        /// A socket file nobody serves: a daemon that ended without removing it.
        case stale
        /// The socket is there, and this user may not use it.
        case permissionDenied
        /// Another daemon serves the socket already.
        case inUse
        /// Something else is at the path, or the path cannot be a socket's.
        case unusable
        /// The daemon did not answer in time, or closed the connection without a reply.
        case noReply
        /// Any other system error.
        case failed
    }

    /// The kind.
    public var kind: Kind
    /// The sentence.
    public var description: String

    /// An error of `kind`, said as `description`.
    public init(_ kind: Kind, _ description: String) {
        self.kind = kind
        self.description = description
    }
}

/// The process on the other end of a Unix socket (`SO_PEERCRED`): who connected, or who serves.
public struct PeerCredentials: Sendable, Hashable, CustomStringConvertible {
    /// Its process id.
    public var pid: Int32
    /// Its user id.
    public var uid: UInt32
    /// Its group id.
    public var gid: UInt32

    /// Credentials as the kernel gives them.
    public init(pid: Int32, uid: UInt32, gid: UInt32) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }

    /// `pid 123, uid 1000, gid 1000`.
    public var description: String { "pid \(pid), uid \(uid), gid \(gid)" }

    /// The credentials of the peer of the connected socket `fd` (`getsockopt(SO_PEERCRED)`), or nil.
    public static func of(_ fd: Int32) -> PeerCredentials? {
        var credentials = KernelCredentials()
        var size = socklen_t(MemoryLayout<KernelCredentials>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &size) == 0 else { return nil }
        return PeerCredentials(pid: credentials.pid, uid: credentials.uid, gid: credentials.gid)
    }
}

/// Linux's `struct ucred` (`<sys/socket.h>` declares it only under `_GNU_SOURCE`, which Swift's C library module
/// is built without): what `SO_PEERCRED` fills.
struct KernelCredentials: Sendable {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}

/// The control socket's file: made listening with its mode set before anyone can connect, a stale one from a dead
/// daemon replaced, a live one refused, and removed at the end only while it is still this daemon's.
enum ControlSocketFile {
    /// The most bytes of a Unix socket's path (`sun_path` less its terminating zero).
    static let pathLimit = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    /// A listening socket at `path` with `mode` (the file's owner is this process's user, its group this
    /// process's group), and the file's device and inode to recognise it later. A socket file there that nobody
    /// serves is replaced (`replacedStale` says so); one served by a running process is an ``ControlSocketError``
    /// of kind `inUse`, and anything else at the path is left alone and refused.
    static func listen(
        path: String,
        mode: mode_t,
        backlog: Int32 = 16
    ) throws(ControlSocketError) -> (fd: Int32, identity: FileIdentity, replacedStale: Bool) {
        guard path.hasPrefix("/") else {
            throw ControlSocketError(.unusable, "the control socket's path must be absolute (\(printable(path)))")
        }
        guard path.utf8.count <= pathLimit else {
            throw ControlSocketError(
                .unusable,
                "the control socket's path is longer than a Unix socket's \(pathLimit) bytes: \(printable(path))"
            )
        }
        var replaced = false
        var existing = stat()
        if lstat(path, &existing) == 0 {
            guard existing.st_mode & S_IFMT == S_IFSOCK else {
                throw ControlSocketError(
                    .unusable,
                    "\(printable(path)) exists and is not a socket: not replaced (remove it, or set control_socket)"
                )
            }
            switch probe(path) {
            case .served(let peer):
                let who = peer.map { " (process \($0.pid))" } ?? ""
                throw ControlSocketError(
                    .inUse,
                    "another hark daemon\(who) serves the control socket \(printable(path)): stop it first "
                        + "(systemctl stop hark), or give this one another control_socket"
                )
            case .refused:
                guard unlink(path) == 0 || errno == ENOENT else {
                    throw ControlSocketError(
                        .failed,
                        "cannot remove the stale control socket \(printable(path)): \(errnoText())"
                    )
                }
                replaced = true
            case .failed(let error):
                throw error
            }
        } else if errno != ENOENT {
            throw ControlSocketError(.failed, "cannot look at \(printable(path)): \(errnoText())")
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ControlSocketError(.failed, "cannot make a Unix socket: \(errnoText())") }
        var address = socketAddress(path)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0 else {
            let reason = errno
            close(fd)
            if reason == EADDRINUSE {
                throw ControlSocketError(.inUse, "another process took the control socket \(printable(path)) just now")
            }
            if reason == ENOENT {
                throw ControlSocketError(
                    .missing,
                    "cannot make the control socket \(printable(path)): its folder does not exist"
                )
            }
            throw ControlSocketError(
                reason == EACCES ? .permissionDenied : .failed,
                "cannot make the control socket \(printable(path)): \(String(cString: strerror(reason)))"
            )
        }
        // The mode is set before listen(): until then every connection is refused, so nobody outside the group
        // reaches the socket in between, whatever the umask made of it.
        var made = stat()
        guard chmod(path, mode) == 0, stat(path, &made) == 0, Glibc.listen(fd, backlog) == 0 else {
            let reason = errnoText()
            close(fd)
            unlink(path)
            throw ControlSocketError(.failed, "cannot set up the control socket \(printable(path)): \(reason)")
        }
        return (fd, FileIdentity(made), replaced)
    }

    /// Removes the socket file at `path` if it is still the one `identity` names (another daemon's, made since,
    /// is left alone).
    static func remove(path: String, identity: FileIdentity) {
        var now = stat()
        guard lstat(path, &now) == 0, FileIdentity(now) == identity else { return }
        unlink(path)
    }

    /// What a connection to an existing socket file finds.
    enum Probe {
        /// A process accepts connections there (its credentials, when the kernel gives them).
        case served(PeerCredentials?)
        /// Nobody listens: the file is stale.
        case refused
        /// It could not be told.
        case failed(ControlSocketError)
    }

    /// Connects to `path` without waiting, to tell a live socket from a stale one.
    static func probe(_ path: String) -> Probe {
        switch connect(path, blocking: false) {
        case .success(let fd):
            defer { close(fd) }
            return .served(PeerCredentials.of(fd))
        case .failure(let error):
            switch error.kind {
            case .stale: return .refused
            case .inUse: return .served(nil)
            default: return .failed(error)
            }
        }
    }

    /// A connection to the socket at `path`, or why not (no socket, stale, permission denied, ...). Without
    /// `blocking`, a socket whose backlog is full counts as `inUse`.
    static func connect(_ path: String, blocking: Bool) -> Result<Int32, ControlSocketError> {
        guard path.utf8.count <= pathLimit else {
            return .failure(ControlSocketError(.unusable, "the path \(printable(path)) is too long for a socket"))
        }
        var flags = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        if !blocking { flags |= Int32(SOCK_NONBLOCK.rawValue) }
        let fd = socket(AF_UNIX, flags, 0)
        guard fd >= 0 else { return .failure(ControlSocketError(.failed, "cannot make a Unix socket: \(errnoText())")) }
        var address = socketAddress(path)
        var result: Int32
        repeat {
            result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
        } while result != 0 && errno == EINTR
        guard result != 0 else { return .success(fd) }
        let reason = errno
        close(fd)
        let shown = printable(path)
        switch reason {
        case ENOENT, ENOTDIR:
            return .failure(ControlSocketError(.missing, "no daemon: no control socket at \(shown)"))
        case ECONNREFUSED:
            return .failure(
                ControlSocketError(.stale, "no daemon: the control socket \(shown) is stale (nobody serves it)")
            )
        case EACCES, EPERM:
            return .failure(ControlSocketError(.permissionDenied, "permission denied for the control socket \(shown)"))
        case EAGAIN:
            return .failure(ControlSocketError(.inUse, "the daemon is busy (\(shown) accepts no more connections)"))
        default:
            return .failure(
                ControlSocketError(.failed, "cannot connect to \(shown): \(String(cString: strerror(reason)))")
            )
        }
    }

    private static func socketAddress(_ path: String) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.prefix(raw.count - 1).enumerated() { raw[index] = byte }
        }
        return address
    }

    static func printable(_ path: String) -> String { RemoteText.printable(path, limit: 200) }

    static func errnoText() -> String { String(cString: strerror(errno)) }
}

/// A file's device and inode: which file a path named when it was made.
struct FileIdentity: Sendable, Hashable {
    var device: UInt64
    var inode: UInt64

    init(_ status: stat) {
        device = UInt64(status.st_dev)
        inode = UInt64(status.st_ino)
    }
}
