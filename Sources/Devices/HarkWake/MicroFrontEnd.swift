import Glibc

/// The audio front end microWakeWord models are trained on: TensorFlow Lite Micro's `microfrontend` (the C library
/// `tensorflow/lite/experimental/microfrontend/lib`, as pymicro-features 2.0.2 and ESPHome configure it), in Swift,
/// integer for integer. Every 10 ms of 16 kHz audio it gives 40 channels of log filterbank energy as `UInt16`:
///
/// - a 30 ms Hann window (12-bit coefficients) every 10 ms, scaled up to fill 16 bits;
/// - a 512-point real FFT in 16-bit fixed point (KISS FFT's `kiss_fftr` with `FIXED_POINT=16`, radix 4);
/// - energies summed into 40 mel channels from 125 to 7500 Hz (triangular weights of 12 bits), and their square
///   roots;
/// - noise reduction (each channel's slowly smoothed level subtracted, at least 5 % of it kept);
/// - PCAN gain control (each channel divided by its noise level to the power 0.95: per-channel automatic gain);
/// - a fixed-point natural logarithm, scaled by 64.
///
/// The tables (window, filterbank weights, gain curve) are computed when it is made, with the same single-precision
/// arithmetic and C library functions (`cosf`, `log1pf`, `powf`) as the C code, so every feature equals the C
/// library's (held to pymicro-features on recordings by the tests). Allocation-free per frame; not thread-safe.
public final class MicroFrontEnd {
    /// The audio rate it takes.
    public static let sampleRate = 16_000
    /// Channels per feature frame.
    public static let channels = 40
    /// Samples per window (30 ms) and between windows (10 ms).
    public static let windowSize = 480
    public static let step = 160
    /// How pymicro-features and microWakeWord's training scale a feature to a float: `Float(value) * 0.0390625`.
    public static let featureScale: Float = 0.0390625

    static let fftSize = 512
    static let windowBits = 12
    static let filterbankBits = 12
    static let noiseReductionBits = 14
    static let smoothingBits: UInt32 = 10
    static let pcanSnrBits = 12
    static let pcanOutputBits = 6
    static let wideDynamicFunctionBits = 32
    static let logScaleShift: UInt32 = 6
    static let logScaleLog2: UInt32 = 16
    static let logSegmentsLog2: UInt32 = 7
    static let logCoefficient: UInt64 = 45426
    /// `MostSignificantBit32(fft_size) - 1 - kFilterbankBits / 2`: 3.
    static let correctionBits = 3

    // The window.
    private let coefficients: UnsafeMutablePointer<Int16>
    private let input: UnsafeMutablePointer<Int16>
    private var inputUsed = 0
    private let windowed: UnsafeMutablePointer<Int16>
    // The FFT.
    private let fft: FixedPointRealFFT
    private let fftInput: UnsafeMutablePointer<Int16>
    private let spectrum: UnsafeMutablePointer<FixedPointRealFFT.Complex>
    private let energy: UnsafeMutablePointer<UInt64>
    private let energyCount: Int
    // The filterbank.
    private let filterbank: Filterbank
    private let work: UnsafeMutablePointer<UInt64>
    private let signal: UnsafeMutablePointer<UInt32>
    // Noise reduction and gain control.
    private let evenSmoothing: UInt32
    private let oddSmoothing: UInt32
    private let minimumSignalRemaining: UInt32
    private let noiseEstimate: UnsafeMutablePointer<UInt32>
    private let gainTable: UnsafeMutablePointer<Int16>
    private let snrShift: UInt32
    // The output.
    private let output: UnsafeMutablePointer<UInt16>

