// hark-audio-bench: measures the audio engine. Run through scripts/bench-audio, which makes the test speech.
//
//   hark-audio-bench [--far FAR.wav] [--near NEAR.wav] [--seconds N]
//
// 1. Echo: far-end speech through a synthetic room (direct path delay, decaying random impulse response,
//    gain, a noise floor) into the microphone, with and without a near-end talker; prints ERLE (steady state)
//    and how much near-end speech survives double talk, and the canceller's CPU per audio minute, for
//    speexdsp's echo canceller (alone, with the preprocessor's residual echo suppression, and with noise
//    suppression: the engine's front end) and, side by side, webrtc-audio-processing's AEC.
// 2. Latency: capture-to-queue and queue-to-ALSA-write, p50/p99, through alsa-lib's file plugin over null.
// 3. Interrupt-to-silence: from interrupt() until snd_pcm_drop returned.
// 4. CPU seconds per audio minute of the full duplex path (capture + DSP + playback at once).
// 5. CPU of the speaker mixer per audio minute with every lane active (`--mixer-only` runs this alone).
import CWebRTCAudioProcessing
import Glibc
import HarkAudio
import HarkCore
import HarkDSP

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

// MARK: Arguments and signals

#if DEBUG
    let buildKind = "debug build"
#else
    let buildKind = "release build"
#endif

var arguments = CommandLine.arguments.dropFirst()
var farPath: String?
var nearPath: String?
var durationSeconds = 60
var loopbackCard: Int?
var mixerOnly = false
while let argument = arguments.popFirst() {
    switch argument {
    case "--far": farPath = arguments.popFirst()
    case "--near": nearPath = arguments.popFirst()
    case "--seconds": durationSeconds = Int(arguments.popFirst() ?? "") ?? durationSeconds
    case "--loopback-card": loopbackCard = Int(arguments.popFirst() ?? "")
    case "--mixer-only": mixerOnly = true
    default:
        print(
            "usage: hark-audio-bench [--far FAR.wav] [--near NEAR.wav] [--seconds N] [--loopback-card N] [--mixer-only]"
        )
        exit(2)
    }
}

/// The speaker mixer alone, as the playback thread runs it: 20 ms blocks at 24 kHz with the voice lane sounding three
/// blocks in four, the alert looping, media read from a ring a writer fills block by block, and a reason to duck
/// set and cleared every second. Prints the CPU it took per audio minute (over ten audio minutes at least).
func benchMixer(seconds: Int) {
    let rate = 24_000
    let block = 480
    let blocks = max(600, seconds * 10) * rate / block
    var mixer = SpeakerMixer(rate: rate)
    let ring = SampleRing(capacity: rate)
    let media = (0..<block).map { Float(sin(Double($0) * 2 * Double.pi * 450 / Double(rate)) * 8000) }
    let voice = (0..<block).map { Float(sin(Double($0) * 2 * Double.pi * 200 / Double(rate)) * 6000) }
    let beep = (0..<(rate / 2)).map { Int16($0 < rate / 4 ? sin(Double($0) * 2 * Double.pi * 880 / 24_000) * 9000 : 0) }
    mixer.setMedia(ring)
    mixer.setAlert(MixerSound(beep, limit: rate * 4))
    var output = [Float](repeating: 0, count: block)
    var checksum: Float = 0
    let before = cpuSeconds()
    let started = ContinuousClock.now
    for n in 0..<blocks {
        ring.write(media)
        mixer.ducking = (n / 50) % 2 == 0 ? [] : [.wakeWord]
        let voiced = n % 4 == 0 ? 0 : block
        output.withUnsafeMutableBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return }
            for k in 0..<block { base[k] = k < voiced ? voice[k] : 0 }
            mixer.mix(base, count: block, voiceCount: voiced)
        }
        checksum += output[n % block]
    }
    let cpu = cpuSeconds() - before
    let wall = (ContinuousClock.now - started).seconds
    let minutes = Double(blocks * block) / Double(rate) / 60
    print(
        "speaker mixer: \(format(cpu * 1000 / minutes, 2)) ms CPU per audio minute, all lanes at once"
            + " (\(format(minutes, 0)) audio minutes in \(format(cpu, 3)) s CPU, \(format(wall, 3)) s wall; \(buildKind))"
    )
    print(
        "  (\(mixer.mediaUnderruns) media underruns; the ring's writer is counted in it; checksum \(format(Double(checksum), 0)))"
    )
}

if mixerOnly {
    print("== The speaker mixer (voice, alert, media ducked on and off)")
    benchMixer(seconds: durationSeconds)
    exit(0)
}

/// Mono 16 kHz samples of a WAV file, or nil.
func speech(_ path: String?) -> [Int16]? {
    guard let path, let audio = try? WAVFile.read(path: path) else { return nil }
    return try? Resampler.convert(audio.mono, from: audio.sampleRate, to: 16_000)
}

