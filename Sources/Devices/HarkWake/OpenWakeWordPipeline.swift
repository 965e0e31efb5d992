import Glibc

/// The openWakeWord family of ``WakeWordDetector`` over 16 kHz mono audio: the three-model pipeline of openWakeWord run
/// through TensorFlow Lite, with the same numbers as its streaming reference (pyopen-wakeword 1.1.0). Its scores'
/// ``WakeScore/word`` count its own words; the detector maps them.
///
/// - The melspectrogram model runs over the last 1760 samples every 1280 new samples (80 ms) and gives 8 frames
///   of 32 mel bins, each scaled to `x / 10 + 2`.
/// - The embedding model runs over the last 76 mel frames every 8 new frames and gives 96 features.
/// - Each word's model runs over its last N embeddings (N from its input shape, 16 for the built-in ones) at
///   every new embedding and gives the probability.
///
/// Like the reference, it starts as if 8 s of silence had already been heard, so the first frame comes after the
/// first 480 samples (and one every 1280 after). The silence is not run through the models: every window of it
/// is the same, so its result is computed once when the detector is made and copied after that, which makes
/// ``reset()`` cheap. Several words share the mel and embedding stages. Every buffer is allocated when the
/// detector is made: processing audio allocates nothing. Not thread-safe: one caller at a time.
///
/// In a quiet room most of the cost is saved (``quietLevel``): the melspectrogram still runs on every window, but
/// a word's model is not run while every mel frame its next probability depends on (the last 76 + 8 × (N − 1),
/// about 2 s) came from quiet audio, and an embedding no word needs is not computed. When sound returns, the
/// embeddings the words' windows lack are computed then from the mel frames kept for them, so every probability
/// that is computed is exactly the one the detector gives when it runs every model on every frame.
final class OpenWakeWordPipeline {
    /// The audio rate it takes.
    static let sampleRate = WakeWordDetector.sampleRate
    /// Samples the melspectrogram model takes at once, and how many of them are new each time.
    static let melWindow = 1760
    static let melHop = 1280
    static let melBins = 32
    /// Mel frames the embedding model takes at once, and how many of them are new each time.
    static let embeddingWindow = 76
    static let embeddingStep = 8
    static let features = 96
    /// The reference's bounds on pending mel frames and embeddings (its 10 s buffers).
    static let maximumNewMels = 970
    static let maximumNewEmbeddings = 80
    /// The silence the reference starts with, in whole melspectrogram hops (8 s).
    static let primingHops = 100

    /// The words, in the order its ``WakeScore/word`` counts them.
    let words: [WakeWord]
    /// A probability above this is a detection (default 0.5), for every word without a threshold of its own
    /// (``WakeWord/threshold``) or in its manifest.
    var threshold: Float
    /// After a detection of a word, further frames of the same word are not detections for this long.
    var refractory: Duration {
        didSet { refractorySamples = WakeWordDetector.samples(refractory) }
    }
    /// Samples heard since the start or the last ``reset()``.
    private(set) var samplesHeard = 0
    /// A melspectrogram window (1760 samples, 110 ms) whose RMS level above 100 Hz is below this, in dBFS, is quiet:
    /// no wake word is said at that level. (Below 100 Hz is the rumble that fills a quiet room's noise and that
    /// neither speech nor the melspectrogram, from 60 Hz, has much of.) Probabilities that depend on quiet windows alone are not computed (see above);
    /// nil computes every one, as the reference does.
    var quietLevel: Double? {
        didSet { quietMeanSquare = Self.meanSquare(quietLevel) }
    }
    /// Frames (per word) whose probability was not computed because the audio they depend on was quiet.
    private(set) var quietFrames = 0

    private let melModel: TensorFlowLiteInterpreter
    private let embeddingModel: TensorFlowLiteInterpreter
    private let wordStates: [WordState]
    private var refractorySamples: Int
    /// Mel frames per melspectrogram run (8 for openWakeWord's model).
    private let melFrames: Int

