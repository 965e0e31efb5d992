import HarkCore

/// What was sent on the current connection that the service has not yet confirmed by a resumable
/// `sessionResumptionUpdate`.
///
/// A resumed session holds the state of its last handle, so input sent after that handle is not part
/// of it: when the connection ends (a close, a drop, a frame too large, a goAway switch), this input
/// goes out again on the next connection, or the user's words of that moment are lost. The service
/// asks for exactly this ("buffering messages sent since last SessionResumptionTokenUpdate"); where it
/// also reports `lastConsumedClientMessageIndex` (only when asked with `transparent`, which the Gemini
/// Developer API refuses) the log keeps only what follows that index.
///
/// Without that index a handle covers what the service had consumed when it issued the handle, which
/// is not all that was sent before it arrived: input still in flight (socket buffers, a service that
/// reads behind) is not in it. So an update without an index leaves unconfirmed the newest `margin` of
/// audio sent before it arrived (a device streams in real time, so that is what a round trip and the
/// buffers on the way hold), and everything sent in the last `lag` of time (what a round trip holds
/// when a backlog goes out faster than real time); it may reach the service twice, which costs less
/// than a lost word. A service that reads further behind than that loses the rest on a resume, which is
/// why a backlog is paced (``GeminiLiveConfiguration/catchUpRate``) rather than sent at once.
///
/// The log keeps the newest `boundSamples` of audio; control inputs (activity markers, stream end,
/// text turns) are kept in order with it. Without resumption, a completed turn confirms everything
/// before it, since no handle ever will.
public struct UnconfirmedInput: Sendable {
    private var entries: [(index: Int64, input: SessionInput, at: Duration)] = []
    /// Samples of audio held.
    public private(set) var audioSamples = 0
    /// Samples of audio dropped because the log was over its bound.
    public private(set) var droppedSamples = 0
    /// Most audio held.
    public let boundSamples: Int

    public init(boundSamples: Int) {
        self.boundSamples = boundSamples
    }

    /// Nothing is held.
    public var isEmpty: Bool { entries.isEmpty }

    /// Whether an `activityStart` is among the held inputs (it is then sent again with them, so the
    /// reopening of an open activity after setup would repeat it).
    public var holdsActivityStart: Bool {
        entries.contains { if case .activityStart = $0.input { true } else { false } }
    }

    /// `input` went out as the connection's message number `index` (the setup is 0) at `at` (any
    /// monotonic time base, the same as ``confirmed(through:marginSamples:lag:now:)``'s).
    public mutating func sent(_ input: SessionInput, index: Int64, at: Duration = .zero) {
        switch input {
        case .audio(let chunk):
            entries.append((index, input, at))
            audioSamples += chunk.samples.count
            while audioSamples > boundSamples,
                let first = entries.firstIndex(where: { if case .audio = $0.input { true } else { false } }),
                case .audio(let oldest) = entries[first].input
            {
                entries.remove(at: first)
                audioSamples -= oldest.samples.count
                droppedSamples += oldest.samples.count
            }
        case .audioStreamEnd, .activityStart, .activityEnd, .text:
            entries.append((index, input, at))
        case .interrupt:
            break
        }
    }

    /// A resumable update arrived at `now`: what it covers is part of the session's state. `index` is
    /// the update's `lastConsumedClientMessageIndex`; without it (the usual case) the update covers all
    /// but the newest `marginSamples` of audio and what was sent within `lag` before `now` (and what was
    /// sent after that audio began).
    public mutating func confirmed(
        through index: Int64?,
        marginSamples: Int = 0,
        lag: Duration = .zero,
        now: Duration = .zero
    ) {
        let kept: ArraySlice<(index: Int64, input: SessionInput, at: Duration)>
        if let index {
            kept = entries.drop { $0.index <= index }
        } else {
            // From the newest entry back, the first audio that takes the kept audio to the margin, or
            // the first entry sent longer than `lag` ago.
            var held = 0
            var start = entries.endIndex
            while start > entries.startIndex, held < marginSamples || now - entries[start - 1].at < lag {
                start -= 1
                if case .audio(let chunk) = entries[start].input { held += chunk.samples.count }
            }
            if held == 0 { start = entries.endIndex }
            kept = entries[start...]
        }
        guard kept.count != entries.count else { return }
        entries = Array(kept)
        audioSamples = entries.reduce(0) { sum, entry in
            if case .audio(let chunk) = entry.input { sum + chunk.samples.count } else { sum }
        }
    }

    /// Forgets everything held.
    public mutating func removeAll() {
        entries.removeAll(keepingCapacity: true)
        audioSamples = 0
    }

    /// Everything held, oldest first, and the log emptied.
    public mutating func takeAll() -> [SessionInput] {
        defer { removeAll() }
        return entries.map(\.input)
    }
}
