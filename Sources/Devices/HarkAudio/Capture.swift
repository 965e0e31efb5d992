import Glibc
import HarkCore
import HarkPlatform
import Synchronization

/// Microphone capture: an ALSA PCM read on a dedicated thread, mapped to mono, resampled to 16 kHz,
/// echo-cancelled and denoised as configured, cut into fixed frames and put into a bounded queue that drops
/// the oldest frame when the consumer falls behind. Overruns recover with `snd_pcm_recover`; a device that
/// goes away is reopened with backoff. The capture thread allocates only when it (re)opens the device.
public final class AudioCapture: Sendable {
    /// What to capture and how.
    public struct Configuration: Sendable {
        /// The ALSA PCM.
        public var device: AudioDevice
        /// Format, channels, rate and period to ask for.
        public var request: PCMRequest
        /// How the device's channels become one.
        public var channelMap: ChannelMap
        /// Duration of one output frame (at 16 kHz: 20 ms is 320 samples).
        public var frameDuration: Duration
        /// Most audio the queue holds before it drops the oldest frame.
        public var queueBound: Duration
        /// Echo cancellation, noise suppression, AGC.
        public var frontEnd: FrontEndOptions
        /// Waits between attempts to reopen a device that went away.
        public var reopenBackoff: Backoff
        /// For sources faster than real time (a file through alsa-lib's `file` plugin, in tests and benchmarks):
        /// when the queue is full the capture waits for the consumer instead of dropping the oldest frame.
        /// Never for a live device, which would overrun meanwhile.
        public var backpressure: Bool
        /// Pacing for a device without a clock of its own (alsa-lib's `file` plugin over `null`): 0 reads as fast
        /// as the device gives (the default, right for sound cards); 1 reads one period per period-time, like a
        /// sound card; k, k times real time. A paced capture whose thread falls more than one device buffer
        /// behind (with ``backpressure``, a stalled consumer) overruns as a card would: counted and recovered
        /// with `snd_pcm_recover`.
        public var pace: Double

        public init(
            device: AudioDevice = .named("default"),
            request: PCMRequest = PCMRequest(),
            channelMap: ChannelMap = .pick(0),
            frameDuration: Duration = .milliseconds(20),
            queueBound: Duration = .seconds(2),
            frontEnd: FrontEndOptions = FrontEndOptions(),
            reopenBackoff: Backoff = Backoff(initial: .milliseconds(100), cap: .seconds(5)),
            backpressure: Bool = false,
            pace: Double = 0
        ) {
            self.device = device
            self.request = request
            self.channelMap = channelMap
            self.frameDuration = frameDuration
            self.queueBound = queueBound
            self.frontEnd = frontEnd
            self.reopenBackoff = reopenBackoff
            self.backpressure = backpressure
            self.pace = pace
        }
    }

    /// Counters for diagnostics.
    public struct Statistics: Sendable, Hashable {
        /// Frames produced (including those dropped or muted).
        public var frames: Int
        /// Frames dropped because the queue was full.
        public var dropped: Int
        /// Overruns (`-EPIPE`) recovered.
        public var overruns: Int
        /// Times the device was reopened after it went away.
        public var reopens: Int
        /// Times the device went away (an outage lasts until a reopened device has run for a second).
        public var outages: Int
        /// How long the current outage has lasted; nil while the device works.
        public var failingFor: Duration?
        /// What the device agreed to, once open.
        public var format: NegotiatedFormat?
        /// The last error met, if any.
        public var lastError: String?
    }

    /// The configuration.
    public let configuration: Configuration
    /// Samples per output frame at 16 kHz.
    public let frameSize: Int
    private let queue: FrameQueue
    private let reference: EchoReference?
    private let stopping = Atomic(false)
    private let muted = Atomic(false)
    private let levelBits = Atomic<UInt32>(Float(-200).bitPattern)
    private let frames = Atomic(0)
    private let overruns = Atomic(0)
    private let reopens = Atomic(0)
    private let health = DeviceHealth()
    private let details = Mutex<(format: NegotiatedFormat?, error: String?)>((nil, nil))
    private let thread = Mutex<DeviceThread?>(nil)
    private let wakeup = Wakeup()

