/// The bounded queue between the microphone and a session.
///
/// It holds input while the session is connected and — this is its point — while it is not: during
/// a goAway switch or a reconnect, microphone audio waits here (up to `audioBound`, default 30 s) and
/// is sent once the new connection is set up, so nothing the user said is lost within the bound.
/// Beyond the bound the oldest audio is dropped and counted. Control inputs are never dropped.
///
/// ``push(_:)`` never blocks (the capture side calls it); one consumer awaits ``next(maxAudio:minAudio:)``.
/// A ``BoundedQueue`` whose cost is samples of audio (other inputs cost nothing).
public final class SessionInputQueue: Sendable {
    private let queue: BoundedQueue<SessionInput>
    /// Most audio held, in samples at the microphone's rate.
    public let audioBoundSamples: Int

    /// A queue holding at most `audioBound` of audio at `sampleRate`.
    public init(audioBound: Duration = .seconds(30), sampleRate: Int = AudioFormat.microphone.sampleRate) {
        audioBoundSamples = Int(audioBound.milliseconds) * sampleRate / 1000
        queue = BoundedQueue(bound: audioBoundSamples, overflow: .dropOldest) { input in
            if case .audio(let chunk) = input { chunk.samples.count } else { 0 }
        }
    }

    /// Samples dropped because the bound was exceeded.
    public var droppedSamples: Int {
        let statistics = queue.statistics
        return statistics.droppedCost + statistics.rejectedCost
    }

    /// Samples of audio waiting.
    public var queuedSamples: Int { queue.cost }

    /// Adds input; drops the oldest audio when over the bound. Wakes the consumer only once what it
    /// waits for is there.
    public func push(_ input: SessionInput) { queue.push(input) }

    /// Puts input back at the front (it could not be sent); keeps the order it had.
    public func pushFront(_ inputs: [SessionInput]) { queue.pushFront(inputs) }

    /// The next input. Consecutive audio chunks of one rate are merged up to `maxAudio` samples, so a
    /// backlog (after a reconnect, or a fast file) goes out in few messages. With `minAudio`, audio is
    /// gathered until that much is queued (or any other input, which goes at once, or the end): a
    /// microphone's 10 ms frames then go out a few at a time, and the sender wakes that much less
    /// often. Nil once closed or cancelled.
    public func next(maxAudio: Int, minAudio: Int = 0) async -> SessionInput? {
        await queue.next(gathering: min(minAudio, maxAudio)) { taken, following in
            guard case .audio(var chunk) = taken, chunk.samples.count < maxAudio,
                case .audio(let more) = following, more.sampleRate == chunk.sampleRate,
                chunk.samples.count + more.samples.count <= maxAudio
            else { return false }
            taken = .audioStreamEnd  // lets go of the samples, so the append below does not copy them
            chunk.samples.append(contentsOf: more.samples)
            // The newest sample's capture time, when both parts know theirs (audio from a file does not).
            chunk.capturedAt = chunk.capturedAt == nil ? nil : more.capturedAt
            taken = .audio(chunk)
            return true
        }
    }

    /// Waits until fewer than `samples` audio samples are queued (backpressure for a source that can
    /// produce faster than real time, such as a file). Returns at once when closed.
    public func waitForRoom(below samples: Int) async { await queue.waitForRoom(below: samples) }

    /// Removes and returns everything queued (used to discard audio on a deliberate reset).
    @discardableResult
    public func removeAll() -> [SessionInput] { queue.removeAll() }

    /// Ends the queue: the consumer gets nil once it is empty, later pushes are ignored.
    public func close() { queue.close() }
}
