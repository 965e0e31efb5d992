import HarkCore
import Testing

/// The one conversion from `Duration` to whole nanoseconds that the clocks, timers and devices share.
@Suite struct DurationNanosecondsTests {
    @Test func wholeNanosecondsRoundTowardZero() {
        #expect(Duration.seconds(2).nanoseconds == 2_000_000_000)
        #expect(Duration.milliseconds(1500).nanoseconds == 1_500_000_000)
        #expect(Duration.nanoseconds(7).nanoseconds == 7)
        #expect(
            (Duration.nanoseconds(7) + .init(secondsComponent: 0, attosecondsComponent: 999_999_999)).nanoseconds == 7
        )
        #expect(Duration.milliseconds(-250).nanoseconds == -250_000_000)
        #expect(Duration.zero.nanoseconds == 0)
    }

    @Test func absurdDurationsSaturateInsteadOfTrapping() {
        #expect(Duration.seconds(Int64.max).nanoseconds == .max)
        #expect(Duration.seconds(Int64.min).nanoseconds == .min)
        // Just past the range: 9 223 372 036 s and 0.9 s more.
        #expect((Duration.seconds(9_223_372_036) + .milliseconds(900)).nanoseconds == .max)
        #expect(Duration.seconds(9_223_372_036).nanoseconds == 9_223_372_036_000_000_000)
    }
}