    /// A capture with `configuration`; `echoReference`, when given, is what the playback wrote (for AEC).
    public init(configuration: Configuration, echoReference: EchoReference? = nil) {
        self.configuration = configuration
        frameSize = max(1, AudioFormat.microphone.samples(in: configuration.frameDuration))
        queue = FrameQueue(
            frameSize: frameSize,
            capacity: max(
                1,
                Int(configuration.queueBound.milliseconds / max(1, configuration.frameDuration.milliseconds))
            )
        )
        reference = echoReference
    }

    deinit { stop() }

    /// Opens the device and starts the capture thread. When the device cannot be opened, throws — unless
    /// `waitForDevice`, in which case the thread keeps trying with backoff. A capture runs once: after
    /// ``stop()``, make a new one.
    public func start(waitForDevice: Bool = false) throws {
        guard thread.withLock({ $0 == nil }), !stopping.load(ordering: .acquiring) else {
            throw AudioError.invalid("the capture was already started")
        }
        var first: PCM?
        do {
            first = try PCM(
                device: configuration.device,
                capture: true,
                request: configuration.request,
                pace: configuration.pace
            )
            _ = try Pipeline(configuration: configuration, format: first!.format, frameSize: frameSize)
            details.withLock { $0.format = first!.format }
        } catch let error as AudioError where waitForDevice && error.isOpenFailure {
            details.withLock { $0.error = error.description }
            health.failed(now: monotonicNanoseconds())
        }
        let opened = PCMBox(first)
        let started = try DeviceThread(name: "hark-capture") { [self] in run(opened) }
        thread.withLock { $0 = started }
    }

    /// Stops the thread and closes the device; the consumer then gets the frames left, then nil.
    public func stop() {
        stopping.store(true, ordering: .releasing)
        wakeup.signal()
        queue.room.signal()
        let running = thread.withLock { box -> DeviceThread? in
            defer { box = nil }
            return box
        }
        running?.join()
        queue.close()
    }

    /// The next frame; nil after ``stop()`` once the queue is empty.
    public func next() async -> CapturedFrame? { await queue.next() }

    /// While muted no frame leaves the capture (and the level reads −200 dBFS).
    public var isMuted: Bool {
        get { muted.load(ordering: .relaxed) }
        set { muted.store(newValue, ordering: .relaxed) }
    }

    /// Frames that wait before ``next()`` is woken: 1 delivers each at once; more wakes the reader once per so many
    /// (an idle appliance spends much of its time being woken). Bounded to 1...8.
    public var deliveryBatch: Int {
        get { queue.batch.load(ordering: .relaxed) }
        set { queue.batch.store(max(1, min(8, newValue)), ordering: .relaxed) }
    }

    /// Level of the latest frame in dBFS (the input meter, for LEDs and diagnostics).
    public var level: Float { Float(bitPattern: levelBits.load(ordering: .relaxed)) }

    /// What the device agreed to (nil until it opened).
    public var format: NegotiatedFormat? { details.withLock { $0.format } }

    /// Counters.
    public var statistics: Statistics {
        let (format, error) = details.withLock { ($0.format, $0.error) }
        return Statistics(
            frames: frames.load(ordering: .relaxed),
            dropped: queue.dropped,
            overruns: overruns.load(ordering: .relaxed),
            reopens: reopens.load(ordering: .relaxed),
            outages: health.count,
            failingFor: health.failingFor(now: monotonicNanoseconds()),
            format: format,
            lastError: error
        )
    }

    // MARK: The capture thread

