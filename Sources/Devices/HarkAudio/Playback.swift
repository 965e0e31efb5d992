import Glibc
import HarkCore
import HarkDSP
import HarkPlatform
import Synchronization

/// Speaker playback: mono PCM16 (24 kHz, or 16 kHz) goes into a bounded jitter buffer; a dedicated thread
/// starts once the prebuffer is met, converts to the device's rate, format and channels, applies the
/// software volume (or sets the card's volume control), writes to ALSA and hands the exact samples written
/// to the echo reference. When the buffer runs dry mid-turn it plays silence (counted) and rebuffers. ``interrupt()`` silences the device
/// within one period (`snd_pcm_drop`) and discards the queue; ``finishTurn()`` returns once the last
/// sample has been played (`snd_pcm_delay` reached zero).
public final class AudioPlayback: Sendable {
    /// What to play on and how.
    public struct Configuration: Sendable {
        /// The ALSA PCM.
        public var device: AudioDevice
        /// Format, channels, rate and period to ask for.
        public var request: PCMRequest
        /// Rate of the audio handed to ``AudioPlayback/enqueue(_:)`` (other rates are converted on arrival).
        public var inputRate: Int
        /// Audio gathered before playback starts (and restarts after an underrun).
        public var prebuffer: Duration
        /// Most audio the jitter buffer holds before it drops the oldest.
        public var bufferBound: Duration
        /// Waits between attempts to reopen a device that went away.
        public var reopenBackoff: Backoff
        /// Where the volume persists (read at start, written on every change); nil to keep it in memory.
        public var volumeFile: VolumeFile?
        /// A playback volume control of the device's card (`Speaker`, `PCM`, `Master`) that
        /// ``AudioPlayback/volume`` sets instead of scaling the samples; nil (the default) for software volume.
        /// The card is the PCM's (`snd_pcm_info`); a PCM on no card (a plugin such as `pulse`) uses the
        /// control device of its own name in the device's configuration text, or else `default`. The echo
        /// canceller then sees the samples before the card's gain, and adapts to each change of volume.
        public var mixerControl: String?
        /// Pacing for a device without a clock of its own (alsa-lib's `null` plugin, or its `file` plugin over
        /// `null`). nil (the default): the device's own clock, and when it has none (it takes two device
        /// buffers without reporting any frame queued) the wall clock, as with 1. 1 writes one period per
        /// period-time, like a sound card, so a turn's last sample is played (``AudioPlayback/finishTurn()``)
        /// when it would be heard; k, k times real time. A paced playback whose thread falls more than one device buffer behind underruns as
        /// a card would: counted in `deviceUnderruns` and recovered with `snd_pcm_recover`. 0 writes answers as
        /// fast as the device takes them (file devices in tests and benchmarks); silence while the jitter buffer
        /// is dry still goes out no faster than real time.
        public var pace: Double?
        /// On ``AudioPlayback/interrupt()``, the audio about to be written next fades linearly to silence over this
        /// long before `snd_pcm_drop`, instead of a hard cut. It is clamped so that what the device still holds
        /// plus the fade ends within one period (the design's bound); when the device holds a period or more
        /// already, it drops at once. 0 turns the fade off.
        public var interruptFade: Duration
        /// The device keeps running on silence (two periods ahead of it) between turns and from the moment it
        /// opens, instead of stopping after each turn. A stream that stops starts again at a new offset against
        /// the microphone's, which the echo reference must measure anew and the canceller learn anew at the start
        /// of each answer (seconds of echo left in, when a barge-in is most likely); one that keeps running is
        /// measured once. Costs a wake-up per period while idle. An interruption still drops what the device
        /// holds, and the stream starts again. Default false.
        public var keepRunning: Bool
        /// How far the media lane falls while ducked (under the agent's voice, an alert, the wake word, the user's
        /// speech), in dB: −60 … 0, default −20.
        public var duckDecibels: Double

        public init(
            device: AudioDevice = .named("default"),
            request: PCMRequest = PCMRequest(channels: 2, rates: [48_000, 44_100, 16_000]),
            inputRate: Int = 24_000,
            prebuffer: Duration = .milliseconds(60),
            bufferBound: Duration = .seconds(60),
            reopenBackoff: Backoff = Backoff(initial: .milliseconds(100), cap: .seconds(5)),
            volumeFile: VolumeFile? = nil,
            pace: Double? = nil,
            interruptFade: Duration = .milliseconds(5),
            mixerControl: String? = nil,
            keepRunning: Bool = false,
            duckDecibels: Double = -20
        ) {
            self.device = device
            self.request = request
            self.inputRate = inputRate
            self.prebuffer = prebuffer
            self.bufferBound = bufferBound
            self.reopenBackoff = reopenBackoff
            self.volumeFile = volumeFile
            self.pace = pace
            self.interruptFade = interruptFade
            self.mixerControl = mixerControl
            self.keepRunning = keepRunning
            self.duckDecibels = duckDecibels
        }
    }

