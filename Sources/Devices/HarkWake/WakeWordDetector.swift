import Glibc

/// One frame's probability for one wake word (every 80 ms of audio for an openWakeWord word, every model run, 30 ms,
/// for a microWakeWord word).
public struct WakeScore: Sendable, Hashable {
    /// The word's index in ``WakeWordDetector/words``.
    public var word: Int
    /// The model's probability that the word was just said (0...1): for a microWakeWord word, the mean over its
    /// sliding window.
    public var probability: Float
    /// Where the frame's audio ended: samples of input (16 kHz) since the start or the last reset.
    public var endSample: Int
    /// True when this frame is a detection: above the word's threshold, outside the word's refractory period.
    public var isDetection: Bool
    /// While the probability is at least ``WakeWordDetector/riseLevel`` (a microWakeWord word's: half its threshold):
    /// where the run of such frames began (that frame's ``endSample``); nil below it. At a detection, about where the word ended: the models' probabilities
    /// begin to climb as the word's last sound comes into their window, and reach the threshold up to half a
    /// second later.
    public var riseSample: Int?

    /// ``endSample`` in seconds.
    public var seconds: Double { Double(endSample) / Double(WakeWordDetector.sampleRate) }

    public init(
        word: Int,
        probability: Float,
        endSample: Int,
        isDetection: Bool,
        riseSample: Int? = nil
    ) {
        self.word = word
        self.probability = probability
        self.endSample = endSample
        self.isDetection = isDetection
        self.riseSample = riseSample
    }
}

/// The wake-word detector over 16 kHz mono audio, for words of both families at once on one TensorFlow Lite library:
/// microWakeWord's (``MicroWakeWordPipeline``: TensorFlow Lite Micro's front end and a small streaming model per word,
/// as pymicro-wakeword runs them) and openWakeWord's (``OpenWakeWordPipeline``: the melspectrogram, embedding and word
/// models, as pyopen-wakeword runs them). Each family's words share its front end; a family without words costs
/// nothing.
///
/// The audio is cut at every 160th sample (10 ms), where both families' frames end, so the scores of one time come
/// together, in the order of ``words``. Every buffer is allocated when the detector is made: processing audio
/// allocates nothing. Not thread-safe: one caller at a time.
public final class WakeWordDetector {
    /// The audio rate the detector takes.
    public static let sampleRate = 16_000
    /// A probability from which a word's score counts as rising (``WakeScore/riseSample``): 1 %, where the
    /// built-in models' scores stay until the word is nearly said.
    public static let riseLevel: Float = 0.01
    /// The appliance's ``quietLevel`` unless configured: −60 dBFS, where a quiet room's noise sits after noise
    /// suppression, far below a voice that speaks to the device.
    public static let defaultQuietLevel = -60.0
    /// Where both families' frames end: every 10 ms.
    static let grain = MicroFrontEnd.step

    /// The words, in the order ``WakeScore/word`` counts them.
    public let words: [WakeWord]
    /// A probability above this is a detection (default 0.5), for every word without a threshold of its own
    /// (``WakeWord/threshold``) or in its manifest (every microWakeWord word has one there).
    public var threshold: Float {
        didSet {
            open?.threshold = threshold
            micro?.threshold = threshold
        }
    }
    /// After a detection of a word, further frames of the same word are not detections for this long.
    public var refractory: Duration {
        didSet {
            open?.refractory = refractory
            micro?.refractory = refractory
        }
    }
    /// openWakeWord: a melspectrogram window (1760 samples, 110 ms) whose RMS level above 100 Hz is below this, in
    /// dBFS, is quiet: no wake word is said at that level, and probabilities that depend on quiet windows alone are
    /// not computed (every one computed is exactly the one computed without resting); nil computes every one, as the
    /// reference does. microWakeWord's models run on every frame (they keep state from frame to frame, and cost
    /// little).
    public var quietLevel: Double? {
        didSet { open?.quietLevel = quietLevel }
    }
    /// Frames (per word) whose probability was not computed because the audio they depend on was quiet.
    public var quietFrames: Int { open?.quietFrames ?? 0 }
    /// Samples heard since the start or the last ``reset()``.
    public private(set) var samplesHeard = 0