    /// The first device comes in a box and is taken out of it here, so that the thread holds the only reference:
    /// a device that failed is closed before it is opened again (a card's substream opens once at a time, and a
    /// reference kept by the caller for the length of the call kept it busy: every reopen failed with EBUSY).
    private func run(_ opened: PCMBox) {
        var pacing = ReopenPacing(configuration.reopenBackoff)
        var pcm = opened.take()
        var sequence = 0
        var everOpened = pcm != nil
        while !stopping.load(ordering: .acquiring) {
            if pcm == nil {
                do {
                    pcm = try PCM(
                        device: configuration.device,
                        capture: true,
                        request: configuration.request,
                        pace: configuration.pace
                    )
                    if everOpened { reopens.add(1, ordering: .relaxed) }
                    everOpened = true
                    let format = pcm!.format
                    details.withLock { $0.format = format }
                } catch {
                    details.withLock { $0.error = "\(error)" }
                    health.failed(now: monotonicNanoseconds())
                    pacing.wait(on: wakeup) { stopping.load(ordering: .acquiring) }
                    continue
                }
            }
            guard let device = pcm else { continue }
            let pipeline: Pipeline
            do {
                pipeline = try Pipeline(configuration: configuration, format: device.format, frameSize: frameSize)
            } catch {
                details.withLock { $0.error = "\(error)" }
                // The thread ends: the device is gone for good (the appliance gives up after a while).
                health.failed(now: monotonicNanoseconds())
                break
            }
            read(device, pipeline, sequence: &sequence)
            // A device that ran for a second is reopened at once and backs off afresh; one that failed sooner
            // (it opens, then fails at once) waits its turn of the backoff first, longer each time.
            if pipeline.run.sustained {
                pacing.reset()
            } else {
                pacing.wait(on: wakeup) { stopping.load(ordering: .acquiring) }
            }
            pcm = nil
        }
        queue.close()
    }

    /// Reads until stopped or the device is lost.
    private func read(_ pcm: PCM, _ pipeline: Pipeline, sequence: inout Int) {
        let format = pcm.format
        let period = format.periodFrames
        let nanosecondsPerFrame = 1_000_000_000 / Double(format.rate)
        let lead = AudioFormat.microphone.samples(in: configuration.frontEnd.referenceLead)
        let rateRatio = Double(AudioFormat.microphone.sampleRate) / Double(format.rate)
        var lastBlockEnd: UInt64 = 0
        var settled = 0
        // The echo reference is aligned by sample counts: the index (in 16 kHz samples) of the next sample to go
        // into a frame, of the sample this run of the stream began at, and the device frames read in this run.
        var taken = 0
        var runStart = 0.0
        var runFrames = 0
        var restarted = true
        while !stopping.load(ordering: .acquiring) {
            if configuration.backpressure && queue.isFull {
                queue.room.wait(nanoseconds: 5_000_000)
                continue
            }
            let count = pcm.read(pipeline.raw, frames: period)
            if count < 0 {
                if count == -Int(EAGAIN) { continue }
                if count == -Int(EPIPE) { overruns.add(1, ordering: .relaxed) }
                lastBlockEnd = 0
                restarted = true
                runStart = Double(taken + pipeline.pending)
                runFrames = 0
                if pcm.recover(count) == 0 { continue }
                let message = "capture read failed: \(AudioError.io("snd_pcm_readi", Int32(count)))"
                details.withLock { $0.error = message }
                health.failed(now: monotonicNanoseconds())
                return
            }
            guard count > 0 else { continue }
            pipeline.run.transferred(count, health: health)
            runFrames += count
            let asked = monotonicNanoseconds()
            let delay = pcm.delayFrames()
            let readAt = monotonicNanoseconds()
            // For the echo reference: the sample at the converter now, what was read plus what waits to be (not
            // when the thread was preempted while reading it).
            if let reference, readAt &- asked <= EchoReference.readingLimit {
                reference.capturePosition(
                    captured: runStart + Double(runFrames + delay) * rateRatio,
                    at: readAt,
                    restarted: restarted,
                    card: pcm.card
                )
                restarted = false
            }
            // When the newest sample read was at the converter (for the frames' timestamps): measured from the
            // delay when the stream (re)starts, then the stream's own sample clock, following the measurement
            // closely for a second and then by 1/256 of the difference and at most 0.25 ms per period (clock
            // drift; delay reports jitter).
            let measured = readAt &- UInt64(Double(delay) * nanosecondsPerFrame)
            let predicted = lastBlockEnd &+ UInt64(Double(count) * nanosecondsPerFrame)
            let young = settled < format.rate
            let limit: Int64 = young ? .max : 250_000
            let step = max(-limit, min(limit, Int64(bitPattern: measured &- predicted) / (young ? 8 : 256)))
            let blockEnd = lastBlockEnd == 0 ? measured : predicted &+ UInt64(bitPattern: step)
            settled = lastBlockEnd == 0 ? 0 : settled + count
            lastBlockEnd = blockEnd
            pipeline.ingest(frames: count)
            while pipeline.pending >= frameSize {
                // The accumulator's newest sample was at the converter at blockEnd.
                let frameEnd = blockEnd &- UInt64(pipeline.pending - frameSize) * 62_500
                pipeline.takeFrame()
                var referenceIndex: Int?
                if let reference {
                    referenceIndex = reference.read(
                        into: pipeline.reference,
                        count: frameSize,
                        captureIndex: taken,
                        lead: lead
                    )
                }
                taken += frameSize
                pipeline.canceller?.process(
                    microphone: pipeline.frame,
                    reference: pipeline.reference,
                    output: pipeline.frame
                )
                let level = pipeline.frameLevel()
                frames.add(1, ordering: .relaxed)
                if muted.load(ordering: .relaxed) {
                    levelBits.store(Float(-200).bitPattern, ordering: .relaxed)
                } else {
                    levelBits.store(level.bitPattern, ordering: .relaxed)
                    queue.push(
                        pipeline.frame,
                        sequence: sequence,
                        capturedAt: frameEnd,
                        readAt: readAt,
                        level: level,
                        referenceIndex: referenceIndex
                    )
                }
                sequence += 1
            }
        }
    }
}

