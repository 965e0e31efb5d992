import Testing

@testable import HarkAudio

/// An outage of an audio device lasts until a reopened device has run for a second.
@Suite struct DeviceHealthTests {
    @Test func anOutageLastsUntilAReopenedDeviceHasRunForASecond() {
        let health = DeviceHealth()
        let second: UInt64 = 1_000_000_000
        #expect(health.failingFor(now: 5 * second) == nil)
        health.failed(now: 10 * second)
        #expect(health.count == 1)
        // Reopened, it runs half a second and fails again: the same outage, still counted from its start.
        var run = RunSinceOpen(rate: 16_000)
        run.transferred(8_000, health: health)
        #expect(!run.sustained)
        health.failed(now: 12 * second)
        #expect(health.count == 1)
        #expect(health.failingFor(now: 13 * second) == .seconds(3))
        // Reopened again, it runs a whole second: the outage is over, and the next failure is a new one.
        run = RunSinceOpen(rate: 16_000)
        run.transferred(15_999, health: health)
        #expect(health.failingFor(now: 14 * second) != nil)
        run.transferred(1, health: health)
        #expect(run.sustained)
        #expect(health.failingFor(now: 15 * second) == nil)
        health.failed(now: 20 * second)
        #expect(health.count == 2)
        #expect(health.failingFor(now: 21 * second) == .seconds(1))
    }
}
