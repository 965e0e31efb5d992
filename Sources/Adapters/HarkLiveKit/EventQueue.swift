import HarkCore
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
        /// Queued; `dropped` older elements made room for it.
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
        /// Elements queued.
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
    /// Where the consumer waits for an element.
    private let arrivals = EventCount()

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
    /// including threads that are not Swift's. Wakes the consumer when it is waiting.
    @discardableResult
    public func push(_ element: Element, bytes: Int) -> PushResult {
        let weight = max(0, bytes)
        let result = state.withLock { state -> PushResult in
            if state.finished {
                state.statistics.afterFinish += 1
                return .finished
            }
            guard weight <= byteCapacity else {
                state.statistics.tooLarge += 1
                return .tooLarge
            }
            var dropped = 0
            while state.count >= capacity || state.bytes + weight > byteCapacity {
                if policy == .rejectNewest {
                    state.statistics.rejected += 1
                    return .rejected
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
            return .queued(dropped: dropped)
        }
        if case .queued = result { arrivals.notify() }
        return result
    }

    /// The oldest element, waiting for one when the queue is empty; nil once the queue is finished and empty.
    /// One consumer at a time. Not ended by task cancellation: ``finish()`` ends it.
    public func next() async -> Element? {
        while true {
            let ticket = arrivals.ticket()
            let (element, finished) = state.withLock { state in (state.popFirst()?.element, state.finished) }
            if let element { return element }
            if finished { return nil }
            await arrivals.wait(after: ticket, cancellable: false)
        }
    }

    /// The oldest element when one is waiting, without waiting (nil otherwise).
    public func poll() -> Element? {
        state.withLock { $0.popFirst()?.element }
    }

    /// Ends the queue: later pushes are refused; the consumer gets what is still queued, then nil.
    public func finish() {
        state.withLock { $0.finished = true }
        arrivals.notify()
    }

    /// Elements waiting now.
    public var count: Int { state.withLock { $0.count } }

    /// Bytes waiting now.
    public var bytes: Int { state.withLock { $0.bytes } }

    /// What has gone through the queue so far.
    public var statistics: Statistics { state.withLock { $0.statistics } }
}
