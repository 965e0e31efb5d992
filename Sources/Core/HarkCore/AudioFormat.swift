/// The shape of a stream of mono PCM16 audio: its rate and the samples of one frame.
public struct AudioFormat: Sendable, Hashable {
    /// Samples a second.
    public var sampleRate: Int
    /// Samples in one frame.
    public var frameSamples: Int

    public init(sampleRate: Int, frameSamples: Int) {
        self.sampleRate = sampleRate
        self.frameSamples = frameSamples
    }

    /// The microphone's audio as the capture delivers it after the front end (channel pick, echo cancellation,
    /// resampling): 16 kHz mono, in frames of 20 ms (320 samples). The wake-word detector, the voice detector
    /// and the sessions' input all take this rate.
    public static let microphone = AudioFormat(sampleRate: 16_000, frameSamples: 320)

    /// How long one frame lasts.
    public var frameDuration: Duration { duration(of: frameSamples) }

    /// Samples in `duration` (rounded down; 0 for a negative one).
    public func samples(in duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0, attoseconds >= 0 else { return 0 }
        let whole = seconds.multipliedReportingOverflow(by: Int64(sampleRate))
        guard !whole.overflow else { return Int.max }
        return Int(clamping: whole.partialValue) &+ Int(attoseconds / (1_000_000_000_000_000_000 / Int64(sampleRate)))
    }

    /// How long `samples` last.
    public func duration(of samples: Int) -> Duration {
        .nanoseconds(Int64(samples) * 1_000_000_000 / Int64(max(1, sampleRate)))
    }

    /// Seconds that `samples` last, for a person or a status file.
    public func seconds(_ samples: Int) -> Double { Double(samples) / Double(max(1, sampleRate)) }
}
