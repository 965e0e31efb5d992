import DequeModule
import Synchronization

/// A first-in first-out queue between any number of producers and one consumer, bounded by a cost: a count
/// (each element costs 1), bytes, samples of audio. What a push that would pass the bound does is the queue's
/// ``Overflow`` policy. Elements that cost nothing (a control among audio) never count toward the bound and are
/// never dropped or refused.
///
/// Producers never block a thread: ``push(_:)`` takes a short lock and returns; ``pushWhenRoom(_:)`` and
/// ``waitForRoom(below:)`` suspend the producing task. The consumer awaits ``next()`` (or ``next(gathering:merging:)``,
/// ``nextAll()``); a cancelled consumer gets nil and takes nothing. ``close()`` ends the queue: later pushes are
/// refused, the consumer takes what is left, then nil.
public final class BoundedQueue<Element: Sendable>: Sendable {
    /// What a push that would pass the bound does.
    public enum Overflow: Sendable, Hashable {
        /// Drops the oldest elements that cost something until the new one fits, and counts them: audio and
        /// events age, the newest matter most.
        case dropOldest
        /// Refuses the new element, and counts it: what was queued first is kept.
        case reject
        /// ``pushWhenRoom(_:)`` waits until the new element fits; ``push(_:)``, which never waits, puts it in
        /// beyond the bound (a source that must not wait, a control that must not be lost).
        case waitForRoom
    }

    /// What became of a push.
    public enum PushResult: Sendable, Hashable {
        /// Queued; `dropped` older elements made room for it.
        case queued(dropped: Int)
        /// Refused: full under ``Overflow/reject``, or alone costlier than the bound.
        case rejected
        /// Refused: the queue was closed.
        case closed
    }

    /// What has gone through the queue so far.
    public struct Statistics: Sendable, Hashable {
        /// Elements queued.
        public var queued = 0
        /// Elements dropped to make room (the oldest), and what they cost.
        public var dropped = 0
        public var droppedCost = 0
        /// Elements refused (``Overflow/reject``, or alone costlier than the bound), and what they cost.
        public var rejected = 0
        public var rejectedCost = 0
        /// The highest cost waiting at once.
        public var highWater = 0
    }

    private struct State {
        var items = Deque<Element>()
        var cost = 0
        /// Elements without a cost waiting (they go to the consumer at once, whatever it gathers).
        var free = 0
        var closed = false
        /// The cost the consumer gathers before it is woken (``next(gathering:merging:)``).
        var gathering = 0
        var statistics = Statistics()

        /// True when the consumer has something to take, by its own measure.
        var ready: Bool { closed || !items.isEmpty && (free > 0 || cost >= gathering) }
    }

    /// The most cost that may wait (pushes that must not wait, and elements put back, may pass it).
    public let bound: Int
    /// What a push that would pass the bound does.
    public let overflow: Overflow
    private let costOf: @Sendable (Element) -> Int
    private let state = Mutex(State())
    /// Rung when the consumer may have something to take.
    private let arrivals: EventCount
    /// Rung when something was taken (room for producers that wait).
    private let departures = EventCount()

    /// A queue of at most `bound` (at least 1) of `cost` (1 an element unless given; never below 0).
    /// - Parameter arrivals: where the consumer waits; queues that one consumer takes from together share one.
    public init(
        bound: Int,
        overflow: Overflow,
        arrivals: EventCount = EventCount(),
        cost: @escaping @Sendable (Element) -> Int = { _ in 1 }
    ) {
        self.bound = max(1, bound)
        self.overflow = overflow
        self.arrivals = arrivals
        self.costOf = { max(0, cost($0)) }
    }

    /// Elements waiting.
    public var count: Int { state.withLock { $0.items.count } }

    /// The cost waiting.
    public var cost: Int { state.withLock { $0.cost } }

    /// What has gone through so far.
    public var statistics: Statistics { state.withLock { $0.statistics } }

    /// Producers waiting for room now (``pushWhenRoom(_:)``, ``waitForRoom(below:)``).
    public var producersWaiting: Int { departures.waiting }

    /// Consumers waiting for an element now.
    public var consumersWaiting: Int { arrivals.waiting }

    /// Queues `element` without waiting, as the ``overflow`` policy says.
    @discardableResult
    public func push(_ element: Element) -> PushResult {
        let (result, wake) = state.withLock { state -> (PushResult, Bool) in
            let result = add(element, to: &state)
            return (result, state.ready)
        }
        if wake { arrivals.notify() }
        return result
    }

    /// Queues `elements` together (the consumer finds all or none of them), each as ``push(_:)`` would.
    public func push(contentsOf elements: some Sequence<Element>) {
        let wake = state.withLock { state -> Bool in
            for element in elements { _ = add(element, to: &state) }
            return state.ready
        }
        if wake { arrivals.notify() }
    }

    /// Queues `element`; under ``Overflow/waitForRoom`` first waits until it fits (a cancelled producer stops
    /// waiting and queues it anyway: nothing is lost). Under the other policies, as ``push(_:)``.
    @discardableResult
    public func pushWhenRoom(_ element: Element) async -> PushResult {
        let weight = costOf(element)
        while overflow == .waitForRoom, !Task.isCancelled {
            let ticket = departures.ticket()
            let fits = state.withLock { $0.closed || $0.cost == 0 || $0.cost + weight <= bound }
            if fits { break }
            await departures.wait(after: ticket)
        }
        return push(element)
    }

