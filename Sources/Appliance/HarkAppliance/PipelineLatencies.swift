import HarkCore
import Histogram
import Synchronization

/// The appliance's two pipeline latencies, kept from the start for `hark status` (and the benchmark that
/// reads it): a microphone frame from its capture to its message going out on the connection, and answer
/// audio from the appliance taking it from the session to the ALSA write of its first sample (audio that
/// found nothing queued ahead of it; see ``Speaker/writeLatencies(from:)``).
///
/// Values are microseconds in HDR histograms (two significant digits, up to two minutes; larger values
/// count as two minutes), so memory stays the same however long the daemon runs.
public final class PipelineLatencies: Sendable {
    private static let highest: UInt64 = 120_000_000

    private struct SpeakerLog: ~Copyable {
        var histogram = PipelineLatencies.histogram()
        /// How far the playback's latency log has been read.
        var read = 0
    }

    private let wire = Mutex(PipelineLatencies.histogram())
    private let speaker = Mutex(SpeakerLog())
    /// Samples per capture frame: a message's frames are measured one by one.
    private let frameSamples: Int
    /// How many times faster than real time the microphone delivers (a paced file device; 0: unpaced).
    private let pace: Double

    /// Latencies of frames of `frameSamples` samples from a microphone delivering at `pace` times real time.
    public init(frameSamples: Int, pace: Double = 1) {
        self.frameSamples = max(1, frameSamples)
        self.pace = pace
    }

    private static func histogram() -> Histogram<UInt32> {
        Histogram(lowestDiscernibleValue: 1, highestTrackableValue: highest, numberOfSignificantValueDigits: .two)
    }

    /// A message of microphone audio went out at `now` (monotonic ns): each of its frames' capture-to-wire
    /// time, from ``AudioChunk/capturedAt`` (its newest frame's) back one frame period at a time. Audio
    /// without a capture time (a pre-roll) is not measured.
    public func sent(_ chunk: AudioChunk, now: UInt64) {
        guard let newest = chunk.capturedAt, chunk.sampleRate > 0 else { return }
        let frames = max(1, chunk.samples.count / frameSamples)
        let frameNanoseconds =
            pace > 0 ? UInt64(Double(frameSamples) * 1e9 / (Double(chunk.sampleRate) * pace)) : 0
        wire.withLock { histogram in
            for back in 0..<UInt64(frames) {
                let captured = newest &- back * frameNanoseconds
                guard now >= captured else { continue }
                _ = histogram.record(min((now - captured) / 1000, Self.highest))
            }
        }
    }

    /// Takes in what the playback thread measured since the last call.
    public func collect(from playback: any Speaker) {
        speaker.withLock { state in
            let (values, next) = playback.writeLatencies(from: state.read)
            state.read = next
            for value in values { _ = state.histogram.record(min(value / 1000, Self.highest)) }
        }
    }

    /// Capture to wire so far; nil before the first measurement.
    public var captureToWire: LatencySummary? { wire.withLock { Self.summary($0) } }

    /// Received to speaker so far (as of the last ``collect(from:)``); nil before the first measurement.
    public var receivedToSpeaker: LatencySummary? { speaker.withLock { Self.summary($0.histogram) } }

    private static func summary(_ histogram: Histogram<UInt32>) -> LatencySummary? {
        guard histogram.totalCount > 0 else { return nil }
        return LatencySummary(
            p50: Double(histogram.valueAtPercentile(50)) / 1000,
            p99: Double(histogram.valueAtPercentile(99)) / 1000,
            max: Double(histogram.max) / 1000,
            count: Int(histogram.totalCount),
            sum: histogram.mean * Double(histogram.totalCount) / 1000
        )
    }
}
