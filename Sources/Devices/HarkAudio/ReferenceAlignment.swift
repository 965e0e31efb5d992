/// How the speaker's and the microphone's sample clocks relate, which decides how the echo reference is aligned.
public enum ReferenceClock: Sendable, Hashable {
    /// Shared when the playback and capture PCMs are on the same sound card (`snd_pcm_info_get_card`), else
    /// independent (two cards, or PCMs on no card, such as a sound server's).
    case automatic
    /// One sample clock drives both streams (one card's codec): the echo of the speaker's sample n reaches the
    /// microphone at its sample n + a constant, so the offset is measured once per run and then held.
    case shared
    /// Each stream has its own clock: the offset drifts by the clocks' difference in rate, which is tracked.
    case independent
}

/// Where the microphone's samples meet the speaker's: the offset, in samples, from a capture sample's index to
/// the index of the reference sample heard while it was captured, estimated from observations of the two
/// streams' positions at (nearly) the same moment.
///
/// Each observation errs by the streams' position granularity and the scheduling of the threads that read them
/// (a timer tick on a kernel loopback card, a period or a DMA burst on hardware): milliseconds. Following each one
/// makes the reference wander against the echo, and the echo canceller cannot converge. So the offset is a
/// least-squares line over the capture index: with a shared clock its slope is 0 and the level is the mean of
/// every observation since either stream (re)started, which settles and then stays put; with independent clocks
/// the slope is the clocks' drift, fitted over about a minute of observations (older ones are forgotten
/// gradually) and kept across restarts as the prior for the next run, since a clock's rate changes slowly.
/// Observations far from the line (beyond four times the mean distance of the others) are left out. The offset
/// handed out moves only when the estimate has moved by 3/4 of a sample (and, with a shared clock, by more than
/// its standard error), so a settled estimate does not flicker between two samples.
public struct ReferenceAlignment: Sendable, Hashable {
    /// True when the two streams share a sample clock (no drift).
    public let shared: Bool
    /// Observations since the level was last reset (a stream restarted).
    public private(set) var observations = 0
    /// Mean distance of the observations from the line, in samples.
    public private(set) var spread = 0.0
    /// The drift the fit starts from (reference samples per capture sample, minus 1).
    private var priorDrift = 0.0
    /// Weighted sums over the observations (x: capture index − origin, y: offset).
    private var origin = 0.0
    private var sw = 0.0
    private var sx = 0.0
    private var sy = 0.0
    private var sxx = 0.0
    private var sxy = 0.0
    /// The offset last handed out.
    private var applied: Int?

    /// Weight lost per observation with independent clocks: about a minute of observations at 100 a second.
    static let forgetting = 1.0 / 6000
    /// How much the prior drift weighs, as Σ(x − x̄)² of observations: about five seconds' worth at 16 kHz.
    static let priorWeight = 3e11
    /// Observations after which a shared clock's offset is held (about two seconds of both streams running).
    static let settledObservations = 200
    /// How far a shared clock's estimate must move from the held offset to move it, in samples (2 ms).
    static let sharedTolerance = 32.0

    public init(shared: Bool) { self.shared = shared }

    /// A stream restarted: the offset is unknown again (the drift is kept as what the next fit starts from).
    public mutating func restart() {
        priorDrift = drift
        observations = 0
        spread = 0
        sw = 0
        sx = 0
        sy = 0
        sxx = 0
        sxy = 0
        applied = nil
    }

    /// Adds one observation: at capture sample `index`, the reference sample `offset` further on was heard.
    public mutating func observe(offset: Double, at index: Double) {
        guard offset.isFinite, index.isFinite else { return }
        if observations == 0 { origin = index }
        if let predicted = estimate(at: index) {
            let residual = offset - predicted
            let limit = 4 * spread + 2
            spread += (min(abs(residual), 2 * limit) - spread) / Double(min(observations, 100))
            // Far off the line (a thread preempted between the position and the clock): not used, though the
            // spread grows with it, so a genuine change is taken up in a while.
            if observations >= 8 && abs(residual) > limit { return }
        }
        if !shared {
            let keep = 1 - Self.forgetting
            sw *= keep
            sx *= keep
            sy *= keep
            sxx *= keep
            sxy *= keep
        }
        let x = index - origin
        sw += 1
        sx += x
        sy += offset
        sxx += x * x
        sxy += x * offset
        observations += 1
    }

    /// The fitted line: level at the origin and slope.
    private var line: (level: Double, slope: Double)? {
        guard sw > 0 else { return nil }
        if shared { return (sy / sw, 0) }
        // Least squares with the prior drift as a pseudo-observation of the slope.
        let a12 = sx
        let a22 = sxx + Self.priorWeight
        let b2 = sxy + Self.priorWeight * priorDrift
        let determinant = sw * a22 - a12 * a12
        guard determinant > 0 else { return (sy / sw, priorDrift) }
        return ((sy * a22 - a12 * b2) / determinant, (sw * b2 - a12 * sy) / determinant)
    }

    /// The estimated offset at capture sample `index`; nil before the first observation.
    public func estimate(at index: Double) -> Double? {
        guard let line else { return nil }
        return line.level + line.slope * (index - origin)
    }

    /// The reference's clock against the microphone's: reference samples per capture sample, minus 1 (0 with a
    /// shared clock).
    public var drift: Double { line?.slope ?? priorDrift }

    /// The whole-sample offset to read the reference at for capture sample `index`; nil before the first
    /// observation. It moves only once the estimate is 3/4 of a sample away, and with a shared clock also more than
    /// twice the estimate's standard error away: a level still settling moves it when the evidence says so, not
    /// with every observation.
    public mutating func offset(at index: Int) -> Int? {
        guard let estimate = estimate(at: Double(index)) else {
            applied = nil
            return nil
        }
        // σ ≈ 1.25 × the mean absolute deviation; the standard error of a mean of n is σ / √n.
        let settle = shared ? 2 * 1.25 * spread / Double(max(1, observations)).squareRoot() : 0
        if let applied {
            let distance = abs(estimate - Double(applied))
            // One clock, settled: the true offset cannot move without a restart, and the canceller models any steady
            // offset within its tail, while each whole-sample step of the reference costs it a reconvergence (about
            // a second at 10–15 dB). So the offset is held until the estimate is a clear change away.
            if shared && observations >= Self.settledObservations && distance < Self.sharedTolerance { return applied }
            if distance < max(0.75, settle) { return applied }
        }
        let rounded = Int(estimate.rounded())
        applied = rounded
        return rounded
    }
}