    /// Counters for diagnostics.
    public struct Statistics: Sendable, Hashable {
        /// Times the jitter buffer ran dry mid-turn (each such episode once).
        public var underruns: Int
        /// Device frames of silence written while dry.
        public var silenceFrames: Int
        /// Device frames written in all.
        public var framesWritten: Int
        /// Input samples dropped because the jitter buffer was full.
        public var dropped: Int
        /// Device underruns (`-EPIPE`) recovered.
        public var deviceUnderruns: Int
        /// Interruptions performed.
        public var interrupts: Int
        /// From the last ``AudioPlayback/interrupt()`` call until `snd_pcm_drop` returned, in ns.
        public var lastInterruptLatency: UInt64
        /// Times the device was reopened.
        public var reopens: Int
        /// Times the device went away (an outage lasts until a reopened device has played for a second).
        public var outages: Int
        /// How long the current outage has lasted; nil while the device works.
        public var failingFor: Duration?
        /// What the device agreed to, once open.
        public var format: NegotiatedFormat?
        /// The last error met, if any.
        public var lastError: String?
        /// Times the media lane's ring ran dry while attached (each episode once).
        public var mediaUnderruns: Int = 0
        /// Samples of silence the media lane played for what its ring did not have.
        public var mediaMissing: Int = 0
    }

    private struct Shared: ~Copyable {
        var head = 0
        var count = 0
        /// Input samples ever enqueued / taken (absolute indices).
        var enqueued = 0
        var consumed = 0
        var dropped = 0
        var endOfTurn = false
        var waiter: CheckedContinuation<PlaybackEnd, Never>?
        var markerHead = 0
        var markerCount = 0
        var stopped = false
        /// Set by ``AudioPlayback/interrupt()`` until the playback thread has handled it.
        var interrupted = false
        /// Input samples kept in `fadeTail` for the fade-out.
        var tailCount = 0
    }

    /// The configuration.
    public let configuration: Configuration
    private let capacity: Int
    private nonisolated(unsafe) let ring: UnsafeMutablePointer<Int16>
    /// The first input samples the interruption discarded, kept for the fade-out (guarded by `shared`).
    private nonisolated(unsafe) let fadeTail: UnsafeMutablePointer<Int16>
    private let fadeTailCapacity: Int
    private static let markerCapacity = 512
    private nonisolated(unsafe) let markers: UnsafeMutablePointer<(index: Int, time: UInt64)>
    private let shared = Mutex(Shared())
    private let reference: EchoReference?
    private let stopping = Atomic(false)
    private let interruptPending = Atomic(false)
    /// True while a turn is being written (audible), so an interruption keeps audio to fade out.
    private let audible = Atomic(false)
    private let interruptRequestedAt = Atomic<UInt64>(0)
    private let volumeBits = Atomic<UInt32>(Float(1).bitPattern)
    private let underruns = Atomic(0)
    private let silenceFrames = Atomic(0)
    private let framesWritten = Atomic(0)
    private let deviceUnderruns = Atomic(0)
    private let interrupts = Atomic(0)
    private let interruptLatency = Atomic<UInt64>(0)
    private let reopens = Atomic(0)
    private let health = DeviceHealth()
    private let details = Mutex<(format: NegotiatedFormat?, error: String?)>((nil, nil))
    private let thread = Mutex<DeviceThread?>(nil)
    /// The card's volume control while it is open (``Configuration/mixerControl``).
    private let mixer = Mutex<MixerControl?>(nil)
    /// True while the volume is the mixer's: the samples are then written unscaled.
    private let hardwareVolume = Atomic(false)
    private let wakeup = Wakeup()
    /// The lanes under the voice (alert, media) and their gains: the playback thread's alone.
    private nonisolated(unsafe) var lanes: SpeakerMixer
    /// The lanes' orders from other threads (``setAlert(_:)``, ``setMedia(_:)``), taken at the start of each block.
    private let handOff = MixerHandOff()
    /// The orders the playback thread applied last (its own).
    private nonisolated(unsafe) var appliedOrders = 0
    private nonisolated(unsafe) var appliedAlert = 0
    private nonisolated(unsafe) var heldOrders: MixerOrders?
    /// ``DuckReason`` bits set by ``setDuck(_:_:)``.
    private let ducks = Atomic<UInt8>(0)
    /// Published by the playback thread after each block.
    private let alertAsked = Atomic(false)
    private let alertSounding = Atomic(false)
    private let mediaSounding = Atomic(false)
    private let mediaUnderruns = Atomic(0)
    private let mediaMissing = Atomic(0)
    /// Queue-to-write latencies in ns of audio that found the jitter buffer empty (written by the playback
    /// thread only).
    let latencies = LatencyLog(capacity: 1 << 16)

    /// A playback with `configuration`; `echoReference`, when given, receives every sample written.
    public init(configuration: Configuration, echoReference: EchoReference? = nil) {
        self.configuration = configuration
        capacity = max(4096, Int(configuration.bufferBound.milliseconds) * configuration.inputRate / 1000)
        ring = .allocate(capacity: capacity)
        ring.initialize(repeating: 0, count: capacity)
        fadeTailCapacity =
            Int(configuration.interruptFade.milliseconds) * configuration.inputRate / 1000 + 16
        fadeTail = .allocate(capacity: fadeTailCapacity)
        fadeTail.initialize(repeating: 0, count: fadeTailCapacity)
        markers = .allocate(capacity: Self.markerCapacity)
        markers.initialize(repeating: (0, 0), count: Self.markerCapacity)
        reference = echoReference
        lanes = SpeakerMixer(rate: configuration.inputRate, duckDecibels: configuration.duckDecibels)
        if let stored = configuration.volumeFile?.load() { volumeBits.store(stored.bitPattern, ordering: .relaxed) }
    }

