import HarkCore
import Testing

@testable import HarkLiveKit

/// The bounded queue between LiveKit's Rust threads and the client's event pump: the core's queue, each event
/// costing its bytes and at least its share of them, so both the number and the bytes waiting are bounded.
@Suite struct EventQueueTests {
    @Test func tinyEventsAreBoundedInNumberAndLargeOnesInBytes() async {
        let queue = LiveKitClient.queue(elements: 3, bytes: 300)  // a share of 100 bytes each
        for value in 1...3 { #expect(queue.push([UInt8(value)]) == .queued(dropped: 0)) }
        // A fourth event of one byte: the oldest goes, though only 3 bytes wait.
        #expect(queue.push([4]) == .queued(dropped: 1))
        #expect(queue.count == 3)
        // 250 bytes: every share must go to make room (250 + 100 > 300).
        #expect(queue.push([UInt8](repeating: 5, count: 250)) == .queued(dropped: 3))
        #expect(queue.count == 1 && queue.cost == 250)
        #expect(await queue.next()?.count == 250)
        // One event alone larger than the bound is refused (the callback counts it without copying).
        #expect(queue.push([UInt8](repeating: 0, count: 301)) == .rejected)
        #expect(queue.statistics.dropped == 4 && queue.statistics.rejected == 1)
    }
}