    /// A front end with the microWakeWord settings (30 ms windows every 10 ms, 40 channels from 125 to 7500 Hz, noise
    /// reduction with smoothing 0.025 / 0.06 and 5 % kept, PCAN strength 0.95 and offset 80, log scale shift 6).
    public init() {
        coefficients = .allocate(capacity: Self.windowSize)
        // (float)M_PI, rounded to nearest as C converts it (Float.pi is rounded toward zero).
        let argument = Float(Double.pi) * 2 / Float(Self.windowSize)
        for index in 0..<Self.windowSize {
            let value: Float = 0.5 - 0.5 * cosf(argument * (Float(index) + 0.5))
            coefficients[index] = Int16(floorf(value * Float(1 << Self.windowBits) + 0.5))
        }
        input = .allocate(capacity: Self.windowSize)
        windowed = .allocate(capacity: Self.windowSize)
        fft = FixedPointRealFFT(size: Self.fftSize)
        fftInput = .allocate(capacity: Self.fftSize)
        spectrum = .allocate(capacity: Self.fftSize / 2 + 1)
        filterbank = Filterbank(
            channels: Self.channels,
            lowerLimit: 125,
            upperLimit: 7500,
            sampleRate: Self.sampleRate,
            spectrumSize: Self.fftSize / 2 + 1
        )
        // A band's padded width may read a few bins past the last one used (with zero weights).
        energyCount = max(Self.fftSize / 2 + 1, filterbank.reach)
        energy = .allocate(capacity: energyCount)
        work = .allocate(capacity: Self.channels + 1)
        signal = .allocate(capacity: Self.channels)
        // `config * (1 << kNoiseReductionBits)` in float, converted to uint16 (truncated).
        let scale = Float(1 << Self.noiseReductionBits)
        evenSmoothing = UInt32(UInt16(Float(0.025) * scale))
        oddSmoothing = UInt32(UInt16(Float(0.06) * scale))
        minimumSignalRemaining = UInt32(UInt16(Float(0.05) * scale))
        noiseEstimate = .allocate(capacity: Self.channels)
        gainTable = .allocate(capacity: 4 * Self.wideDynamicFunctionBits - 3)
        let inputCorrectionBits = Self.correctionBits
        snrShift = UInt32(21 - inputCorrectionBits - Self.pcanSnrBits)
        Self.fillGainTable(gainTable, inputBits: Int(Self.smoothingBits) - inputCorrectionBits)
        output = .allocate(capacity: Self.channels)
        fftInput.initialize(repeating: 0, count: Self.fftSize)
        spectrum.initialize(repeating: .init(), count: Self.fftSize / 2 + 1)
        energy.initialize(repeating: 0, count: energyCount)
        work.initialize(repeating: 0, count: Self.channels + 1)
        signal.initialize(repeating: 0, count: Self.channels)
        output.initialize(repeating: 0, count: Self.channels)
        input.initialize(repeating: 0, count: Self.windowSize)
        windowed.initialize(repeating: 0, count: Self.windowSize)
        noiseEstimate.initialize(repeating: 0, count: Self.channels)
    }

    deinit {
        coefficients.deallocate()
        input.deallocate()
        windowed.deallocate()
        fftInput.deallocate()
        spectrum.deallocate()
        energy.deallocate()
        work.deallocate()
        signal.deallocate()
        noiseEstimate.deallocate()
        gainTable.deallocate()
        output.deallocate()
    }

    /// Back to the state of a new front end (no audio heard, noise estimates zero), as `FrontendReset` after
    /// `FrontendPopulateState`.
    public func reset() {
        input.update(repeating: 0, count: Self.windowSize)
        windowed.update(repeating: 0, count: Self.windowSize)
        inputUsed = 0
        fftInput.update(repeating: 0, count: Self.fftSize)
        work.update(repeating: 0, count: Self.channels + 1)
        noiseEstimate.update(repeating: 0, count: Self.channels)
    }

    /// Runs `samples` (16 kHz mono) through the front end, calling `each` with every feature frame completed (40
    /// values; valid only during the call): the first once 480 samples have been heard, then one every 160. Allocates
    /// nothing.
    public func process(_ samples: UnsafeBufferPointer<Int16>, _ each: (UnsafeBufferPointer<UInt16>) -> Void) {
        var index = 0
        while index < samples.count {
            let take = min(Self.windowSize - inputUsed, samples.count - index)
            (input + inputUsed).update(from: samples.baseAddress! + index, count: take)
            inputUsed += take
            index += take
            guard inputUsed == Self.windowSize else { continue }
            frame()
            each(UnsafeBufferPointer(start: output, count: Self.channels))
        }
    }

    /// Every feature frame of `samples` (see ``process(_:_:)``), in order.
    public func process(_ samples: [Int16]) -> [[UInt16]] {
        var frames: [[UInt16]] = []
        samples.withUnsafeBufferPointer { buffer in
            process(buffer) { frames.append(Array($0)) }
        }
        return frames
    }

    // MARK: - One frame (FrontendProcessSamples)