    /// The last 1760 samples (as floats, unscaled), `audioFilled` of them present.
    private let audio: UnsafeMutablePointer<Float>
    private var audioFilled = 0
    /// Mel frames (rows of 32), `melCount` of them, the last `melNew` not yet in an embedding.
    private let mels: UnsafeMutablePointer<Float>
    private let melCapacity: Int
    private var melCount = 0
    private var melNew = 0
    /// Mel frames kept when the buffer is compacted: those of the embeddings the longest word window may still
    /// have to compute, and those not yet in an embedding.
    private let melKeep: Int
    /// Mel frames appended since priming began (the number of the next one), and the number after the last frame
    /// of the latest window that was not quiet (frames from there on are all quiet).
    private var melTotal = 0
    private var loudMelEnd = 0
    /// ``quietLevel`` as a mean square of samples (−1 when nil: nothing is quiet).
    private var quietMeanSquare: Float
    /// The level above 100 Hz: a one-pole high-pass filter's state, the sum of its squared output since the last
    /// melspectrogram run and over how many samples, and the mean square of the run before (whose last 480 samples
    /// are in the window too).
    private var highPassInput: Float = 0
    private var highPassOutput: Float = 0
    private var energy: Float = 0
    private var energySamples = 0
    private var previousMeanSquare: Float = 0
    /// The filter's coefficient: 1 / (1 + 2π · 100 Hz / 16 kHz).
    private static let highPass: Float = 1 / (1 + 2 * Float.pi * 100 / Float(sampleRate))
    /// Embeddings (rows of 96), `embeddingCount` of them.
    private let embeddings: UnsafeMutablePointer<Float>
    private let embeddingCapacity: Int
    private var embeddingCount = 0
    /// Per embedding: the number of its first mel frame while it is not computed yet, or −1.
    private let embeddingPending: UnsafeMutablePointer<Int>
    /// The longest word window, in embeddings.
    private let longestWindow: Int
    /// One melspectrogram run's output, and one embedding.
    private let melOutput: UnsafeMutablePointer<Float>
    private let embeddingOutput: UnsafeMutablePointer<Float>
    /// The melspectrogram of silence (scaled), and the embedding of the mel frames silence gives.
    private let silentMels: UnsafeMutablePointer<Float>
    private let silentEmbeddingInput: UnsafeMutablePointer<Float>
    private let silentEmbedding: UnsafeMutablePointer<Float>
    private var silentEmbeddingKnown = false

    /// One word's model and its place in the embeddings.
    private final class WordState {
        let model: TensorFlowLiteInterpreter
        /// Embeddings the model takes at once.
        let window: Int
        /// The word's own threshold, if it has one.
        let threshold: Float?
        /// Embeddings not yet ended a window of this word.
        var new = 0
        /// Where the last detection's frame ended, if any.
        var lastDetection: Int?
        /// Where the current run of probabilities at or above ``riseLevel`` began, if the last one was.
        var riseSample: Int?
        /// The model's output.
        let output = UnsafeMutablePointer<Float>.allocate(capacity: 1)

        init(model: TensorFlowLiteInterpreter, window: Int, threshold: Float?) {
            self.model = model
            self.window = window
            self.threshold = threshold
            output.initialize(to: 0)
        }

        deinit { output.deallocate() }
    }

