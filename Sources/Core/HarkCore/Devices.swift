/// One frame of captured audio after the front end, in the microphone's format (``AudioFormat/microphone``).
public struct CapturedFrame: Sendable, Hashable {
    /// The samples.
    public var samples: [Int16]
    /// Frames captured since the capture started (0, 1, 2, …); a gap means frames were dropped.
    public var sequence: Int
    /// When the last sample was at the converter (monotonic ns, estimated from the device's delay).
    public var capturedAt: UInt64
    /// When the read that completed the frame returned (monotonic ns): `enqueuedAt - readAt` is the
    /// software path (mapping, resampling, front end, queueing).
    public var readAt: UInt64
    /// When the frame entered the queue (monotonic ns).
    public var enqueuedAt: UInt64
    /// Level of the frame, dBFS.
    public var level: Float
    /// Index of the first echo reference sample the echo canceller was given with this frame (the
    /// reference's own count of samples sent to the speaker); nil when there was none or it was not yet aligned.
    public var referenceIndex: Int?

    public init(
        samples: [Int16],
        sequence: Int,
        capturedAt: UInt64,
        readAt: UInt64,
        enqueuedAt: UInt64,
        level: Float,
        referenceIndex: Int? = nil
    ) {
        self.samples = samples
        self.sequence = sequence
        self.capturedAt = capturedAt
        self.readAt = readAt
        self.enqueuedAt = enqueuedAt
        self.level = level
        self.referenceIndex = referenceIndex
    }

    /// The frame as a chunk for a session, stamped with ``readAt``: when the frame reached the software, on
    /// the wall clock (``capturedAt`` follows the device's sample clock, which a paced file device runs faster).
    public var chunk: AudioChunk {
        AudioChunk(samples: samples, sampleRate: AudioFormat.microphone.sampleRate, capturedAt: readAt)
    }
}

/// How a turn of playback ended.
public enum PlaybackEnd: Sendable, Hashable {
    /// The last sample was played (the device's delay reached zero) at this monotonic time, in ns.
    case played(at: UInt64)
    /// The speaker was interrupted: the turn's audio was discarded.
    case interrupted
    /// Playback stopped before the turn ended.
    case stopped
}

/// Why the speaker's media lane (music, radio) is ducked. Any reason active ducks it; it comes back once none is.
/// The playback thread knows ``agentVoice``, ``alert`` and ``announcement`` by itself; the supervisor sets
/// ``wakeWord`` and ``userSpeech``.
public struct DuckReason: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8

    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// The wake word was heard: the device listens for what follows.
    public static let wakeWord = DuckReason(rawValue: 1 << 0)
    /// The user speaks (the voice gate or the session's own detection).
    public static let userSpeech = DuckReason(rawValue: 1 << 1)
    /// The agent's voice plays.
    public static let agentVoice = DuckReason(rawValue: 1 << 2)
    /// A timer or an alarm rings.
    public static let alert = DuckReason(rawValue: 1 << 3)
    /// An announcement plays.
    public static let announcement = DuckReason(rawValue: 1 << 4)
}

/// Whether an audio device works, as its supervisor reads it. An outage begins when opening the device or a
/// transfer fails and ends only once the reopened device has run for a second.
public struct DeviceCondition: Sendable, Hashable {
    /// How long the current outage has lasted; nil while the device works.
    public var failingFor: Duration?
    /// Outages so far.
    public var outages: Int
    /// The last problem, for a person.
    public var lastError: String?

    public init(failingFor: Duration? = nil, outages: Int = 0, lastError: String? = nil) {
        self.failingFor = failingFor
        self.outages = outages
        self.lastError = lastError
    }
}

/// What a microphone has done so far.
public struct MicrophoneCounters: Sendable, Hashable {
    /// Frames captured (the capture's progress).
    public var frames: Int
    /// Frames dropped because nobody took them in time.
    public var dropped: Int
    /// Device overruns (xruns).
    public var overruns: Int

    public init(frames: Int = 0, dropped: Int = 0, overruns: Int = 0) {
        self.frames = frames
        self.dropped = dropped
        self.overruns = overruns
    }
}

/// What a speaker has done so far.
public struct SpeakerCounters: Sendable, Hashable {
    /// Frames of answer audio written to the device.
    public var framesWritten: Int
    /// Frames of silence written while starved or idle.
    public var silenceFrames: Int
    /// Times the jitter buffer ran dry mid-turn.
    public var underruns: Int
    /// Device underruns (xruns).
    public var deviceUnderruns: Int
    /// Interruptions.
    public var interrupts: Int
    /// The last interruption's time to silence, ns.
    public var lastInterruptLatency: UInt64

    public init(
        framesWritten: Int = 0,
        silenceFrames: Int = 0,
        underruns: Int = 0,
        deviceUnderruns: Int = 0,
        interrupts: Int = 0,
        lastInterruptLatency: UInt64 = 0
    ) {
        self.framesWritten = framesWritten
        self.silenceFrames = silenceFrames
        self.underruns = underruns
        self.deviceUnderruns = deviceUnderruns
        self.interrupts = interrupts
        self.lastInterruptLatency = lastInterruptLatency
    }
}

