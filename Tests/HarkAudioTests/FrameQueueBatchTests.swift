import HarkCore
import HarkTestKit
import Synchronization
import Testing

@testable import HarkAudio

/// The capture's queue wakes its reader once per batch of frames (an idle appliance's pace) and each frame still
/// arrives, in order.
@Suite struct FrameQueueBatchTests {
    private func push(_ queue: FrameQueue, _ sequence: Int) {
        let samples = [Int16](repeating: Int16(sequence), count: queue.frameSize)
        samples.withUnsafeBufferPointer { buffer in
            queue.push(buffer.baseAddress!, sequence: sequence, capturedAt: 0, readAt: 0, level: 0)
        }
    }

    @Test func aWaitingReaderIsWokenOncePerBatchAndGetsEveryFrameInOrder() async throws {
        let queue = FrameQueue(frameSize: 4, capacity: 16)
        queue.batch.store(3, ordering: .relaxed)
        let reader = Task { () -> [Int] in
            var seen: [Int] = []
            while seen.count < 4, let frame = await queue.next() { seen.append(frame.sequence) }
            return seen
        }
        try await withDeadline(.seconds(10), "the reader waits") {
            while queue.consumersWaiting == 0 { await Task.yield() }
        }
        push(queue, 0)
        push(queue, 1)
        // Two of three frames: the reader is not woken (only a notification wakes it, and none was sent).
        #expect(queue.consumersWaiting == 1)
        #expect(queue.count == 2)
        push(queue, 2)
        try await withDeadline(.seconds(10), "the batch taken") {
            while queue.count > 0 { await Task.yield() }
        }
        // Back to one frame at a time: the next frame wakes the reader by itself.
        queue.batch.store(1, ordering: .relaxed)
        try await withDeadline(.seconds(10), "the reader waits again") {
            while queue.consumersWaiting == 0 { await Task.yield() }
        }
        push(queue, 3)
        let seen = try await withDeadline(.seconds(10), "the last frame") { await reader.value }
        #expect(seen == [0, 1, 2, 3])
    }
}
