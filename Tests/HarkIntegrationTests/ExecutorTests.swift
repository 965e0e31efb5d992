import Foundation
import HarkAudio
import HarkCore
import HarkLiveSimulator
import HarkNet
import HarkSimulatorKit
import HarkTestKit
import Testing

@Suite struct EventLoopClockTests {
    @Test func aSleepEndsNoSoonerThanItsDeadline() async throws {
        let clock = EventLoopClock()
        let start = ContinuousClock.now
        try await clock.sleep(for: .milliseconds(30))
        #expect(ContinuousClock.now - start >= .milliseconds(30))
        // A deadline already passed returns at once.
        try await clock.sleep(until: start)
    }

    @Test func cancelledSleepsThrowCancellationAtOnce() async throws {
        let clock = EventLoopClock()
        // Cancelled before, while and after they arm their timer: each ends with CancellationError, long
        // before its ten minutes.
        let sleepers = (0..<50).map { _ in Task { try await clock.sleep(for: .seconds(600)) } }
        for sleeper in sleepers { sleeper.cancel() }
        try await withDeadline(.seconds(10), "the cancelled sleeps to end") {
            for sleeper in sleepers {
                await #expect(throws: CancellationError.self) { try await sleeper.value }
            }
        }
    }
}

/// The built `hark` binary in a child process: the only place its `main` runs, and with it Swift
/// concurrency on the NIO event loop (tests in this process keep the default pool).
@Suite struct HarkBinaryTests {
    static let hark = BuiltProducts.executable("hark")

    @Test(
        .enabled(
            if: HarkBinaryTests.hark != nil,
            "needs the hark binary next to the test bundle: build it with the tests (swift build --build-tests)"
        )
    )
    func converseRunsInRealTimeOnTheEventLoop() async throws {
        let hark = try #require(Self.hark)
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        var microphone = TestSignals.speech(total: .milliseconds(1500), burst: .milliseconds(1500), gap: .zero)
        microphone += [Int16](repeating: 0, count: 16_000)
        let input = try TestSignals.writeTemporaryWAV(microphone)
        let output = FileManager.default.temporaryDirectory.path + "/hark-binary-\(UUID().uuidString).wav"
        defer { try? FileManager.default.removeItem(atPath: output) }

        let started = ContinuousClock.now
        let child = try await ChildProcess.run(
            hark,
            [
                "converse", "--input", input, "--output", output, "--endpoint", simulator.baseURL,
                "--idle-timeout", "1", "--timeout", "60",
            ]
        )
        let text = child.text
        #expect(child.status == 0, "\(text)")
        // Paced in real time: 2.5 s of input take at least that long.
        #expect(ContinuousClock.now - started >= .milliseconds(2_500))
        let answer = try WAVFile.read(path: output)
        #expect(answer.samples.count > 24_000 / 2, "\(text)")
        let connection = try #require(simulator.recorder.snapshot().connection(1))
        #expect(connection.audioSamples == Int64(microphone.count))
        #expect(connection.turns.first?.outcome == "completed")
    }
}
