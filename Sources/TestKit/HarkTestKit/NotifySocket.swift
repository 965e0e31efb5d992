import HarkCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// A test-made `NOTIFY_SOCKET`: a real datagram socket a notifier sends to, as systemd's would be.
public final class NotifySocket: @unchecked Sendable {
    /// The socket's path, for `NOTIFY_SOCKET`.
    public let path: String
    private let fd: Int32

    /// Binds a new socket in the temporary folder.
    public init() throws {
        path = FileManager.default.temporaryDirectory.path + "/hark-notify-\(UInt32.random(in: 0...UInt32.max))"
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { throw NotifySocketError(description: "socket() failed: errno \(errno)") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() where index < raw.count - 1 { raw[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0 else { throw NotifySocketError(description: "bind(\(path)) failed: errno \(errno)") }
    }

    deinit {
        close(fd)
        unlink(path)
    }

    /// The next datagram, or nil when none arrives within `timeout`. The wait blocks a thread of its own, never
    /// one of the task pool's (other tests run there meanwhile).
    public func receive(timeout: Duration = .seconds(5)) async -> String? {
        let fd = self.fd
        let milliseconds = Int32(clamping: max(0, timeout.milliseconds))
        return await offThePool {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, milliseconds) > 0 else { return nil }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = recv(fd, &buffer, buffer.count, 0)
            guard count > 0 else { return nil }
            return String(decoding: buffer[0..<count], as: UTF8.self)
        }
    }

    /// Receives datagrams until one satisfies `match` (returned) or `timeout` passes (nil); `seen` gets every
    /// datagram received on the way.
    public func receive(
        until match: (String) -> Bool,
        timeout: Duration,
        seen: (String) -> Void = { _ in }
    ) async -> String? {
        let clock = ContinuousClock()
        let end = clock.now + timeout
        while clock.now < end {
            guard let message = await receive(timeout: end - clock.now) else { return nil }
            seen(message)
            if match(message) { return message }
        }
        return nil
    }
}

/// The notify socket could not be made.
public struct NotifySocketError: Error, CustomStringConvertible {
    public var description: String
}