/// A deterministic speech-like signal when espeak-ng is missing: voiced bursts with a moving pitch.
func syntheticSpeech(seconds: Int, pitch: Double, seed: UInt64) -> [Int16] {
    var state = seed
    return (0..<(seconds * 16_000)).map { n in
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        let t = Double(n) / 16_000
        let envelope = max(0, sin(2 * Double.pi * 2.3 * t)) * (0.6 + 0.4 * sin(2 * Double.pi * 0.31 * t))
        let f0 = pitch * (1 + 0.1 * sin(2 * Double.pi * 0.7 * t))
        var value = 0.0
        for k in 1...8 { value += sin(2 * Double.pi * f0 * Double(k) * t) / Double(k) }
        value += Double(Int16(truncatingIfNeeded: state >> 48)) / 32768 * 0.2
        return Int16(max(-32768, min(32767, value * envelope * 7000)))
    }
}

/// `samples` repeated (with its pauses) to exactly `count`.
func loop(_ samples: [Int16], to count: Int) -> [Int16] {
    guard !samples.isEmpty else { return [Int16](repeating: 0, count: count) }
    var out: [Int16] = []
    out.reserveCapacity(count)
    while out.count < count { out += samples.prefix(count - out.count) }
    return out
}

func percentile(_ values: [UInt64], _ p: Double) -> Double {
    guard !values.isEmpty else { return .nan }
    let sorted = values.sorted()
    return Double(sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * p))]) / 1000
}

func format(_ value: Double, _ digits: Int = 1) -> String {
    let scale = pow(10, Double(digits))
    return String((value * scale).rounded() / scale)
}

func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6 + Double(usage.ru_stime.tv_sec)
        + Double(usage.ru_stime.tv_usec) / 1e6
}

let talkersFromFiles = speech(farPath) != nil && speech(nearPath) != nil
let farSpeech = speech(farPath) ?? syntheticSpeech(seconds: 20, pitch: 120, seed: 1)
let nearSpeech = speech(nearPath) ?? syntheticSpeech(seconds: 20, pitch: 210, seed: 2)
print("hark-audio-bench: talkers \(talkersFromFiles ? "espeak-ng speech" : "synthetic speech-like signals")")

// MARK: 0. Echo cancellation through a kernel loopback sound card (scripts/bench-aec-aloop)

