import Foundation
import Testing

@testable import HarkApp

#if canImport(Glibc)
    import Glibc
#endif

/// How `hark reload` tells the daemon from a process that took its id.
@Suite struct DaemonProcessTests {
    @Test func theStartTimeIsTheTwentySecondFieldAfterTheCommand() {
        // A command may hold spaces and parentheses: the fields are counted after the last ')'.
        let line = "4242 (hark (evil) x) S 1 4242 4242 0 -1 4194560 1200 0 0 0 12 3 0 0 20 0 9 0 987654 1000 300"
        #expect(DaemonProcess.startTicks(stat: line) == 987_654)
        #expect(DaemonProcess.startTicks(stat: "4242 (hark) S 1 2 3") == nil)
        #expect(DaemonProcess.startTicks(stat: "no parenthesis") == nil)
    }

    @Test func aStrangerAProcessThatTookTheIdAndNoProcessAreRefused() throws {
        // The caller's own executable counts as the daemon's: this process, with its start time, passes.
        let own = try #require(DaemonProcess.ownStartTicks)
        try DaemonProcess.verify(getpid(), recordedStart: own)
        // The same executable started at another time: another process that took the id.
        let other = #expect(throws: DaemonProcess.Refusal.self) {
            try DaemonProcess.verify(getpid(), recordedStart: own + 1)
        }
        #expect(other?.description.contains("another time") == true)
        // Another executable: refused, and never signalled.
        let stranger = Process()
        stranger.executableURL = URL(fileURLWithPath: "/bin/sleep")
        stranger.arguments = ["30"]
        try stranger.run()
        defer { stranger.terminate() }
        let refusal = #expect(throws: DaemonProcess.Refusal.self) {
            try DaemonProcess.verify(stranger.processIdentifier, recordedStart: nil)
        }
        #expect(refusal?.description.contains("not the hark daemon") == true)
        for pid: Int32 in [0, 1, -3] {
            let none = #expect(throws: DaemonProcess.Refusal.self) { try DaemonProcess.verify(pid, recordedStart: nil) }
            #expect(none?.description.contains("Success") == false)
        }
    }
}