    private let open: OpenWakeWordPipeline?
    private let micro: MicroWakeWordPipeline?
    /// Each family's words' indices in ``words``.
    private let openIndices: [Int]
    private let microIndices: [Int]
    /// The scores of the current time, by word (emitted in order, then cleared).
    private var pending: [WakeScore?]

    /// Loads the library and the models of `runtime` and `words` (at least one, of either family) and primes the
    /// pipelines. `threads` is each TensorFlow Lite interpreter's thread count. Throws when the library or a model
    /// cannot be loaded, or when a model's tensors are not those of its family (checked before any buffer is sized
    /// from them). `optimizedKernels` runs openWakeWord's models on TensorFlow Lite's XNNPACK delegate when the
    /// library has it (the reference does not: about three times less CPU for the embedding model, probabilities
    /// within 1e-5 of the reference's on the test clips); microWakeWord's quantised models run as their reference
    /// runs them either way. `quietLevel`: see ``quietLevel``.
    public init(
        runtime: WakeRuntime,
        words: [WakeWord],
        threshold: Float = 0.5,
        refractory: Duration = .seconds(2),
        threads: Int = 1,
        optimizedKernels: Bool = true,
        quietLevel: Double? = nil
    ) throws(WakeError) {
        guard !words.isEmpty else { throw WakeError.word("no wake word given") }
        let library = try TensorFlowLite.open(runtime.library)
        let openIndices = words.indices.filter { words[$0].family == .open }
        let microIndices = words.indices.filter { words[$0].family == .micro }
        open =
            openIndices.isEmpty
            ? nil
            : try OpenWakeWordPipeline(
                library: library,
                runtime: runtime,
                words: openIndices.map { words[$0] },
                threshold: threshold,
                refractory: refractory,
                threads: threads,
                optimizedKernels: optimizedKernels,
                quietLevel: quietLevel
            )
        micro =
            microIndices.isEmpty
            ? nil
            : try MicroWakeWordPipeline(
                library: library,
                words: microIndices.map { words[$0] },
                threshold: threshold,
                refractory: refractory,
                threads: threads,
                optimizedKernels: false
            )
        self.words = words
        self.threshold = threshold
        self.refractory = refractory
        self.quietLevel = quietLevel
        self.openIndices = openIndices
        self.microIndices = microIndices
        pending = [WakeScore?](repeating: nil, count: words.count)
    }

    /// Back to the state of a new detector (no audio heard, no detection, ``samplesHeard`` 0).
    public func reset() throws(WakeError) {
        try open?.reset()
        try micro?.reset()
        samplesHeard = 0
        for index in pending.indices { pending[index] = nil }
    }

    /// Runs the detector over `samples` (16 kHz mono), calling `each` with every word's probability at every
    /// frame completed, in order of time and, at one time, of ``words``. Allocates nothing.
    public func process(_ samples: UnsafeBufferPointer<Int16>, _ each: (WakeScore) -> Void) throws(WakeError) {
        var index = 0
        while index < samples.count {
            let take = min(Self.grain - samplesHeard % Self.grain, samples.count - index)
            let piece = UnsafeBufferPointer(rebasing: samples[index..<(index + take)])
            try open?.process(piece) { score in pending[openIndices[score.word]] = mapped(score, openIndices) }
            try micro?.process(piece) { score in pending[microIndices[score.word]] = mapped(score, microIndices) }
            index += take
            samplesHeard += take
            guard samplesHeard % Self.grain == 0 else { continue }
            for slot in pending.indices {
                guard let score = pending[slot] else { continue }
                pending[slot] = nil
                each(score)
            }
        }
    }

    /// Runs the detector over `samples` and returns every score (see ``process(_:_:)``).
    public func process(_ samples: [Int16]) throws(WakeError) -> [WakeScore] {
        var scores: [WakeScore] = []
        scores.reserveCapacity(samples.count / 480 * words.count + words.count)
        try samples.withUnsafeBufferPointer { (buffer) throws(WakeError) in
            try process(buffer) { scores.append($0) }
        }
        return scores
    }

    private func mapped(_ score: WakeScore, _ indices: [Int]) -> WakeScore {
        var score = score
        score.word = indices[score.word]
        return score
    }

    /// A duration in samples (16 kHz), 0 for none or less, at most a day's.
    static func samples(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        let total = Double(seconds) + Double(attoseconds) / 1e18
        guard total.isFinite, total > 0 else { return 0 }
        return Int(min(total, 86_400) * Double(sampleRate))
    }
}
