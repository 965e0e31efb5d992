import HarkCore
import Synchronization

/// Where the library's one C callback puts what it is given. The callback runs on the library's Rust threads and
/// carries no context pointer, so it reaches the running client's queues through this process-wide slot. It
/// only copies the bytes (bounded) and queues them: it never decodes, never logs, never waits for Swift.
enum CallbackRouting {
    /// The running client's queues: events (everything but the library's log records) and log records, apart so
    /// that a burst of logs can never push out an answer a caller waits for.
    struct Sink: Sendable {
        let events: BoundedQueue<[UInt8]>
        let logs: BoundedQueue<[UInt8]>
        /// Events larger than their queue's bound on their own, refused without being copied.
        let tooLarge: TooLargeCount
    }

    /// A count the library's threads add to.
    final class TooLargeCount: Sendable {
        let value = Atomic<Int>(0)
    }

    /// The sink of the running client, nil when none runs.
    static let active = Mutex<Sink?>(nil)
    /// Events that came when no client was running (after `dispose`, a late callback), dropped.
    static let unrouted = Atomic<Int>(0)

    /// The function handed to `livekit_ffi_initialize`.
    static let callback: LiveKitLibrary.Callback = { data, count in
        CallbackRouting.deliver(data, count)
    }

    /// Copies one event's bytes into the running client's queue (logs into its own): the bytes are only valid
    /// during the call. Sizes are bounded by the queues' byte bounds before anything is copied.
    static func deliver(_ data: UnsafePointer<UInt8>?, _ count: Int) {
        guard let data, count > 0 else { return }
        guard let sink = active.withLock({ $0 }) else {
            unrouted.add(1, ordering: .relaxed)
            return
        }
        let bytes = UnsafeBufferPointer(start: data, count: count)
        let queue = EventKind.fieldNumber(of: bytes) == EventKind.logs ? sink.logs : sink.events
        guard count <= queue.bound else {
            // Counted as too large, without copying it.
            sink.tooLarge.value.add(1, ordering: .relaxed)
            return
        }
        queue.push(Array(bytes))
    }
}

/// What kind of `FfiEvent` a buffer holds, read from its first field's tag without decoding it: the event is a
/// oneof, so its encoding is one field, whose number names the kind.
enum EventKind {
    /// `FfiEvent.logs`.
    static let logs = 18
    /// `FfiEvent.panic`.
    static let panic = 20

    /// The field number of the first field in an encoded message (its tag is a varint: field number << 3 | wire
    /// type), or nil when the bytes do not start with a valid tag.
    static func fieldNumber(of bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        var tag: UInt64 = 0
        var shift: UInt64 = 0
        for index in 0..<min(bytes.count, 5) {
            let byte = bytes[index]
            tag |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 {
                let field = Int(tag >> 3)
                return field > 0 ? field : nil
            }
            shift += 7
        }
        return nil
    }
}