    /// Loads the library and the models of `runtime` and `words` (at least one) and primes the pipeline.
    /// `threads` is each TensorFlow Lite interpreter's thread count. Throws when the library or a model cannot
    /// be loaded, or when a model's tensors are not those of openWakeWord (checked before any buffer is sized
    /// from them). `optimizedKernels` runs the models on TensorFlow Lite's XNNPACK delegate when the library has it
    /// (the reference does not: about three times less CPU for the embedding model, probabilities within 1e-5 of
    /// the reference's on the test clips); false runs TensorFlow Lite's built-in kernels, as the reference does.
    /// `quietLevel`: see ``quietLevel``.
    init(
        library: TensorFlowLite,
        runtime: WakeRuntime,
        words: [WakeWord],
        threshold: Float,
        refractory: Duration,
        threads: Int,
        optimizedKernels: Bool,
        quietLevel: Double?
    ) throws(WakeError) {
        guard !words.isEmpty else { throw WakeError.word("no wake word given") }
        let melModel = try TensorFlowLiteInterpreter(
            library: library,
            path: runtime.melspectrogram,
            inputShape: [1, Self.melWindow],
            threads: threads,
            xnnpack: optimizedKernels
        )
        guard melModel.outputCount % Self.melBins == 0, (1...32).contains(melModel.outputCount / Self.melBins) else {
            throw WakeError.model(
                melModel.path,
                "its output \(melModel.outputShape) is not frames of \(Self.melBins) mel bins"
            )
        }
        let embeddingModel = try TensorFlowLiteInterpreter(
            library: library,
            path: runtime.embedding,
            inputShape: [1, Self.embeddingWindow, Self.melBins, 1],
            threads: threads,
            xnnpack: optimizedKernels
        )
        guard embeddingModel.outputCount == Self.features else {
            throw WakeError.model(
                embeddingModel.path,
                "its output \(embeddingModel.outputShape) is not \(Self.features) features"
            )
        }
        var states: [WordState] = []
        for word in words {
            let model = try TensorFlowLiteInterpreter(
                library: library,
                path: word.path,
                threads: threads,
                xnnpack: optimizedKernels
            )
            let shape = model.inputShape
            guard shape.count == 3, shape[0] == 1, shape[2] == Self.features,
                (1...Self.maximumNewEmbeddings).contains(shape[1])
            else {
                throw WakeError.model(
                    word.path,
                    "its input \(shape) is not [1, N, \(Self.features)] with N from 1 to \(Self.maximumNewEmbeddings): "
                        + "not an openWakeWord wake-word model"
                )
            }
            guard model.outputCount == 1 else {
                throw WakeError.model(word.path, "its output \(model.outputShape) is not one probability")
            }
            states.append(
                WordState(model: model, window: shape[1], threshold: word.threshold ?? word.cutoff.map { Float($0) })
            )
        }
        self.words = words
        self.threshold = threshold
        self.refractory = refractory
        refractorySamples = WakeWordDetector.samples(refractory)
        self.melModel = melModel
        self.embeddingModel = embeddingModel
        wordStates = states
        melFrames = melModel.outputCount / Self.melBins
        longestWindow = states.map(\.window).max() ?? 1
        melKeep = Self.embeddingWindow + (longestWindow + 1) * Self.embeddingStep + melFrames
        melCapacity = melKeep + melFrames + 256
        embeddingCapacity = longestWindow + 256
        self.quietLevel = quietLevel
        quietMeanSquare = Self.meanSquare(quietLevel)
        audio = .allocate(capacity: Self.melWindow)
        mels = .allocate(capacity: melCapacity * Self.melBins)
        embeddings = .allocate(capacity: embeddingCapacity * Self.features)
        embeddingPending = .allocate(capacity: embeddingCapacity)
        melOutput = .allocate(capacity: melFrames * Self.melBins)
        embeddingOutput = .allocate(capacity: Self.features)
        silentMels = .allocate(capacity: melFrames * Self.melBins)
        silentEmbeddingInput = .allocate(capacity: Self.embeddingWindow * Self.melBins)
        silentEmbedding = .allocate(capacity: Self.features)
        audio.initialize(repeating: 0, count: Self.melWindow)
        mels.initialize(repeating: 0, count: melCapacity * Self.melBins)
        embeddings.initialize(repeating: 0, count: embeddingCapacity * Self.features)
        embeddingPending.initialize(repeating: -1, count: embeddingCapacity)
        try melModel.run(audio, into: silentMels)
        Self.scale(silentMels, count: melFrames * Self.melBins)
        try prime()
    }

    deinit {
        audio.deallocate()
        mels.deallocate()
        embeddings.deallocate()
        embeddingPending.deallocate()
        melOutput.deallocate()
        embeddingOutput.deallocate()
        silentMels.deallocate()
        silentEmbeddingInput.deallocate()
        silentEmbedding.deallocate()
    }

    /// Back to the state of a new detector (8 s of silence heard, no detection, ``samplesHeard`` 0).
    func reset() throws(WakeError) {
        try prime()
    }

