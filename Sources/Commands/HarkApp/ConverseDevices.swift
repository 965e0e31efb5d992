import HarkAppliance
import HarkAudio
import HarkCore
import HarkDSP
import Synchronization

/// The devices a converse run talks and listens through, behind the core's seams: a microphone (a sound card's, or
/// ``FileMicrophone`` saying the input file) and, when asked, a speaker that plays the answer as it arrives.
struct ConverseDevices: Sendable {
    let microphone: any Microphone
    let speaker: (any Speaker)?

    /// Opens what the options name: the ALSA capture and playback PCMs (a speaker's samples are then the echo
    /// canceller's reference for the microphone), or `input` as the microphone. Throws a usage error naming the
    /// device that failed.
    static func open(
        _ options: ConverseOptions,
        input: ConverseInput,
        burst: Int,
        clock: any Clock<Duration>
    ) throws -> ConverseDevices {
        let reference = options.captureDevice != nil && options.playbackDevice != nil ? EchoReference() : nil
        var speaker: AudioPlayback?
        if let device = options.playbackDevice {
            var configuration = AudioPlayback.Configuration(device: device)
            if let request = options.playbackRequest { configuration.request = request }
            let player = AudioPlayback(configuration: configuration, echoReference: reference)
            do {
                try player.start()
            } catch {
                throw ConverseUsageError("cannot open the playback device \(device): \(error)")
            }
            speaker = player
        }
        guard let device = options.captureDevice else {
            let microphone = FileMicrophone(
                input: input,
                frameSamples: options.chunkSamples,
                pace: options.fast ? 0 : 1,
                burst: burst,
                clock: clock
            )
            return ConverseDevices(microphone: microphone, speaker: speaker)
        }
        var configuration = AudioCapture.Configuration(device: device, backpressure: options.captureBackpressure)
        if let request = options.captureRequest { configuration.request = request }
        configuration.frontEnd.echoCancellation = reference != nil
        let capture = AudioCapture(configuration: configuration, echoReference: reference)
        do {
            try capture.start()
        } catch {
            speaker?.stop()
            throw ConverseUsageError("cannot open the capture device \(device): \(error)")
        }
        return ConverseDevices(microphone: capture, speaker: speaker)
    }

    /// The answer audio as it arrives; an interruption silences the speaker at once.
    func play(_ event: SessionEvent) {
        guard let speaker else { return }
        switch event {
        case .audio(let chunk): speaker.enqueue(chunk)
        case .interrupted: speaker.interrupt()
        default: break
        }
    }

    /// Closes the microphone, waits until the last answer sample has left the speaker (at most `limit` on
    /// `clock`), then closes the speaker.
    func finish(within limit: Duration, clock: any Clock<Duration>) async {
        microphone.stop()
        guard let speaker else { return }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { _ = await speaker.finishTurn() }
            group.addTask { try? await clock.sleep(for: limit) }
            _ = await group.next()
            speaker.stop()
            group.cancelAll()
        }
    }
}

/// The input audio at the microphone's rate, read in order by the one task that takes it.
final class ConverseInput: @unchecked Sendable {
    /// Samples in all (at the microphone's rate).
    let total: Int
    private let reader: WAVStreamReader?
    /// Converts the file's rate to the microphone's, block by block (nil at that rate).
    private let resampler: Resampler?
    /// Converted samples not handed out yet, and whether the resampler's tail was taken.
    private var pending: [Int16] = []
    private var flushed = false
    private let samples: [Int16]
    private var offset = 0

    init(reader: WAVStreamReader) throws {
        let rate = AudioFormat.microphone.sampleRate
        self.reader = reader
        samples = []
        total = reader.frames * rate / max(reader.sampleRate, 1)
        resampler = reader.sampleRate == rate ? nil : try Resampler(inputRate: reader.sampleRate, outputRate: rate)
    }

    init(samples: [Int16]) {
        reader = nil
        resampler = nil
        self.samples = samples
        total = samples.count
    }

    /// The next `count` samples at most; empty at the end (or when the file ends early).
    func read(_ count: Int) throws -> [Int16] {
        if let reader {
            guard let resampler else { return try reader.readMono(count) }
            while pending.count < count, !flushed {
                // About as many of the file's frames as make `count` samples at the microphone's rate.
                let frames = max(1, (count - pending.count) * reader.sampleRate / AudioFormat.microphone.sampleRate + 1)
                let block = try reader.readMono(frames)
                if block.isEmpty {
                    pending += resampler.flush()
                    flushed = true
                } else {
                    pending += try resampler.process(block)
                }
            }
            let taken = Array(pending.prefix(count))
            pending.removeFirst(taken.count)
            return taken
        }
        let end = min(offset + count, samples.count)
        defer { offset = end }
        return Array(samples[offset..<end])
    }
}

