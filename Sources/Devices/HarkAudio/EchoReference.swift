import HarkCore
import Synchronization

/// The samples that went to the speaker, at 16 kHz mono, and where the microphone's samples meet them: written
/// by the playback thread, read by the capture thread to feed the echo canceller its aligned reference.
///
/// Alignment is by sample counts, not by wall-clock times. Each stream reports, once a period, its position — the
/// reference sample being heard now (frames written since the playback stream started, less its delay), the
/// microphone sample being captured now (frames read since the capture stream started, plus its delay) — with the
/// monotonic time it was read at. A report of one stream between two of the other's gives one observation of the
/// offset between the streams' sample counts (the other's position interpolated to its time); ``ReferenceAlignment`` turns them into a steady offset (held when the two streams share
/// a sample clock, tracked with its drift when they do not), and the capture path reads the reference by its own
/// sample count plus that offset. The reference never follows a single delay report: delay reports jitter by a
/// timer tick or a period, and a reference that wanders against the echo keeps the canceller from converging.
public final class EchoReference: Sendable {
    /// What ``EchoReference/alignment`` reports.
    public struct Alignment: Sendable, Hashable {
        /// True when the two streams were found to share a sample clock.
        public var shared: Bool
        /// Reference index minus capture index, in samples, at the newest capture position; nil while unknown.
        public var offset: Double?
        /// The reference's clock against the microphone's, in parts per million (0 with a shared clock).
        public var driftPPM: Double
        /// Observations the offset rests on (since either stream last started).
        public var observations: Int
        /// Mean distance of the observations from the fitted offset, in samples.
        public var spread: Double
    }

    private struct Position {
        var index: Double
        var time: UInt64
    }

    private struct State: ~Copyable {
        /// Samples ever written (index of the next one).
        var written = 0
        /// Index of the current playback run's first sample: reads before it are silence.
        var runStart = 0
        /// The latest position of each stream (nil while the stream is not known to run).
        var heard: Position?
        var captured: Position?
        var playbackCard: Int32?
        var captureCard: Int32?
        var alignment: ReferenceAlignment
    }

    /// Sample rate of the reference.
    public let sampleRate: Int
    /// How the two clocks relate (``ReferenceClock/automatic``: decided by the streams' cards).
    public let clock: ReferenceClock
    private let capacity: Int
    private nonisolated(unsafe) let ring: UnsafeMutablePointer<Int16>
    private let state: Mutex<State>
    /// Two reports of a stream further apart than this do not bracket the other's (the stream stalled or stopped).
    private let pairing: UInt64 = 200_000_000
    /// Reports that took longer than this to read (the thread was preempted between the device's answer and the
    /// clock) are not used.
    static let readingLimit: UInt64 = 1_000_000

    /// A reference holding the last `history` of audio.
    public init(
        sampleRate: Int = AudioFormat.microphone.sampleRate,
        history: Duration = .seconds(2),
        clock: ReferenceClock = .automatic
    ) {
        self.sampleRate = sampleRate
        self.clock = clock
        capacity = max(1024, Int(history.milliseconds) * sampleRate / 1000)
        ring = .allocate(capacity: capacity)
        ring.initialize(repeating: 0, count: capacity)
        state = Mutex(State(alignment: ReferenceAlignment(shared: clock == .shared)))
    }

    deinit { ring.deallocate() }

    // MARK: The playback side

    /// Records `count` samples sent to the speaker. `continuous` says they follow the previous ones on a running
    /// stream; otherwise the stream (re)started with them, and its position counts from their first sample.
    public func write(_ samples: UnsafePointer<Int16>, count: Int, continuous: Bool) {
        state.withLock { state in
            if !continuous {
                state.runStart = state.written
                state.heard = nil
                state.alignment.restart()
            }
            for k in 0..<count { ring[(state.written + k) % capacity] = samples[k] }
            state.written += count
        }
    }

    /// The playback stream's position: `played` samples of its current run (counted from the first sample of the
    /// last ``write(_:count:continuous:)`` that was not continuous) have been heard at `time` (monotonic ns).
    /// `card` is the playback PCM's sound card (-1 for none).
    public func playbackPosition(played: Double, at time: UInt64, card: Int32) {
        state.withLock { state in
            if state.playbackCard != card {
                state.playbackCard = card
                decideClock(&state)
            }
            let heard = Position(index: Double(state.runStart) + played, time: time)
            if let before = state.heard, let captured = state.captured,
                let heardThen = interpolate(before, heard, at: captured.time)
            {
                state.alignment.observe(offset: heardThen - captured.index, at: captured.index)
            }
            state.heard = heard
        }
    }

