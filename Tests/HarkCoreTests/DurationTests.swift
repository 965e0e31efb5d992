import Foundation
import HarkBackendKit
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

/// Durations that come from a service are bounded before any arithmetic: whole milliseconds saturate, and a
/// protobuf `Duration` past its own range is clamped to it.
@Suite struct DurationFromTheWireTests {
    /// Protobuf's own range of a `Duration`: ±315 576 000 000 s.
    static let protobufLimit = Duration.seconds(315_576_000_000)

    @Test func wholeMillisecondsSaturateInsteadOfTrapping() {
        #expect(Duration.seconds(Int64.max).milliseconds == .max)
        #expect(Duration.seconds(Int64.min).milliseconds == .min)
        #expect(Duration.seconds(9_223_372_036_854_775).milliseconds == 9_223_372_036_854_775_000)
        #expect(Duration.seconds(9_223_372_036_854_776).milliseconds == .max)
        #expect(Duration.milliseconds(-1500).milliseconds == -1500)
        // Said for a person, an absurd duration is a large number, not a trap.
        #expect(Duration.seconds(Int64.max).humanDescription.hasSuffix(" s"))
    }

    @Test func aProtobufDurationPastItsRangeIsRefused() throws {
        for text in ["9223372036854775807s", "-9223372036854775808s", "9300000000000000s", "315576000000.5s", "1e300s"]
        {
            #expect(ProtoDuration.parse(text) == nil, "\(text)")
        }
        #expect(ProtoDuration.parse("315576000000s") == Self.protobufLimit)
        #expect(ProtoDuration.parse("-315576000000s") == .zero - Self.protobufLimit)
        #expect(ProtoDuration.parse("49.990s") == .milliseconds(49_990))
        #expect(ProtoDuration.parse("-1.5s") == .milliseconds(-1500))
        #expect(ProtoDuration.parse(String(repeating: "9", count: 100) + "s") == nil)
        for json in [#"["9223372036854775807s"]"#, "[1e300]", "[1e12]"] {
            #expect(throws: DecodingError.self, "\(json)") {
                try JSONDecoder().decode([ProtoDuration].self, from: Data(json.utf8))
            }
        }
        // Everything in range converts without a trap.
        for text in ["315576000000s", "-315575999999.999999999s", "1e11s", "0.000000001s"] {
            let duration = try #require(ProtoDuration.parse(text))
            _ = duration.milliseconds
            _ = duration.humanDescription
            _ = ProtoDuration.format(duration)
        }
    }
}