/// Plays far-end speech on the `snd-aloop` card's device 0 and captures it back from its device 1 (the echo:
/// the card's own latency, gain 1), once with the front end off and once with the engine's default front end
/// (speexdsp AEC with the reference aligned by sample counts, residual echo and noise suppression); returns the
/// energy of each captured 20 ms frame.
/// With the front end off it also returns, per second, the lag (ms) at which the captured echo best matches
/// the reference the capture path aligned with each frame: where the echo sits in the canceller's filter (the
/// front end's lead plus the card's own latency), which must be steady and within its tail.
/// With `talker`, a near-end talker speaks over the far end from two thirds of the pass on: played on the card's
/// second cable (device 0 subdevice 1) by a playback of its own, and captured with the echo through a `multi` PCM
/// over both cables' capture ends, mixed to one channel (each at half). The frames are returned, for the
/// near-end's share of the output.
/// With `answers`, the far end speaks as an agent does: answers of 4 s with a second's pause after each, the
/// speaker kept running between them or not (`keepRunning`).
func loopbackPass(
    card: Int,
    seconds: Int,
    frontEnd: FrontEndOptions,
    talker: [Int16]? = nil,
    answers: Bool = false,
    keepRunning: Bool = false
) async throws -> (
    energies: [Double], lags: [Double], capture: AudioCapture.Statistics, playback: AudioPlayback.Statistics,
    output: [Int16], offline: Double?
) {
    let text = """
        pcm.hark_aloop_speaker { type hw card \(card) device 0 subdevice 0 }
        pcm.hark_aloop_microphone { type hw card \(card) device 1 subdevice 0 }
        pcm.hark_aloop_talker { type hw card \(card) device 0 subdevice 1 }
        pcm.hark_aloop_room {
            type multi
            slaves.a.pcm { type hw card \(card) device 1 subdevice 0 }
            slaves.a.channels 1
            slaves.b.pcm { type hw card \(card) device 1 subdevice 1 }
            slaves.b.channels 1
            bindings.0 { slave a channel 0 }
            bindings.1 { slave b channel 0 }
        }
        """
    // Periods of 20 ms, 6 in the buffer: the TCG guest is scheduled coarsely.
    let request = PCMRequest(formats: [.s16LE], channels: 1, rates: [16_000], period: .milliseconds(20), periods: 6)
    let reference = EchoReference()
    let playback = AudioPlayback(
        configuration: AudioPlayback.Configuration(
            device: AudioDevice(name: "hark_aloop_speaker", configuration: text),
            request: request,
            inputRate: 16_000,
            keepRunning: keepRunning
        ),
        echoReference: reference
    )
    var captureRequest = request
    if talker != nil { captureRequest.channels = 2 }
    let capture = AudioCapture(
        configuration: AudioCapture.Configuration(
            device: AudioDevice(name: talker == nil ? "hark_aloop_microphone" : "hark_aloop_room", configuration: text),
            request: captureRequest,
            channelMap: talker == nil ? .pick(0) : .average([0, 1]),
            queueBound: .seconds(seconds + 10),
            frontEnd: frontEnd
        ),
        echoReference: reference
    )
    var voice: AudioPlayback?
    if let talker {
        let speaker = AudioPlayback(
            configuration: AudioPlayback.Configuration(
                device: AudioDevice(name: "hark_aloop_talker", configuration: text),
                request: request,
                inputRate: 16_000
            )
        )
        // Silence for two thirds of the pass, then the talker.
        let silent = seconds * 16_000 * 2 / 3
        speaker.enqueue(
            AudioChunk(
                samples: [Int16](repeating: 0, count: silent) + loop(talker, to: seconds * 16_000 - silent),
                sampleRate: 16_000
            )
        )
        voice = speaker
    }
    try capture.start()
    try voice?.start()
    try playback.start()
    let far = loop(farSpeech, to: seconds * 16_000)
    if answers {
        Task {
            for start in stride(from: 0, to: far.count, by: 5 * 16_000) {
                playback.enqueue(
                    AudioChunk(samples: Array(far[start..<min(far.count, start + 4 * 16_000)]), sampleRate: 16_000)
                )
                _ = await playback.finishTurn()
                try? await Task.sleep(for: .seconds(1))
            }
        }
    } else {
        for start in stride(from: 0, to: far.count, by: 16_000) {
            playback.enqueue(
                AudioChunk(samples: Array(far[start..<min(far.count, start + 16_000)]), sampleRate: 16_000)
            )
        }
    }
    var energies: [Double] = []
    var microphone: [Int16] = []
    var echoReference: [Int16] = []
    var output: [Int16] = []
    while energies.count < seconds * 50, let frame = await capture.next() {
        energies.append(frame.samples.reduce(0.0) { $0 + Double($1) * Double($1) })
        if talker != nil { output += frame.samples }
        if frontEnd == .off {
            microphone += frame.samples
            // The reference exactly as the capture path gave it to the canceller with this frame.
            var block = [Int16](repeating: 0, count: frame.samples.count)
            if let index = frame.referenceIndex {
                block.withUnsafeMutableBufferPointer {
                    reference.read(into: $0.baseAddress!, count: $0.count, from: index)
                }
            }
            echoReference += block
        }
    }
    let alignment = reference.alignment
    capture.stop()
    playback.stop()
    voice?.stop()
    print(
        "  \(frontEnd == .off ? "front end off" : "default front end")\(talker == nil ? "" : ", double talk"):"
            + " reference aligned by sample counts,"
            + " \(alignment.shared ? "shared clock (one card)" : "independent clocks")"
            + ", offset \(alignment.offset.map { format($0) } ?? "unknown") samples"
            + ", drift \(format(alignment.driftPPM)) ppm, spread \(format(alignment.spread)) samples"
            + " over \(alignment.observations) observations"
    )
    var lags: [Double] = []
    var offline: Double?
    for window in stride(from: 16_000, to: microphone.count - 16_000, by: 16_000) {
        var best = (lag: 0, value: -Double.infinity)
        for lag in stride(from: -4000, through: 8000, by: 4) {
            var value = 0.0
            for i in stride(from: window, to: window + 4000, by: 2) where i - lag >= 0 {
                value += Double(microphone[i]) * Double(echoReference[i - lag])
            }
            if value > best.value { best = (lag, value) }
        }
        lags.append(Double(best.lag) / 16)
    }
    if frontEnd == .off && microphone.count > 32_000 {
        // The same canceller, offline on exactly the samples and reference the capture path had.
        let canceller = EchoCanceller(frameSize: 320, sampleRate: 16_000, options: FrontEndOptions())
        var echo = 0.0
        var left = 0.0
        for start in stride(from: 0, to: microphone.count - 319, by: 320) {
            let input = Array(microphone[start..<(start + 320)])
            let out = canceller.process(microphone: input, reference: Array(echoReference[start..<(start + 320)]))
            if start >= microphone.count / 2 {
                echo += input.reduce(0.0) { $0 + Double($1) * Double($1) }
                left += out.reduce(0.0) { $0 + Double($1) * Double($1) }
            }
        }
        offline = 10 * log10(echo / max(left, 1))
        print("offline, the same canceller on the samples the capture path had: ERLE \(format(offline!)) dB")
    }
    return (energies, lags, capture.statistics, playback.statistics, output, offline)
}

/// The near-end talker's share of `output` in dB (0: all of it, as in the synthetic benchmark's figure): the
/// output's projection on the talker, who entered the microphone at half level and at the lag (searched) where
/// the two match best. Over the double-talk part: from two thirds of the pass on.
func nearEndRetained(output: [Int16], talker: [Int16], seconds: Int) -> (retained: Double, lag: Int) {
    let start = seconds * 16_000 * 2 / 3
    let near = loop(talker, to: seconds * 16_000 - start).map { Double($0) / 2 }
    var best = (lag: 0, dot: -Double.infinity)
    for lag in stride(from: 0, through: 4000, by: 2) {
        var dot = 0.0
        for k in stride(from: 0, to: min(near.count, output.count - start - lag), by: 4) {
            dot += Double(output[start + lag + k]) * near[k]
        }
        if dot > best.dot { best = (lag, dot) }
    }
    var dot = 0.0
    var energy = 0.0
    for k in 0..<min(near.count, output.count - start - best.lag) {
        dot += Double(output[start + best.lag + k]) * near[k]
        energy += near[k] * near[k]
    }
    return (10 * log10(max(dot, 1) / max(energy, 1)), best.lag)
}