    /// Runs the detector over `samples` (16 kHz mono), calling `each` with every word's probability at every
    /// frame completed (one per 1280 samples), in order. Allocates nothing.
    func process(_ samples: UnsafeBufferPointer<Int16>, _ each: (WakeScore) -> Void) throws(WakeError) {
        var index = 0
        while index < samples.count {
            let take = min(Self.melWindow - audioFilled, samples.count - index)
            for offset in 0..<take {
                let sample = Float(samples[index + offset])
                audio[audioFilled + offset] = sample
                highPassOutput = Self.highPass * (highPassOutput + sample - highPassInput)
                highPassInput = sample
                energy += highPassOutput * highPassOutput
            }
            energySamples += take
            audioFilled += take
            index += take
            samplesHeard += take
            if audioFilled == Self.melWindow {
                try melStep(each)
            }
        }
    }

    // MARK: The pipeline

    /// A level in dBFS as the mean square of 16-bit samples; −1 (below any mean square) for nil.
    private static func meanSquare(_ level: Double?) -> Float {
        guard let level, level.isFinite else { return -1 }
        let amplitude = 32_768 * pow(10, min(level, 0) / 20)
        return Float(amplitude * amplitude)
    }

    /// `x / 10 + 2`, as the reference scales mel values for the embedding model.
    private static func scale(_ values: UnsafeMutablePointer<Float>, count: Int) {
        for index in 0..<count { values[index] = values[index] / 10 + 2 }
    }

    /// The reference's start: 8 s of silence already heard. Its first 99 melspectrogram windows are all silence
    /// (their mels are `silentMels`); the 100th reaches 480 samples into the input, so 1280 samples of silence
    /// wait in the window. The embeddings of the silence are computed once; the words' models do not run on it
    /// (their probabilities there would belong to frames before the input).
    private func prime() throws(WakeError) {
        audio.update(repeating: 0, count: Self.melWindow)
        audioFilled = Self.melHop
        samplesHeard = 0
        melCount = 0
        melNew = 0
        melTotal = 0
        loudMelEnd = 0
        quietFrames = 0
        highPassInput = 0
        highPassOutput = 0
        energy = 0
        energySamples = 0
        previousMeanSquare = 0
        embeddingCount = 0
        embeddingPending.update(repeating: -1, count: embeddingCapacity)
        for state in wordStates {
            state.new = 0
            state.lastDetection = nil
            state.riseSample = nil
        }
        for _ in 0..<(Self.primingHops - 1) {
            appendMels(silentMels)
            while melNew >= Self.embeddingWindow {
                let window = mels + (melCount - melNew) * Self.melBins
                let count = Self.embeddingWindow * Self.melBins
                // Every window of the silence starts on a run's first frame, so all are the same; checked, not assumed.
                if !silentEmbeddingKnown || !Self.equal(window, silentEmbeddingInput, count: count) {
                    try embeddingModel.run(window, into: silentEmbedding)
                    silentEmbeddingInput.update(from: window, count: count)
                    silentEmbeddingKnown = true
                }
                melNew = max(0, melNew - Self.embeddingStep)
                appendEmbedding(silentEmbedding, pendingFrom: -1)
                for state in wordStates {
                    state.new = min(Self.maximumNewEmbeddings, state.new + 1)
                    while state.new >= state.window { state.new = max(0, state.new - 1) }
                }
            }
        }
    }

