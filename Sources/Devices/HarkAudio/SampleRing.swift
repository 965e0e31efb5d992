import Synchronization

/// A bounded ring of Float samples with one writer and one reader that never lock: a decoder's thread writes what
/// it decoded, the playback thread reads what it mixes. Its room is reserved when it is made; neither side
/// allocates, blocks or waits. A writer that finds the ring full writes less (it is told how much went in and waits
/// on its own terms); a reader that finds it empty reads less (the mixer plays silence for the rest).
///
/// Each index is written by one side only: the writer publishes its index with release ordering after the samples,
/// the reader acquires it before reading them (and the other way round for the room a read frees).
public final class SampleRing: Sendable {
    /// The most samples the ring holds.
    public let capacity: Int
    private nonisolated(unsafe) let storage: UnsafeMutablePointer<Float>
    /// Samples ever written (the writer's index).
    private let written = Atomic(0)
    /// Samples ever read (the reader's index).
    private let consumed = Atomic(0)

    /// A ring that holds up to `capacity` samples (at least one).
    public init(capacity: Int) {
        self.capacity = max(1, capacity)
        storage = .allocate(capacity: self.capacity)
        storage.initialize(repeating: 0, count: self.capacity)
    }

    deinit { storage.deallocate() }

    /// Samples waiting to be read.
    public var count: Int {
        let read = consumed.load(ordering: .acquiring)
        return max(0, min(capacity, written.load(ordering: .acquiring) - read))
    }

    /// Room for samples to be written.
    public var room: Int { capacity - count }

    /// Writes up to `count` samples from `source` (writer's side only); returns how many went in.
    @discardableResult
    public func write(_ source: UnsafePointer<Float>, count: Int) -> Int {
        let head = written.load(ordering: .relaxed)
        let tail = consumed.load(ordering: .acquiring)
        let n = max(0, min(count, capacity - (head - tail)))
        guard n > 0 else { return 0 }
        let start = head % capacity
        let first = min(n, capacity - start)
        (storage + start).update(from: source, count: first)
        if first < n { storage.update(from: source + first, count: n - first) }
        written.store(head + n, ordering: .releasing)
        return n
    }

    /// ``write(_:count:)`` from an array (for tests and for writers that hold one).
    @discardableResult
    public func write(_ samples: [Float]) -> Int {
        samples.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return 0 }
            return write(base, count: buffer.count)
        }
    }

    /// Reads up to `count` samples into `target` (reader's side only); returns how many were read.
    @discardableResult
    public func read(into target: UnsafeMutablePointer<Float>, count: Int) -> Int {
        let tail = consumed.load(ordering: .relaxed)
        let head = written.load(ordering: .acquiring)
        let n = max(0, min(count, head - tail))
        guard n > 0 else { return 0 }
        let start = tail % capacity
        let first = min(n, capacity - start)
        target.update(from: storage + start, count: first)
        if first < n { (target + first).update(from: storage, count: n - first) }
        consumed.store(tail + n, ordering: .releasing)
        return n
    }

    /// ``read(into:count:)`` into a new array (for tests; it allocates).
    public func read(count: Int) -> [Float] {
        var out = [Float](repeating: 0, count: max(0, min(count, capacity)))
        let n = out.withUnsafeMutableBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return 0 }
            return read(into: base, count: buffer.count)
        }
        return Array(out.prefix(n))
    }

    /// Drops everything waiting (reader's side only: a stop or a seek), returning how many samples were dropped.
    @discardableResult
    public func drain() -> Int {
        let tail = consumed.load(ordering: .relaxed)
        let head = written.load(ordering: .acquiring)
        consumed.store(head, ordering: .releasing)
        return head - tail
    }
}