/// The ERLE (dB) of a pass's frame energies `cancelled` against the same frames of a pass with the front end off,
/// `raw`, over the frames of `frames` where the echo is audible; nil when none is.
func erle(raw: [Double], cancelled: [Double], frames: Range<Int>) -> Double? {
    let audible = frames.filter { raw[$0] / 320 > 100 * 100 }
    guard !audible.isEmpty else { return nil }
    let echo = audible.reduce(0.0) { $0 + raw[$1] }
    let residual = audible.reduce(0.0) { $0 + cancelled[$1] }
    return 10 * log10(echo / max(residual, 1))
}

/// ``erle(raw:cancelled:frames:)`` for each second of two passes ("-" for a second with no echo audible).
func erlePerSecond(raw: [Double], cancelled: [Double]) -> String {
    (0..<(min(raw.count, cancelled.count) / 50)).map { second in
        erle(raw: raw, cancelled: cancelled, frames: second * 50..<(second * 50 + 50)).map { format($0) } ?? "-"
    }.joined(separator: " ")
}

if let card = loopbackCard {
    let seconds = min(durationSeconds, 60)
    print("\n== Echo cancellation through snd-aloop (card \(card), \(seconds) s per pass, paced by the kernel)")
    let raw = try await loopbackPass(card: card, seconds: seconds, frontEnd: .off)
    let cancelled = try await loopbackPass(card: card, seconds: seconds, frontEnd: FrontEndOptions())
    // Steady state: the second half of each pass (the canceller has converged), frames where the echo is audible.
    let half = raw.energies.count / 2
    let audible = (half..<min(raw.energies.count, cancelled.energies.count)).filter {
        raw.energies[$0] / 320 > 100 * 100
    }
    let echo = audible.reduce(0.0) { $0 + raw.energies[$1] }
    let residual = audible.reduce(0.0) { $0 + cancelled.energies[$1] }
    let format0 = raw.capture.format.map { "\($0)" } ?? "?"
    print("capture device: \(format0)")
    print(
        "echo found at filter tap (ms, per second; the canceller's tail is \(FrontEndOptions().echoTail)): \(raw.lags)"
    )
    print(
        "ERLE steady state (second half, \(audible.count) audible frames): \(format(10 * log10(echo / max(residual, 1)))) dB"
    )
    let doubleTalk = try await loopbackPass(
        card: card,
        seconds: seconds,
        frontEnd: FrontEndOptions(),
        talker: nearSpeech
    )
    for (name, pass) in [("front end off", raw), ("default front end", cancelled), ("double talk", doubleTalk)] {
        print(
            "  \(name): capture \(pass.capture.frames) frames, \(pass.capture.overruns) overruns;"
                + " playback \(pass.playback.framesWritten) frames, \(pass.playback.deviceUnderruns) device underruns,"
                + " \(pass.playback.underruns) times dry, \(pass.playback.reopens) reopens"
                + (pass.playback.lastError.map { ", last error: \($0)" } ?? "")
                + (pass.capture.lastError.map { ", capture's last error: \($0)" } ?? "")
        )
    }
    let liveERLE = 10 * log10(echo / max(residual, 1))
    // Answers of 4 s with a pause of a second after each, as an agent speaks: the speaker stopped after each (a new
    // stream, whose offset is measured anew) or kept running on silence between them.
    let rawAnswers = try await loopbackPass(card: card, seconds: seconds, frontEnd: .off, answers: true)
    var answerFigures: [(keepRunning: Bool, erle: Double, profile: String)] = []
    for keepRunning in [false, true] {
        let pass = try await loopbackPass(
            card: card,
            seconds: seconds,
            frontEnd: FrontEndOptions(),
            answers: true,
            keepRunning: keepRunning
        )
        let count = min(rawAnswers.energies.count, pass.energies.count)
        let steady = erle(raw: rawAnswers.energies, cancelled: pass.energies, frames: count / 2..<count) ?? 0
        let profile = erlePerSecond(raw: rawAnswers.energies, cancelled: pass.energies)
        answerFigures.append((keepRunning, steady, profile))
        print(
            "  answers, speaker \(keepRunning ? "kept running" : "stopped after each"): capture \(pass.capture.overruns)"
                + " overruns, playback \(pass.playback.deviceUnderruns) device underruns; live ERLE per second: \(profile)"
        )
    }
    // Per second of the pass: how the canceller converges, and any step it takes back (the reference moving
    // against the echo costs a reconvergence).
    print("live ERLE per second: \(erlePerSecond(raw: raw.energies, cancelled: cancelled.energies))")
    let near = nearEndRetained(output: doubleTalk.output, talker: nearSpeech, seconds: seconds)
    // The synthetic room, the same front end (the figure of the benchmark's own table).
    let synthetic = runEcho(EchoScene(seconds: 45), speexCanceller(residualSuppression: true, noiseSuppression: true))
    print("\nThe engine's default front end (ERLE dB, steady state | near-end retained in double talk dB, 0 = all):")
    print("  \(format(synthetic.erle)) | \(format(synthetic.nearRetained))   synthetic room (offline)")
    print(
        "  \(raw.offline.map { format($0) } ?? "–") | –   loopback card, offline on the captured samples and reference"
    )
    print(
        "  \(format(liveERLE)) | \(format(near.retained))   loopback card, live (reference aligned by sample counts;"
            + " talker found \(format(Double(near.lag) / 16)) ms in)"
    )
    for figure in answerFigures {
        print(
            "  \(format(figure.erle)) | –   loopback card, live, answers of 4 s with 1 s pauses, the speaker"
                + " \(figure.keepRunning ? "kept running between them (as the appliance does)" : "stopped after each")"
        )
    }
    exit(0)
}