    deinit {
        stop()
        ring.deallocate()
        fadeTail.deallocate()
        markers.deallocate()
    }

    /// Opens the device and starts the playback thread; throws when the device cannot be opened.
    /// A playback runs once: after ``stop()``, make a new one.
    public func start() throws {
        guard thread.withLock({ $0 == nil }), !stopping.load(ordering: .acquiring) else {
            throw AudioError.invalid("the playback was already started")
        }
        let first = try PCM(
            device: configuration.device,
            capture: false,
            request: configuration.request,
            pace: configuration.pace
        )
        details.withLock { $0.format = first.format }
        if let control = configuration.mixerControl { try openMixer(control, for: first) }
        let opened = PCMBox(first)
        let started = try DeviceThread(name: "hark-playback") { [self] in run(opened) }
        thread.withLock { $0 = started }
    }

    /// Stops the thread and closes the device; a pending ``finishTurn()`` returns ``PlaybackEnd/stopped``.
    public func stop() {
        stopping.store(true, ordering: .releasing)
        wakeup.signal()
        let running = thread.withLock { box -> DeviceThread? in
            defer { box = nil }
            return box
        }
        running?.join()
        let waiter = shared.withLock { state -> CheckedContinuation<PlaybackEnd, Never>? in
            state.stopped = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: .stopped)
    }

    /// Queues audio to play. Never blocks; when the jitter buffer is full the oldest audio is dropped.
    public func enqueue(_ chunk: AudioChunk) {
        var samples = chunk.samples
        if chunk.sampleRate != configuration.inputRate {
            samples = (try? Resampler.convert(samples, from: chunk.sampleRate, to: configuration.inputRate)) ?? []
        }
        guard !samples.isEmpty else { return }
        let now = monotonicNanoseconds()
        shared.withLock { state in
            guard !state.stopped else { return }
            // Timed only when nothing waits ahead of it: audio that queues behind an answer the service sent
            // faster than real time waits for its turn to play, which is the answer's length, not latency.
            if state.count == 0, state.markerCount < Self.markerCapacity {
                markers[(state.markerHead + state.markerCount) % Self.markerCapacity] = (state.enqueued, now)
                state.markerCount += 1
            }
            for sample in samples {
                if state.count == capacity {
                    state.head = (state.head + 1) % capacity
                    state.count -= 1
                    state.dropped += 1
                    state.consumed += 1
                }
                ring[(state.head + state.count) % capacity] = sample
                state.count += 1
            }
            state.enqueued += samples.count
        }
        wakeup.signal()
    }

    /// Marks the end of the answer and waits until its last sample has been played — or it was interrupted.
    public func finishTurn() async -> PlaybackEnd {
        await withCheckedContinuation { continuation in
            let previous = shared.withLock { state -> CheckedContinuation<PlaybackEnd, Never>? in
                if state.stopped {
                    continuation.resume(returning: .stopped)
                    return nil
                }
                let previous = state.waiter
                state.waiter = continuation
                state.endOfTurn = true
                return previous
            }
            previous?.resume(returning: .interrupted)
            wakeup.signal()
        }
    }

    /// Silences the speaker within one ALSA period and discards everything queued (the first few milliseconds
    /// of it fade out when ``Configuration/interruptFade`` allows).
    public func interrupt() {
        interruptRequestedAt.store(monotonicNanoseconds(), ordering: .relaxed)
        let keep = audible.load(ordering: .relaxed) ? fadeTailCapacity : 0
        let waiter = shared.withLock { state -> CheckedContinuation<PlaybackEnd, Never>? in
            let tail = min(keep, state.count)
            if tail > 0 {
                for k in 0..<tail { fadeTail[k] = ring[(state.head + k) % capacity] }
                state.tailCount = tail
            }
            state.interrupted = true
            state.consumed += state.count
            state.head = 0
            state.count = 0
            state.markerCount = 0
            state.endOfTurn = false
            defer { state.waiter = nil }
            return state.waiter
        }
        interruptPending.store(true, ordering: .releasing)
        wakeup.signal()
        waiter?.resume(returning: .interrupted)
    }

    /// Loops `chunk` (a timer's or an alarm's sound, at most 4 s) under the voice lane until called with nil:
    /// mixed at full level while nothing else plays, ducked under the agent's voice, into the samples the device
    /// and the echo reference get. An interruption leaves it ringing.
    public func setAlert(_ chunk: AudioChunk?) {
        var samples = chunk?.samples
        if let chunk, chunk.sampleRate != configuration.inputRate {
            samples = (try? Resampler.convert(chunk.samples, from: chunk.sampleRate, to: configuration.inputRate)) ?? []
        }
        let sound = samples.flatMap { $0.isEmpty ? nil : MixerSound($0, limit: configuration.inputRate * 4) }
        alertAsked.store(sound != nil, ordering: .relaxed)
        handOff.post(alert: .some(sound))
        wakeup.signal()
    }

    /// True while an alert is asked to sound, or sounds (or fades out).
    public var isAlerting: Bool { alertAsked.load(ordering: .relaxed) || alertSounding.load(ordering: .relaxed) }