    private func frame() {
        // WindowProcessSamples: the window applied, the input moved on by one step.
        var maximum: Int16 = 0
        for index in 0..<Self.windowSize {
            let value = Int16(truncatingIfNeeded: (Int32(input[index]) * Int32(coefficients[index])) >> Self.windowBits)
            windowed[index] = value
            let magnitude = value < 0 ? 0 &- value : value
            if magnitude > maximum { maximum = magnitude }
        }
        let kept = Self.windowSize - Self.step
        memmove(input, input + Self.step, kept * MemoryLayout<Int16>.stride)
        inputUsed = kept

        // FftCompute, scaled up so the fixed-point FFT keeps as much resolution as it can.
        let shift = 15 - Self.mostSignificantBit(UInt32(UInt16(bitPattern: maximum)))
        for index in 0..<Self.windowSize {
            fftInput[index] = Int16(truncatingIfNeeded: Int32(UInt16(bitPattern: windowed[index])) << shift)
        }
        (fftInput + Self.windowSize).update(repeating: 0, count: Self.fftSize - Self.windowSize)
        fft.transform(fftInput, into: spectrum)

        // FilterbankConvertFftComplexToEnergy: int32 arithmetic, read back as int32 and widened to uint64 (a
        // square sum of 2^31 wraps negative in C, and so here).
        for index in filterbank.startIndex..<filterbank.endIndex {
            let real = Int32(spectrum[index].real)
            let imaginary = Int32(spectrum[index].imaginary)
            let squared = (real &* real) &+ (imaginary &* imaginary)
            energy[index] = UInt64(bitPattern: Int64(squared))
        }
        filterbank.accumulate(energy, into: work)
        for channel in 0..<Self.channels {
            signal[channel] = Self.squareRoot64(work[channel + 1]) >> UInt32(shift)
        }

        noiseReduction()
        gainControl()
        logScale()
    }

    /// NoiseReductionApply.
    private func noiseReduction() {
        let one = UInt32(1 << Self.noiseReductionBits)
        for channel in 0..<Self.channels {
            let smoothing = channel & 1 == 0 ? evenSmoothing : oddSmoothing
            let scaledUp = signal[channel] &<< Self.smoothingBits
            var estimate = UInt32(
                truncatingIfNeeded: (UInt64(scaledUp) &* UInt64(smoothing)
                    &+ UInt64(noiseEstimate[channel]) &* UInt64(one &- smoothing)) >> UInt64(Self.noiseReductionBits)
            )
            noiseEstimate[channel] = estimate
            if estimate > scaledUp { estimate = scaledUp }
            let floor = UInt32(
                truncatingIfNeeded: (UInt64(signal[channel]) &* UInt64(minimumSignalRemaining))
                    >> UInt64(Self.noiseReductionBits)
            )
            let subtracted = (scaledUp &- estimate) >> Self.smoothingBits
            signal[channel] = subtracted > floor ? subtracted : floor
        }
    }

    /// PcanGainControlApply.
    private func gainControl() {
        for channel in 0..<Self.channels {
            let gain = UInt32(bitPattern: Int32(Self.wideDynamicFunction(noiseEstimate[channel], gainTable)))
            let snr = UInt32(truncatingIfNeeded: (UInt64(signal[channel]) &* UInt64(gain)) >> UInt64(snrShift))
            signal[channel] = Self.shrink(snr)
        }
    }

    /// LogScaleApply.
    private func logScale() {
        for channel in 0..<Self.channels {
            var value = signal[channel] &<< UInt32(Self.correctionBits)
            value = value > 1 ? Self.logarithm(value) : 0
            output[channel] = value < 0xFFFF ? UInt16(value) : 0xFFFF
        }
    }

    // MARK: - The C library's integer functions

    /// `32 - CountLeadingZeros32(n)`: 0 for 0.
    @inline(__always)
    static func mostSignificantBit(_ value: UInt32) -> Int { 32 - value.leadingZeroBitCount }

    /// `Sqrt32`: the integer square root, rounded.
    static func squareRoot32(_ value: UInt32) -> UInt32 {
        guard value != 0 else { return 0 }
        var number = value
        var result: UInt32 = 0
        let maximumBit = (32 - mostSignificantBit(number)) | 1
        var bit = UInt32(1) << UInt32(31 - maximumBit)
        var iterations = (31 - maximumBit) / 2 + 1
        while iterations > 0 {
            iterations -= 1
            if number >= result &+ bit {
                number &-= result &+ bit
                result = (result >> 1) &+ bit
            } else {
                result >>= 1
            }
            bit >>= 2
        }
        if number > result && result != 0xFFFF { result &+= 1 }
        return UInt32(UInt16(truncatingIfNeeded: result))
    }

