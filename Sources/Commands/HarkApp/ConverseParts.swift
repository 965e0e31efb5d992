import HarkAudio
import HarkCore
import Synchronization

/// What a converse run has seen so far: shared by the feeder, the event reader and the quiet watcher, behind a
/// lock (``ConverseProgressBox``). Times are offsets on the run's injected clock from the run's start.
struct ConverseProgress {
    var inputDone = false
    var inputDoneAt: Duration?
    var lastEventAt: Duration = .zero
    var turnsCompleted = 0
    var turnInFlight = false
    /// Model audio received (samples at ``outputRate``).
    var outputSamples = 0
    /// The rate the output is written at: the backend's.
    var outputRate = 24_000
    /// Where it goes as it comes (nil without an output file).
    var output: WAVStreamWriter?
    /// The output could not be written.
    var outputError: String?
    var failure: SessionFailure?
    var timedOut = false
    /// The run was stopped early (SIGINT, SIGTERM).
    var interrupted = false

    /// The input was sent, an answer came, and nothing of an answer is under way.
    var isDone: Bool { inputDone && turnsCompleted > 0 && !turnInFlight }
}

/// The run's shared ``ConverseProgress``, behind a lock.
final class ConverseProgressBox: Sendable {
    private let state = Mutex(ConverseProgress())
    func withLock<T>(_ body: (inout ConverseProgress) -> T) -> T { state.withLock { body(&$0) } }
}

/// Feeds a session from a microphone: the greeting and the activity start when asked, each frame as audio (for at
/// most `listen` on the clock, when given), then the end of the input; returns once the session has put all of it
/// on the wire (or dropped it at its bound), so "sent" means sent, not queued.
struct ConverseFeeder: Sendable {
    var greeting: String?
    var manualActivity = false
    /// Wait while two seconds of audio are queued (a source faster than real time: a file sent `--fast`, a
    /// file-backed capture device) instead of overflowing the session's hold bound.
    var backpressure = false
    /// How long the microphone stays open (nil: to its end).
    var listen: Duration?

    /// Feeds `session` from `microphone` on `clock`; returns the samples fed.
    func run(_ microphone: any Microphone, into session: any VoiceSession, clock: any Clock<Duration>) async -> Int {
        let elapsed = clock.stopwatch()
        if let greeting { session.send(.text(greeting)) }
        if manualActivity { session.send(.activityStart) }
        let room = AudioFormat.microphone.samples(in: .seconds(2))
        var fed = 0
        while !Task.isCancelled, listen.map({ elapsed() < $0 }) ?? true, let frame = await microphone.next() {
            if backpressure { await session.waitForInputRoom(below: room) }
            session.send(.audio(AudioChunk(samples: frame.samples, sampleRate: AudioFormat.microphone.sampleRate)))
            fed += frame.samples.count
        }
        session.send(manualActivity ? .activityEnd : .audioStreamEnd)
        // An empty queue is not enough: the sender may hold the last chunk back for the next connection (a goAway).
        await session.waitForInputRoom(below: 1)
        while !Task.isCancelled {
            let statistics = session.statistics
            guard statistics.audioSamplesSent + statistics.droppedInputSamples < fed else { break }
            guard (try? await clock.sleep(for: .milliseconds(20))) != nil else { break }
        }
        return fed
    }
}

/// When a converse run ends, as a value: after the input was sent, an answer finished and `idleTimeout` passed in
/// quiet; or at a failure, a stop, or the overall `timeout`. Times are offsets on the run's clock.
struct QuietWatcher: Sendable, Hashable {
    /// What to do now.
    enum Verdict: Sendable, Hashable {
        /// Look again then.
        case wait(until: Duration)
        /// The answer is in, or the session failed: end the run.
        case done
        /// Stopped early (a signal).
        case interrupted
        /// The overall timeout passed.
        case timedOut
    }

    var idleTimeout: Duration
    var timeout: Duration

    /// The verdict on `progress` at `now`, the stop pulled or not.
    func check(_ progress: ConverseProgress, now: Duration, stopPulled: Bool) -> Verdict {
        let quietSince = max(progress.lastEventAt, progress.inputDoneAt ?? progress.lastEventAt)
        let due = quietSince + idleTimeout
        if progress.isDone && now >= due || progress.failure != nil { return .done }
        if stopPulled { return .interrupted }
        if now >= timeout { return .timedOut }
        // Until the input is done a quarter second is soon enough to look again (a wake-up each 50 ms cost more
        // than the rest of the paced run); then the quiet's end.
        let next = progress.isDone ? max(due, now + .milliseconds(50)) : now + .milliseconds(250)
        return .wait(until: min(timeout, next))
    }

    /// Watches `progress` until the run is to end, sleeping on `clock`, whose time since the run began `elapsed`
    /// tells; records a stop or a timeout in it.
    func watch(
        _ progress: ConverseProgressBox,
        stop: ConverseStop,
        clock: any Clock<Duration>,
        elapsed: @Sendable () -> Duration
    ) async {
        while !Task.isCancelled {
            let now = elapsed()
            switch progress.withLock({ check($0, now: now, stopPulled: stop.isPulled) }) {
            case .wait(let until):
                try? await clock.sleep(for: until - now)
            case .done:
                return
            case .interrupted:
                progress.withLock { $0.interrupted = true }
                return
            case .timedOut:
                progress.withLock { $0.timedOut = true }
                return
            }
        }
    }
}

extension ConverseOutcome {
    /// How a run that made a session ended, from what it saw: a write error (2), a stop (130), a failure before the
    /// answer was in (by its kind: 3 authentication, 2 configuration, 4 transient, 5 untrusted), a timeout (4), or
    /// done (0). `output` names the answer's file for the message of a stopped run.
    init(
        _ progress: ConverseProgress,
        writeError: String?,
        statistics: SessionStatistics,
        output: String,
        timeout: Duration
    ) {
        self.init(
            exitCode: 0,
            message: nil,
            outputSamples: progress.outputSamples,
            inputSamplesSent: statistics.audioSamplesSent,
            statistics: statistics
        )
        if let writeError {
            exitCode = 2
            message = writeError
        } else if progress.interrupted {
            exitCode = 130
            message = "interrupted" + (output.isEmpty ? "" : "; the answer received so far is in \(output)")
        } else if let failure = progress.failure, !progress.isDone {
            switch failure.kind {
            case .authentication: exitCode = 3
            case .configuration: exitCode = 2
            case .transient: exitCode = 4
            case .untrusted: exitCode = 5
            }
            message = failure.message
        } else if progress.timedOut {
            exitCode = 4
            message = "timed out after \(timeout.humanDescription) without a finished answer"
        }
    }
}
