import HarkCore
import Synchronization

/// A microphone a test feeds: frames come out in the order ``push(_:)`` put them in. Its condition (an outage,
/// its length, its error) is whatever the test sets, as a real device reports it.
public final class ScriptedMicrophone: Microphone {
    private struct State {
        var frames: [CapturedFrame] = []
        var head = 0
        var waiter: CheckedContinuation<CapturedFrame?, Never>?
        var stopped = false
        var sequence = 0
        var delivered = 0
        var muted = false
        var batch = 1
        var condition = DeviceCondition()
        var counters = MicrophoneCounters()
    }

    private let state = Mutex(State())
    public let frameSize: Int
    public let pace: Double

    /// A microphone of `frameSize`-sample frames (the microphone's 20 ms by default) delivering at `pace`.
    public init(frameSize: Int = AudioFormat.microphone.frameSamples, pace: Double = 1) {
        self.frameSize = frameSize
        self.pace = pace
    }

    /// The pace the appliance asked for (frames per wake-up); frames are delivered as pushed whatever it is.
    public var deliveryBatch: Int {
        get { state.withLock { $0.batch } }
        set { state.withLock { $0.batch = newValue } }
    }

    /// Queues one frame of `samples` (stamped with `capturedAt`, monotonic ns).
    public func push(_ samples: [Int16], capturedAt: UInt64 = 0) {
        let waiter = state.withLock { state -> (CheckedContinuation<CapturedFrame?, Never>, CapturedFrame)? in
            guard !state.stopped else { return nil }
            let frame = CapturedFrame(
                samples: samples,
                sequence: state.sequence,
                capturedAt: capturedAt,
                readAt: capturedAt,
                enqueuedAt: capturedAt,
                level: Float(PCM16.levelDBFS(samples))
            )
            state.sequence += 1
            if let waiter = state.waiter {
                state.waiter = nil
                state.counters.frames += 1
                return (waiter, frame)
            }
            state.frames.append(frame)
            return nil
        }
        waiter?.0.resume(returning: waiter?.1)
    }

    /// Queues `count` frames of silence.
    public func pushSilence(frames count: Int) {
        for _ in 0..<count { push([Int16](repeating: 0, count: frameSize)) }
    }

    /// The next frame; nil once stopped, or when the calling task is cancelled (as the ALSA capture does).
    public func next() async -> CapturedFrame? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ready = state.withLock { state -> CapturedFrame?? in
                    if state.head < state.frames.count {
                        defer { state.head += 1 }
                        state.counters.frames += 1
                        return .some(state.frames[state.head])
                    }
                    if state.stopped || Task.isCancelled { return .some(nil) }
                    state.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<CapturedFrame?, Never>? in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: nil)
        }
    }

    public var isMuted: Bool {
        get { state.withLock { $0.muted } }
        set { state.withLock { $0.muted = newValue } }
    }

    public var level: Float { -90 }

    /// What the supervisor reads as the device's health; set by the test.
    public var condition: DeviceCondition {
        get { state.withLock { $0.condition } }
        set { state.withLock { $0.condition = newValue } }
    }

    public var counters: MicrophoneCounters { state.withLock { $0.counters } }

    public func stop() {
        let waiter = state.withLock { state -> CheckedContinuation<CapturedFrame?, Never>? in
            state.stopped = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
    }
}

/// A speaker that records what it was given. Audio stays "buffered" until the test calls ``playAll()`` (a turn
/// then ends as played) or the supervisor interrupts it. Its condition is whatever the test sets.
public final class RecordingSpeaker: Speaker {
    private struct State {
        var chunks: [AudioChunk] = []
        var bufferedSamples = 0
        var bufferedRate = 24_000
        var waiters: [CheckedContinuation<PlaybackEnd, Never>] = []
        var interrupts = 0
        var stopped = false
        var volume: Float = 0.5
        var condition = DeviceCondition()
        var framesWritten = 0
        var alerts: [AudioChunk?] = []
        var ducks: [(DuckReason, Bool)] = []
    }

    private let state = Mutex(State())

    public init() {}

    /// Every alert set so far, in order (nil: the alert stopped).
    public var alerts: [AudioChunk?] { state.withLock { $0.alerts } }

    /// True while the last alert set is a sound.
    public var isAlerting: Bool { state.withLock { ($0.alerts.last ?? nil) != nil } }