    /// `Sqrt64`: the integer square root, rounded (32-bit arithmetic when the upper word is clear, as the C code).
    static func squareRoot64(_ value: UInt64) -> UInt32 {
        if value >> 32 == 0 { return squareRoot32(UInt32(value)) }
        var number = value
        var result: UInt64 = 0
        let maximumBit = (64 - (64 - number.leadingZeroBitCount)) | 1
        var bit = UInt64(1) << UInt64(63 - maximumBit)
        var iterations = (63 - maximumBit) / 2 + 1
        while iterations > 0 {
            iterations -= 1
            if number >= result &+ bit {
                number &-= result &+ bit
                result = (result >> 1) &+ bit
            } else {
                result >>= 1
            }
            bit >>= 2
        }
        if number > result && result != 0xFFFF_FFFF { result &+= 1 }
        return UInt32(truncatingIfNeeded: result)
    }

    /// `WideDynamicFunction`: the gain for a noise level, from the piecewise quadratic table.
    static func wideDynamicFunction(_ x: UInt32, _ table: UnsafePointer<Int16>) -> Int16 {
        if x <= 2 { return table[Int(x)] }
        let interval = mostSignificantBit(x)
        let entry = table + (4 * interval - 6)
        let fraction = Int32(
            Int16(
                truncatingIfNeeded: (interval < 11 ? x &<< UInt32(11 - interval) : x >> UInt32(interval - 11)) & 0x3FF
            )
        )
        var result = (Int32(entry[2]) &* fraction) >> 5
        result &+= Int32(bitPattern: UInt32(bitPattern: Int32(entry[1])) &<< 5)
        result &*= fraction
        result = (result &+ (1 << 14)) >> 15
        result &+= Int32(entry[0])
        return Int16(truncatingIfNeeded: result)
    }

    /// `PcanShrink`.
    static func shrink(_ x: UInt32) -> UInt32 {
        if x < UInt32(2 << pcanSnrBits) {
            return (x &* x) >> UInt32(2 + 2 * pcanSnrBits - pcanOutputBits)
        }
        return (x >> UInt32(pcanSnrBits - pcanOutputBits)) &- UInt32(1 << pcanOutputBits)
    }

    /// `PcanGainLookupFunction`: `2^21 · (x / 2^inputBits + 80)^-0.95` in single precision, saturated to int16.
    static func gain(inputBits: Int, _ x: UInt32) -> Int16 {
        let xAsFloat = Float(x) / Float(UInt32(1) << UInt32(inputBits))
        let strength: Float = 0.95
        let offset: Float = 80
        let gain = Float(UInt32(1) << 21) * powf(xAsFloat + offset, -strength)
        if gain > Float(Int16.max) { return Int16.max }
        return Int16(gain + 0.5)
    }

    /// `PcanGainControlPopulateState`'s table (kWideDynamicFunctionLUTSize entries; those it never reads are 0).
    static func fillGainTable(_ table: UnsafeMutablePointer<Int16>, inputBits: Int) {
        table.initialize(repeating: 0, count: 4 * wideDynamicFunctionBits - 3)
        table[0] = gain(inputBits: inputBits, 0)
        table[1] = gain(inputBits: inputBits, 1)
        for interval in 2...wideDynamicFunctionBits {
            let x0 = UInt32(1) << UInt32(interval - 1)
            let x1 = x0 + (x0 >> 1)
            let x2 = interval == wideDynamicFunctionBits ? x0 + (x0 - 1) : 2 * x0
            let y0 = gain(inputBits: inputBits, x0)
            let y1 = gain(inputBits: inputBits, x1)
            let y2 = gain(inputBits: inputBits, x2)
            let difference1 = Int32(y1) - Int32(y0)
            let difference2 = Int32(y2) - Int32(y0)
            let a1 = 4 * difference1 - difference2
            let a2 = difference2 - a1
            let base = 4 * interval - 6
            table[base] = y0
            table[base + 1] = Int16(truncatingIfNeeded: a1)
            table[base + 2] = Int16(truncatingIfNeeded: a2)
        }
    }

