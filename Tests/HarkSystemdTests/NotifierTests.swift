import Foundation
import HarkCore
import HarkSystemd
import HarkTestKit
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The environment is process-wide: these tests run one at a time and restore it.
@Suite(.serialized) struct SystemdNotifierTests {
    @Test func readyStatusWatchdogStoppingAndReloadingReachTheSocket() async throws {
        let socket = try NotifySocket()
        setenv("NOTIFY_SOCKET", socket.path, 1)
        defer { unsetenv("NOTIFY_SOCKET") }
        let notifier = SystemdNotifier()
        notifier.ready(status: "offline: retrying in 8 s")
        #expect(await socket.receive() == "READY=1\nSTATUS=offline: retrying in 8 s")
        notifier.status("listening\nREADY=0")  // a newline cannot smuggle in an assignment
        #expect(await socket.receive() == "STATUS=listening READY=0")
        notifier.watchdog()
        #expect(await socket.receive() == "WATCHDOG=1")
        notifier.stopping()
        #expect(await socket.receive() == "STOPPING=1\nSTATUS=stopping")
        notifier.reloading()
        let reloading = try #require(await socket.receive())
        #expect(reloading.hasPrefix("RELOADING=1\nMONOTONIC_USEC="))
        #expect(reloading.hasSuffix("\nSTATUS=reloading the configuration"))
    }

    @Test func aManagerThatDoesNotReadNeverStallsTheCallerAndGetsTheNewestStatus() async throws {
        let socket = try NotifySocket()
        setenv("NOTIFY_SOCKET", socket.path, 1)
        defer { unsetenv("NOTIFY_SOCKET") }
        let notifier = SystemdNotifier()
        // Far more than the socket queues unread (10 here): sd_notify would block the caller on the eleventh.
        let calls = Task.detached {
            for line in 0..<200 {
                notifier.status("line \(line)")
                notifier.watchdog()
            }
        }
        try await withDeadline(.seconds(5), "the calls to return while nothing is read") { await calls.value }
        // Read now: what was queued in the socket, then the newest status line, nothing lost of it.
        var received: [String] = []
        while let message = await socket.receive(timeout: .seconds(2)) {
            received.append(message)
            if message == "STATUS=line 199" { break }
        }
        #expect(received.last == "STATUS=line 199", "\(received)")
        #expect(received.count < 60, "\(received.count) messages: newer status lines replace waiting ones")
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