    public func setAlert(_ chunk: AudioChunk?) {
        state.withLock { $0.alerts.append(chunk) }
    }

    /// Every duck set or cleared so far, in order.
    public var ducks: [(reason: DuckReason, active: Bool)] { state.withLock { $0.ducks.map { ($0.0, $0.1) } } }

    /// The reasons that hold the media lane ducked now.
    public var ducking: DuckReason {
        state.withLock { state in
            state.ducks.reduce(into: DuckReason()) { held, duck in
                if duck.1 { held.insert(duck.0) } else { held.remove(duck.0) }
            }
        }
    }

    public func setDuck(_ reason: DuckReason, _ active: Bool) {
        state.withLock { $0.ducks.append((reason, active)) }
    }

    /// Every chunk enqueued so far, in order.
    public var chunks: [AudioChunk] { state.withLock { $0.chunks } }

    /// Interruptions so far.
    public var interruptCount: Int { state.withLock { $0.interrupts } }

    public func enqueue(_ chunk: AudioChunk) {
        state.withLock { state in
            state.chunks.append(chunk)
            state.bufferedSamples += chunk.samples.count
            state.bufferedRate = max(1, chunk.sampleRate)
        }
    }

    /// Plays what is buffered: turns waiting in ``finishTurn()`` end as played.
    public func playAll(at time: UInt64 = 0) {
        let waiters = state.withLock { state -> [CheckedContinuation<PlaybackEnd, Never>] in
            state.framesWritten += state.bufferedSamples
            state.bufferedSamples = 0
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: .played(at: time)) }
    }

    public func interrupt() {
        let waiters = state.withLock { state -> [CheckedContinuation<PlaybackEnd, Never>] in
            state.interrupts += 1
            state.bufferedSamples = 0
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: .interrupted) }
    }

    public func finishTurn() async -> PlaybackEnd {
        await withCheckedContinuation { continuation in
            let end = state.withLock { state -> PlaybackEnd? in
                if state.stopped { return .stopped }
                state.waiters.append(continuation)
                return nil
            }
            if let end { continuation.resume(returning: end) }
        }
    }

    public var volume: Float {
        get { state.withLock { $0.volume } }
        set { state.withLock { $0.volume = max(0, min(1, newValue)) } }
    }

    public var buffered: Duration {
        state.withLock { .nanoseconds(Int64($0.bufferedSamples) * 1_000_000_000 / Int64($0.bufferedRate)) }
    }

    /// What the supervisor reads as the device's health; set by the test.
    public var condition: DeviceCondition {
        get { state.withLock { $0.condition } }
        set { state.withLock { $0.condition = newValue } }
    }

    public var counters: SpeakerCounters {
        state.withLock { SpeakerCounters(framesWritten: $0.framesWritten, interrupts: $0.interrupts) }
    }

    public func writeLatencies(from start: Int) -> (values: [UInt64], next: Int) { ([], start) }

    public func stop() {
        let waiters = state.withLock { state -> [CheckedContinuation<PlaybackEnd, Never>] in
            state.stopped = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: .stopped) }
    }
}

/// A session a test drives: it records what it is sent, emits what the test says, and runs until finished
/// (or until the test ends it, with a failure or not).
public final class ScriptedSession: VoiceSession {
    private struct State {
        var sent: [SessionInput] = []
        var finished = false
        var ended: SessionFailure?? = nil
        var runWaiter: CheckedContinuation<SessionFailure?, Never>?
        var statistics = SessionStatistics()
    }

    public let events: AsyncStream<SessionEvent>
    private let sink: AsyncStream<SessionEvent>.Continuation
    private let state = Mutex(State())

    private let endsOnFinish: Bool

    /// A session whose run ends when finished, unless `endsOnFinish` is false (a session that never answers the
    /// polite close: only cancelling its run ends it).
    public init(endsOnFinish: Bool = true) {
        self.endsOnFinish = endsOnFinish
        (events, sink) = AsyncStream.makeStream(of: SessionEvent.self)
    }

    /// Everything sent so far, in order.
    public var sent: [SessionInput] { state.withLock { $0.sent } }

    /// True once ``finish()`` was called.
    public var isFinished: Bool { state.withLock { $0.finished } }

    /// Delivers `event` to the session's consumer.
    public func emit(_ event: SessionEvent) { sink.yield(event) }