    /// `Log`: the natural logarithm of `x` (> 1) in fixed point, times 2^scale_shift.
    static func logarithm(_ x: UInt32) -> UInt32 {
        let integer = UInt32(mostSignificantBit(x) - 1)
        let fraction = log2FractionPart(x, integer)
        let log2 = (integer &<< logScaleLog2) &+ fraction
        let round: UInt32 = 1 << 15
        let loge = UInt32(truncatingIfNeeded: (logCoefficient &* UInt64(log2) &+ UInt64(round)) >> UInt64(logScaleLog2))
        return ((loge &<< logScaleShift) &+ round) >> logScaleLog2
    }

    /// `Log2FractionPart`: the fraction of log2(x), from the 128-segment table.
    static func log2FractionPart(_ x: UInt32, _ log2x: UInt32) -> UInt32 {
        var fraction = Int32(truncatingIfNeeded: Int64(x) - (Int64(1) << Int64(log2x)))
        if log2x < logScaleLog2 {
            fraction = fraction &<< Int32(logScaleLog2 - log2x)
        } else {
            fraction >>= Int32(log2x - logScaleLog2)
        }
        let baseSegment = UInt32(bitPattern: fraction) >> (logScaleLog2 - logSegmentsLog2)
        let segmentUnit = (UInt32(1) << logScaleLog2) >> logSegmentsLog2
        let c0 = Int32(logTable[Int(baseSegment)])
        let c1 = Int32(logTable[Int(baseSegment) + 1])
        let segmentBase = Int32(bitPattern: segmentUnit &* baseSegment)
        let relative = ((c1 &- c0) &* (fraction &- segmentBase)) >> Int32(logScaleLog2)
        return UInt32(bitPattern: fraction &+ c0 &+ relative)
    }

    /// `kLogLut`.
    static let logTable: [UInt16] = [
        0, 224, 442, 654, 861, 1063, 1259, 1450, 1636, 1817, 1992, 2163, 2329, 2490, 2646, 2797, 2944, 3087, 3224,
        3358, 3487, 3611, 3732, 3848, 3960, 4068, 4172, 4272, 4368, 4460, 4549, 4633, 4714, 4791, 4864, 4934, 5001,
        5063, 5123, 5178, 5231, 5280, 5326, 5368, 5408, 5444, 5477, 5507, 5533, 5557, 5578, 5595, 5610, 5622, 5631,
        5637, 5640, 5641, 5638, 5633, 5626, 5615, 5602, 5586, 5568, 5547, 5524, 5498, 5470, 5439, 5406, 5370, 5332,
        5291, 5249, 5203, 5156, 5106, 5054, 5000, 4944, 4885, 4825, 4762, 4697, 4630, 4561, 4490, 4416, 4341, 4264,
        4184, 4103, 4020, 3935, 3848, 3759, 3668, 3575, 3481, 3384, 3286, 3186, 3084, 2981, 2875, 2768, 2659, 2549,
        2437, 2323, 2207, 2090, 1971, 1851, 1729, 1605, 1480, 1353, 1224, 1094, 963, 830, 695, 559, 421, 282, 142, 0,
        0,
    ]
}

/// The mel filterbank of the micro front end (`FilterbankPopulateState`, `FilterbankAccumulateChannels`): for each
/// of channels + 1 bands, where its FFT bins start, where its weights start and how many it has (padded to blocks of
/// 4, aligned to even bins, as the C code lays them out, so sums run over the same terms in the same order).
final class Filterbank {
    let channels: Int
    /// The first FFT bin any channel uses (DC is always left out) and the one after the last.
    let startIndex: Int
    let endIndex: Int
    /// The bin after the last one any band reads (with its padding).
    let reach: Int
    private let frequencyStarts: [Int]
    private let weightStarts: [Int]
    private let widths: [Int]
    private let weights: UnsafeMutablePointer<UInt64>
    private let unweights: UnsafeMutablePointer<UInt64>
    private let weightCount: Int

    static let indexAlignment = 2
    static let blockSize = 4

    /// `1127 · ln(1 + f / 700)` in single precision, as `FreqToMel`.
    static func mel(_ frequency: Float) -> Float { 1127 * log1pf(frequency / 700) }