    /// Attaches `ring` as the media lane's source (music, radio), or detaches it (nil): Float samples in PCM16 scale,
    /// mono, at ``Configuration/inputRate``, written by one other thread. The lane fades in and out (no click),
    /// ducks under the agent's voice, an alert and every ``setDuck(_:_:)`` reason, and plays silence for what the
    /// ring does not have when asked (counted in ``Statistics/mediaUnderruns``), never waiting for it. While a ring is
    /// attached the device keeps running, so the echo canceller's reference is what left the speaker. Lock-free on
    /// the playback thread's side.
    public func setMedia(_ ring: SampleRing?) {
        handOff.post(media: .some(ring))
        wakeup.signal()
    }

    /// Ducks the media lane for `reason` (`active` true) or lets go of that reason: it falls by
    /// ``Configuration/duckDecibels`` within 100 ms of any reason and comes back within a second of the last one
    /// clearing. The playback thread ducks for the agent's voice and the alert by itself. An atomic bitmask: callable
    /// from any thread.
    public func setDuck(_ reason: DuckReason, _ active: Bool) {
        if active {
            ducks.bitwiseOr(reason.rawValue, ordering: .relaxed)
        } else {
            ducks.bitwiseAnd(~reason.rawValue, ordering: .relaxed)
        }
        wakeup.signal()
    }

    /// The reasons set by ``setDuck(_:_:)`` that hold now.
    public var ducking: DuckReason { DuckReason(rawValue: ducks.load(ordering: .relaxed)) }

    /// True while the media lane has a ring attached and it sounds (gives samples).
    public var mediaPlaying: Bool { mediaSounding.load(ordering: .relaxed) }

    /// The volume, 0 (silent) … 1 (unchanged). Software volume scales the samples before the echo reference,
    /// so AEC sees it; with a ``Configuration/mixerControl`` open, it sets that control instead (on the same
    /// amplitude scale; a failed set shows in `lastError`). Persisted to ``Configuration/volumeFile`` when one
    /// is set (a failed write shows in `lastError`).
    public var volume: Float {
        get { Float(bitPattern: volumeBits.load(ordering: .relaxed)) }
        set {
            let value = max(0, min(1, newValue.isNaN ? 0 : newValue))
            volumeBits.store(value.bitPattern, ordering: .relaxed)
            let result = mixer.withLock { $0?.set(value) ?? 0 }
            if result < 0 {
                details.withLock { $0.error = "\(AudioError.io("cannot set the volume control", result))" }
            }
            do {
                try configuration.volumeFile?.save(value)
            } catch {
                details.withLock { $0.error = "cannot save the volume: \(error)" }
            }
        }
    }

    /// Input audio waiting in the jitter buffer.
    public var buffered: Duration {
        let count = shared.withLock { $0.count }
        return .nanoseconds(Int64(count) * 1_000_000_000 / Int64(configuration.inputRate))
    }

    /// What the device agreed to (nil until it opened).
    public var format: NegotiatedFormat? { details.withLock { $0.format } }

    /// Counters.
    public var statistics: Statistics {
        let (format, error) = details.withLock { ($0.format, $0.error) }
        return Statistics(
            underruns: underruns.load(ordering: .relaxed),
            silenceFrames: silenceFrames.load(ordering: .relaxed),
            framesWritten: framesWritten.load(ordering: .relaxed),
            dropped: shared.withLock { $0.dropped },
            deviceUnderruns: deviceUnderruns.load(ordering: .relaxed),
            interrupts: interrupts.load(ordering: .relaxed),
            lastInterruptLatency: interruptLatency.load(ordering: .relaxed),
            reopens: reopens.load(ordering: .relaxed),
            outages: health.count,
            failingFor: health.failingFor(now: monotonicNanoseconds()),
            format: format,
            lastError: error,
            mediaUnderruns: mediaUnderruns.load(ordering: .relaxed),
            mediaMissing: mediaMissing.load(ordering: .relaxed)
        )
    }

    /// Queue-to-ALSA-write latencies in ns (enqueue to the write of a chunk's first sample, for chunks that
    /// found the jitter buffer empty: the prebuffer's wait and the path to the device): the newest 32768.
    public var writeLatencies: [UInt64] { latencies.values(from: 0).values }

    /// The queue-to-ALSA-write latencies (ns) recorded after the first `start` (the newest 32768 at most),
    /// and the `start` to pass next time: for a reader that follows them as they come.
    public func writeLatencies(from start: Int) -> (values: [UInt64], next: Int) {
        latencies.values(from: start)
    }

    // MARK: The playback thread