    /// Ends the run: `run()` returns, or throws `failure`.
    public func end(failure: SessionFailure? = nil) {
        let waiter = state.withLock { state -> CheckedContinuation<SessionFailure?, Never>? in
            state.ended = .some(failure)
            defer { state.runWaiter = nil }
            return state.runWaiter
        }
        waiter?.resume(returning: failure)
    }

    public func send(_ input: SessionInput) {
        state.withLock { state in
            state.sent.append(input)
            if case .audio(let chunk) = input { state.statistics.audioSamplesSent += chunk.samples.count }
        }
    }

    public func waitForInputRoom(below samples: Int) async {}

    /// Runs until ended (by the test, by ``finish()``, or by cancelling the task: it then throws `CancellationError`).
    public func run() async throws {
        let failure = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ended = state.withLock { state -> SessionFailure?? in
                    if let ended = state.ended { return .some(ended) }
                    state.runWaiter = continuation
                    return nil
                }
                if let ended { continuation.resume(returning: ended) }
            }
        } onCancel: {
            end()
        }
        sink.yield(.link(.ended))
        sink.finish()
        if let failure { throw failure }
        if Task.isCancelled { throw CancellationError() }
    }

    public func finish() {
        state.withLock { $0.finished = true }
        if endsOnFinish { end() }
    }

    /// Counters: audio sent is counted; the rest is whatever the test sets.
    public var statistics: SessionStatistics {
        get { state.withLock { $0.statistics } }
        set { state.withLock { $0.statistics = newValue } }
    }
}

/// A wake-word detector a test fires: it records what it was fed, and ``fire(_:)`` reports a detection as the
/// real one does from its thread.
public final class ScriptedWakeSpotter: WakeWordSpotter {
    private struct State {
        var handler: (@Sendable (WakeDetection) -> Void)?
        var fed: [(samples: [Int16], at: Int)] = []
        var stopped = false
        var counters = WakeCounters()
    }

    private let state = Mutex(State())
    public let words: [String]

    public init(words: [String] = ["hey_jarvis"]) { self.words = words }

    public func start(_ onDetection: @escaping @Sendable (WakeDetection) -> Void) throws {
        state.withLock { $0.handler = onDetection }
    }

    public func feed(_ samples: [Int16], at sample: Int) {
        state.withLock { state in
            guard !state.stopped else { return }
            state.fed.append((samples, sample))
            state.counters.samplesHeard += samples.count
        }
    }

    /// The samples fed so far.
    public var samplesFed: Int { state.withLock { $0.counters.samplesHeard } }

    /// Where each frame fed began, in order.
    public var frameStarts: [Int] { state.withLock { $0.fed.map(\.at) } }

    /// Reports `detection` (false when the detector was not started).
    @discardableResult
    public func fire(_ detection: WakeDetection) -> Bool {
        let handler = state.withLock { state -> (@Sendable (WakeDetection) -> Void)? in
            state.counters.detections += 1
            return state.handler
        }
        handler?(detection)
        return handler != nil
    }

    public var counters: WakeCounters { state.withLock { $0.counters } }

    public func stop() { state.withLock { $0.stopped = true } }
}

/// A service notifier that records what it was told, in order (`READY`, `STATUS=...`, `WATCHDOG`, ...).
public final class RecordingNotifier: ServiceNotifier {
    private let told = Mutex<[String]>([])

    public init() {}

    /// Everything told so far: `ready: LINE`, `status: LINE`, `watchdog`, `stopping`, `reloading`.
    public var all: [String] { told.withLock { $0 } }

    /// The status lines told so far (`ready` and `status`), in order.
    public var statusLines: [String] {
        all.compactMap { entry in
            for prefix in ["ready: ", "status: "] where entry.hasPrefix(prefix) {
                return String(entry.dropFirst(prefix.count))
            }
            return nil
        }
    }

    public func ready(status: String) { told.withLock { $0.append("ready: \(status)") } }
    public func status(_ text: String) { told.withLock { $0.append("status: \(text)") } }
    public func watchdog() { told.withLock { $0.append("watchdog") } }
    public func stopping() { told.withLock { $0.append("stopping") } }
    public func reloading() { told.withLock { $0.append("reloading") } }
    public var watchdogInterval: Duration? { nil }
}