    init(channels: Int, lowerLimit: Float, upperLimit: Float, sampleRate: Int, spectrumSize: Int) {
        self.channels = channels
        let bands = channels + 1
        let melLow = Self.mel(lowerLimit)
        let melHigh = Self.mel(upperLimit)
        let spacing = (melHigh - melLow) / Float(bands)
        let centers = (0..<bands).map { melLow + spacing * Float($0 + 1) }
        let hzPerBin = 0.5 * Float(sampleRate) / (Float(spectrumSize) - 1)
        let start = Int(1.5 + lowerLimit / hzPerBin)
        var frequencyStarts = [Int](repeating: 0, count: bands)
        var weightStarts = [Int](repeating: 0, count: bands)
        var widths = [Int](repeating: 0, count: bands)
        var actualStarts = [Int](repeating: 0, count: bands)
        var actualWidths = [Int](repeating: 0, count: bands)
        var channelStart = start
        var weightIndex = 0
        var needsZeros = false
        for channel in 0..<bands {
            var frequency = channelStart
            while Self.mel(Float(frequency) * hzPerBin) <= centers[channel] { frequency += 1 }
            let width = frequency - channelStart
            actualStarts[channel] = channelStart
            actualWidths[channel] = width
            if width == 0 {
                // A band with no bins reads four zero weights placed at the start of the weights.
                frequencyStarts[channel] = 0
                weightStarts[channel] = 0
                widths[channel] = Self.blockSize
                if !needsZeros {
                    needsZeros = true
                    for earlier in 0..<channel { weightStarts[earlier] += Self.blockSize }
                    weightIndex += Self.blockSize
                }
            } else {
                let alignedStart = (channelStart / Self.indexAlignment) * Self.indexAlignment
                let alignedWidth = channelStart - alignedStart + width
                let paddedWidth = ((alignedWidth - 1) / Self.blockSize + 1) * Self.blockSize
                frequencyStarts[channel] = alignedStart
                weightStarts[channel] = weightIndex
                widths[channel] = paddedWidth
                weightIndex += paddedWidth
            }
            channelStart = frequency
        }
        weightCount = weightIndex
        weights = .allocate(capacity: max(1, weightIndex))
        unweights = .allocate(capacity: max(1, weightIndex))
        weights.initialize(repeating: 0, count: max(1, weightIndex))
        unweights.initialize(repeating: 0, count: max(1, weightIndex))
        var end = 0
        let scale = Float(1 << MicroFrontEnd.filterbankBits)
        for channel in 0..<bands {
            var frequency = actualStarts[channel]
            let offset = frequency - frequencyStarts[channel]
            let denominator = channel == 0 ? melLow : centers[channel - 1]
            for index in 0..<actualWidths[channel] {
                let weight =
                    (centers[channel] - Self.mel(Float(frequency) * hzPerBin)) / (centers[channel] - denominator)
                let at = weightStarts[channel] + offset + index
                // Quantised to int16 as the C code does; stored widened (int16 to uint64, as the C multiply widens).
                weights[at] = UInt64(bitPattern: Int64(Int16(floorf(weight * scale + 0.5))))
                unweights[at] = UInt64(bitPattern: Int64(Int16(floorf((1 - weight) * scale + 0.5))))
                frequency += 1
            }
            if frequency > end { end = frequency }
        }
        precondition(end < spectrumSize, "the filterbank reaches past the spectrum")
        startIndex = start
        endIndex = end
        reach = (0..<bands).map { frequencyStarts[$0] + widths[$0] }.max() ?? 0
        self.frequencyStarts = frequencyStarts
        self.weightStarts = weightStarts
        self.widths = widths
    }

    deinit {
        weights.deallocate()
        unweights.deallocate()
    }

    /// `FilterbankAccumulateChannels`: `work[0...channels]` from the energies (bins outside the bands are read with
    /// zero weights, whatever they hold).
    func accumulate(_ energy: UnsafePointer<UInt64>, into work: UnsafeMutablePointer<UInt64>) {
        var weightAccumulator: UInt64 = 0
        var unweightAccumulator: UInt64 = 0
        for channel in 0...channels {
            let magnitudes = energy + frequencyStarts[channel]
            let channelWeights = weights + weightStarts[channel]
            let channelUnweights = unweights + weightStarts[channel]
            for index in 0..<widths[channel] {
                weightAccumulator &+= channelWeights[index] &* magnitudes[index]
                unweightAccumulator &+= channelUnweights[index] &* magnitudes[index]
            }
            work[channel] = weightAccumulator
            weightAccumulator = unweightAccumulator
            unweightAccumulator = 0
        }
    }
}