    /// Puts `elements` back in front of the rest, in their order (what the consumer took but could not use): never
    /// dropped, never refused, not even once closed.
    public func pushFront(_ elements: some Collection<Element>) {
        guard !elements.isEmpty else { return }
        let wake = state.withLock { state -> Bool in
            state.items.prepend(contentsOf: elements)
            for element in elements { account(element, in: &state, sign: 1) }
            state.statistics.highWater = max(state.statistics.highWater, state.cost)
            return state.ready
        }
        if wake { arrivals.notify() }
    }

    /// The oldest element; nil once closed and empty, or when the calling task is cancelled (nothing taken).
    public func next() async -> Element? {
        await take(gathering: 0) { state in popFirst(&state) }
    }

    /// The oldest element, and the ones after it that `merge` folds into it (it returns false for the first
    /// one it leaves). With `gathering`, waits until that much cost is queued, or an element without a cost
    /// (which goes at once, with what is before it), or the end: a producer of small pieces then wakes the
    /// consumer a few pieces at a time. Nil once closed and empty, or when the calling task is cancelled.
    public func next(gathering: Int = 0, merging merge: (inout Element, Element) -> Bool) async -> Element? {
        await take(gathering: gathering) { state in
            guard var taken = popFirst(&state) else { return nil }
            while let following = state.items.first, merge(&taken, following) {
                _ = popFirst(&state)
            }
            return taken
        }
    }

    /// Every element waiting (at least one); nil once closed and empty, or when the calling task is cancelled.
    public func nextAll() async -> [Element]? {
        await take(gathering: 0) { state in
            guard !state.items.isEmpty else { return nil }
            defer { clear(&state) }
            return Array(state.items)
        }
    }

    /// The oldest element when one waits, without waiting.
    public func poll() -> Element? {
        let element = state.withLock { popFirst(&$0) }
        if element != nil { departures.notify() }
        return element
    }

    /// Waits until less than `cost` waits (backpressure for a source faster than real time), the queue is
    /// closed, or the task is cancelled.
    public func waitForRoom(below cost: Int) async {
        while !Task.isCancelled {
            let ticket = departures.ticket()
            if state.withLock({ $0.cost < cost || $0.closed }) { return }
            await departures.wait(after: ticket)
        }
    }

    /// Removes and returns everything waiting.
    @discardableResult
    public func removeAll() -> [Element] {
        let removed = state.withLock { state -> [Element] in
            defer { clear(&state) }
            return Array(state.items)
        }
        departures.notify()
        return removed
    }

    /// Ends the queue: later pushes are refused; the consumer takes what is left, then gets nil.
    public func close() {
        state.withLock { $0.closed = true }
        arrivals.notify()
        departures.notify()
    }

    // MARK: - Under the lock

    private func add(_ element: Element, to state: inout State) -> PushResult {
        guard !state.closed else { return .closed }
        let weight = costOf(element)
        var dropped = 0
        if weight > 0, state.cost + weight > bound, overflow != .waitForRoom {
            guard overflow == .dropOldest, weight <= bound else {
                state.statistics.rejected += 1
                state.statistics.rejectedCost += weight
                return .rejected
            }
            while state.cost + weight > bound, let index = state.items.firstIndex(where: { costOf($0) > 0 }) {
                let oldest = state.items.remove(at: index)
                account(oldest, in: &state, sign: -1)
                dropped += 1
                state.statistics.dropped += 1
                state.statistics.droppedCost += costOf(oldest)
            }
        }
        state.items.append(element)
        account(element, in: &state, sign: 1)
        state.statistics.queued += 1
        state.statistics.highWater = max(state.statistics.highWater, state.cost)
        return .queued(dropped: dropped)
    }

    private func account(_ element: Element, in state: inout State, sign: Int) {
        let weight = costOf(element)
        state.cost += sign * weight
        if weight == 0 { state.free += sign }
    }

    private func popFirst(_ state: inout State) -> Element? {
        guard let first = state.items.popFirst() else { return nil }
        account(first, in: &state, sign: -1)
        return first
    }

    private func clear(_ state: inout State) {
        state.items.removeAll()
        state.cost = 0
        state.free = 0
    }

    /// Takes with `taking` once the consumer's measure is met; waits on ``arrivals`` until then.
    private func take<Taken: Sendable>(
        gathering: Int,
        _ taking: (inout State) -> Taken?
    ) async -> Taken? {
        while !Task.isCancelled {
            let ticket = arrivals.ticket()
            let (taken, end) = state.withLock { state -> (Taken?, Bool) in
                state.gathering = gathering
                guard state.ready else { return (nil, false) }
                let taken = taking(&state)
                return (taken, taken == nil && state.closed)
            }
            if let taken {
                departures.notify()
                return taken
            }
            if end { return nil }
            await arrivals.wait(after: ticket)
        }
        return nil
    }
}
