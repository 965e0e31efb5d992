/// What the playback thread mixes under the agent's voice before anything reaches the device, as a value: the
/// sound of a timer or an alarm, looped while it rings. The voice lane (the agent's answer, earcons, announcements)
/// comes from the jitter buffer; this mixes the alert into each block: at full level while nothing is said, ducked
/// under the voice while the agent speaks (the alarm still heard, the words understood), faded in and out over a few
/// milliseconds (no click). A barge-in silences the voice lane only (the alert rings on until it is stopped). The
/// echo canceller gets the sum, since it is what the device plays.
///
/// Real-time rules: its buffers are reserved when it is made; ``mix(_:count:voiceCount:)`` neither allocates nor
/// locks (its owner holds it in a lock taken for one block at a time), and ``setAlert(_:)`` copies into the reserved
/// room.
public struct SpeakerMix: Sendable {
    /// The longest alert loop, in samples at the mix's rate.
    public let capacity: Int
    /// The level of the alert under the voice (0.25 is -12 dB).
    public var duckedGain: Float
    /// Samples over which a gain change ramps (5 ms at 24 kHz).
    public var rampSamples: Int
    private var pattern: [Float]
    private var length = 0
    private var position = 0
    /// The alert's gain now (it ramps toward its target).
    public private(set) var gain: Float = 0
    /// True while the alert is asked to sound.
    public private(set) var alerting = false

    /// A mix with room for an alert loop of `capacity` samples.
    public init(capacity: Int, duckedGain: Float = 0.25, rampSamples: Int = 120) {
        self.capacity = max(1, capacity)
        self.duckedGain = duckedGain
        self.rampSamples = max(1, rampSamples)
        pattern = [Float](repeating: 0, count: self.capacity)
    }

    /// True while the mix adds something to a block (ringing, or fading out).
    public var isActive: Bool { alerting || gain > 0 }

    /// Starts looping `samples` (PCM16 values at the mix's rate, cut to ``capacity``), or fades the alert out (nil
    /// or empty). A new sound starts from its beginning.
    public mutating func setAlert(_ samples: [Int16]?) {
        guard let samples, !samples.isEmpty else {
            alerting = false
            return
        }
        length = min(samples.count, capacity)
        for k in 0..<length { pattern[k] = Float(samples[k]) }
        position = 0
        alerting = true
    }

    /// Mixes into the first `count` samples of `block` (Float PCM16 values; the first `voiceCount` of them are the
    /// voice lane's, the rest silence): adds the alert, ducked where the voice is.
    public mutating func mix(_ block: UnsafeMutablePointer<Float>, count: Int, voiceCount: Int) {
        guard isActive, length > 0 else {
            gain = 0
            return
        }
        let step = 1 / Float(rampSamples)
        for k in 0..<count {
            let target: Float = alerting ? (k < voiceCount ? duckedGain : 1) : 0
            if gain < target {
                gain = min(target, gain + step)
            } else if gain > target {
                gain = max(target, gain - step)
            }
            block[k] += pattern[position] * gain
            position += 1
            if position == length { position = 0 }
        }
    }

    /// ``mix(_:count:voiceCount:)`` on an array: `voice` followed by `silence` samples (for tests; it allocates).
    public mutating func mixed(voice: [Int16], silence: Int = 0) -> [Float] {
        var block = voice.map(Float.init) + [Float](repeating: 0, count: silence)
        block.withUnsafeMutableBufferPointer { buffer in
            if let base = buffer.baseAddress { mix(base, count: buffer.count, voiceCount: voice.count) }
        }
        return block
    }
}
