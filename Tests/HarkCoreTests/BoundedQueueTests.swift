import HarkCore
import HarkTestKit
import Synchronization
import Testing

/// The one bounded queue: its bounds under each policy, its cost, its consumer and producers waiting, cancellation.
@Suite struct BoundedQueueTests {
    /// A queue of words that cost their length (a control word, "", costs nothing).
    func words(bound: Int, _ overflow: BoundedQueue<String>.Overflow) -> BoundedQueue<String> {
        BoundedQueue(bound: bound, overflow: overflow) { $0.count }
    }

    func drain(_ queue: BoundedQueue<String>) -> [String] {
        var taken: [String] = []
        while let word = queue.poll() { taken.append(word) }
        return taken
    }

    @Test func dropOldestKeepsTheNewestWithinTheBoundAndCountsWhatItDropped() {
        let queue = words(bound: 10, .dropOldest)
        #expect(queue.push("aaaa") == .queued(dropped: 0))
        #expect(queue.push("bbbb") == .queued(dropped: 0))
        #expect(queue.push("") == .queued(dropped: 0))  // costs nothing: never counts, never dropped
        #expect(queue.push("cccc") == .queued(dropped: 1))
        #expect(queue.cost == 8)
        #expect(queue.push("dddddddd") == .queued(dropped: 2))
        #expect(queue.cost == 8 && queue.count == 2)
        // Alone costlier than the bound: refused, the rest untouched.
        #expect(queue.push("eeeeeeeeeee") == .rejected)
        #expect(drain(queue) == ["", "dddddddd"])
        let statistics = queue.statistics
        #expect(statistics.dropped == 3 && statistics.droppedCost == 12)
        #expect(statistics.rejected == 1 && statistics.rejectedCost == 11)
        #expect(statistics.highWater <= 10)
    }

    @Test func rejectKeepsWhatCameFirstAndRefusesTheNewest() {
        let queue = words(bound: 6, .reject)
        #expect(queue.push("aaa") == .queued(dropped: 0))
        #expect(queue.push("bbb") == .queued(dropped: 0))
        #expect(queue.push("c") == .rejected)
        #expect(queue.push("") == .queued(dropped: 0))  // no cost: never refused
        #expect(drain(queue) == ["aaa", "bbb", ""])
        #expect(queue.statistics.rejected == 1)
    }

    @Test func aCountBoundCostsOneAnElement() {
        let queue = BoundedQueue<Int>(bound: 3, overflow: .dropOldest)
        for value in 1...5 { queue.push(value) }
        #expect(queue.count == 3 && queue.cost == 3)
        var taken: [Int] = []
        while let value = queue.poll() { taken.append(value) }
        #expect(taken == [3, 4, 5])
    }

    @Test func waitForRoomPushesBeyondTheBoundOnlyWhenToldNotToWait() async throws {
        let queue = words(bound: 4, .waitForRoom)
        queue.push("aaaa")
        #expect(queue.push("bb") == .queued(dropped: 0))  // a push that must not wait goes in beyond the bound
        #expect(queue.cost == 6)
        let pushed = Flag()
        let producer = Task {
            await queue.pushWhenRoom("cc")
            pushed.set()
        }
        try await withDeadline(.seconds(5), "the producer to wait for room") {
            while queue.producersWaiting == 0 { await Task.yield() }
        }
        #expect(!pushed.isSet)  // 6 + 2 > 4: it waits
        #expect(queue.poll() == "aaaa")  // 2 + 2 fits now
        try await withDeadline(.seconds(5), "the waiting producer to push") { await producer.value }
        #expect(drain(queue) == ["bb", "cc"])
    }

