/// The microWakeWord family of ``WakeWordDetector`` over 16 kHz mono audio, with the same numbers as its reference,
/// pymicro-wakeword 2.5.0:
///
/// - TensorFlow Lite Micro's audio front end (``MicroFrontEnd``) gives 40 features every 10 ms, shared by every word;
/// - each word's streaming model takes its features quantised to its input's int8 (`round(value · 0.0390625 / scale
///   + zero point)`, halves to even, as numpy rounds), `stride` frames at a time (the model's input is
///   `[1, stride, 40]`: 3 frames, a run every 30 ms, for the built-in models), and keeps its own state between runs;
/// - its uint8 output, dequantised, is averaged over its manifest's sliding window (5 runs); until the window is full
///   the probability is 0, as the reference's;
/// - a mean above the word's threshold (its own, else its manifest's `probability_cutoff`) is a detection, outside the
///   word's refractory period.
///
/// One difference, on purpose: a feature above what the model's int8 input can hold (about 666 in the front end's
/// units, a very loud sound) is saturated, as TensorFlow Lite's own quantisation and ESPHome do, where
/// pymicro-wakeword's numpy cast wraps it round to a very small value.
///
/// The models keep state between runs (their streaming buffers are TensorFlow Lite variables), so a reset makes their
/// interpreters anew. Allocation-free per frame otherwise. Its scores' ``WakeScore/word`` count its own words; the
/// detector maps them. Not thread-safe.
final class MicroWakeWordPipeline {
    /// The features per frame, and the most frames a model may take at once.
    static let features = MicroFrontEnd.channels
    static let maximumStride = 16

    let words: [WakeWord]
    /// The threshold of a word with none of its own and no manifest cutoff.
    var threshold: Float
    /// After a detection of a word, further frames of the same word are not detections for this long.
    var refractory: Duration {
        didSet { refractorySamples = WakeWordDetector.samples(refractory) }
    }
    /// Samples heard since the start or the last ``reset()``.
    private(set) var samplesHeard = 0

    private let frontEnd = MicroFrontEnd()
    private let models: [Model]
    private var refractorySamples: Int
    /// Feature frames completed since the start or the last reset.
    private var frames = 0

    /// One word's model, its input being filled, its sliding window and its detections.
    private final class Model {
        let word: WakeWord
        let interpreter: TensorFlowLiteInterpreter
        /// Feature frames per run.
        let stride: Int
        /// The input's quantisation, and the range its type holds.
        let inputScale: Double
        let inputZeroPoint: Double
        let inputRange: ClosedRange<Double>
        let inputIsSigned: Bool
        /// The output's quantisation.
        let outputScale: Float
        let outputZeroPoint: Float
        let outputIsSigned: Bool
        let threshold: Double?
        /// The input: `stride` frames of 40 quantised features; how many are filled.
        let input: UnsafeMutableRawPointer
        var filled = 0
        let output = UnsafeMutableRawPointer.allocate(byteCount: 1, alignment: 1)
        /// The latest probabilities (a ring), how many there are and where the next goes.
        let window: UnsafeMutablePointer<Float>
        var windowCount = 0
        var windowNext = 0
        var lastDetection: Int?
        var riseSample: Int?

        init(word: WakeWord, interpreter: TensorFlowLiteInterpreter) throws(WakeError) {
            let shape = interpreter.inputShape
            guard shape.count == 3, shape[0] == 1, shape[2] == MicroWakeWordPipeline.features,
                (1...MicroWakeWordPipeline.maximumStride).contains(shape[1])
            else {
                throw WakeError.model(
                    word.path,
                    "its input \(shape) is not [1, N, \(MicroWakeWordPipeline.features)] with N from 1 to "
                        + "\(MicroWakeWordPipeline.maximumStride): not a microWakeWord model"
                )
            }
            guard interpreter.outputCount == 1, interpreter.inputType != TensorFlowLite.float32,
                interpreter.outputType != TensorFlowLite.float32
            else {
                throw WakeError.model(
                    word.path,
                    "its output \(interpreter.outputShape) is not one quantised probability: not a microWakeWord model"
                )
            }
            self.word = word
            self.interpreter = interpreter
            stride = shape[1]
            inputScale = Double(interpreter.inputQuantization.scale)
            inputZeroPoint = Double(interpreter.inputQuantization.zeroPoint)
            inputIsSigned = interpreter.inputType == TensorFlowLite.int8
            inputRange = inputIsSigned ? -128...127 : 0...255
            outputScale = interpreter.outputQuantization.scale
            outputZeroPoint = Float(interpreter.outputQuantization.zeroPoint)
            outputIsSigned = interpreter.outputType == TensorFlowLite.int8
            threshold = word.threshold.map { Double($0) } ?? word.cutoff
            input = .allocate(byteCount: stride * MicroWakeWordPipeline.features, alignment: 1)
            input.initializeMemory(as: UInt8.self, repeating: 0, count: stride * MicroWakeWordPipeline.features)
            output.initializeMemory(as: UInt8.self, repeating: 0, count: 1)
            window = .allocate(capacity: max(1, word.slidingWindow))
            window.initialize(repeating: 0, count: max(1, word.slidingWindow))
        }

