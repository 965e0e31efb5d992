import HarkLiveKit
import HarkTestKit
import Synchronization
import Testing

/// The bounded queue between LiveKit's Rust threads and the client's event pump.
@Suite struct EventQueueTests {
    @Test func keepsOrderAndHandsOverToAWaitingConsumer() async throws {
        let queue = EventQueue<Int>(capacity: 8, byteCapacity: 1024)
        let consumer = Task { await queue.next() }
        // Whether the consumer is already waiting or not, it gets the first element.
        #expect(queue.push(1, bytes: 4) == .queued(dropped: 0))
        #expect(await consumer.value == 1)
        for value in 2...4 { queue.push(value, bytes: 4) }
        #expect(await queue.next() == 2)
        #expect(queue.poll() == 3)
        #expect(await queue.next() == 4)
        #expect(queue.poll() == nil)
    }

    @Test func dropsTheOldestWhenFullByCountOrBytes() async {
        let queue = EventQueue<Int>(capacity: 3, byteCapacity: 100)
        for value in 1...3 { queue.push(value, bytes: 10) }
        #expect(queue.push(4, bytes: 10) == .queued(dropped: 1))
        // 90 more bytes: one of the oldest goes for the count, one more for the bytes (10 + 90 <= 100).
        #expect(queue.push(5, bytes: 90) == .queued(dropped: 2))
        #expect(queue.count == 2 && queue.bytes == 100)
        #expect(await queue.next() == 4)
        #expect(await queue.next() == 5)
        let statistics = queue.statistics
        #expect(statistics.dropped == 3)
        #expect(statistics.queued == 5)
        #expect(statistics.highWater == 3)
        #expect(statistics.highWaterBytes <= 100)
    }

    @Test func rejectsTheNewestUnderThatPolicy() async {
        let queue = EventQueue<Int>(capacity: 2, byteCapacity: 100, policy: .rejectNewest)
        #expect(queue.push(1, bytes: 1) == .queued(dropped: 0))
        #expect(queue.push(2, bytes: 1) == .queued(dropped: 0))
        #expect(queue.push(3, bytes: 1) == .rejected)
        #expect(await queue.next() == 1)
        #expect(await queue.next() == 2)
        #expect(queue.statistics.rejected == 1)
    }

    @Test func refusesAnElementLargerThanTheByteBoundWithoutTouchingTheRest() async {
        let queue = EventQueue<Int>(capacity: 4, byteCapacity: 64)
        queue.push(1, bytes: 8)
        #expect(queue.push(2, bytes: 65) == .tooLarge)
        #expect(queue.count == 1)
        #expect(queue.statistics.tooLarge == 1)
        #expect(await queue.next() == 1)
    }

    @Test func finishWakesTheConsumerAfterWhatIsQueued() async throws {
        let queue = EventQueue<Int>(capacity: 4, byteCapacity: 64)
        queue.push(7, bytes: 1)
        queue.finish()
        #expect(queue.push(8, bytes: 1) == .finished)
        #expect(await queue.next() == 7)
        #expect(await queue.next() == nil)

        let waiting = EventQueue<Int>(capacity: 4, byteCapacity: 64)
        let consumer = Task { await waiting.next() }
        waiting.finish()
        let ended = try await withDeadline(.seconds(5), "the waiting consumer to see the end") { await consumer.value }
        #expect(ended == nil)
    }

    /// Four producers on threads of their own push 50 000 events each as fast as they can while the consumer is
    /// slow: the queue never holds more than its bounds, every event is either consumed or counted as dropped,
    /// and each producer's events come out in the order they went in.
    @Test func staysBoundedUnderAFlood() async throws {
        let capacity = 256
        let byteCapacity = 64 << 10
        let queue = EventQueue<[UInt8]>(capacity: capacity, byteCapacity: byteCapacity)
        let producers = 4
        let perProducer = 50_000
        let counters = FloodCounters()
        for producer in 0..<producers {
            Task.detached { @Sendable in
                for index in 0..<perProducer {
                    // Producer in the first byte, a little-endian sequence number in the next three, then padding.
                    var event = [UInt8](repeating: 0, count: 4 + (index % 300))
                    event[0] = UInt8(producer)
                    event[1] = UInt8(truncatingIfNeeded: index)
                    event[2] = UInt8(truncatingIfNeeded: index >> 8)
                    event[3] = UInt8(truncatingIfNeeded: index >> 16)
                    queue.push(event, bytes: event.count)
                    if queue.count > capacity || queue.bytes > byteCapacity {
                        counters.overBounds.add(1, ordering: .relaxed)
                    }
                }
                if counters.finished.add(1, ordering: .relaxed).newValue == producers { queue.finish() }
            }
        }
        let consumed = try await withDeadline(.seconds(60), "the flood to be consumed") {
            var consumed = 0
            var last = [Int](repeating: -1, count: producers)
            while let event = await queue.next() {
                let producer = Int(event[0])
                let index = Int(event[1]) | Int(event[2]) << 8 | Int(event[3]) << 16
                #expect(index > last[producer], "producer \(producer): \(index) after \(last[producer])")
                last[producer] = index
                consumed += 1
                // A slow consumer: the producers outrun it, so the queue fills and sheds.
                if consumed % 64 == 0 { await Task.yield() }
            }
            return consumed
        }
        let statistics = queue.statistics
        #expect(statistics.queued == producers * perProducer)
        #expect(consumed + statistics.dropped == producers * perProducer)
        #expect(statistics.highWater <= capacity)
        #expect(statistics.highWaterBytes <= byteCapacity)
        #expect(statistics.tooLarge == 0)
        #expect(counters.overBounds.load(ordering: .relaxed) == 0)
    }
}

/// What the flood's producers count, shared with the test.
private final class FloodCounters: Sendable {
    let finished = Atomic<Int>(0)
    let overBounds = Atomic<Int>(0)
}
