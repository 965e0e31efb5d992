import Glibc
import HarkCore
import Synchronization

/// A tiny mutex for the fakes and the file-backed outputs (not used on any per-frame hot path that
/// contends: one owner thread writes).
final class SimpleLock: Sendable {
    private let mutex = Mutex(())
    func with<T>(_ body: () throws -> T) rethrows -> T { try mutex.withLock { _ in try body() } }
}

/// Text for an errno value (strerror).
enum ErrnoText {
    static func describe(_ code: Int32) -> String {
        guard let text = strerror(code) else { return "errno \(code)" }
        return "\(String(cString: text)) (errno \(code))"
    }
}

/// A file descriptor this process owns: closed once, in `deinit`.
final class OwnedDescriptor: Sendable {
    let fd: Int32
    init(_ fd: Int32) { self.fd = fd }
    deinit { close(fd) }

    /// open(2), retrying EINTR.
    static func open(_ path: String, _ flags: Int32) throws(FileError) -> OwnedDescriptor {
        while true {
            let fd = Glibc.open(path, flags | O_CLOEXEC)
            if fd >= 0 { return OwnedDescriptor(fd) }
            if errno != EINTR { throw FileError(path: path, operation: "open", errno: errno) }
        }
    }

    /// write(2) of all of `bytes`, retrying EINTR and short writes.
    func writeAll(_ bytes: [UInt8], path: String) throws(FileError) { try Descriptors.writeAll(fd, bytes, path: path) }

    /// poll(2) for input, retrying EINTR: true if readable before `timeout`.
    func waitReadable(timeout: Duration, path: String) throws(FileError) -> Bool {
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let millis = Int32(clamping: max(0, timeout.milliseconds))
        while true {
            let result = poll(&descriptor, 1, millis)
            if result >= 0 { return result > 0 }
            if errno != EINTR { throw FileError(path: path, operation: "poll", errno: errno) }
        }
    }

    /// read(2) of up to `count` bytes, retrying EINTR; empty at end of file.
    func read(upTo count: Int, path: String) throws(FileError) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: count)
        while true {
            let got = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, count) }
            if got >= 0 { return Array(buffer[..<got]) }
            if errno != EINTR { throw FileError(path: path, operation: "read", errno: errno) }
        }
    }
}

/// Operations on descriptors this process does not own (standard output).
enum Descriptors {
    /// write(2) of all of `bytes` to `fd`, retrying EINTR and short writes; `path` names it in errors.
    static func writeAll(_ fd: Int32, _ bytes: [UInt8], path: String) throws(FileError) {
        var done = 0
        while done < bytes.count {
            let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + done, $0.count - done) }
            if written < 0 {
                if errno == EINTR { continue }
                throw FileError(path: path, operation: "write", errno: errno)
            }
            done += written
        }
    }
}

/// A file operation on a device or sysfs file failed.
public struct FileError: Error, CustomStringConvertible, Sendable {
    public var path: String
    public var operation: String
    public var errno: Int32
    public var description: String { "\(operation) \(path): \(ErrnoText.describe(errno))" }
}
