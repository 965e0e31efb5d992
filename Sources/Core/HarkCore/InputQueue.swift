import Synchronization

/// The bounded queue between the microphone and a session.
///
/// It holds input while the session is connected and — this is its point — while it is not: during
/// a goAway switch or a reconnect, microphone audio waits here (up to `audioBound`, default 30 s) and
/// is sent once the new connection is set up, so nothing the user said is lost within the bound.
/// Beyond the bound the oldest audio is dropped and counted. Control inputs are never dropped.
///
/// ``push(_:)`` never blocks (the capture side calls it); one consumer awaits ``next(maxAudio:)``.
public final class SessionInputQueue: Sendable {
    private struct State {
        var items: [SessionInput] = []
        var head = 0
        var audioSamples = 0
        /// Inputs other than audio waiting (they are sent at once, with the audio before them).
        var controls = 0
        var droppedSamples = 0
        /// The consumer's gathering threshold while it waits (see ``next(maxAudio:minAudio:)``).
        var minAudio = 0
        var waiter: CheckedContinuation<Void, Never>?
        var roomWaiter: (limit: Int, continuation: CheckedContinuation<Void, Never>)?
        var closed = false
    }

    private let state = Mutex(State())
    /// Most audio held, in samples at 16 kHz.
    public let audioBoundSamples: Int

    /// A queue holding at most `audioBound` of audio at `sampleRate`.
    public init(audioBound: Duration = .seconds(30), sampleRate: Int = 16_000) {
        self.audioBoundSamples = Int(audioBound.milliseconds) * sampleRate / 1000
    }

    /// Samples dropped because the bound was exceeded.
    public var droppedSamples: Int { state.withLock { $0.droppedSamples } }

    /// Samples of audio waiting.
    public var queuedSamples: Int { state.withLock { $0.audioSamples } }

    /// Adds input; drops the oldest audio when over the bound. Wakes the consumer only once what it
    /// waits for is there.
    public func push(_ input: SessionInput) {
        let waiter: CheckedContinuation<Void, Never>? = state.withLock { state in
            guard !state.closed else { return nil }
            state.items.append(input)
            if case .audio = input {} else { state.controls += 1 }
            if case .audio(let chunk) = input {
                state.audioSamples += chunk.samples.count
                while state.audioSamples > audioBoundSamples {
                    guard
                        let index = state.items[state.head...].firstIndex(where: {
                            if case .audio = $0 { true } else { false }
                        }),
                        case .audio(let oldest) = state.items[index]
                    else { break }
                    state.items.remove(at: index)
                    state.audioSamples -= oldest.samples.count
                    state.droppedSamples += oldest.samples.count
                }
            }
            guard Self.ready(state) else { return nil }
            let waiter = state.waiter
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    private static func ready(_ state: State) -> Bool {
        state.closed || (state.head < state.items.count && (state.controls > 0 || state.audioSamples >= state.minAudio))
    }

    /// Puts input back at the front (it could not be sent); keeps the order it had.
    public func pushFront(_ inputs: [SessionInput]) {
        guard !inputs.isEmpty else { return }
        state.withLock { state in
            state.items.replaceSubrange(state.head..<state.head, with: inputs)
            for input in inputs {
                if case .audio(let chunk) = input {
                    state.audioSamples += chunk.samples.count
                } else {
                    state.controls += 1
                }
            }
        }
    }

    /// The next input. Consecutive audio chunks of one rate are merged up to `maxAudio` samples, so a
    /// backlog (after a reconnect, or a fast file) goes out in few messages. With `minAudio`, audio is
    /// gathered until that much is queued (or any other input, which goes at once, or the end): a
    /// microphone's 10 ms frames then go out a few at a time, and the sender wakes that much less
    /// often. Nil once closed or cancelled.
    public func next(maxAudio: Int, minAudio: Int = 0) async -> SessionInput? {
        while true {
            if Task.isCancelled { return nil }
            let (result, roomWaiter) = state.withLock { state -> (SessionInput??, CheckedContinuation<Void, Never>?) in
                state.minAudio = min(minAudio, maxAudio)
                if Self.ready(state), state.head < state.items.count {
                    let item = take(&state, maxAudio: maxAudio)
                    var room: CheckedContinuation<Void, Never>?
                    if let waiter = state.roomWaiter, state.audioSamples < waiter.limit {
                        room = waiter.continuation
                        state.roomWaiter = nil
                    }
                    return (.some(item), room)
                }
                return (state.closed ? .some(nil) : nil, nil)
            }
            roomWaiter?.resume()
            if let result { return result }
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let resumeNow = state.withLock { state -> Bool in
                        if Self.ready(state) || Task.isCancelled { return true }
                        state.waiter = continuation
                        return false
                    }
                    if resumeNow { continuation.resume() }
                }
            } onCancel: {
                let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                    defer { state.waiter = nil }
                    return state.waiter
                }
                waiter?.resume()
            }
        }
    }

    /// Waits until fewer than `samples` audio samples are queued (backpressure for a source that can
    /// produce faster than real time, such as a file). One waiter at a time; returns at once when closed.
    public func waitForRoom(below samples: Int) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if state.audioSamples < samples || state.closed || Task.isCancelled { return true }
                    state.roomWaiter = (samples, continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                defer { state.roomWaiter = nil }
                return state.roomWaiter?.continuation
            }
            waiter?.resume()
        }
    }

    /// Removes and returns everything queued (used to discard audio on a deliberate reset).
    @discardableResult
    public func removeAll() -> [SessionInput] {
        state.withLock { state in
            let rest = Array(state.items[state.head...])
            state.items.removeAll(keepingCapacity: true)
            state.head = 0
            state.audioSamples = 0
            state.controls = 0
            return rest
        }
    }

    /// Ends the queue: the consumer gets nil once it is empty, later pushes are ignored.
    public func close() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.closed = true
            defer {
                state.waiter = nil
                state.roomWaiter = nil
            }
            return [state.waiter, state.roomWaiter?.continuation].compactMap { $0 }
        }
        for waiter in waiters { waiter.resume() }
    }

    private func take(_ state: inout State, maxAudio: Int) -> SessionInput {
        let first = state.items[state.head]
        state.head += 1
        guard case .audio(var chunk) = first else {
            state.controls -= 1
            compact(&state)
            return first
        }
        while state.head < state.items.count, chunk.samples.count < maxAudio,
            case .audio(let more) = state.items[state.head], more.sampleRate == chunk.sampleRate,
            chunk.samples.count + more.samples.count <= maxAudio
        {
            chunk.samples.append(contentsOf: more.samples)
            // The newest sample's capture time, when both parts know theirs (a pre-roll does not).
            chunk.capturedAt = chunk.capturedAt == nil ? nil : more.capturedAt
            state.head += 1
        }
        state.audioSamples -= chunk.samples.count
        compact(&state)
        return .audio(chunk)
    }

    private func compact(_ state: inout State) {
        if state.head == state.items.count {
            state.items.removeAll(keepingCapacity: true)
            state.head = 0
        } else if state.head > 256, state.head * 2 > state.items.count {
            state.items.removeFirst(state.head)
            state.head = 0
        }
    }
}