/// Buffers and DSP state of one open capture device, allocated at open time.
private final class Pipeline {
    let raw: UnsafeMutableRawPointer
    let mono: UnsafeMutablePointer<Float>
    let accumulator: UnsafeMutablePointer<Float>
    let accumulatorRoom: Int
    let frame: UnsafeMutablePointer<Int16>
    let reference: UnsafeMutablePointer<Int16>
    let mixer: ChannelMixer
    let resampler: StreamResampler
    let canceller: EchoCanceller?
    let frameSize: Int
    let period: Int
    var pending = 0
    /// What the device has read since it was opened.
    var run: RunSinceOpen

    init(configuration: AudioCapture.Configuration, format: NegotiatedFormat, frameSize: Int) throws {
        mixer = try ChannelMixer(map: configuration.channelMap, format: format.format, deviceChannels: format.channels)
        resampler = try StreamResampler(inputRate: format.rate, outputRate: AudioFormat.microphone.sampleRate)
        self.frameSize = frameSize
        run = RunSinceOpen(rate: format.rate)
        period = format.periodFrames
        raw = .allocate(byteCount: period * format.bytesPerFrame, alignment: 16)
        mono = .allocate(capacity: period)
        accumulatorRoom = frameSize + resampler.maximumOutput(forInput: period)
        accumulator = .allocate(capacity: accumulatorRoom)
        frame = .allocate(capacity: frameSize)
        frame.initialize(repeating: 0, count: frameSize)
        reference = .allocate(capacity: frameSize)
        reference.initialize(repeating: 0, count: frameSize)
        let options = configuration.frontEnd
        canceller =
            options.echoCancellation || options.needsPreprocess
            ? EchoCanceller(frameSize: frameSize, sampleRate: AudioFormat.microphone.sampleRate, options: options) : nil
    }

    deinit {
        raw.deallocate()
        mono.deallocate()
        accumulator.deallocate()
        frame.deallocate()
        reference.deallocate()
    }

    /// Maps and resamples `frames` device frames from ``raw`` onto the accumulator.
    func ingest(frames: Int) {
        mixer.mix(raw, frames: frames, into: mono)
        pending += resampler.process(
            mono,
            count: frames,
            into: accumulator + pending,
            room: accumulatorRoom - pending
        )
    }

    /// Moves the oldest `frameSize` accumulated samples into ``frame`` as PCM16.
    func takeFrame() {
        for k in 0..<frameSize { frame[k] = SampleConversion.clip16(accumulator[k]) }
        pending -= frameSize
        if pending > 0 { accumulator.update(from: accumulator + frameSize, count: pending) }
    }

    /// RMS level of ``frame`` in dBFS.
    func frameLevel() -> Float {
        var sum: Float = 0
        for k in 0..<frameSize {
            let value = Float(frame[k])
            sum += value * value
        }
        let rms = (sum / Float(frameSize)).squareRoot()
        return rms > 0 ? 20 * log10f(rms / 32768) : -200
    }
}

/// Moves a just-opened PCM into the capture thread exactly once.
final class PCMBox: @unchecked Sendable {
    private var pcm: PCM?
    init(_ pcm: PCM?) { self.pcm = pcm }
    func take() -> PCM? {
        defer { pcm = nil }
        return pcm
    }
}
