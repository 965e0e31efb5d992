import CSpeexDSP
import HarkCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Which parts of the capture front end run (per board: a board with a hardware AEC turns ours off).
public struct FrontEndOptions: Sendable, Hashable {
    /// Acoustic echo cancellation against the playback reference (speexdsp echo canceller).
    public var echoCancellation: Bool
    /// Echo tail the adaptive filter covers (room reverberation plus any misalignment).
    public var echoTail: Duration
    /// Residual echo suppression after the canceller (speexdsp preprocess, needs echo cancellation).
    public var residualEchoSuppression: Bool
    /// Noise suppression (speexdsp preprocess).
    public var noiseSuppression: Bool
    /// The room's noise floor (dBFS: the quietest 20 ms of the last second) below which noise suppression passes
    /// the microphone unchanged, while the speaker is silent; nil: it always runs. In a quiet room there is no
    /// noise to remove, and the preprocessor still reshapes what the wake-word models hear: measured on an hour of
    /// non-wake speech, it raised their false accepts by a tenth and detected nothing more. The default, -60 dBFS,
    /// is the wake word's `quiet_level` too: a room between the two would be heard by the detector, awake, where
    /// suppressed it rests.
    public var quietRoomLevel: Double?
    /// Automatic gain control (speexdsp preprocess).
    public var automaticGain: Bool
    /// How far ahead of each microphone frame's time the reference is read: the echo then sits at filter tap
    /// (acoustic delay + lead), so delay estimates that err early by up to the lead still leave it causal.
    /// Keep it below the playback buffer (samples not yet written when read count as silence).
    public var referenceLead: Duration

    public init(
        echoCancellation: Bool = true,
        echoTail: Duration = .milliseconds(250),
        residualEchoSuppression: Bool = true,
        noiseSuppression: Bool = true,
        quietRoomLevel: Double? = -60,
        automaticGain: Bool = false,
        referenceLead: Duration = .milliseconds(20)
    ) {
        self.echoCancellation = echoCancellation
        self.echoTail = echoTail
        self.residualEchoSuppression = residualEchoSuppression
        self.noiseSuppression = noiseSuppression
        self.quietRoomLevel = quietRoomLevel
        self.automaticGain = automaticGain
        self.referenceLead = referenceLead
    }

    /// Everything off: the capture path only maps channels and resamples.
    public static let off = FrontEndOptions(
        echoCancellation: false,
        residualEchoSuppression: false,
        noiseSuppression: false,
        automaticGain: false
    )

    var needsPreprocess: Bool { noiseSuppression || automaticGain || (echoCancellation && residualEchoSuppression) }
}

/// The speexdsp echo canceller and preprocessor over fixed-size frames of 16 kHz mono PCM16.
/// One owner (the capture thread); ``process(microphone:reference:output:)`` does not allocate.
public final class EchoCanceller {
    private let echo: OpaquePointer?
    private let preprocess: OpaquePointer?
    /// Samples per frame.
    public let frameSize: Int
    /// Sample rate in Hz.
    public let sampleRate: Int
    /// Silent reference samples in a row (up to ``idleAfter`` and a frame).
    private var silentReference = 0
    /// After this much silent reference the echo has died away (the tail and a frame): the canceller, which would
    /// subtract nothing, is not run until the speaker plays again. Most of an idle appliance's time.
    private let idleAfter: Int
    /// A silent frame, and a frame to throw away.
    private let silence: UnsafeMutablePointer<Int16>
    private let scratch: UnsafeMutablePointer<Int16>
    /// Frames the canceller was not run because the speaker had long been silent.
    public private(set) var framesIdle = 0
    /// Frames passed unchanged (one frame late, as the preprocessor's are) because the room was quiet.
    public private(set) var framesPassed = 0
    /// The quiet-room level as a frame's mean square (nil: noise suppression always runs), and the level 6 dB
    /// below it at which a noisy room counts as quiet again.
    private let quietEnergy: Double?
    private let quietAgainEnergy: Double
    /// The mean squares of the last second's frames (a ring), and whether the room is noisy now.
    private let energies: UnsafeMutablePointer<Double>
    private let energyCount = 50
    private var energyHead = 0
    private var noisy = false
    /// The frame before this one as it came to the preprocessor: what a quiet room passes on, one frame late.
    private let previous: UnsafeMutablePointer<Int16>

