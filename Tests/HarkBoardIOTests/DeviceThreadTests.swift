import Glibc
import HarkBoardIO
import HarkCore
import HarkIndicators
import HarkPlatform
import HarkTestKit
import Synchronization
import Testing

/// The one way device threads start: named, joined on stop, and a failure to start is an error.
@Suite struct DeviceThreadTests {
    @Test func aThreadRunsItsBodyUnderItsNameAndJoinWaitsForIt() throws {
        let seen = Mutex<(name: String, finished: Bool)>(("", false))
        let thread = try DeviceThread(name: "hark-test-thread-long-name") {
            let descriptor = open("/proc/thread-self/comm", O_RDONLY)
            var bytes = [UInt8](repeating: 0, count: 64)
            let count = descriptor < 0 ? 0 : bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, 64) }
            if descriptor >= 0 { close(descriptor) }
            var pause = timespec(tv_sec: 0, tv_nsec: 50_000_000)
            nanosleep(&pause, nil)
            let name = String(decoding: bytes.prefix(max(0, count)), as: UTF8.self)
            seen.withLock { $0 = (name.trimmingSuffix("\n"), true) }
        }
        thread.join()
        // Joined: the body has finished; the kernel kept the first 15 bytes of the name.
        let result = seen.withLock { $0 }
        #expect(result.finished)
        #expect(result.name == "hark-test-threa")
        thread.join()  // a second join returns at once
    }

    @Test func aThreadThatCannotStartIsAnErrorNamingIt() {
        // No stack that large can be mapped: pthread_create refuses it.
        #expect {
            _ = try DeviceThread(name: "hark-huge", stackSize: Int.max / 2) {}
        } throws: { error in
            guard let error = error as? DeviceThreadError else { return false }
            return error.name == "hark-huge" && error.description.contains("cannot start the hark-huge thread")
        }
    }

    @Test func theButtonThreadStopsWhenAsked() throws {
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        defer {
            close(ends[0])
            close(ends[1])
        }
        let reader = ButtonReader(
            source: TerminalKeySource(fd: ends[0]),
            interpreter: ButtonInterpreter(map: .standard, mode: .pushToTalk)
        )
        try reader.start { _ in }
        try reader.start { _ in }  // already running: nothing more
        let before = reader.turns
        let deadline = MonotonicClock.now() + .seconds(10)
        while reader.turns == before, MonotonicClock.now() < deadline { sched_yield() }
        #expect(reader.turns > before)
        reader.stop()
        // Joined: no turn is made after stop() returned.
        let after = reader.turns
        var pause = timespec(tv_sec: 0, tv_nsec: 300_000_000)
        nanosleep(&pause, nil)
        #expect(reader.turns == after)
    }
}

extension String {
    fileprivate func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) : self
    }
}