/// A microphone that says a recording: the input, in frames of `frameSamples`, paced on the injected clock (a
/// frame comes when its time in the recording comes, `burst` frames at once at the last one's time), or as fast as
/// they are taken at pace 0. Behind the core's ``Microphone``, so a file feeds a session as a sound card does.
/// Ends (nil) at the end of the input, when the file cannot be read further (its ``condition`` says why), when
/// stopped, or when the task taking frames is cancelled.
final class FileMicrophone: Microphone {
    private struct State {
        var offset = 0
        var taken = 0
        var stopped = false
        var muted = false
        var level: Float = -200
        var lastError: String?
    }

    let frameSize: Int
    let pace: Double
    private let input: ConverseInput
    private let burst: Int
    private let clock: any Clock<Duration>
    private let state = Mutex(State())
    /// Time since the first frame was asked for.
    private let elapsed = Mutex<(@Sendable () -> Duration)?>(nil)

    init(input: ConverseInput, frameSamples: Int, pace: Double, burst: Int = 1, clock: any Clock<Duration>) {
        self.input = input
        frameSize = max(1, frameSamples)
        self.pace = max(0, pace)
        self.burst = max(1, burst)
        self.clock = clock
    }

    func next() async -> CapturedFrame? {
        while true {
            let (offset, taken, stopped) = state.withLock { ($0.offset, $0.taken, $0.stopped) }
            guard !stopped, !Task.isCancelled, offset < input.total else { return nil }
            if pace > 0, taken % burst == 0 {
                let since = elapsed.withLock { elapsed in
                    if elapsed == nil { elapsed = clock.stopwatch() }
                    return elapsed!
                }
                // The burst goes when the first sample of its last frame is due.
                let last = min(offset + (burst - 1) * frameSize, input.total - 1)
                let due = AudioFormat.microphone.duration(of: last) / pace
                if due > since() {
                    guard (try? await clock.sleep(for: due - since())) != nil else { return nil }
                }
            }
            let samples: [Int16]
            do {
                samples = try input.read(min(frameSize, input.total - offset))
            } catch {
                state.withLock { $0.lastError = "\(error)" }
                return nil
            }
            guard !samples.isEmpty else { return nil }  // the file ended before its header said
            let frame = state.withLock { state -> CapturedFrame? in
                defer {
                    state.offset += samples.count
                    state.taken += 1
                }
                // While muted the recording goes on, unheard.
                guard !state.muted else { return nil }
                state.level = Float(PCM16.levelDBFS(samples))
                return CapturedFrame(
                    samples: samples,
                    sequence: state.taken,
                    capturedAt: 0,
                    readAt: 0,
                    enqueuedAt: 0,
                    level: state.level
                )
            }
            if let frame { return frame }
        }
    }

    var isMuted: Bool {
        get { state.withLock { $0.muted } }
        set { state.withLock { $0.muted = newValue } }
    }

    var level: Float { state.withLock { $0.level } }

    var condition: DeviceCondition { DeviceCondition(lastError: state.withLock { $0.lastError }) }

    var counters: MicrophoneCounters { MicrophoneCounters(frames: state.withLock { $0.taken }) }

    func stop() { state.withLock { $0.stopped = true } }
}

/// The device tools' controls for `hark converse --tools`: volume and mute kept in memory for the run, the
/// status real (version, system, network, uptime of the run).
final class InMemoryDeviceControls: DeviceControls {
    private struct State {
        var volume = 50
        var muted = false
    }
    private let state = Mutex(State())
    private let started = ContinuousClock.now

    func volume() async -> Int { state.withLock { $0.volume } }

    func setVolume(_ percent: Int) async -> Int {
        state.withLock { state in
            state.volume = max(0, min(100, percent))
            return state.volume
        }
    }

    func isMuted() async -> Bool { state.withLock { $0.muted } }

    func setMuted(_ muted: Bool) async { state.withLock { $0.muted = muted } }

    func status() async -> JSONValue {
        let (volume, muted) = state.withLock { ($0.volume, $0.muted) }
        let uptime = started.duration(to: .now).components.seconds
        return [
            "firmware_version": .string(HarkVersion.current),
            "operating_system": .string(HarkVersion.operatingSystem()),
            "network": .string(HarkVersion.networkSummary()),
            "uptime_seconds": .number(Double(uptime)),
            "volume_percent": .number(Double(volume)),
            "microphone_muted": .bool(muted),
            "board": "none (hark converse)",
        ]
    }
}