    /// A front end for frames of `frameSize` samples at `sampleRate`. Stands for `speex_echo_state_init`,
    /// `speex_preprocess_state_init` and their `_ctl` settings.
    public init(frameSize: Int = 320, sampleRate: Int = 16_000, options: FrontEndOptions = FrontEndOptions()) {
        self.frameSize = frameSize
        self.sampleRate = sampleRate
        let tail = max(frameSize, Int(options.echoTail.milliseconds) * sampleRate / 1000)
        idleAfter = tail + frameSize
        silence = .allocate(capacity: frameSize)
        silence.initialize(repeating: 0, count: frameSize)
        scratch = .allocate(capacity: frameSize)
        scratch.initialize(repeating: 0, count: frameSize)
        previous = .allocate(capacity: frameSize)
        previous.initialize(repeating: 0, count: frameSize)
        energies = .allocate(capacity: energyCount)
        energies.initialize(repeating: 0, count: energyCount)
        // Only noise suppression is skipped in a quiet room: automatic gain has work there too.
        let quiet = options.noiseSuppression && !options.automaticGain ? options.quietRoomLevel : nil
        quietEnergy = quiet.map { Self.meanSquare(dBFS: $0) }
        quietAgainEnergy = quiet.map { Self.meanSquare(dBFS: $0 - 6) } ?? 0
        var rate = Int32(sampleRate)
        if options.echoCancellation {
            echo = speex_echo_state_init(Int32(frameSize), Int32(tail))
            speex_echo_ctl(echo, SPEEX_ECHO_SET_SAMPLING_RATE, &rate)
        } else {
            echo = nil
        }
        if options.needsPreprocess {
            let state = speex_preprocess_state_init(Int32(frameSize), Int32(sampleRate))
            // speexdsp applies residual echo suppression through its denoiser's gains: with suppression wanted
            // but noise suppression not, the denoiser runs with its noise attenuation limited to 0 dB.
            let residual = echo != nil && options.residualEchoSuppression
            var on: Int32 = options.noiseSuppression || residual ? 1 : 0
            speex_preprocess_ctl(state, SPEEX_PREPROCESS_SET_DENOISE, &on)
            if !options.noiseSuppression {
                var attenuation: Int32 = 0
                speex_preprocess_ctl(state, SPEEX_PREPROCESS_SET_NOISE_SUPPRESS, &attenuation)
            }
            on = options.automaticGain ? 1 : 0
            speex_preprocess_ctl(state, SPEEX_PREPROCESS_SET_AGC, &on)
            if let echo, options.residualEchoSuppression {
                speex_preprocess_ctl(state, SPEEX_PREPROCESS_SET_ECHO_STATE, UnsafeMutableRawPointer(echo))
            }
            preprocess = state
        } else {
            preprocess = nil
        }
    }

    deinit {
        if let preprocess { speex_preprocess_state_destroy(preprocess) }
        if let echo { speex_echo_state_destroy(echo) }
        silence.deallocate()
        scratch.deallocate()
        previous.deallocate()
        energies.deallocate()
    }

    /// The mean square of a 16-bit signal at `level` dBFS (RMS against full scale).
    private static func meanSquare(dBFS level: Double) -> Double {
        let amplitude = 32768 * pow(10, level / 20)
        return amplitude * amplitude
    }

    /// Samples the front end delays its output by: speexdsp's preprocessor overlaps two frames, so it
    /// returns each frame one frame late; the echo canceller alone adds nothing.
    public var latency: Int { preprocess == nil ? 0 : frameSize }

    /// True when echo cancellation runs.
    public var cancelsEcho: Bool { echo != nil }

    /// One frame: `microphone` minus the echo of `reference` (the samples that reached the speaker at the
    /// same time), then noise suppression / AGC / residual echo suppression as configured. `output` may be
    /// `microphone`. Stands for `speex_echo_cancellation` and `speex_preprocess_run`.
    public func process(
        microphone: UnsafePointer<Int16>,
        reference: UnsafePointer<Int16>,
        output: UnsafeMutablePointer<Int16>
    ) {
        var speakerSilent = true
        if let echo {
            var silent = true
            for index in 0..<frameSize where reference[index] != 0 {
                silent = false
                break
            }
            if silent {
                silentReference = min(silentReference + frameSize, idleAfter + frameSize)
            } else {
                if silentReference > idleAfter {
                    // The speaker plays again: the canceller's far-end history becomes the silence it missed (a
                    // silent far end and microphone adapt nothing), so it does not subtract an echo of old sound.
                    for _ in stride(from: 0, to: idleAfter, by: frameSize) {
                        speex_echo_cancellation(echo, silence, silence, scratch)
                    }
                }
                silentReference = 0
            }
            if silentReference > idleAfter {
                framesIdle += 1
                if UnsafePointer(output) != microphone { output.update(from: microphone, count: frameSize) }
            } else {
                speakerSilent = false
                speex_echo_cancellation(echo, microphone, reference, output)
            }
        } else if UnsafePointer(output) != microphone {
            output.update(from: microphone, count: frameSize)
        }
        guard let preprocess else { return }
        guard let quietEnergy else {
            speex_preprocess_run(preprocess, output)
            return
        }
        // The room's noise floor: the quietest frame of the last second (speech has pauses; noise has none).
        var sum = 0.0
        for index in 0..<frameSize { sum += Double(output[index]) * Double(output[index]) }
        energies[energyHead] = sum / Double(frameSize)
        energyHead = energyHead + 1 == energyCount ? 0 : energyHead + 1
        var floor = energies[0]
        for index in 1..<energyCount where energies[index] < floor { floor = energies[index] }
        noisy = noisy ? floor > quietAgainEnergy : floor > quietEnergy
        // The preprocessor runs on every frame (its noise estimate stays current for when the room gets noisy);
        // in a quiet room, with the speaker silent (no residual echo to suppress), its output is replaced by the
        // frame before, unchanged: the same one frame late, so the timing never jumps.
        scratch.update(from: output, count: frameSize)
        speex_preprocess_run(preprocess, output)
        if !noisy, speakerSilent {
            framesPassed += 1
            output.update(from: previous, count: frameSize)
        }
        previous.update(from: scratch, count: frameSize)
    }

    /// Array convenience for tests and benchmarks (allocates).
    public func process(microphone: [Int16], reference: [Int16]) -> [Int16] {
        precondition(microphone.count == frameSize && reference.count == frameSize)
        var output = [Int16](repeating: 0, count: frameSize)
        microphone.withUnsafeBufferPointer { mic in
            reference.withUnsafeBufferPointer { ref in
                output.withUnsafeMutableBufferPointer { out in
                    process(microphone: mic.baseAddress!, reference: ref.baseAddress!, output: out.baseAddress!)
                }
            }
        }
        return output
    }

    /// Forgets the adapted echo path (`speex_echo_state_reset`).
    public func reset() { if let echo { speex_echo_state_reset(echo) } }
}