    /// The first device comes in a box and is taken out of it here, so that the thread holds the only reference:
    /// a device that failed is closed before it is opened again (a card's substream opens once at a time, and a
    /// reference kept by the caller for the length of the call kept it busy: every reopen failed with EBUSY).
    private func run(_ opened: PCMBox) {
        var pacing = ReopenPacing(configuration.reopenBackoff)
        var pcm = opened.take()
        while !stopping.load(ordering: .acquiring) {
            takeOrders()
            if pcm == nil {
                do {
                    pcm = try PCM(
                        device: configuration.device,
                        capture: false,
                        request: configuration.request,
                        pace: configuration.pace
                    )
                    reopens.add(1, ordering: .relaxed)
                    let format = pcm!.format
                    details.withLock { $0.format = format }
                    // The card may have come back under another number (a USB speaker plugged in again).
                    if let control = configuration.mixerControl {
                        do {
                            try openMixer(control, for: pcm!)
                        } catch {
                            closeMixer()
                            details.withLock { $0.error = "\(error); scaling the samples meanwhile" }
                        }
                    }
                } catch {
                    details.withLock { $0.error = "\(error)" }
                    health.failed(now: monotonicNanoseconds())
                    pacing.wait(on: wakeup) { stopping.load(ordering: .acquiring) }
                    continue
                }
            }
            guard let device = pcm else { continue }
            do {
                let engine = try PlaybackPipeline(
                    format: device.format,
                    inputRate: configuration.inputRate,
                    fade: configuration.interruptFade
                )
                play(device, engine)
                reference?.playbackStopped()
                // A device that played for a second is reopened at once and backs off afresh; one that failed
                // sooner (it opens, then fails at once) waits its turn of the backoff first, longer each time.
                if engine.run.sustained {
                    pacing.reset()
                } else {
                    pacing.wait(on: wakeup) { stopping.load(ordering: .acquiring) }
                }
            } catch {
                details.withLock { $0.error = "\(error)" }
                // The thread ends: the device is gone for good (the appliance gives up after a while).
                health.failed(now: monotonicNanoseconds())
                break
            }
            pcm = nil
        }
    }

    /// Opens the volume control `name` of `pcm`'s card (see ``Configuration/mixerControl``) and sets it to the
    /// volume; the samples are written unscaled from then on.
    private func openMixer(_ name: String, for pcm: PCM) throws {
        let card = pcm.card
        let device = configuration.device
        let level = volume
        try mixer.withLock { slot in
            let control: MixerControl
            if card >= 0 {
                control = try MixerControl(card: "hw:\(card)", name: name)
            } else if let text = device.configuration {
                control = try MixerControl(card: device.name, configuration: text, name: name)
            } else {
                control = try MixerControl(name: name)
            }
            let result = control.set(level)
            guard result == 0 else { throw AudioError.io("cannot set the \(name) control on \(control.card)", result) }
            slot = control
        }
        hardwareVolume.store(true, ordering: .relaxed)
    }

    /// Back to software volume (the card's control could not be opened again).
    private func closeMixer() {
        hardwareVolume.store(false, ordering: .relaxed)
        mixer.withLock { $0 = nil }
    }

    private enum Phase { case waiting, playing, draining }