    /// One melspectrogram run over the full window, the embeddings and probabilities it completes, and the
    /// window moved on by 1280 samples.
    private func melStep(_ each: (WakeScore) -> Void) throws(WakeError) {
        try melModel.run(audio, into: melOutput)
        Self.scale(melOutput, count: melFrames * Self.melBins)
        appendMels(melOutput)
        let meanSquare = energySamples > 0 ? energy / Float(energySamples) : 0
        if quietMeanSquare < 0 || max(meanSquare, previousMeanSquare) >= quietMeanSquare {
            loudMelEnd = melTotal
        }
        previousMeanSquare = meanSquare
        energy = 0
        energySamples = 0
        while melNew >= Self.embeddingWindow {
            let first = melTotal - melNew
            melNew = max(0, melNew - Self.embeddingStep)
            // A word whose window (this embedding and the N − 1 before it, 8 mel frames apart) begins after the last
            // loud frame would score quiet alone: it is skipped, and the embedding waits until a word needs it.
            var needed = false
            for state in wordStates where first - (state.window - 1) * Self.embeddingStep < loudMelEnd {
                needed = true
                break
            }
            if needed {
                try embeddingModel.run(mels + (first - (melTotal - melCount)) * Self.melBins, into: embeddingOutput)
                appendEmbedding(embeddingOutput, pendingFrom: -1)
            } else {
                appendEmbedding(embeddingOutput, pendingFrom: first)
            }
            for (index, state) in wordStates.enumerated() {
                state.new = min(Self.maximumNewEmbeddings, state.new + 1)
                while state.new >= state.window {
                    let start = embeddingCount - state.new
                    state.new = max(0, state.new - 1)
                    guard first - (state.window - 1) * Self.embeddingStep < loudMelEnd else {
                        quietFrames += 1
                        state.riseSample = nil
                        continue
                    }
                    try computePending(from: start, count: state.window)
                    try state.model.run(embeddings + start * Self.features, into: state.output)
                    let probability = state.output[0]
                    if probability >= WakeWordDetector.riseLevel {
                        if state.riseSample == nil { state.riseSample = samplesHeard }
                    } else {
                        state.riseSample = nil
                    }
                    var detection = false
                    if probability > state.threshold ?? threshold {
                        if let last = state.lastDetection, samplesHeard - last < refractorySamples {
                            detection = false
                        } else {
                            detection = true
                            state.lastDetection = samplesHeard
                        }
                    }
                    each(
                        WakeScore(
                            word: index,
                            probability: probability,
                            endSample: samplesHeard,
                            isDetection: detection,
                            riseSample: state.riseSample
                        )
                    )
                }
            }
        }
        let kept = Self.melWindow - Self.melHop
        memmove(audio, audio + Self.melHop, kept * MemoryLayout<Float>.stride)
        audioFilled = kept
    }

    /// Computes the embeddings among `count` from `start` that were left for later, from their kept mel frames.
    private func computePending(from start: Int, count: Int) throws(WakeError) {
        let melBase = melTotal - melCount
        for index in start..<(start + count) where embeddingPending[index] >= 0 {
            let offset = embeddingPending[index] - melBase
            // Kept by appendMels for every embedding a word window can still reach.
            precondition(offset >= 0, "the mel frames of a pending embedding were not kept")
            try embeddingModel.run(mels + offset * Self.melBins, into: embeddings + index * Self.features)
            embeddingPending[index] = -1
        }
    }

    /// Appends one run's mel frames, first moving the frames still needed to the front when the buffer is full.
    private func appendMels(_ frames: UnsafeMutablePointer<Float>) {
        if melCount + melFrames > melCapacity {
            let keep = min(melCount, max(melKeep, melNew))
            memmove(mels, mels + (melCount - keep) * Self.melBins, keep * Self.melBins * MemoryLayout<Float>.stride)
            melCount = keep
        }
        (mels + melCount * Self.melBins).update(from: frames, count: melFrames * Self.melBins)
        melCount += melFrames
        melTotal += melFrames
        melNew = min(Self.maximumNewMels, melNew + melFrames)
    }

    /// Appends one embedding (or, when `pendingFrom` is a mel frame's number, a place for the embedding of the
    /// frames from there, computed when a word needs it), first moving the ones still needed to the front when the
    /// buffer is full.
    private func appendEmbedding(_ embedding: UnsafeMutablePointer<Float>, pendingFrom: Int) {
        if embeddingCount + 1 > embeddingCapacity {
            let keep = min(embeddingCount, embeddingCapacity - 256)
            memmove(
                embeddings,
                embeddings + (embeddingCount - keep) * Self.features,
                keep * Self.features * MemoryLayout<Float>.stride
            )
            memmove(embeddingPending, embeddingPending + (embeddingCount - keep), keep * MemoryLayout<Int>.stride)
            embeddingCount = keep
        }
        if pendingFrom < 0 {
            (embeddings + embeddingCount * Self.features).update(from: embedding, count: Self.features)
        }
        embeddingPending[embeddingCount] = pendingFrom
        embeddingCount += 1
    }

    private static func equal(_ a: UnsafePointer<Float>, _ b: UnsafePointer<Float>, count: Int) -> Bool {
        for index in 0..<count where a[index].bitPattern != b[index].bitPattern { return false }
        return true
    }
}