        deinit {
            input.deallocate()
            output.deallocate()
            window.deallocate()
        }

        /// Quantises one frame of features into the next row of the input; true when the input is full.
        func add(_ features: UnsafeBufferPointer<UInt16>) -> Bool {
            let row = input + filled * MicroWakeWordPipeline.features
            for index in 0..<MicroWakeWordPipeline.features {
                // Double(Float(v) · 0.0390625) is exact: the reference's float64 arithmetic from there on.
                let value = Double(features[index]) * Double(MicroFrontEnd.featureScale)
                let quantised = (value / inputScale + inputZeroPoint).rounded(.toNearestOrEven)
                let clamped = min(max(quantised, inputRange.lowerBound), inputRange.upperBound)
                row.storeBytes(
                    of: inputIsSigned
                        ? UInt8(bitPattern: Int8(clamped)) : UInt8(clamped),
                    toByteOffset: index,
                    as: UInt8.self
                )
            }
            filled += 1
            return filled == stride
        }

        /// Runs the model on the full input; returns the sliding window's mean (0 until the window is full).
        func run() throws(WakeError) -> Double {
            filled = 0
            try interpreter.run(bytes: UnsafeRawPointer(input), into: output)
            let raw = output.load(as: UInt8.self)
            let quantised = outputIsSigned ? Float(Int8(bitPattern: raw)) : Float(raw)
            window[windowNext] = (quantised - outputZeroPoint) * outputScale
            windowNext = (windowNext + 1) % max(1, word.slidingWindow)
            windowCount = min(windowCount + 1, max(1, word.slidingWindow))
            guard windowCount == max(1, word.slidingWindow) else { return 0 }
            var sum = 0.0
            for index in 0..<windowCount { sum += Double(window[index]) }
            return sum / Double(windowCount)
        }

        func reset() throws(WakeError) {
            try interpreter.restart()
            filled = 0
            windowCount = 0
            windowNext = 0
            window.update(repeating: 0, count: max(1, word.slidingWindow))
            lastDetection = nil
            riseSample = nil
        }
    }

    /// Loads each word's model (checked to be a microWakeWord model: input `[1, N, 40]` int8, one quantised output).
    /// `optimizedKernels` adds TensorFlow Lite's XNNPACK delegate; without it the interpreter is made as the
    /// reference makes it.
    init(
        library: TensorFlowLite,
        words: [WakeWord],
        threshold: Float,
        refractory: Duration,
        threads: Int,
        optimizedKernels: Bool
    ) throws(WakeError) {
        guard !words.isEmpty else { throw WakeError.word("no wake word given") }
        var models: [Model] = []
        for word in words {
            let interpreter = try TensorFlowLiteInterpreter(
                library: library,
                path: word.path,
                threads: threads,
                xnnpack: optimizedKernels,
                types: [TensorFlowLite.int8, TensorFlowLite.uint8]
            )
            models.append(try Model(word: word, interpreter: interpreter))
        }
        self.words = words
        self.models = models
        self.threshold = threshold
        self.refractory = refractory
        refractorySamples = WakeWordDetector.samples(refractory)
    }

    /// Back to the state of a new pipeline: the front end's and every model's state, the windows, the detections.
    func reset() throws(WakeError) {
        frontEnd.reset()
        for model in models { try model.reset() }
        samplesHeard = 0
        frames = 0
    }

    /// Runs the pipeline over `samples`, calling `each` with every word's probability at every run of its model,
    /// in order (the words in order at the same time).
    func process(_ samples: UnsafeBufferPointer<Int16>, _ each: (WakeScore) -> Void) throws(WakeError) {
        var failure: WakeError?
        frontEnd.process(samples) { features in
            guard failure == nil else { return }
            // The frame's audio ended here: its 30 ms window's last sample.
            let end = MicroFrontEnd.windowSize + frames * MicroFrontEnd.step
            frames += 1
            for (index, model) in models.enumerated() where model.add(features) {
                do throws(WakeError) {
                    let probability = try model.run()
                    each(score(model, index: index, probability: probability, end: end))
                } catch {
                    failure = error
                    return
                }
            }
        }
        samplesHeard += samples.count
        if let failure { throw failure }
    }

    /// The share of a word's threshold from which its mean counts as rising (``WakeScore/riseSample``): half. The
    /// models' outputs rest a little above 1 % (up to 6 % for hey_mycroft), so openWakeWord's rise level would say
    /// nothing; the mean passes half the cutoff as the word's last sound comes in.
    static let riseShare = 0.5

    private func score(_ model: Model, index: Int, probability: Double, end: Int) -> WakeScore {
        let probabilityValue = Float(probability)
        if probability >= Self.riseShare * (model.threshold ?? Double(threshold)) {
            if model.riseSample == nil { model.riseSample = end }
        } else {
            model.riseSample = nil
        }
        var detection = false
        if probability > model.threshold ?? Double(threshold) {
            if let last = model.lastDetection, end - last < refractorySamples {
                detection = false
            } else {
                detection = true
                model.lastDetection = end
            }
        }
        return WakeScore(
            word: index,
            probability: probabilityValue,
            endSample: end,
            isDetection: detection,
            riseSample: model.riseSample
        )
    }
}