    /// Plays until stopped or the device is lost.
    private func play(_ pcm: PCM, _ engine: PlaybackPipeline) {
        let format = pcm.format
        let period = format.periodFrames
        // Wall time of device frames: a paced file device runs `pace` times faster than real time, and
        // waits on the real-time scale would make it underrun at each one.
        let pace = configuration.pace ?? 0
        let nanosecondsPerFrame = 1e9 / (Double(format.rate) * (pace > 0 ? pace : 1))
        let periodNanoseconds = UInt64(Double(period) * nanosecondsPerFrame)
        let prebuffer = max(1, Int(configuration.prebuffer.milliseconds) * configuration.inputRate / 1000)
        var phase = Phase.waiting
        // Keep the device fed with silence while there is nothing to play: mid-turn when the jitter buffer ran dry,
        // and between turns with keepRunning (from the start: the first write of a period starts the stream).
        var starved = configuration.keepRunning
        // keepRunning: device frames of silence written behind the turn being drained.
        var trailingSilence = 0
        // The stream runs on the lanes alone (an alert, media; no turn): once they end it stops as after a turn.
        var laneStream = false
        while !stopping.load(ordering: .acquiring) {
            takeOrders()
            if interruptPending.exchange(false, ordering: .acquiring) {
                guard fadeOut(pcm, engine, period: period, playing: phase == .playing) else { return }
                audible.store(false, ordering: .relaxed)
                pcm.dropAndPrepare()
                reference?.playbackStopped()
                let requested = interruptRequestedAt.load(ordering: .relaxed)
                interruptLatency.store(monotonicNanoseconds() &- requested, ordering: .relaxed)
                interrupts.add(1, ordering: .relaxed)
                engine.reset()
                lanes.restartFades()
                lanes.voiceWaiting = false
                phase = .waiting
                starved = configuration.keepRunning
                continue
            }
            switch phase {
            case .waiting:
                let (available, end) = shared.withLock { ($0.count, $0.endOfTurn) }
                // The voice's audio is here: the media lane ducks ahead of it (a block or two of the lanes first,
                // while it is above its ducked level), so the voice never plays over media at full level.
                lanes.voiceWaiting = available > 0
                let ready = available >= prebuffer || (end && available > 0)
                if ready && lanes.isActive && !lanes.readyForVoice {
                    guard writeSilence(pcm, engine, period: period) else { return }
                } else if ready {
                    phase = .playing
                    audible.store(true, ordering: .relaxed)
                    starved = false
                } else if end {
                    phase = .draining
                } else if starved || lanes.isActive {
                    laneStream = !starved
                    // Dry mid-turn, or idle with keepRunning: keep the device fed with silence, two periods ahead
                    // of it, paced by its own fill level. Wait only when it has them: a device without a clock of
                    // its own (a paced file) reports none queued and is paced by its writes, and a wait on top of
                    // each would leave it a period late every time, an underrun whenever the thread is scheduled
                    // late. One asked to run unpaced (pace 0) takes whatever is written at once: a period of
                    // silence per period of real time then, or the thread would spin writing it.
                    if pcm.delayFrames() < 2 * period {
                        guard writeSilence(pcm, engine, period: period) else { return }
                        if !pcm.isPaced && pcm.delayFrames() == 0 { wakeup.wait(nanoseconds: periodNanoseconds) }
                    } else {
                        wakeup.wait(nanoseconds: periodNanoseconds)
                    }
                } else if laneStream {
                    // The lanes ended: what they wrote plays out, then the stream stops as after a turn.
                    let remaining = pcm.delayFrames()
                    if remaining > 0 && pcm.isRunning {
                        let wait = min(periodNanoseconds, UInt64(Double(remaining) * nanosecondsPerFrame))
                        wakeup.wait(nanoseconds: max(100_000, wait))
                    } else {
                        pcm.dropAndPrepare()
                        reference?.playbackStopped()
                        engine.reset()
                        laneStream = false
                    }
                } else {
                    wakeup.wait(nanoseconds: periodNanoseconds * 4)
                }
            case .playing:
                let filled = fill(engine, period: period)
                if filled == .interrupted { continue }
                if filled == .dry {
                    let end = shared.withLock { $0.endOfTurn }
                    if end {
                        if engine.pending > 0 {
                            padToPeriod(engine, period: period)
                            guard write(pcm, engine, frames: period) else { return }
                        }
                        lanes.voiceWaiting = false
                        phase = .draining
                        audible.store(false, ordering: .relaxed)
                        continue
                    }
                    if engine.pending > 0 {
                        let filled = engine.pending
                        padToPeriod(engine, period: period)
                        guard write(pcm, engine, frames: period) else { return }
                        silenceFrames.add(period - filled, ordering: .relaxed)
                    }
                    underruns.add(1, ordering: .relaxed)
                    starved = true
                    phase = .waiting
                    audible.store(false, ordering: .relaxed)
                    continue
                }
                guard write(pcm, engine, frames: period) else { return }
                logLatencies()
            case .draining:
                if pcm.isPrepared && pcm.delayFrames() > 0 { pcm.start() }
                let remaining = pcm.delayFrames()
                let keep = (configuration.keepRunning || lanes.isActive) && pcm.isRunning
                if keep && remaining > trailingSilence {
                    // The turn's last frames are still ahead of the silence behind them: keep it fed until heard.
                    if remaining < 2 * period {
                        guard writeSilence(pcm, engine, period: period) else { return }
                        trailingSilence += period
                    } else {
                        let frames = min(period, remaining - trailingSilence, remaining - 2 * period)
                        wakeup.wait(nanoseconds: max(100_000, UInt64(Double(frames) * nanosecondsPerFrame)))
                    }
                } else if keep || remaining <= 0 || !pcm.isRunning {
                    if keep {
                        // The lanes play on through the turn's end: their stream (and the resampler's) continues.
                        if !lanes.isActive { engine.endTurn() }
                    } else {
                        pcm.dropAndPrepare()
                        reference?.playbackStopped()
                        engine.reset()
                    }
                    trailingSilence = 0
                    let played = monotonicNanoseconds()
                    let waiter = shared.withLock { state -> CheckedContinuation<PlaybackEnd, Never>? in
                        state.endOfTurn = false
                        defer { state.waiter = nil }
                        return state.waiter
                    }
                    waiter?.resume(returning: .played(at: played))
                    logLatencies()
                    phase = .waiting
                    starved = configuration.keepRunning && keep
                    laneStream = keep && !starved
                } else {
                    let wait = min(periodNanoseconds, UInt64(Double(remaining) * nanosecondsPerFrame))
                    wakeup.wait(nanoseconds: max(100_000, wait))
                }
            }
        }
    }

    private enum Fill { case complete, dry, interrupted }

    /// Pulls input until one period of device frames is ready; `.dry` when the buffer ran dry first,
    /// `.interrupted` when an interruption is waiting to be handled.
    private func fill(_ engine: PlaybackPipeline, period: Int) -> Fill {
        while engine.pending < period {
            let want = min(engine.sourceRoom, max(1, (period - engine.pending) * engine.inputRate / engine.rate + 1))
            let got = shared.withLock { state -> Int in
                if state.interrupted { return -1 }
                let n = min(want, state.count)
                for k in 0..<n { engine.source[k] = Float(ring[(state.head + k) % capacity]) }
                state.head = (state.head + n) % capacity
                state.count -= n
                state.consumed += n
                return n
            }
            if got < 0 { return .interrupted }
            if got == 0 { return .dry }
            lanes.mix(engine.source, count: got, voiceCount: got)
            engine.resample(got)
        }
        return .complete
    }

    /// Before the drop of an interruption: when a turn was `playing`, writes what comes next (the output the
    /// thread holds, then the input the interruption kept) under a linear ramp to silence, if what the device
    /// still holds plus the ramp ends within one period; then waits until it has been played. False when the
    /// device was lost.
    private func fadeOut(_ pcm: PCM, _ engine: PlaybackPipeline, period: Int, playing: Bool) -> Bool {
        let tail = shared.withLock { state -> Int in
            let n = playing ? min(state.tailCount, engine.sourceRoom) : 0
            for k in 0..<n { engine.source[k] = Float(fadeTail[k]) }
            state.tailCount = 0
            state.interrupted = false
            return n
        }
        let length = min(engine.fadeFrames, period - pcm.delayFrames())
        guard playing, length > 0, engine.pending + tail > 0 else { return true }
        engine.resample(tail)
        if engine.pending < length { engine.silence(frames: length - engine.pending) }
        engine.ramp(frames: length)
        guard write(pcm, engine, frames: length) else { return false }
        if pcm.isPrepared { pcm.start() }
        let remaining = pcm.delayFrames()
        if remaining > 0 && pcm.isRunning {
            let wait = min(UInt64(remaining), UInt64(period)) * 1_000_000_000 / UInt64(engine.rate)
            sleepUntil(monotonicNanoseconds() &+ wait)
        }
        return true
    }

