import Glibc
import HarkPlatform
import Synchronization

/// One end of a stream socket to another process (a socket pair's), served by a thread of its own: what arrives is
/// handed to `receive` on that thread as it is read (up to 64 KiB at a time), what is sent goes out at once when the
/// socket takes it (the caller's thread writes it, without blocking) and otherwise waits, bounded, for the thread to
/// write it when the socket has room. The socket is non-blocking; writes never raise `SIGPIPE`. The link ends when
/// the other side closes or fails (`receive` gets ``Incoming/closed(_:)`` once, last) or when ``close()`` is called
/// (nothing more is delivered); the thread then closes the descriptor.
public final class SocketLink: Sendable {
    /// What the thread hands over.
    public enum Incoming: Sendable {
        /// Bytes that arrived.
        case bytes([UInt8])
        /// The link ended: nil when the other side closed it, else why it failed.
        case closed(String?)
    }

    /// The most bytes waiting to be written; a ``send(_:)`` beyond is refused.
    public let maximumPending: Int
    private let core: Core
    private let thread: DeviceThread

    /// Serves `descriptor` (a connected stream socket, which the link now owns) on a thread named `name`. `ended`
    /// runs on that thread after the last delivery (a child process is reaped there). Throws when the thread or
    /// its wake-up pipe cannot be made (the descriptor is then closed).
    public init(
        descriptor: Int32,
        name: String,
        maximumPending: Int = 4 << 20,
        receive: @escaping @Sendable (Incoming) -> Void,
        ended: (@Sendable () -> Void)? = nil
    ) throws(HelperProcessError) {
        self.maximumPending = maximumPending
        var pipeEnds: [Int32] = [-1, -1]
        guard pipe(&pipeEnds) == 0 else {
            let code = errno
            Glibc.close(descriptor)
            throw HelperProcessError("pipe", code: code)
        }
        // (pipe2 is not in Swift's view of Glibc: the flags are set one by one; no exec races a link's creation
        // here, since helpers are spawned with their descriptors named.)
        for end in pipeEnds {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
        }
        let flags = fcntl(descriptor, F_GETFL)
        _ = fcntl(descriptor, F_SETFL, flags | O_NONBLOCK)
        let core = Core(descriptor: descriptor, wakeRead: pipeEnds[0], wakeWrite: pipeEnds[1])
        self.core = core
        do {
            thread = try DeviceThread(name: name, stackSize: 256 << 10) {
                core.serve(receive)
                ended?()
            }
        } catch {
            core.closeAll()
            throw HelperProcessError("pthread_create", code: error.code)
        }
    }

    /// Sends `bytes`; false when the link has ended or more than ``maximumPending`` bytes wait already (the caller
    /// treats that as a broken link). Never blocks.
    @discardableResult
    public func send(_ bytes: [UInt8]) -> Bool {
        core.send(bytes, limit: maximumPending)
    }

    /// Bytes waiting to be written.
    public var pendingBytes: Int { core.state.withLock { $0.pending.count - $0.start } }

    /// Ends the link from this side: nothing more is sent or delivered, and the thread closes the socket (the other
    /// side reads its end). Safe to call more than once, and after the link ended.
    public func close() {
        core.requestClose()
    }

    /// Waits until the link's thread has ended (after ``close()`` or the other side's end). Never call it from
    /// `receive`.
    public func join() { thread.join() }

    final class Core: Sendable {
        struct State {
            var pending: [UInt8] = []
            var start = 0
            /// The socket is closed (or about to be): nothing more goes out, the wake-up pipe is gone.
            var closed = false
            var closing = false
        }

        let descriptor: Int32
        let wakeRead: Int32
        let wakeWrite: Int32
        let state = Mutex(State())

        init(descriptor: Int32, wakeRead: Int32, wakeWrite: Int32) {
            self.descriptor = descriptor
            self.wakeRead = wakeRead
            self.wakeWrite = wakeWrite
        }

        func send(_ bytes: [UInt8], limit: Int) -> Bool {
            guard !bytes.isEmpty else { return true }
            return state.withLock { state in
                guard !state.closed, !state.closing else { return false }
                if state.pending.count == state.start {
                    let written = Self.write(descriptor, bytes[...])
                    guard written >= 0 else { return false }
                    if written == bytes.count { return true }
                    state.pending = Array(bytes[written...])
                    state.start = 0
                    wake()
                    return true
                }
                guard state.pending.count - state.start + bytes.count <= limit else { return false }
                state.pending += bytes
                return true
            }
        }

