/// Jittered exponential backoff: `initial`, doubling up to `cap`, each delay drawn uniformly from
/// its upper half so that a fleet of devices does not reconnect in step. Pure value: the caller
/// passes the randomness, so tests are exact.
public struct Backoff: Sendable, Hashable {
    /// First delay's upper bound.
    public var initial: Duration
    /// Largest delay's upper bound.
    public var cap: Duration
    /// Growth per failure.
    public var multiplier: Double
    /// Failures since the last ``reset()``.
    public private(set) var failures: Int = 0

    public init(initial: Duration = .milliseconds(500), cap: Duration = .seconds(30), multiplier: Double = 2) {
        self.initial = initial
        self.cap = cap
        self.multiplier = multiplier
    }

    /// The upper bound of the next delay.
    public var currentCeiling: Duration {
        var ceiling = Double(initial.milliseconds)
        let limit = Double(cap.milliseconds)
        for _ in 0..<failures where ceiling < limit { ceiling *= multiplier }
        return .milliseconds(Int64(min(ceiling, limit)))
    }

    /// Records a failure and returns how long to wait before the next attempt.
    public mutating func next(using random: inout some RandomNumberGenerator) -> Duration {
        let ceiling = currentCeiling.milliseconds
        failures += 1
        let low = ceiling / 2
        return .milliseconds(low + Int64.random(in: 0...(ceiling - low), using: &random))
    }

    /// Call after a connection proved healthy.
    public mutating func reset() { failures = 0 }
}

extension Duration {
    /// Whole milliseconds, rounded toward zero; saturating at the bounds of `Int64` (about 292 million years), so
    /// an absurd duration read from a file or the network (`"9223372036854775807s"`) becomes the largest value,
    /// not a trap.
    public var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        if overflow { return seconds < 0 ? .min : .max }
        let (sum, carry) = scaled.addingReportingOverflow(attoseconds / 1_000_000_000_000_000)
        if carry { return seconds < 0 ? .min : .max }
        return sum
    }

    /// Whole nanoseconds, rounded toward zero; saturating at the bounds of `Int64` (about 292 years), so an
    /// absurd duration read from a file or the network becomes the largest wait, not a trap.
    public var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        let (sum, carry) = scaled.addingReportingOverflow(attoseconds / 1_000_000_000)
        if carry { return seconds < 0 ? .min : .max }
        return sum
    }

    /// Seconds as a floating-point number.
    public var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    /// "8 s", "250 ms", "1.5 s": for status lines.
    public var humanDescription: String {
        let ms = milliseconds
        if ms < 1000 { return "\(ms) ms" }
        if ms % 1000 == 0 { return "\(ms / 1000) s" }
        return "\(Double(ms / 100) / 10) s"
    }
}

/// A small, fast, seedable random number generator (SplitMix64) for injecting into backoff and
/// simulators where runs must repeat.
public struct SeededRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { self.state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