    /// Takes the lanes' newest orders and the duck reasons (at the start of each block: two atomic loads when
    /// nothing changed), and publishes what the lanes do for other threads.
    private func takeOrders() {
        if let orders = handOff.take(newerThan: appliedOrders) {
            if orders.alertSerial != appliedAlert {
                lanes.setAlert(orders.alert)
                appliedAlert = orders.alertSerial
            }
            lanes.setMedia(orders.media)
            appliedOrders = orders.generation
            heldOrders = orders
        }
        if let held = heldOrders, lanes.holdsOnly(alert: held.alert, media: held.media) {
            handOff.hold(from: held.generation)
        }
        lanes.ducking = DuckReason(rawValue: ducks.load(ordering: .relaxed))
        alertSounding.store(lanes.isAlerting, ordering: .relaxed)
        mediaSounding.store(lanes.mediaPlaying, ordering: .relaxed)
        mediaUnderruns.store(lanes.mediaUnderruns, ordering: .relaxed)
        mediaMissing.store(lanes.mediaMissing, ordering: .relaxed)
    }

    /// Pads the pending output to a whole period: with the lanes (an alert, media) while they sound, else silence.
    private func padToPeriod(_ engine: PlaybackPipeline, period: Int) {
        guard lanes.isActive else {
            engine.padToPeriod(period)
            return
        }
        while engine.pending < period {
            let want = min(engine.sourceRoom, max(1, (period - engine.pending) * engine.inputRate / engine.rate + 1))
            engine.source.update(repeating: 0, count: want)
            lanes.mix(engine.source, count: want, voiceCount: 0)
            engine.resample(want)
        }
    }

    /// Writes a period of silence (counted in ``Statistics/silenceFrames``), or of the lanes while they sound.
    private func writeSilence(_ pcm: PCM, _ engine: PlaybackPipeline, period: Int) -> Bool {
        if lanes.isActive {
            padToPeriod(engine, period: period)
            return write(pcm, engine, frames: period)
        }
        engine.silence(frames: period)
        guard write(pcm, engine, frames: period) else { return false }
        silenceFrames.add(period, ordering: .relaxed)
        return true
    }

    /// Writes the first `frames` pending device frames (volume applied), feeds the echo reference, keeps the rest.
    private func write(_ pcm: PCM, _ engine: PlaybackPipeline, frames: Int) -> Bool {
        engine.render(frames: frames, volume: hardwareVolume.load(ordering: .relaxed) ? 1 : volume)
        var offset = 0
        while offset < frames {
            let result = pcm.write(engine.raw + offset * engine.bytesPerFrame, frames: frames - offset)
            if result >= 0 {
                offset += result
                continue
            }
            if result == -Int(EAGAIN) { continue }
            if result == -Int(EPIPE) { deviceUnderruns.add(1, ordering: .relaxed) }
            engine.continuous = false
            if pcm.recover(result) == 0 { continue }
            details.withLock { $0.error = "playback write failed: \(AudioError.io("snd_pcm_writei", Int32(result)))" }
            health.failed(now: monotonicNanoseconds())
            return false
        }
        framesWritten.add(frames, ordering: .relaxed)
        engine.run.transferred(frames, health: health)
        if let reference {
            let count = engine.referenceBlock(frames: frames)
            reference.write(engine.reference, count: count, continuous: engine.continuous)
            engine.runFrames = (engine.continuous ? engine.runFrames : 0) + frames
            // Where the stream is: what it has taken less what it still holds, once it runs (a prepared stream's
            // delay is what waits for the start). Not when the thread was preempted while reading it.
            if pcm.isRunning {
                let asked = monotonicNanoseconds()
                let delay = pcm.delayFrames()
                let now = monotonicNanoseconds()
                if now &- asked <= EchoReference.readingLimit {
                    reference.playbackPosition(
                        played: Double(engine.runFrames - delay) * Double(AudioFormat.microphone.sampleRate)
                            / Double(engine.rate),
                        at: now,
                        card: pcm.card
                    )
                }
            }
        }
        engine.continuous = true
        engine.consume(frames: frames)
        return true
    }

    private func logLatencies() {
        let now = monotonicNanoseconds()
        shared.withLock { state in
            while state.markerCount > 0 {
                let marker = markers[state.markerHead]
                guard marker.index < state.consumed else { break }
                latencies.append(now &- marker.time)
                state.markerHead = (state.markerHead + 1) % Self.markerCapacity
                state.markerCount -= 1
            }
        }
    }
}