// MARK: 1. Echo cancellation on a synthetic room

/// The room: 12 ms direct-path delay, a 120 ms exponentially decaying random tail (RT60 ≈ 120 ms),
/// echo about 4 dB below the far-end level at the microphone, and a −65 dBFS noise floor.
func roomImpulseResponse() -> [Double] {
    var state: UInt64 = 77
    let delay = 192
    let tail = 1920
    var response = [Double](repeating: 0, count: delay + tail)
    response[delay] = 0.5
    for n in 1..<tail {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        let noise = Double(Int16(truncatingIfNeeded: state >> 48)) / 32768
        response[delay + n] = 0.25 * noise * exp(-6.9 * Double(n) / Double(tail))
    }
    return response
}

func convolve(_ signal: [Int16], _ response: [Double]) -> [Double] {
    let taps = response.enumerated().filter { $0.element != 0 }
    var out = [Double](repeating: 0, count: signal.count)
    for (index, value) in signal.enumerated() where value != 0 {
        let x = Double(value)
        for (lag, h) in taps where index + lag < out.count { out[index + lag] += x * h }
    }
    return out
}

struct EchoResult {
    var erle: Double
    var doubleTalkERLE: Double
    var nearRetained: Double
    var nearSDR: Double
    /// CPU seconds the canceller took per minute of audio.
    var cpuPerMinute: Double
}

/// An echo canceller under test: 20 ms frames (320 samples at 16 kHz) of microphone and reference in, the
/// cleaned microphone out, `latency` samples late.
protocol EchoProcessor {
    var latency: Int { get }
    func process(microphone: [Int16], reference: [Int16]) -> [Int16]
}

extension EchoCanceller: EchoProcessor {}

/// WebRTC's AudioProcessing (webrtc-audio-processing 0.3, the AEC of PC and IP-phone WebRTC) through the
/// CWebRTCAudioProcessing shim: each 20 ms frame is two 10 ms frames, reference first
/// (ProcessReverseStream), then the microphone (ProcessStream) with a stream delay of 0, since the reference
/// arrives in step with the microphone here. Its output comes late (the AEC's 64-sample blocks and the noise
/// suppressor's overlap: 112 and 208 samples at 16 kHz here); `latency` is measured at creation.
final class WebRTCCanceller: EchoProcessor {
    private let apm: OpaquePointer
    private let frame: Int
    private var microphone: [Float]
    private var reference: [Float]
    private(set) var latency = 0

    convenience init?(suppressionLevel: Int32, noiseSuppression: Int32) {
        guard let probe = WebRTCCanceller(options: Self.options(suppressionLevel, noiseSuppression)) else {
            return nil
        }
        probe.latency = probe.measureLatency()
        self.init(options: Self.options(suppressionLevel, noiseSuppression))
        latency = probe.latency
    }

    private static func options(_ suppressionLevel: Int32, _ noiseSuppression: Int32) -> hark_webrtc_apm_options {
        hark_webrtc_apm_options(
            sample_rate: 16_000,
            echo_cancellation: 1,
            suppression_level: suppressionLevel,
            extended_filter: 1,
            delay_agnostic: 0,
            noise_suppression: noiseSuppression,
            high_pass_filter: 1
        )
    }

    private init?(options: hark_webrtc_apm_options) {
        var options = options
        guard let apm = hark_webrtc_apm_create(&options) else { return nil }
        self.apm = apm
        frame = Int(hark_webrtc_apm_frame_size(apm))
        microphone = [Float](repeating: 0, count: frame)
        reference = [Float](repeating: 0, count: frame)
    }

    deinit { hark_webrtc_apm_destroy(apm) }