/// KISS FFT's real FFT in 16-bit fixed point (`kiss_fftr` over `kiss_fft` with `FIXED_POINT=16`), forward only,
/// for sizes whose half is a power of two: each stage divides by its radix, products are rounded (`sround`), sums
/// wrap to 16 bits, exactly as the C code does.
final class FixedPointRealFFT {
    /// A complex value of the fixed-point FFT (`kiss_fft_cpx`).
    struct Complex {
        var real: Int16 = 0
        var imaginary: Int16 = 0
    }

    private let half: Int
    private let factors: [(radix: Int, length: Int)]
    private let twiddles: UnsafeMutablePointer<Complex>
    private let superTwiddles: UnsafeMutablePointer<Complex>
    private let buffer: UnsafeMutablePointer<Complex>

    init(size: Int) {
        precondition(size >= 4 && size & (size - 1) == 0, "the fixed-point FFT takes a power of two")
        half = size / 2
        // kf_factor: powers of 4, then of 2.
        var factors: [(Int, Int)] = []
        var remaining = half
        while remaining > 1 {
            let radix = remaining % 4 == 0 ? 4 : 2
            remaining /= radix
            factors.append((radix, remaining))
        }
        self.factors = factors
        twiddles = .allocate(capacity: half)
        let pi = 3.141592653589793238462643383279502884197169399375105820974944
        for index in 0..<half {
            let phase = -2 * pi * Double(index) / Double(half)
            twiddles[index] = Complex(
                real: Int16(floor(0.5 + 32767 * cos(phase))),
                imaginary: Int16(floor(0.5 + 32767 * sin(phase)))
            )
        }
        superTwiddles = .allocate(capacity: half / 2)
        for index in 0..<(half / 2) {
            let phase = -3.14159265358979323846264338327 * (Double(index + 1) / Double(half) + 0.5)
            superTwiddles[index] = Complex(
                real: Int16(floor(0.5 + 32767 * cos(phase))),
                imaginary: Int16(floor(0.5 + 32767 * sin(phase)))
            )
        }
        buffer = .allocate(capacity: half)
        buffer.initialize(repeating: Complex(), count: half)
    }

    deinit {
        twiddles.deallocate()
        superTwiddles.deallocate()
        buffer.deallocate()
    }

    // MARK: Fixed-point arithmetic (_kiss_fft_guts.h)

    /// `sround`: a 32-bit product back to 16 bits, rounded.
    @inline(__always)
    private static func round(_ x: Int32) -> Int16 { Int16(truncatingIfNeeded: (x &+ (1 << 14)) >> 15) }

    @inline(__always)
    private static func multiply(_ a: Complex, _ b: Complex) -> Complex {
        Complex(
            real: round(Int32(a.real) &* Int32(b.real) &- Int32(a.imaginary) &* Int32(b.imaginary)),
            imaginary: round(Int32(a.real) &* Int32(b.imaginary) &+ Int32(a.imaginary) &* Int32(b.real))
        )
    }

    /// `C_FIXDIV`.
    @inline(__always)
    private static func divide(_ c: inout Complex, by divisor: Int32) {
        let factor = 32767 / divisor
        c.real = round(Int32(c.real) &* factor)
        c.imaginary = round(Int32(c.imaginary) &* factor)
    }

    @inline(__always)
    private static func add(_ a: Complex, _ b: Complex) -> Complex {
        Complex(
            real: Int16(truncatingIfNeeded: Int32(a.real) + Int32(b.real)),
            imaginary: Int16(truncatingIfNeeded: Int32(a.imaginary) + Int32(b.imaginary))
        )
    }

    @inline(__always)
    private static func subtract(_ a: Complex, _ b: Complex) -> Complex {
        Complex(
            real: Int16(truncatingIfNeeded: Int32(a.real) - Int32(b.real)),
            imaginary: Int16(truncatingIfNeeded: Int32(a.imaginary) - Int32(b.imaginary))
        )
    }

    // MARK: The transform