/// Buffers and converters of one open playback device, allocated at open time.
private final class PlaybackPipeline {
    let rate: Int
    let inputRate: Int
    let channels: Int
    let format: SampleFormat
    let bytesPerFrame: Int
    let source: UnsafeMutablePointer<Float>
    let sourceRoom: Int
    let output: UnsafeMutablePointer<Float>
    let outputRoom: Int
    let raw: UnsafeMutableRawPointer
    let referenceInput: UnsafeMutablePointer<Float>
    let referenceFloat: UnsafeMutablePointer<Float>
    let reference: UnsafeMutablePointer<Int16>
    let referenceRoom: Int
    let resampler: StreamResampler
    let referenceResampler: StreamResampler
    var pending = 0
    /// What the device has played since it was opened.
    var run: RunSinceOpen
    /// True while the device runs on from the previous write (false after it was started again).
    var continuous = false
    /// Device frames written since the device was last started.
    var runFrames = 0
    /// Length of the fade-out of an interruption, in device frames (at most a period).
    let fadeFrames: Int

    init(format: NegotiatedFormat, inputRate: Int, fade: Duration) throws {
        rate = format.rate
        run = RunSinceOpen(rate: format.rate)
        fadeFrames = min(format.periodFrames, Int(fade.milliseconds) * format.rate / 1000)
        self.inputRate = inputRate
        channels = format.channels
        self.format = format.format
        bytesPerFrame = format.bytesPerFrame
        resampler = try StreamResampler(inputRate: inputRate, outputRate: format.rate)
        referenceResampler = try StreamResampler(inputRate: format.rate, outputRate: AudioFormat.microphone.sampleRate)
        let period = format.periodFrames
        sourceRoom = max(64, period * inputRate / format.rate + 16)
        source = .allocate(capacity: sourceRoom)
        outputRoom = period * 2 + resampler.maximumOutput(forInput: sourceRoom)
        output = .allocate(capacity: outputRoom)
        raw = .allocate(byteCount: outputRoom * format.bytesPerFrame, alignment: 16)
        referenceInput = .allocate(capacity: outputRoom)
        referenceRoom = referenceResampler.maximumOutput(forInput: outputRoom)
        referenceFloat = .allocate(capacity: referenceRoom)
        reference = .allocate(capacity: referenceRoom)
    }

    deinit {
        source.deallocate()
        output.deallocate()
        raw.deallocate()
        referenceInput.deallocate()
        referenceFloat.deallocate()
        reference.deallocate()
    }

    /// Resamples `count` samples of ``source`` onto the pending output.
    func resample(_ count: Int) {
        pending += resampler.process(source, count: count, into: output + pending, room: outputRoom - pending)
    }

    /// Appends `frames` of silence.
    func silence(frames: Int) {
        let n = min(frames, outputRoom - pending)
        (output + pending).update(repeating: 0, count: n)
        pending += n
    }

    /// Scales the first `frames` pending samples by a linear ramp from just below 1 to just above 0:
    /// sample k by (frames − k) / (frames + 1).
    func ramp(frames: Int) {
        for k in 0..<frames { output[k] *= Float(frames - k) / Float(frames + 1) }
    }

    /// Pads the pending output with silence to a whole period.
    func padToPeriod(_ period: Int) {
        if pending < period { silence(frames: period - pending) }
    }

    /// Interleaves the first `frames` pending samples into ``raw`` with the volume applied; keeps the
    /// mono values (what the speaker gets) for the reference.
    func render(frames: Int, volume: Float) {
        for frame in 0..<frames {
            let value = output[frame] * volume
            referenceInput[frame] = value
            for channel in 0..<channels {
                SampleConversion.store(value, raw, frame * channels + channel, format)
            }
        }
    }

    /// The last rendered block at 16 kHz PCM16 in ``reference``; returns its length.
    func referenceBlock(frames: Int) -> Int {
        let count = referenceResampler.process(referenceInput, count: frames, into: referenceFloat, room: referenceRoom)
        for k in 0..<count { reference[k] = SampleConversion.clip16(referenceFloat[k]) }
        return count
    }

    /// Drops the first `frames` pending samples (they were written).
    func consume(frames: Int) {
        pending -= frames
        if pending > 0 { output.update(from: output + frames, count: pending) }
    }

    /// Forgets pending output and resampler history (after an interruption or a drained turn).
    func reset() {
        endTurn()
        continuous = false
    }

    /// A turn ended on a device that keeps running: the next turn's samples follow on the same stream.
    func endTurn() {
        pending = 0
        resampler.reset()
    }
}

/// Latencies a single thread records without locking or allocating: a ring of the newest `capacity`
/// values, which readers copy out (a reader that falls more than half the ring behind skips ahead).
final class LatencyLog: @unchecked Sendable {
    private let storage: UnsafeMutablePointer<UInt64>
    private let capacity: Int
    /// Values ever recorded.
    private let count = Atomic(0)

    init(capacity: Int) {
        self.capacity = capacity
        storage = .allocate(capacity: capacity)
        storage.initialize(repeating: 0, count: capacity)
    }

    deinit { storage.deallocate() }

    /// Adds one value, over the oldest once the ring is full (the recording thread only).
    func append(_ value: UInt64) {
        let index = count.load(ordering: .relaxed)
        storage[index % capacity] = value
        count.store(index + 1, ordering: .releasing)
    }

    /// The values recorded after the first `start` (the newest half ring at most) and the count to pass next time.
    func values(from start: Int) -> (values: [UInt64], next: Int) {
        let end = count.load(ordering: .acquiring)
        let first = max(start, end - capacity / 2, 0)
        guard first < end else { return ([], end) }
        return ((first..<end).map { storage[$0 % capacity] }, end)
    }
}