    /// The lag (0 ..< 480 samples) at which 2 s of noise, with a silent reference, best comes out again.
    private func measureLatency() -> Int {
        var state: UInt64 = 5
        let input = (0..<32_000).map { _ -> Int16 in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int16(truncatingIfNeeded: state >> 48) / 8
        }
        let silence = [Int16](repeating: 0, count: 320)
        var output: [Int16] = []
        for start in stride(from: 0, to: input.count, by: 320) {
            output += process(microphone: Array(input[start..<(start + 320)]), reference: silence)
        }
        var best = (lag: 0, score: -Double.infinity)
        for lag in 0..<480 {
            var score = 0.0
            for k in 16_000..<(input.count - 480) { score += Double(input[k]) * Double(output[k + lag]) }
            if score > best.score { best = (lag, score) }
        }
        return best.lag
    }

    func process(microphone input: [Int16], reference far: [Int16]) -> [Int16] {
        var output = [Int16](repeating: 0, count: input.count)
        for start in stride(from: 0, to: input.count - frame + 1, by: frame) {
            for k in 0..<frame {
                microphone[k] = Float(input[start + k]) / 32768
                reference[k] = Float(far[start + k]) / 32768
            }
            _ = hark_webrtc_apm_process_reverse(apm, reference)
            _ = hark_webrtc_apm_process(apm, &microphone, 0)
            for k in 0..<frame { output[start + k] = Int16(max(-32768, min(32767, (microphone[k] * 32768).rounded()))) }
        }
        return output
    }
}

/// The scene, made once: far end only for the first two thirds, then double talk.
struct EchoScene {
    let count: Int
    let doubleTalkStart: Int
    let far: [Int16]
    let near: [Int16]
    let echo: [Double]
    let microphone: [Int16]

    init(seconds: Int) {
        count = seconds * 16_000
        doubleTalkStart = count * 2 / 3
        far = loop(farSpeech, to: count)
        var near = [Int16](repeating: 0, count: count)
        let nearPart = loop(nearSpeech, to: count - doubleTalkStart)
        for k in 0..<nearPart.count { near[doubleTalkStart + k] = nearPart[k] }
        self.near = near
        echo = convolve(far, roomImpulseResponse())
        var state: UInt64 = 99
        var microphone = [Int16](repeating: 0, count: count)
        for k in 0..<count {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let noise = Double(Int16(truncatingIfNeeded: state >> 48)) / 32768 * 18
            microphone[k] = Int16(max(-32768, min(32767, (echo[k] + Double(near[k]) + noise).rounded())))
        }
        self.microphone = microphone
    }
}

func runEcho(_ scene: EchoScene, _ canceller: some EchoProcessor) -> EchoResult {
    let count = scene.count
    let doubleTalkStart = scene.doubleTalkStart
    let (far, near, echo) = (scene.far, scene.near, scene.echo)
    var output = [Int16](repeating: 0, count: count)
    let before = cpuSeconds()
    for start in stride(from: 0, to: count - 319, by: 320) {
        let out = canceller.process(
            microphone: Array(scene.microphone[start..<(start + 320)]),
            reference: Array(far[start..<(start + 320)])
        )
        // Undo the front end's own delay so the output lines up with the talkers.
        for k in 0..<320 where start + k - canceller.latency >= 0 { output[start + k - canceller.latency] = out[k] }
    }
    let cpu = cpuSeconds() - before
    // Steady state: the second half of the far-end-only part, frames where the echo is audible.
    func erle(_ range: Range<Int>, removeNear: Bool) -> Double {
        var echoEnergy = 0.0
        var residualEnergy = 0.0
        for start in stride(from: range.lowerBound, to: range.upperBound - 319, by: 320) {
            var e = 0.0
            var r = 0.0
            for k in start..<(start + 320) {
                e += echo[k] * echo[k]
                let residual = Double(output[k]) - (removeNear ? Double(near[k]) : 0)
                r += residual * residual
            }
            if e / 320 > 100 * 100 {
                echoEnergy += e
                residualEnergy += r
            }
        }
        return 10 * log10(echoEnergy / max(residualEnergy, 1))
    }
    let steady = erle((doubleTalkStart / 2)..<doubleTalkStart, removeNear: false)
    let doubleTalk = erle(doubleTalkStart..<count, removeNear: true)
    // Near-end survival during double talk: the output's projection on the near-end talker (0 dB = all of
    // it kept) and near-end-to-distortion ratio (residual echo plus damage to the near-end speech).
    var dot = 0.0
    var nearEnergy = 0.0
    var errorEnergy = 0.0
    for k in doubleTalkStart..<count {
        let n = Double(near[k])
        let o = Double(output[k])
        dot += o * n
        nearEnergy += n * n
        errorEnergy += (o - n) * (o - n)
    }
    return EchoResult(
        erle: steady,
        doubleTalkERLE: doubleTalk,
        nearRetained: 10 * log10(max(dot, 1) / max(nearEnergy, 1)),
        nearSDR: 10 * log10(nearEnergy / max(errorEnergy, 1)),
        cpuPerMinute: cpu / (Double(count) / 16_000 / 60)
    )
}

func speexCanceller(residualSuppression: Bool, noiseSuppression: Bool) -> EchoCanceller {
    EchoCanceller(
        frameSize: 320,
        sampleRate: 16_000,
        options: FrontEndOptions(
            echoTail: .milliseconds(200),
            residualEchoSuppression: residualSuppression,
            noiseSuppression: noiseSuppression,
            automaticGain: false
        )
    )
}