    /// The playback stream stopped (drained, dropped or lost): nothing is heard until it starts again.
    public func playbackStopped() {
        state.withLock { $0.heard = nil }
    }

    // MARK: The capture side

    /// The capture stream's position: the microphone sample with index `captured` (in the capture's own count of
    /// 16 kHz samples) was at the converter at `time` (monotonic ns). `restarted` says the stream (re)started since
    /// the last report; `card` is the capture PCM's sound card (-1 for none).
    public func capturePosition(captured: Double, at time: UInt64, restarted: Bool, card: Int32) {
        state.withLock { state in
            if state.captureCard != card {
                state.captureCard = card
                decideClock(&state)
            } else if restarted {
                state.alignment.restart()
            }
            if restarted { state.captured = nil }
            let position = Position(index: captured, time: time)
            if let before = state.captured, let heard = state.heard,
                let capturedThen = interpolate(before, position, at: heard.time)
            {
                state.alignment.observe(offset: heard.index - capturedThen, at: capturedThen)
            }
            state.captured = position
        }
    }

    /// Fills `output` with the `count` reference samples aligned with the microphone's samples from index
    /// `captureIndex` on, read `lead` samples ahead (see ``FrontEndOptions/referenceLead``); silence where
    /// nothing was (or is no longer) recorded. Returns the reference index of the first, nil while the streams'
    /// offset is unknown (then all silence).
    @discardableResult
    public func read(into output: UnsafeMutablePointer<Int16>, count: Int, captureIndex: Int, lead: Int) -> Int? {
        state.withLock { state in
            guard let offset = state.alignment.offset(at: captureIndex) else {
                output.update(repeating: 0, count: count)
                return nil
            }
            let start = captureIndex + offset + lead
            copy(state, from: start, count: count, into: output)
            return start
        }
    }

    /// Fills `output` with the `count` reference samples from reference index `start` on (silence where nothing
    /// was, or is no longer, recorded): what ``read(into:count:captureIndex:lead:)`` gave, read again.
    public func read(into output: UnsafeMutablePointer<Int16>, count: Int, from start: Int) {
        state.withLock { state in copy(state, from: start, count: count, into: output) }
    }

    /// Where the alignment stands.
    public var alignment: Alignment {
        state.withLock { state in
            let index = state.captured?.index ?? 0
            return Alignment(
                shared: state.alignment.shared,
                offset: state.alignment.estimate(at: index),
                driftPPM: state.alignment.drift * 1e6,
                observations: state.alignment.observations,
                spread: state.alignment.spread
            )
        }
    }

    // MARK: Inside

    private func copy(_ state: borrowing State, from start: Int, count: Int, into output: UnsafeMutablePointer<Int16>) {
        let low = max(state.runStart, state.written - capacity)
        for k in 0..<count {
            let index = start + k
            output[k] = index >= low && index < state.written ? ring[index % capacity] : 0
        }
    }

    /// A stream's position at `time`, between two of its reports that bracket it (and are close enough that the
    /// stream ran at its own steady rate between them); nil otherwise. No rate is assumed: a device paced faster or
    /// slower than its nominal rate is followed as it runs.
    private func interpolate(_ first: Position, _ second: Position, at time: UInt64) -> Double? {
        guard first.time <= time, time <= second.time, second.time > first.time,
            second.time &- first.time <= pairing
        else { return nil }
        let fraction = Double(time &- first.time) / Double(second.time &- first.time)
        return first.index + (second.index - first.index) * fraction
    }

    /// The clock is shared when configured so, or, automatically, when both streams are on one sound card.
    private func decideClock(_ state: inout State) {
        let shared: Bool
        switch clock {
        case .shared: shared = true
        case .independent: shared = false
        case .automatic:
            if let playback = state.playbackCard, let capture = state.captureCard {
                shared = playback >= 0 && playback == capture
            } else {
                shared = false
            }
        }
        if shared != state.alignment.shared {
            state.alignment = ReferenceAlignment(shared: shared)
        } else {
            state.alignment.restart()
        }
    }
}