    @Test func aCancelledProducerStopsWaitingAndLosesNothing() async throws {
        let queue = BoundedQueue<Int>(bound: 1, overflow: .waitForRoom)
        queue.push(1)
        let producer = Task { await queue.pushWhenRoom(2) }
        producer.cancel()
        #expect(
            try await withDeadline(.seconds(5), "the cancelled producer") { await producer.value }
                == .queued(dropped: 0)
        )
        #expect(queue.count == 2)
    }

    @Test func theConsumerWaitsForAPushAndACancelledOneTakesNothing() async throws {
        let queue = BoundedQueue<Int>(bound: 8, overflow: .dropOldest)
        let consumer = Task { await queue.next() }
        queue.push(7)
        #expect(try await withDeadline(.seconds(5), "the consumer to be woken") { await consumer.value } == 7)
        let cancelled = Task { await queue.next() }
        cancelled.cancel()
        #expect(try await withDeadline(.seconds(5), "the cancelled consumer") { await cancelled.value } == nil)
        queue.push(8)
        #expect(queue.count == 1)  // the cancelled consumer took nothing
        #expect(await queue.next() == 8)
    }

    @Test func closeEndsTheConsumerAfterWhatIsLeftAndRefusesLaterPushes() async throws {
        let queue = BoundedQueue<Int>(bound: 8, overflow: .dropOldest)
        let waiting = Task { await queue.next() }
        try await withDeadline(.seconds(5), "the consumer to wait") {
            while queue.consumersWaiting == 0 { await Task.yield() }
        }
        queue.close()
        #expect(try await withDeadline(.seconds(5), "the waiting consumer to end") { await waiting.value } == nil)
        let closed = BoundedQueue<Int>(bound: 8, overflow: .dropOldest)
        closed.push(1)
        closed.close()
        #expect(closed.push(2) == .closed)
        closed.pushFront([0])  // what a consumer took and gives back still comes out
        #expect(await closed.next() == 0)
        #expect(await closed.next() == 1)
        #expect(await closed.next() == nil)
    }

    @Test func pushFrontGoesFirstInItsOrderAndIsNeverDropped() async {
        let queue = words(bound: 4, .dropOldest)
        queue.push("cc")
        queue.pushFront(["aa", "bb"])
        #expect(queue.cost == 6)  // beyond the bound: given back, not dropped
        #expect(drain(queue) == ["aa", "bb", "cc"])
    }

    @Test func aGatheringConsumerWakesOnceEnoughOrAControlIsQueuedAndMergesInOrder() async throws {
        let queue = words(bound: 100, .dropOldest)
        let merge: @Sendable (inout String, String) -> Bool = { taken, next in
            guard !taken.isEmpty, !next.isEmpty, taken.count + next.count <= 6 else { return false }
            taken += next
            return true
        }
        queue.push("ab")
        let gathered = Task { await queue.next(gathering: 4, merging: merge) }
        try await withDeadline(.seconds(5), "the consumer to sleep") {
            while queue.consumersWaiting == 0 { await Task.yield() }
        }
        #expect(queue.count == 1)  // 2 < 4: the consumer sleeps
        queue.push("cd")
        #expect(try await withDeadline(.seconds(5), "the gathered words") { await gathered.value } == "abcd")
        // Less than the minimum goes at once when a control (no cost) follows it, the control after it.
        queue.push("ef")
        queue.push("")
        #expect(await queue.next(gathering: 4, merging: merge) == "ef")
        #expect(await queue.next(gathering: 4, merging: merge) == "")
        // Merging stops at what merge refuses.
        for word in ["abc", "def", "g"] { queue.push(word) }
        #expect(await queue.next(merging: merge) == "abcdef")
        #expect(await queue.next(merging: merge) == "g")
    }

    @Test func nextAllTakesEverythingWaitingAtOnce() async {
        let queue = BoundedQueue<Int>(bound: 8, overflow: .reject)
        queue.push(contentsOf: [1, 2, 3])
        #expect(await queue.nextAll() == [1, 2, 3])
        #expect(queue.count == 0 && queue.cost == 0)
    }

    @Test func waitForRoomReturnsOnceTheConsumerTookEnough() async throws {
        let queue = words(bound: 100, .dropOldest)
        queue.push("aaaa")
        queue.push("bbbb")
        let waiter = Task { await queue.waitForRoom(below: 5) }
        #expect(queue.poll() == "aaaa")
        try await withDeadline(.seconds(5), "room") { await waiter.value }
        #expect(queue.cost == 4)
    }

    /// Four producers on threads of their own flood a small queue while one slow consumer takes: the cost never
    /// passes the bound, and every element is either taken or counted as dropped, each producer's in order.
    @Test func staysBoundedUnderAFloodOfProducers() async throws {
        let queue = BoundedQueue<[Int]>(bound: 256, overflow: .dropOldest) { $0.count }
        let producers = 4
        let perProducer = 20_000
        let finished = Count()
        for producer in 0..<producers {
            Task.detached {
                for index in 0..<perProducer { queue.push([producer, index] + [Int](repeating: 0, count: index % 7)) }
                if finished.add() == producers { queue.close() }
            }
        }
        let taken = try await withDeadline(.seconds(60), "the flood to be taken") {
            var taken = 0
            var last = [Int](repeating: -1, count: producers)
            while let element = await queue.next() {
                #expect(element[1] > last[element[0]])
                last[element[0]] = element[1]
                taken += 1
                if taken % 64 == 0 { await Task.yield() }
            }
            return taken
        }
        let statistics = queue.statistics
        #expect(statistics.queued == producers * perProducer)
        #expect(taken + statistics.dropped == producers * perProducer)
        #expect(statistics.highWater <= 256)
    }
}

/// The one wait-and-wake of the queues.
@Suite struct EventCountTests {
    @Test func aChangeBetweenLookingAndWaitingIsNotMissed() async throws {
        let signal = EventCount()
        let ticket = signal.ticket()
        signal.notify()  // after the look, before the wait
        try await withDeadline(.seconds(5), "the wait to return at once") { await signal.wait(after: ticket) }
    }

    @Test func everyWaiterWakesOnANotifyAndACancelledOneWakesAlone() async throws {
        let signal = EventCount()
        let ticket = signal.ticket()
        let woken = Count()
        let waiters = (0..<3).map { _ in
            Task {
                await signal.wait(after: ticket)
                _ = woken.add()
            }
        }
        let cancelled = Task { await signal.wait(after: ticket) }
        cancelled.cancel()
        try await withDeadline(.seconds(5), "the cancelled waiter") { await cancelled.value }
        #expect(woken.value == 0)
        signal.notify()
        for waiter in waiters { try await withDeadline(.seconds(5), "a waiter to wake") { await waiter.value } }
        #expect(woken.value == 3)
    }

    @Test func aWaitThatIsNotCancellableOutlivesTheCancellation() async throws {
        let signal = EventCount()
        let ticket = signal.ticket()
        let returned = Flag()
        let waiter = Task {
            await signal.wait(after: ticket, cancellable: false)
            returned.set()
        }
        waiter.cancel()
        try await withDeadline(.seconds(5), "the cancelled waiter to park") {
            while signal.waiting == 0 { await Task.yield() }
        }
        #expect(!returned.isSet)
        signal.notify()
        try await withDeadline(.seconds(5), "the notify") { await waiter.value }
        #expect(returned.isSet)
    }
}

/// A flag tasks share.
private final class Flag: Sendable {
    private let flag = Atomic(false)
    func set() { flag.store(true, ordering: .relaxed) }
    var isSet: Bool { flag.load(ordering: .relaxed) }
}

/// A count tasks share.
private final class Count: Sendable {
    private let count = Atomic(0)
    /// Adds one; the new count.
    @discardableResult func add() -> Int { count.add(1, ordering: .relaxed).newValue }
    var value: Int { count.load(ordering: .relaxed) }
}
