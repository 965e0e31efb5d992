import HarkCore

/// Paces audio that goes out faster than real time: a backlog held over a connection switch, and the
/// unconfirmed audio sent again after a resume.
///
/// A handle covers what the service had read when it issued it. Sent at once, a backlog of seconds sits
/// in socket buffers while the service reads it, and a handle issued meanwhile covers only part of it,
/// though the client takes it to cover all (it cannot tell without `lastConsumedClientMessageIndex`):
/// the rest would be lost on the next resume. Paced at a few times real time, little is in flight at
/// any moment, so the confirmation margin holds it; the backlog still clears quickly.
///
/// A token bucket in samples: it refills at `samplesPerSecond` up to `capacitySamples`, so input that
/// arrives in real time (far slower than the rate) never waits.
public struct CatchUpPacer: Sendable {
    /// Samples per second the bucket refills at.
    public let samplesPerSecond: Double
    /// Most samples that go out without waiting.
    public let capacitySamples: Double
    private var tokens: Double
    private var last: Duration?

    /// - Parameters:
    ///   - rate: the pace as a multiple of real time at `sampleRate`.
    ///   - capacity: how much audio goes out at once before pacing starts.
    public init(
        rate: Double,
        sampleRate: Int = AudioFormat.microphone.sampleRate,
        capacity: Duration = .milliseconds(500)
    ) {
        samplesPerSecond = max(rate, 0.001) * Double(sampleRate)
        capacitySamples = capacity.seconds * Double(sampleRate)
        tokens = capacitySamples
    }

    /// Takes `samples` at `now` (any monotonic time base): how long to wait before sending them.
    public mutating func delay(sending samples: Int, at now: Duration) -> Duration {
        if let last {
            tokens = min(capacitySamples, tokens + (now - last).seconds * samplesPerSecond)
        }
        last = now
        tokens -= Double(samples)
        guard tokens < 0 else { return .zero }
        return .nanoseconds(Int64((-tokens / samplesPerSecond * 1e9).rounded(.up)))
    }
}
