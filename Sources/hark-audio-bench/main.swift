// hark-audio-bench: measures the audio engine. Run through scripts/bench-audio, which makes the test speech.
//
//   hark-audio-bench [--far FAR.wav] [--near NEAR.wav] [--seconds N]
//
// 1. Echo: far-end speech through a synthetic room (direct path delay, decaying random impulse response,
//    gain, a noise floor) into the microphone, with and without a near-end talker; prints ERLE (steady state)
//    and how much near-end speech survives double talk, for the echo canceller alone and with the
//    preprocessor's residual echo suppression.
// 2. Latency: capture-to-queue and queue-to-ALSA-write, p50/p99, through alsa-lib's file plugin over null.
// 3. Interrupt-to-silence: from interrupt() until snd_pcm_drop returned.
// 4. CPU seconds per audio minute of the full duplex path (capture + DSP + playback at once).
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
while let argument = arguments.popFirst() {
    switch argument {
    case "--far": farPath = arguments.popFirst()
    case "--near": nearPath = arguments.popFirst()
    case "--seconds": durationSeconds = Int(arguments.popFirst() ?? "") ?? durationSeconds
    default:
        print("usage: hark-audio-bench [--far FAR.wav] [--near NEAR.wav] [--seconds N]")
        exit(2)
    }
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
}

func runEcho(seconds: Int, residualSuppression: Bool, noiseSuppression: Bool) -> EchoResult {
    let count = seconds * 16_000
    let doubleTalkStart = count * 2 / 3
    let far = loop(farSpeech, to: count)
    var near = [Int16](repeating: 0, count: count)
    let nearPart = loop(nearSpeech, to: count - doubleTalkStart)
    for k in 0..<nearPart.count { near[doubleTalkStart + k] = nearPart[k] }
    let echo = convolve(far, roomImpulseResponse())
    var state: UInt64 = 99
    let canceller = EchoCanceller(
        frameSize: 320,
        sampleRate: 16_000,
        options: FrontEndOptions(
            echoTail: .milliseconds(200),
            residualEchoSuppression: residualSuppression,
            noiseSuppression: noiseSuppression,
            automaticGain: false
        )
    )
    var output = [Int16](repeating: 0, count: count)
    var mic = [Int16](repeating: 0, count: 320)
    for start in stride(from: 0, to: count - 319, by: 320) {
        for k in 0..<320 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let noise = Double(Int16(truncatingIfNeeded: state >> 48)) / 32768 * 18
            mic[k] = Int16(max(-32768, min(32767, (echo[start + k] + Double(near[start + k]) + noise).rounded())))
        }
        let out = canceller.process(microphone: mic, reference: Array(far[start..<(start + 320)]))
        // Undo the front end's own delay so the output lines up with the talkers.
        for k in 0..<320 where start + k - canceller.latency >= 0 { output[start + k - canceller.latency] = out[k] }
    }
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
        nearSDR: 10 * log10(nearEnergy / max(errorEnergy, 1))
    )
}

let echoSeconds = 45
print(
    "\n== Echo cancellation (synthetic room: 12 ms delay, 120 ms decaying tail, echo −4 dB, 45 s, last third double talk)"
)
for (suppression, denoise) in [(false, false), (true, false), (true, true)] {
    let result = runEcho(seconds: echoSeconds, residualSuppression: suppression, noiseSuppression: denoise)
    let name =
        switch (suppression, denoise) {
        case (false, _): "AEC only (speex_echo_cancellation)"
        case (true, false): "AEC + residual echo suppression (speex_preprocess)"
        case (true, true): "AEC + residual echo suppression + noise suppression (the default front end)"
        }
    print("\(name):")
    print("  ERLE steady state, far end only:   \(format(result.erle)) dB   (goal ≥ 25 dB)")
    print("  echo reduction during double talk: \(format(result.doubleTalkERLE)) dB")
    print("  near-end speech retained in double talk: \(format(result.nearRetained)) dB (0 dB = all)")
    print("  near-end to residual+distortion ratio:   \(format(result.nearSDR)) dB")
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
            prebuffer: .zero
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
            prebuffer: .zero
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
            request: PCMRequest(formats: [.s16LE], channels: 2, rates: [48_000])
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

try? FileManager.default.removeItem(atPath: directory)