let echoSeconds = 45
print(
    "\n== Echo cancellation (synthetic room: 12 ms delay, 120 ms decaying tail, echo −4 dB, 45 s, last third double talk)"
)
let scene = EchoScene(seconds: echoSeconds)
var echoRows: [(name: String, result: EchoResult)] = []
for (suppression, denoise) in [(false, false), (true, false), (true, true)] {
    let result = runEcho(scene, speexCanceller(residualSuppression: suppression, noiseSuppression: denoise))
    let name =
        switch (suppression, denoise) {
        case (false, _): "speexdsp AEC only (speex_echo_cancellation)"
        case (true, false): "speexdsp AEC + residual echo suppression (speex_preprocess)"
        case (true, true): "speexdsp AEC + residual echo + noise suppression (the engine's default front end)"
        }
    echoRows.append((name, result))
}
// WebRTC's AEC always runs its non-linear processor (NLP); its suppression level is how hard.
for (level, denoise) in [(Int32(0), Int32(-1)), (1, -1), (1, 1)] {
    guard let canceller = WebRTCCanceller(suppressionLevel: level, noiseSuppression: denoise) else {
        print("webrtc-audio-processing: cannot create the AudioProcessing instance")
        break
    }
    let result = runEcho(scene, canceller)
    let levelName = ["low", "moderate", "high"][Int(level)]
    let name =
        "webrtc AEC, \(levelName) suppression, extended filter\(denoise >= 0 ? " + noise suppression" : "")"
        + " (output \(canceller.latency) samples late)"
    echoRows.append((name, result))
}
for (name, result) in echoRows {
    print("\(name):")
    print("  ERLE steady state, far end only:   \(format(result.erle)) dB   (goal ≥ 25 dB)")
    print("  echo reduction during double talk: \(format(result.doubleTalkERLE)) dB")
    print("  near-end speech retained in double talk: \(format(result.nearRetained)) dB (0 dB = all)")
    print("  near-end to residual+distortion ratio:   \(format(result.nearSDR)) dB")
    print("  CPU: \(format(result.cpuPerMinute, 3)) s per audio minute (\(buildKind))")
}
print("\nSide by side (ERLE dB | double-talk echo reduction dB | near-end retained dB | near-end SDR dB | CPU s/min):")
for (name, result) in echoRows {
    let cells = [result.erle, result.doubleTalkERLE, result.nearRetained, result.nearSDR].map { format($0) }
    print("  \(cells.joined(separator: " | ")) | \(format(result.cpuPerMinute, 3))   \(name)")
}

// MARK: 2-4. The engine through alsa-lib (file plugin over null: real code paths, not paced)

let directory = FileManager.default.temporaryDirectory.path + "/hark-audio-bench-\(getpid())"
try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)

/// Writes `seconds` of a 2-channel S32_LE 48 kHz microphone file (speech on both channels).
func writeMicrophoneFile(_ path: String, seconds: Int) throws {
    let mono = try Resampler.convert(loop(nearSpeech, to: seconds * 16_000), from: 16_000, to: 48_000)
    var data = Data(capacity: mono.count * 8)
    for sample in mono {
        withUnsafeBytes(of: (Int32(sample) << 16).littleEndian) { data.append(contentsOf: $0) }
        withUnsafeBytes(of: (Int32(sample) << 16).littleEndian) { data.append(contentsOf: $0) }
    }
    try data.write(to: URL(filePath: path))
}

print("\n== Latency (alsa-lib file plugin over null: the software path, device buffering excluded)")
do {
    // Capture: 10 s of a 2-channel S32 48 kHz microphone, averaged, resampled, AEC + noise suppression.
    try writeMicrophoneFile(directory + "/mic.raw", seconds: 12)
    let capture = AudioCapture(
        configuration: AudioCapture.Configuration(
            device: .rawFile(output: directory + "/mic-out.raw", input: directory + "/mic.raw"),
            request: PCMRequest(formats: [.s32LE], channels: 2, rates: [48_000]),
            channelMap: .average([0, 1]),
            queueBound: .seconds(60),
            backpressure: true
        ),
        echoReference: EchoReference()
    )
    try capture.start()
    var captureLatencies: [UInt64] = []
    while captureLatencies.count < 500, let frame = await capture.next() {
        captureLatencies.append(frame.enqueuedAt - frame.readAt)
    }
    capture.stop()
    print(
        "capture-to-queue (snd_pcm_readi returned → mapped, resampled, AEC+NS, queued): p50 \(format(percentile(captureLatencies, 0.5))) µs,"
            + " p99 \(format(percentile(captureLatencies, 0.99))) µs  (\(captureLatencies.count) frames)"
    )

    // Playback: 20 ms chunks arriving every 20 ms (wall clock), prebuffer 0, 24 kHz → 48 kHz stereo S16.
    let playback = AudioPlayback(
        configuration: AudioPlayback.Configuration(
            device: .rawFile(output: directory + "/speaker.raw"),
            request: PCMRequest(formats: [.s16LE], channels: 2, rates: [48_000]),
            prebuffer: .zero,
            pace: 0
        )
    )
    try playback.start()
    let chunk = Array(try Resampler.convert(loop(farSpeech, to: 320), from: 16_000, to: 24_000).prefix(480))
    let clock = ContinuousClock()
    var next = clock.now
    for _ in 0..<250 {
        playback.enqueue(AudioChunk(samples: chunk, sampleRate: 24_000))
        next += .milliseconds(20)
        try await Task.sleep(until: next, clock: clock)
    }
    _ = await playback.finishTurn()
    playback.stop()
    let writes = playback.writeLatencies
    print(
        "queue-to-ALSA-write (enqueue → snd_pcm_writei returned): p50 \(format(percentile(writes, 0.5))) µs,"
            + " p99 \(format(percentile(writes, 0.99))) µs  (\(writes.count) chunks)"
    )
    print("  (on hardware add for capture up to one period (10 ms) of framing, and for playback the device")
    print("   buffer, periods × period, e.g. 4 × 10 ms, plus the 60 ms prebuffer at the start of a turn)")
}

