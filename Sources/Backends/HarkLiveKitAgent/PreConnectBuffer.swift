/// What the user said before the agent was in the room, kept for it (seed 004's pre-connect audio): microphone audio
/// at one rate, bounded by duration. Past its bound the oldest audio goes, and is counted; ``take()`` hands over
/// what is held and empties it. The chunks are kept as they came (nothing is copied per chunk; dropping the oldest
/// is O(1) per chunk dropped).
public struct PreConnectBuffer: Sendable {
    /// The rate of the audio it takes.
    public let sampleRate: Int
    /// The most audio it holds.
    public let limit: Duration
    /// The most samples it holds (``limit`` at ``sampleRate``).
    public let capacity: Int

    private var chunks: [[Int16]] = []
    /// The first chunk still held (earlier ones are spent), and how many of its samples were dropped.
    private var head = 0
    private var headOffset = 0
    /// Samples held.
    public private(set) var count = 0
    /// Samples dropped since the last ``take()``.
    public private(set) var dropped = 0

    /// A buffer of audio at `sampleRate` (at least 1 Hz) holding at most `limit` (at least nothing).
    public init(sampleRate: Int, limit: Duration) {
        self.sampleRate = max(1, sampleRate)
        self.limit = max(.zero, limit)
        let seconds = Double(self.limit.components.seconds) + Double(self.limit.components.attoseconds) * 1e-18
        capacity = Int(min(Double(Int32.max), seconds * Double(self.sampleRate)))
    }

    /// How long the audio held lasts.
    public var duration: Duration { .nanoseconds(Int64(count) * 1_000_000_000 / Int64(sampleRate)) }

    /// Adds `samples`; the oldest go beyond ``capacity``.
    public mutating func append(_ samples: [Int16]) {
        guard capacity > 0 else {
            dropped += samples.count
            return
        }
        if samples.count >= capacity {
            // Alone it fills the buffer: keep its newest part.
            dropped += count + samples.count - capacity
            chunks = [Array(samples.suffix(capacity))]
            head = 0
            headOffset = 0
            count = capacity
            return
        }
        chunks.append(samples)
        count += samples.count
        while count > capacity {
            let available = chunks[head].count - headOffset
            let excess = count - capacity
            if excess >= available {
                chunks[head] = []
                head += 1
                headOffset = 0
                count -= available
                dropped += available
            } else {
                headOffset += excess
                count -= excess
                dropped += excess
            }
        }
        if head > 32, head * 2 > chunks.count {
            chunks.removeFirst(head)
            head = 0
        }
    }

    /// The audio held, oldest first, and the samples dropped before it; the buffer is empty after.
    public mutating func take() -> (samples: [Int16], dropped: Int) {
        var samples: [Int16] = []
        samples.reserveCapacity(count)
        if head < chunks.count {
            samples += chunks[head][headOffset...]
            for chunk in chunks[(head + 1)...] { samples += chunk }
        }
        let result = (samples, dropped)
        chunks = []
        head = 0
        headOffset = 0
        count = 0
        dropped = 0
        return result
    }
}