        func requestClose() {
            state.withLock { state in
                guard !state.closed, !state.closing else { return }
                state.closing = true
                wake()
            }
        }

        /// Writes to the wake-up pipe (with the lock held: the pipe is open).
        private func wake() {
            var byte: UInt8 = 1
            _ = Glibc.write(wakeWrite, &byte, 1)
        }

        /// Writes what the socket takes now: the count written (0 when it is full), or -1 when it failed.
        static func write(_ descriptor: Int32, _ bytes: ArraySlice<UInt8>) -> Int {
            var total = 0
            while total < bytes.count {
                let result = bytes.withUnsafeBytes { raw in
                    Glibc.send(
                        descriptor,
                        raw.baseAddress! + total,
                        raw.count - total,
                        Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)
                    )
                }
                if result > 0 {
                    total += result
                } else if result < 0, errno == EINTR {
                    continue
                } else if result < 0, errno == EAGAIN || errno == EWOULDBLOCK {
                    return total
                } else {
                    return -1
                }
            }
            return total
        }

        /// The thread's loop: polls the socket (and the wake-up pipe), reads, and writes what waits.
        func serve(_ receive: @Sendable (Incoming) -> Void) {
            var buffer = [UInt8](repeating: 0, count: 64 << 10)
            var reason: String?
            var deliverEnd = true
            loop: while true {
                let wantWrite = state.withLock { $0.pending.count > $0.start }
                var fds = [
                    pollfd(fd: descriptor, events: Int16(POLLIN) | (wantWrite ? Int16(POLLOUT) : 0), revents: 0),
                    pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0),
                ]
                let ready = poll(&fds, 2, -1)
                if ready < 0 {
                    if errno == EINTR { continue }
                    reason = "poll: \(Self.describe(errno))"
                    break
                }
                if fds[1].revents != 0 {
                    var drain = [UInt8](repeating: 0, count: 64)
                    while read(wakeRead, &drain, drain.count) > 0 {}
                    if state.withLock({ $0.closing }) {
                        deliverEnd = false
                        break
                    }
                }
                if fds[0].revents & Int16(POLLOUT) != 0 {
                    let failed = state.withLock { state -> Bool in
                        let written = Self.write(descriptor, state.pending[state.start...])
                        guard written >= 0 else { return true }
                        state.start += written
                        if state.start == state.pending.count {
                            state.pending = []
                            state.start = 0
                        }
                        return false
                    }
                    if failed {
                        reason = "send: \(Self.describe(errno))"
                        break
                    }
                }
                if fds[0].revents & (Int16(POLLIN) | Int16(POLLHUP) | Int16(POLLERR)) != 0 {
                    while true {
                        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                        if count > 0 {
                            receive(.bytes(Array(buffer[0..<count])))
                            if count < buffer.count { break }
                        } else if count == 0 {
                            break loop
                        } else if errno == EINTR {
                            continue
                        } else if errno == EAGAIN || errno == EWOULDBLOCK {
                            break
                        } else {
                            reason = "read: \(Self.describe(errno))"
                            break loop
                        }
                    }
                }
            }
            closeAll()
            if deliverEnd { receive(.closed(reason)) }
        }

        /// Marks the link closed and closes its descriptors (with the lock held, so no wake-up writes to a closed
        /// pipe).
        func closeAll() {
            state.withLock { state in
                guard !state.closed else { return }
                state.closed = true
                state.pending = []
                state.start = 0
                Glibc.close(descriptor)
                Glibc.close(wakeRead)
                Glibc.close(wakeWrite)
            }
        }

        static func describe(_ code: Int32) -> String {
            (strerror(code).map { String(cString: $0) } ?? "error") + " (errno \(code))"
        }
    }
}

/// A system call on the way to a helper process failed.
public struct HelperProcessError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The call (`posix_spawn`, `socketpair`, ...).
    public var operation: String
    /// Its error number.
    public var code: Int32

    public init(_ operation: String, code: Int32) {
        self.operation = operation
        self.code = code
    }

    public var description: String { "\(operation): \(SocketLink.Core.describe(code))" }
}
