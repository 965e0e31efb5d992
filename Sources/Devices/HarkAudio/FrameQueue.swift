import HarkCore
import HarkPlatform
import Synchronization

/// A bounded queue of fixed-size frames between the capture thread and one async consumer. Storage is
/// allocated once; ``push(_:sequence:capturedAt:readAt:level:referenceIndex:)`` copies into it under a lock held only for
/// the copy, and drops (and counts) the oldest frame when full. The consumer awaits ``next()``.
final class FrameQueue: @unchecked Sendable {
    private struct State: ~Copyable {
        var head = 0
        var count = 0
        var dropped = 0
        var closed = false
    }

    let frameSize: Int
    let capacity: Int
    private let storage: UnsafeMutablePointer<Int16>
    private let sequences: UnsafeMutablePointer<Int>
    private let times: UnsafeMutablePointer<(UInt64, UInt64, UInt64)>
    private let levels: UnsafeMutablePointer<Float>
    private let referenceIndices: UnsafeMutablePointer<Int?>
    private let state = Mutex(State())
    /// Where the consumer waits for a frame.
    private let arrivals = EventCount()
    /// Signalled whenever the consumer takes a frame (for a producer that waits for room).
    let room = Wakeup()
    /// Frames that gather before the consumer is woken (1: each at once).
    let batch = Atomic(1)

    init(frameSize: Int, capacity: Int) {
        self.frameSize = frameSize
        self.capacity = max(1, capacity)
        storage = .allocate(capacity: frameSize * self.capacity)
        storage.initialize(repeating: 0, count: frameSize * self.capacity)
        sequences = .allocate(capacity: self.capacity)
        sequences.initialize(repeating: 0, count: self.capacity)
        times = .allocate(capacity: self.capacity)
        times.initialize(repeating: (0, 0, 0), count: self.capacity)
        levels = .allocate(capacity: self.capacity)
        levels.initialize(repeating: 0, count: self.capacity)
        referenceIndices = .allocate(capacity: self.capacity)
        referenceIndices.initialize(repeating: nil, count: self.capacity)
    }

    deinit {
        storage.deallocate()
        sequences.deallocate()
        times.deallocate()
        levels.deallocate()
        referenceIndices.deallocate()
    }

    /// Frames dropped because the consumer fell behind.
    var dropped: Int { state.withLock { $0.dropped } }

    /// Consumers waiting for a frame (0 or 1).
    var consumersWaiting: Int { arrivals.waiting }

    /// Frames waiting.
    var count: Int { state.withLock { $0.count } }

    /// True when the next push would drop the oldest frame.
    var isFull: Bool { state.withLock { $0.count >= capacity } }

    /// Adds a frame (capture thread). Never blocks beyond the copy; never allocates.
    func push(
        _ samples: UnsafePointer<Int16>,
        sequence: Int,
        capturedAt: UInt64,
        readAt: UInt64,
        level: Float,
        referenceIndex: Int? = nil
    ) {
        let wake = state.withLock { state -> Bool in
            guard !state.closed else { return false }
            if state.count == capacity {
                state.head = (state.head + 1) % capacity
                state.count -= 1
                state.dropped += 1
            }
            let slot = (state.head + state.count) % capacity
            (storage + slot * frameSize).update(from: samples, count: frameSize)
            sequences[slot] = sequence
            times[slot] = (capturedAt, readAt, monotonicNanoseconds())
            levels[slot] = level
            referenceIndices[slot] = referenceIndex
            state.count += 1
            return state.count >= batch.load(ordering: .relaxed)
        }
        if wake { arrivals.notify() }
    }

    /// The oldest frame, waiting for one; nil once closed and empty, or when the task is cancelled.
    func next() async -> CapturedFrame? {
        while true {
            if Task.isCancelled { return nil }
            let ticket = arrivals.ticket()
            let result = state.withLock { state -> CapturedFrame?? in
                guard state.count > 0 else { return state.closed ? .some(nil) : nil }
                let slot = state.head
                let frame = CapturedFrame(
                    samples: Array(UnsafeBufferPointer(start: storage + slot * frameSize, count: frameSize)),
                    sequence: sequences[slot],
                    capturedAt: times[slot].0,
                    readAt: times[slot].1,
                    enqueuedAt: times[slot].2,
                    level: levels[slot],
                    referenceIndex: referenceIndices[slot]
                )
                state.head = (state.head + 1) % capacity
                state.count -= 1
                return .some(frame)
            }
            if let result {
                room.signal()
                return result
            }
            await arrivals.wait(after: ticket)
        }
    }

    /// Ends the queue: the consumer drains what is left, then gets nil.
    func close() {
        state.withLock { $0.closed = true }
        arrivals.notify()
    }
}
