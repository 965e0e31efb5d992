import HarkCore
import HarkTestKit
import Synchronization
import Testing

@testable import HarkIndicators

/// An output that records frames (and can be told to fail).
final class RecordingOutput: LEDOutput {
    private let frames = Mutex<[[RGB]]>([])
    private let failing = Mutex(false)

    var shown: [[RGB]] { frames.withLock { $0 } }
    func fail(_ on: Bool) { failing.withLock { $0 = on } }

    func show(_ frame: [RGB]) throws {
        if failing.withLock({ $0 }) { throw CancellationError() }
        frames.withLock { $0.append(frame) }
    }
}

@Suite struct LEDDriverTests {
    @Test func drawsChangedFramesOnTheFrameGridOfTheInjectedClock() async throws {
        let clock = ManualClock()
        let output = RecordingOutput()
        let white = RGB(255, 255, 255)
        let table = PatternTable([.conversation(.thinking): .blink(white, period: .milliseconds(200), duty: 50)])
        let driver = LEDDriver(engine: LEDEngine(pixelCount: 2, frameRate: 10, table: table), output: output)
        let task = Task { try await driver.run(clock: clock) }
        defer { task.cancel() }

        await clock.waitForSleepers(1)
        #expect(output.shown == [[.off, .off]])
        #expect(clock.requestedSleeps == [.milliseconds(100)])

        driver.update(IndicatorInput(conversation: .thinking))
        clock.advance(by: .milliseconds(100))
        await clock.waitForSleepers(1)
        #expect(output.shown.last == [white, white])

        // 200 ms: off phase; 300 ms: on again; an unchanged frame (idle, dark) is not resent.
        clock.advance(by: .milliseconds(100))
        await clock.waitForSleepers(1)
        #expect(output.shown.last == [.off, .off])
        driver.update(IndicatorInput(conversation: .idle))
        clock.advance(by: .milliseconds(100))
        // Dark is static: the driver rests (no sleeps on the clock, no frames) until the next input.
        try await withDeadline(.seconds(10), "the driver resting") {
            while !driver.isResting { await Task.yield() }
        }
        #expect(output.shown.count == 3)
        #expect(driver.framesShown == 3)
        let rendered = driver.framesRendered
        #expect(clock.sleeperCount == 0)
        clock.advance(by: .seconds(5))
        #expect(driver.framesRendered == rendered)
        // An input wakes it at once; the blink starts over (on) and the grid goes on.
        driver.update(IndicatorInput(conversation: .thinking))
        await clock.waitForSleepers(1)
        #expect(output.shown.last == [white, white])
        #expect(!driver.isResting)
        // A late wake-up (250 ms late) lands on the grid again: the next sleep is to the next 100 ms mark.
        clock.advance(by: .milliseconds(350))
        await clock.waitForSleepers(1)
        #expect(clock.requestedSleeps.last == .milliseconds(50))
    }

    @Test func aFailingOutputIsCountedAndRetried() async throws {
        let clock = ManualClock()
        let output = RecordingOutput()
        output.fail(true)
        let driver = LEDDriver(engine: LEDEngine(pixelCount: 1, frameRate: 10), output: output)
        let task = Task { try await driver.run(clock: clock) }
        defer { task.cancel() }
        await clock.waitForSleepers(1)
        #expect(driver.failures == 1)
        output.fail(false)
        clock.advance(by: .milliseconds(100))
        await clock.waitForSleepers(1)
        #expect(output.shown == [[.off]])
        #expect(driver.failures == 1)
    }
}
