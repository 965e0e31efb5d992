import Synchronization

/// A bounded first-in first-out queue with one consumer, bounded both in elements and in bytes: what LiveKit's
/// Rust threads push their copied event bytes into, and the client's event pump takes them out of. Pushing never
/// blocks (a short lock, no waiting for the consumer); when a push would pass a bound, the oldest elements are
/// dropped to make room (``Policy/dropOldest``) or the new one is refused (``Policy/rejectNewest``), and either is
/// counted. An element larger than the byte bound on its own is always refused. Memory never grows with time.
public final class EventQueue<Element: Sendable>: Sendable {
    /// What a full queue does with a push.
    public enum Policy: Sendable, Equatable {
        /// Drop the oldest elements until the new one fits (audio and events age: the newest matter most).
        case dropOldest
        /// Refuse the new element (what was queued first is kept).
        case rejectNewest
    }

    /// What happened to a push.
    public enum PushResult: Sendable, Equatable {
        /// Queued (or handed straight to the waiting consumer); `dropped` older elements made room for it.
        case queued(dropped: Int)
        /// Refused: the queue is full under ``Policy/rejectNewest``.
        case rejected
        /// Refused: the element alone is larger than the byte bound.
        case tooLarge
        /// Refused: the queue was finished.
        case finished
    }

    /// What has gone through the queue so far.
    public struct Statistics: Sendable, Equatable {
        /// Elements queued (or handed straight over).
        public var queued = 0
        /// Elements dropped to make room (the oldest).
        public var dropped = 0
        /// Elements refused because the queue was full (``Policy/rejectNewest``).
        public var rejected = 0
        /// Elements refused because they alone were larger than the byte bound.
        public var tooLarge = 0
        /// Pushes after ``EventQueue/finish()``.
        public var afterFinish = 0
        /// The most elements waiting at once.
        public var highWater = 0
        /// The most bytes waiting at once.
        public var highWaterBytes = 0
    }

    private struct State {
        /// The waiting elements, oldest at `head`; slots before `head` are empty and reclaimed now and then.
        var items: [(element: Element, bytes: Int)?] = []
        var head = 0
        var bytes = 0
        var finished = false
        var consumer: CheckedContinuation<Element?, Never>?
        var statistics = Statistics()

        var count: Int { items.count - head }

        mutating func popFirst() -> (element: Element, bytes: Int)? {
            guard head < items.count, let first = items[head] else { return nil }
            items[head] = nil
            head += 1
            bytes -= first.bytes
            // Reclaim the consumed prefix once it is at least half the storage: amortised O(1) per element.
            if head >= 64 && head * 2 >= items.count {
                items.removeFirst(head)
                head = 0
            }
            return first
        }
    }

    /// The most elements that may wait.
    public let capacity: Int
    /// The most bytes (as each push states them) that may wait.
    public let byteCapacity: Int
    /// What a full queue does.
    public let policy: Policy
    private let state: Mutex<State>

    /// A queue holding at most `capacity` elements and `byteCapacity` bytes (each at least 1).
    public init(capacity: Int, byteCapacity: Int, policy: Policy = .dropOldest) {
        self.capacity = max(1, capacity)
        self.byteCapacity = max(1, byteCapacity)
        self.policy = policy
        var initial = State()
        initial.items.reserveCapacity(min(self.capacity, 1024))
        state = Mutex(initial)
    }

    /// Queues `element`, which weighs `bytes` (its payload's size), without waiting; safe from any thread,
    /// including threads that are not Swift's. Hands it straight to the consumer when it is waiting.
    @discardableResult
    public func push(_ element: Element, bytes: Int) -> PushResult {
        let weight = max(0, bytes)
        let (result, consumer): (PushResult, CheckedContinuation<Element?, Never>?) = state.withLock { state in
            if state.finished {
                state.statistics.afterFinish += 1
                return (.finished, nil)
            }
            guard weight <= byteCapacity else {
                state.statistics.tooLarge += 1
                return (.tooLarge, nil)
            }
            if let consumer = state.consumer {
                // The consumer waits, so nothing is queued: hand it over.
                state.consumer = nil
                state.statistics.queued += 1
                state.statistics.highWater = max(state.statistics.highWater, 1)
                state.statistics.highWaterBytes = max(state.statistics.highWaterBytes, weight)
                return (.queued(dropped: 0), consumer)
            }
            var dropped = 0
            while state.count >= capacity || state.bytes + weight > byteCapacity {
                if policy == .rejectNewest {
                    state.statistics.rejected += 1
                    return (.rejected, nil)
                }
                guard state.popFirst() != nil else { break }
                dropped += 1
            }
            state.statistics.dropped += dropped
            state.items.append((element, weight))
            state.bytes += weight
            state.statistics.queued += 1
            state.statistics.highWater = max(state.statistics.highWater, state.count)
            state.statistics.highWaterBytes = max(state.statistics.highWaterBytes, state.bytes)
            return (.queued(dropped: dropped), nil)
        }
        consumer?.resume(returning: element)
        return result
    }

    /// What the consumer finds without waiting.
    private enum Ready {
        case element(Element)
        case finished
        case empty
    }

    /// The oldest element, waiting for one when the queue is empty; nil once the queue is finished and empty.
    /// One consumer at a time (a second waiting consumer is a programming error and traps). Not ended by task
    /// cancellation: ``finish()`` ends it.
    public func next() async -> Element? {
        switch takeReady(waiting: nil) {
        case .element(let element): return element
        case .finished: return nil
        case .empty: break
        }
        return await withCheckedContinuation { (continuation: CheckedContinuation<Element?, Never>) in
            switch takeReady(waiting: continuation) {
            case .element(let element): continuation.resume(returning: element)
            case .finished: continuation.resume(returning: nil)
            case .empty: break
            }
        }
    }

    /// The oldest element, or that the queue is finished; else, with `waiting`, registers the consumer.
    private func takeReady(waiting: CheckedContinuation<Element?, Never>?) -> Ready {
        state.withLock { state in
            if let first = state.popFirst() { return .element(first.element) }
            if state.finished { return .finished }
            if let waiting {
                precondition(state.consumer == nil, "EventQueue has one consumer")
                state.consumer = waiting
            }
            return .empty
        }
    }

    /// The oldest element when one is waiting, without waiting (nil otherwise).
    public func poll() -> Element? {
        state.withLock { $0.popFirst()?.element }
    }

    /// Ends the queue: later pushes are refused; the consumer gets what is still queued, then nil.
    public func finish() {
        let consumer = state.withLock { state -> CheckedContinuation<Element?, Never>? in
            state.finished = true
            defer { state.consumer = nil }
            return state.consumer
        }
        consumer?.resume(returning: nil)
    }

    /// Elements waiting now.
    public var count: Int { state.withLock { $0.count } }

    /// Bytes waiting now.
    public var bytes: Int { state.withLock { $0.bytes } }

    /// What has gone through the queue so far.
    public var statistics: Statistics { state.withLock { $0.statistics } }
}
