import Testing

@testable import HarkApp

#if canImport(Glibc)
    import Glibc
#endif

/// The daemon's start time, which the status file records.
@Suite struct DaemonProcessTests {
    @Test func theStartTimeIsTheTwentySecondFieldAfterTheCommand() {
        // A command may hold spaces and parentheses: the fields are counted after the last ')'.
        let line = "4242 (hark (evil) x) S 1 4242 4242 0 -1 4194560 1200 0 0 0 12 3 0 0 20 0 9 0 987654 1000 300"
        #expect(DaemonProcess.startTicks(stat: line) == 987_654)
        #expect(DaemonProcess.startTicks(stat: "4242 (hark) S 1 2 3") == nil)
        #expect(DaemonProcess.startTicks(stat: "no parenthesis") == nil)
    }

    @Test func thisProcessHasAStartTime() throws {
        let own = try #require(DaemonProcess.ownStartTicks)
        #expect(DaemonProcess.startTicks(of: getpid()) == own)
        #expect(DaemonProcess.startTicks(of: -3) == nil)
    }
}
