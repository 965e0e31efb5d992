// The CPU of decoding and mixing one stream, per audio minute, and the process's peak resident memory: the media
// player opens URL (FFmpeg: demux, decode, resample to mono 24 kHz) on its own thread; this thread reads its ring in
// 20 ms blocks through the speaker mixer (the media lane ducked on and off every second), as the playback thread
// does, as fast as the player fills it. Stops after SECONDS of audio (or at the stream's end).
//
//   hark-media-bench URL [--seconds N] [--paced]
//
// --paced reads at the audio's own rate (a live stream arrives at it anyway). CPU is the whole process's
// (getrusage), so the decoding thread and the mixing are both in it.
import Glibc
import HarkAudio
import HarkCore
import HarkMedia
import Logging

func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6 + Double(usage.ru_stime.tv_sec)
        + Double(usage.ru_stime.tv_usec) / 1e6
}

func peakKiB() -> Int {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return usage.ru_maxrss
}

func format(_ value: Double, _ digits: Int) -> String {
    var factor = 1.0
    for _ in 0..<digits { factor *= 10 }
    let rounded = (value * factor).rounded() / factor
    return digits == 0 ? String(Int(rounded)) : String(rounded)
}

var arguments = Array(CommandLine.arguments.dropFirst())
var seconds = 60
var paced = false
var url: String?
while !arguments.isEmpty {
    let argument = arguments.removeFirst()
    switch argument {
    case "--seconds":
        guard let value = arguments.first.flatMap({ Int($0) }), (1...3600).contains(value) else {
            print("hark-media-bench: --seconds takes 1 to 3600")
            exit(2)
        }
        seconds = value
        arguments.removeFirst()
    case "--paced": paced = true
    default: url = argument
    }
}
guard let url else {
    print("usage: hark-media-bench URL [--seconds N] [--paced]")
    exit(2)
}

let rate = 24_000
let block = 480
var logger = Logger(label: "hark-media-bench")
logger.logLevel = .warning
let player = MediaPlayer(
    configuration: .init(
        outputRate: rate,
        openTimeout: .seconds(20),
        stallTimeout: .seconds(20),
        allow: MediaAllowList(schemes: ["https", "http", "file"], hosts: [])
    ),
    logger: logger
)
let ring: SampleRing
do {
    ring = try player.play(url)
} catch {
    print("hark-media-bench: \(error)")
    exit(1)
}
var mixer = SpeakerMixer(rate: rate)
mixer.setMedia(ring)
var output = [Float](repeating: 0, count: block)
var checksum: Float = 0
let before = cpuSeconds()
let started = ContinuousClock.now
var mixed = 0
var blocks = 0
let wanted = seconds * rate
// Until the player plays, and then until the audio wanted was read (or the player stopped or failed).
while mixed < wanted {
    let state = player.status.state
    if state == .failed || state == .stopped, ring.count < block { break }
    if ring.count < block {
        // As a playback thread does: one period (a block, 20 ms) later.
        usleep(20_000)
        continue
    }
    if paced {
        let due = started + .milliseconds(mixed * 1000 / rate)
        let now = ContinuousClock.now
        if due > now { try? await Task.sleep(for: due - now) }
    }
    mixer.ducking = (blocks / 50) % 2 == 0 ? [] : [.wakeWord]
    output.withUnsafeMutableBufferPointer { buffer in
        guard let base = buffer.baseAddress else { return }
        for k in 0..<block { base[k] = 0 }
        mixer.mix(base, count: block, voiceCount: 0)
    }
    checksum += output[blocks % block]
    mixed += block
    blocks += 1
}
let cpu = cpuSeconds() - before
let wall = (ContinuousClock.now - started).seconds
player.shutdown()
let status = player.status
guard mixed > 0 else {
    print("hark-media-bench: no audio (\(status.summary))")
    exit(1)
}
let minutes = Double(mixed) / Double(rate) / 60
#if DEBUG
    let build = "debug build"
#else
    let build = "release build"
#endif
print(
    "media: \(format(cpu / minutes, 3)) s CPU per audio minute decoding and mixing (\(format(cpu / (minutes * 60) * 100, 2)) % of one core in real time); "
        + "\(format(minutes * 60, 1)) s of audio in \(format(cpu, 3)) s CPU, \(format(wall, 2)) s wall; peak RSS \(peakKiB() / 1024) MiB; "
        + "\(status.format ?? "?"); \(mixer.mediaUnderruns) underruns; \(build)\(paced ? ", paced" : "")"
)
