import Foundation
import HarkCore
import HarkSystemd
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A test-made `NOTIFY_SOCKET`: a real datagram socket the notifier sends to, as systemd's would be.
final class NotifySocket {
    let path: String
    private let fd: Int32

    init() throws {
        path = FileManager.default.temporaryDirectory.path + "/hark-notify-\(UUID().uuidString.prefix(8))"
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
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
        guard bound == 0 else { throw POSIXError(.EADDRINUSE) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit {
        close(fd)
        unlink(path)
    }

    /// The next datagram, or nil after 5 s.
    func receive() -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = recv(fd, &buffer, buffer.count, 0)
        guard count > 0 else { return nil }
        return String(decoding: buffer[0..<count], as: UTF8.self)
    }
}

/// The environment is process-wide: these tests run one at a time and restore it.
@Suite(.serialized) struct SystemdNotifierTests {
    @Test func readyStatusWatchdogStoppingAndReloadingReachTheSocket() throws {
        let socket = try NotifySocket()
        setenv("NOTIFY_SOCKET", socket.path, 1)
        defer { unsetenv("NOTIFY_SOCKET") }
        let notifier = SystemdNotifier()
        notifier.ready(status: "offline: retrying in 8 s")
        #expect(socket.receive() == "READY=1\nSTATUS=offline: retrying in 8 s")
        notifier.status("listening\nREADY=0")  // a newline cannot smuggle in an assignment
        #expect(socket.receive() == "STATUS=listening READY=0")
        notifier.watchdog()
        #expect(socket.receive() == "WATCHDOG=1")
        notifier.stopping()
        #expect(socket.receive() == "STOPPING=1\nSTATUS=stopping")
        notifier.reloading()
        let reloading = try #require(socket.receive())
        #expect(reloading.hasPrefix("RELOADING=1\nMONOTONIC_USEC="))
        #expect(reloading.hasSuffix("\nSTATUS=reloading the configuration"))
    }

    @Test func theWatchdogIntervalIsHalfTheManagersTimeout() {
        setenv("WATCHDOG_USEC", "30000000", 1)
        setenv("WATCHDOG_PID", "\(getpid())", 1)
        defer {
            unsetenv("WATCHDOG_USEC")
            unsetenv("WATCHDOG_PID")
        }
        #expect(SystemdNotifier().watchdogInterval == .seconds(15))
        setenv("WATCHDOG_PID", "1", 1)  // another process's watchdog is not ours
        #expect(SystemdNotifier().watchdogInterval == nil)
    }

    @Test func withoutSystemdNothingIsSentAndNothingFails() {
        unsetenv("NOTIFY_SOCKET")
        unsetenv("WATCHDOG_USEC")
        let notifier = SystemdNotifier()
        notifier.ready(status: "listening")
        notifier.watchdog()
        #expect(notifier.watchdogInterval == nil)
        #expect(SilentNotifier().watchdogInterval == nil)
    }
}