/// The microphone as the appliance uses it: frames in order, mute, level, health. HarkAudio's ALSA capture
/// implements it; HarkTestKit has a scripted one.
public protocol Microphone: AnyObject, Sendable {
    /// The next frame; nil once the microphone stopped, or when the calling task is cancelled.
    func next() async -> CapturedFrame?
    /// While muted no frame leaves the microphone.
    var isMuted: Bool { get set }
    /// Level of the latest frame, dBFS.
    var level: Float { get }
    /// Samples per frame.
    var frameSize: Int { get }
    /// How many times faster than real time frames come (a paced file device); 0 when as fast as they are
    /// taken; 1 for a sound card.
    var pace: Double { get }
    /// Whether it works.
    var condition: DeviceCondition { get }
    /// What it has done so far.
    var counters: MicrophoneCounters { get }
    /// Stops capturing; ``next()`` then returns what is queued, then nil.
    func stop()
    /// Frames that gather before ``next()`` is woken (1: each at once). An idle appliance asks for a few: it is
    /// then woken a few times less often, each frame still delivered, in order, a few tens of milliseconds later.
    var deliveryBatch: Int { get set }
}

extension Microphone {
    /// Each frame at once (a microphone that does not gather frames).
    public var deliveryBatch: Int {
        get { 1 }
        set {}
    }
}

/// The speaker as the appliance uses it: answer audio in, interrupt, the end of a turn, volume, health.
/// HarkAudio's ALSA playback implements it; HarkTestKit has a recording one.
public protocol Speaker: AnyObject, Sendable {
    /// Queues audio to play.
    func enqueue(_ chunk: AudioChunk)
    /// Silences the speaker at once and drops what is queued.
    func interrupt()
    /// Loops `chunk` (a timer's or an alarm's sound) under what is queued until called with nil: mixed in the one
    /// speaker path (the echo canceller hears it), ducked under the agent's voice; an interruption leaves it.
    func setAlert(_ chunk: AudioChunk?)
    /// Ducks the media lane for `reason` (`active`), or lets go of that reason; the lane comes back once no reason
    /// holds it. Lock-free: callable from any thread at any rate.
    func setDuck(_ reason: DuckReason, _ active: Bool)
    /// Returns once what is queued has been played (or was interrupted, or playback stopped).
    func finishTurn() async -> PlaybackEnd
    /// Volume, 0 … 1.
    var volume: Float { get set }
    /// Audio waiting to be played.
    var buffered: Duration { get }
    /// Whether it works.
    var condition: DeviceCondition { get }
    /// What it has done so far.
    var counters: SpeakerCounters { get }
    /// The queue-to-device latencies (ns) recorded since `start`, and the `start` to pass next time.
    func writeLatencies(from start: Int) -> (values: [UInt64], next: Int)
    /// Stops playing.
    func stop()
}

/// A wake word the detector heard.
public struct WakeDetection: Sendable, Hashable {
    /// The word's name (`okay_nabu`, or a model file's name without `.tflite` or `.json`).
    public var word: String
    /// The model's probability at the detection (0...1).
    public var score: Float
    /// Where the audio the detector had heard ended when it fired, in samples of the feeder's count
    /// (``WakeWordSpotter/feed(_:at:)``): about where the wake word ended, up to one detector frame (80 ms) late.
    public var endSample: Int
    /// Where the wake word most likely ended (the same count), when the detector can tell: a little before its
    /// probability began to rise toward the detection, however late the model fired.
    public var wordEndSample: Int?

    public init(word: String, score: Float, endSample: Int, wordEndSample: Int? = nil) {
        self.word = word
        self.score = score
        self.endSample = endSample
        self.wordEndSample = wordEndSample
    }
}

/// What a wake-word detector has done so far.
public struct WakeCounters: Sendable, Hashable {
    /// Detections reported.
    public var detections: Int
    /// Samples run through the detector.
    public var samplesHeard: Int
    /// Samples dropped because the detector fell more than its backlog behind (it restarts after a gap).
    public var droppedSamples: Int
    /// CPU time the detector's thread has spent, ns.
    public var cpuNanoseconds: UInt64
    /// The last error of the detector, if it failed (it then hears nothing more).
    public var lastError: String?

    public init(
        detections: Int = 0,
        samplesHeard: Int = 0,
        droppedSamples: Int = 0,
        cpuNanoseconds: UInt64 = 0,
        lastError: String? = nil
    ) {
        self.detections = detections
        self.samplesHeard = samplesHeard
        self.droppedSamples = droppedSamples
        self.cpuNanoseconds = cpuNanoseconds
        self.lastError = lastError
    }
}

/// A wake-word detector as the appliance uses it: fed every microphone frame from the supervisor's loop, it
/// runs on a thread of its own (a model run costs milliseconds: never the loop's or the capture's time) and
/// reports each detection through the handler given to ``start(_:)``. HarkWake's openWakeWord listener
/// implements it; tests use scripted ones.
public protocol WakeWordSpotter: AnyObject, Sendable {
    /// The words it listens for, by name.
    var words: [String] { get }
    /// Starts the detector; `onDetection` is called on the detector's thread.
    func start(_ onDetection: @escaping @Sendable (WakeDetection) -> Void) throws
    /// Hands over one 16 kHz mono frame whose first sample is number `sample` of the caller's count. Never
    /// blocks; a frame that does not follow the previous one (a gap) restarts the detector there.
    func feed(_ samples: [Int16], at sample: Int)
    /// What it has done so far.
    var counters: WakeCounters { get }
    /// Stops the detector's thread (frames fed after are ignored).
    func stop()
}