    /// `kiss_fftr`: `size` real samples to `size / 2 + 1` complex bins.
    func transform(_ input: UnsafePointer<Int16>, into output: UnsafeMutablePointer<Complex>) {
        input.withMemoryRebound(to: Complex.self, capacity: half) { pairs in
            work(buffer, pairs, stride: 1, factor: 0)
        }
        var dc = buffer[0]
        Self.divide(&dc, by: 2)
        output[0] = Complex(real: Int16(truncatingIfNeeded: Int32(dc.real) + Int32(dc.imaginary)), imaginary: 0)
        output[half] = Complex(real: Int16(truncatingIfNeeded: Int32(dc.real) - Int32(dc.imaginary)), imaginary: 0)
        var k = 1
        while k <= half / 2 {
            var fpk = buffer[k]
            var fpnk = Complex(
                real: buffer[half - k].real,
                imaginary: Int16(truncatingIfNeeded: -Int32(buffer[half - k].imaginary))
            )
            Self.divide(&fpk, by: 2)
            Self.divide(&fpnk, by: 2)
            let f1k = Self.add(fpk, fpnk)
            let f2k = Self.subtract(fpk, fpnk)
            let tw = Self.multiply(f2k, superTwiddles[k - 1])
            output[k] = Complex(
                real: Int16(truncatingIfNeeded: (Int32(f1k.real) + Int32(tw.real)) >> 1),
                imaginary: Int16(truncatingIfNeeded: (Int32(f1k.imaginary) + Int32(tw.imaginary)) >> 1)
            )
            output[half - k] = Complex(
                real: Int16(truncatingIfNeeded: (Int32(f1k.real) - Int32(tw.real)) >> 1),
                imaginary: Int16(truncatingIfNeeded: (Int32(tw.imaginary) - Int32(f1k.imaginary)) >> 1)
            )
            k += 1
        }
    }

    /// `kf_work`: the mixed-radix decimation in time, recursively.
    private func work(
        _ output: UnsafeMutablePointer<Complex>,
        _ input: UnsafePointer<Complex>,
        stride: Int,
        factor: Int
    ) {
        let (radix, length) = factors[factor]
        if length == 1 {
            for index in 0..<radix { output[index] = input[index * stride] }
        } else {
            for index in 0..<radix {
                work(output + index * length, input + index * stride, stride: stride * radix, factor: factor + 1)
            }
        }
        if radix == 4 {
            butterfly4(output, stride: stride, length: length)
        } else {
            butterfly2(output, stride: stride, length: length)
        }
    }

    /// `kf_bfly2`.
    private func butterfly2(_ output: UnsafeMutablePointer<Complex>, stride: Int, length: Int) {
        for index in 0..<length {
            Self.divide(&output[index], by: 2)
            Self.divide(&output[index + length], by: 2)
            let t = Self.multiply(output[index + length], twiddles[index * stride])
            output[index + length] = Self.subtract(output[index], t)
            output[index] = Self.add(output[index], t)
        }
    }

    /// `kf_bfly4`, forward.
    private func butterfly4(_ output: UnsafeMutablePointer<Complex>, stride: Int, length m: Int) {
        for index in 0..<m {
            let f = output + index
            Self.divide(&f[0], by: 4)
            Self.divide(&f[m], by: 4)
            Self.divide(&f[2 * m], by: 4)
            Self.divide(&f[3 * m], by: 4)
            let s0 = Self.multiply(f[m], twiddles[index * stride])
            let s1 = Self.multiply(f[2 * m], twiddles[index * stride * 2])
            let s2 = Self.multiply(f[3 * m], twiddles[index * stride * 3])
            let s5 = Self.subtract(f[0], s1)
            f[0] = Self.add(f[0], s1)
            let s3 = Self.add(s0, s2)
            let s4 = Self.subtract(s0, s2)
            f[2 * m] = Self.subtract(f[0], s3)
            f[0] = Self.add(f[0], s3)
            f[m] = Complex(
                real: Int16(truncatingIfNeeded: Int32(s5.real) + Int32(s4.imaginary)),
                imaginary: Int16(truncatingIfNeeded: Int32(s5.imaginary) - Int32(s4.real))
            )
            f[3 * m] = Complex(
                real: Int16(truncatingIfNeeded: Int32(s5.real) - Int32(s4.imaginary)),
                imaginary: Int16(truncatingIfNeeded: Int32(s5.imaginary) + Int32(s4.real))
            )
        }
    }
}