print("\n== Interrupt-to-silence (interrupt() → snd_pcm_drop returned, while the thread is writing)")
do {
    let playback = AudioPlayback(
        configuration: AudioPlayback.Configuration(
            device: .rawFile(output: "/dev/null"),
            request: PCMRequest(formats: [.s16LE], channels: 2, rates: [48_000]),
            prebuffer: .zero,
            pace: 0
        )
    )
    try playback.start()
    let audio = loop(farSpeech, to: 24_000 * 5)
    var latencies: [UInt64] = []
    for round in 1...50 {
        playback.enqueue(AudioChunk(samples: audio, sampleRate: 24_000))
        try await Task.sleep(for: .milliseconds(2))
        playback.interrupt()
        let deadline = ContinuousClock.now + .seconds(2)
        while playback.statistics.interrupts < round, ContinuousClock.now < deadline {
            try await Task.sleep(for: .microseconds(200))
        }
        latencies.append(playback.statistics.lastInterruptLatency)
    }
    let period = playback.format.map { Double($0.periodFrames) * 1000 / Double($0.rate) } ?? .nan
    playback.stop()
    print(
        "interrupt-to-silence: p50 \(format(percentile(latencies, 0.5))) µs, p99 \(format(percentile(latencies, 0.99))) µs,"
            + " max \(format(Double(latencies.max() ?? 0) / 1000)) µs"
    )
    print(
        "  (on a paced device add at most one period, \(format(period)) ms here: a blocked snd_pcm_writei returns within one)"
    )
}

print("\n== CPU of the full duplex path (capture + AEC/NS + playback, \(durationSeconds) s of audio each way)")
do {
    try writeMicrophoneFile(directory + "/duplex-mic.raw", seconds: durationSeconds + 2)
    let reference = EchoReference()
    let capture = AudioCapture(
        configuration: AudioCapture.Configuration(
            device: .rawFile(output: directory + "/duplex-unused.raw", input: directory + "/duplex-mic.raw"),
            request: PCMRequest(formats: [.s32LE], channels: 2, rates: [48_000]),
            channelMap: .average([0, 1]),
            queueBound: .seconds(2),
            backpressure: true
        ),
        echoReference: reference
    )
    let playback = AudioPlayback(
        configuration: AudioPlayback.Configuration(
            device: .rawFile(output: "/dev/null"),
            request: PCMRequest(formats: [.s16LE], channels: 2, rates: [48_000]),
            pace: 0
        ),
        echoReference: reference
    )
    let answer = try Resampler.convert(loop(farSpeech, to: durationSeconds * 16_000), from: 16_000, to: 24_000)
    let before = cpuSeconds()
    let started = ContinuousClock.now
    try playback.start()
    try capture.start()
    for start in stride(from: 0, to: answer.count, by: 24_000) {
        playback.enqueue(
            AudioChunk(samples: Array(answer[start..<min(answer.count, start + 24_000)]), sampleRate: 24_000)
        )
    }
    let frameTarget = durationSeconds * 50
    var frames = 0
    while frames < frameTarget, await capture.next() != nil { frames += 1 }
    capture.stop()
    _ = await playback.finishTurn()
    playback.stop()
    let cpu = cpuSeconds() - before
    let wall = (ContinuousClock.now - started).seconds
    let minutes = Double(durationSeconds) / 60
    print(
        "CPU: \(format(cpu / minutes, 2)) s per audio minute (\(format(cpu, 2)) s CPU, \(format(wall, 2)) s wall"
            + " for \(durationSeconds) s captured and \(durationSeconds) s played; \(buildKind))"
    )
    print("  capture: \(capture.statistics.frames) frames, \(capture.statistics.dropped) dropped")
    print("  playback: \(playback.statistics.framesWritten) frames written, \(playback.statistics.underruns) underruns")
}

print("\n== The speaker mixer (voice, alert, media ducked on and off)")
benchMixer(seconds: durationSeconds)

try? FileManager.default.removeItem(atPath: directory)
