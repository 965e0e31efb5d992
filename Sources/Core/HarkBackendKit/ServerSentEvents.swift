import HarkCore

/// One server-sent event (`text/event-stream`), as a parser dispatches it.
public struct ServerSentEvent: Sendable, Hashable {
    /// The `event:` field, `message` when the event names none.
    public var type: String
    /// The `data:` lines, joined with `\n`.
    public var data: String
    /// The last event ID when the event was dispatched (the latest `id:` field of the stream so far).
    public var lastEventID: String

    /// An event of `type` carrying `data`.
    public init(type: String = "message", data: String, lastEventID: String = "") {
        self.type = type
        self.data = data
        self.lastEventID = lastEventID
    }
}

/// Parses a `text/event-stream` as the WHATWG HTML standard's "event stream interpretation" says, fed
/// byte chunks as they arrive (split anywhere, even inside a line end or a UTF-8 sequence); returns
/// the events each chunk completes. Pure: no I/O, no clock.
///
/// - Lines end with CRLF, LF or CR (a CR that ends one chunk and an LF that starts the next are one
///   line end); a UTF-8 byte order mark at the start of the stream is skipped.
/// - `field: value` (one space after the colon removed), a `field` alone (an empty value), a line that
///   starts with `:` is a comment. `data` appends a line, `event` sets the type, `id` sets the last event
///   ID (unless it holds U+0000), `retry` sets ``retryMilliseconds`` when it is digits only; other fields
///   are ignored.
/// - A blank line dispatches the event, when it has data.
/// - One departure from the standard: ``finish()`` delivers a last event whose blank line never came
///   (the standard discards it), as a stream that simply stops after its last `data:` line means it.
///
/// Bounds: a line keeps at most ``maximumLineBytes`` bytes and an event's data at most
/// ``maximumEventBytes``. An event with a longer line or more data is dropped whole (the bytes past the
/// bound are never stored) and counted in ``droppedEvents``; parsing goes on with the next event. An
/// over-long comment line is simply ignored. Memory stays within the two bounds whatever the stream.
public struct ServerSentEventParser: Sendable {
    /// Default bound of one line: 1 MiB.
    public static let defaultMaximumLineBytes = 1 << 20
    /// Default bound of one event's data: 4 MiB.
    public static let defaultMaximumEventBytes = 4 << 20
    /// Largest `retry` kept, in milliseconds (a day); a larger one is taken as this.
    public static let maximumRetryMilliseconds = 86_400_000

    /// Most bytes of one line kept.
    public let maximumLineBytes: Int
    /// Most bytes of one event's data kept.
    public let maximumEventBytes: Int

    /// The last event ID (the `Last-Event-ID` to send when reconnecting); kept across ``finish()``.
    public private(set) var lastEventID = ""
    /// The reconnection time the stream asked for (`retry:`), in milliseconds.
    public private(set) var retryMilliseconds: Int?
    /// Events dropped because a line or their data passed a bound.
    public private(set) var droppedEvents = 0

    private var line: [UInt8] = []
    /// The current line passed ``maximumLineBytes``: its bytes past the bound were not kept.
    private var lineOverflow = false
    /// The byte before was a CR: an LF now ends nothing.
    private var afterCR = false
    /// No line has ended yet: a byte order mark at the start of this line is skipped.
    private var atStreamStart = true
    private var data: [UInt8] = []
    private var hasData = false
    private var eventType: [UInt8] = []
    private var lastEventIDBuffer: [UInt8] = []
    /// The current event passed a bound: it is dropped at its blank line.
    private var eventOverflow = false

    /// A parser that keeps lines of at most `maximumLineBytes` and events of at most `maximumEventBytes`
    /// (each at least 1).
    public init(
        maximumLineBytes: Int = ServerSentEventParser.defaultMaximumLineBytes,
        maximumEventBytes: Int = ServerSentEventParser.defaultMaximumEventBytes
    ) {
        self.maximumLineBytes = max(1, maximumLineBytes)
        self.maximumEventBytes = max(1, maximumEventBytes)
    }

    /// Parses the next chunk of the stream; returns the events it completes, in order.
    public mutating func feed<Bytes: Sequence>(_ bytes: Bytes) -> [ServerSentEvent] where Bytes.Element == UInt8 {
        var events: [ServerSentEvent] = []
        let handled: Void? = bytes.withContiguousStorageIfAvailable { buffer in
            for byte in buffer { take(byte, into: &events) }
        }
        if handled == nil {
            for byte in bytes { take(byte, into: &events) }
        }
        return events
    }

    /// The stream ended: a last line without its line end is taken as a line, and an event without its
    /// blank line is delivered. The parser is then ready for a new stream (``lastEventID`` and
    /// ``retryMilliseconds`` are kept, as a reconnection needs them).
    public mutating func finish() -> [ServerSentEvent] {
        var events: [ServerSentEvent] = []
        if !line.isEmpty || lineOverflow { endLine(into: &events) }
        dispatch(into: &events)
        afterCR = false
        atStreamStart = true
        return events
    }

    private mutating func take(_ byte: UInt8, into events: inout [ServerSentEvent]) {
        switch byte {
        case 0x0D:
            afterCR = true
            endLine(into: &events)
        case 0x0A:
            if afterCR {
                afterCR = false
            } else {
                endLine(into: &events)
            }
        default:
            afterCR = false
            if line.count < maximumLineBytes {
                line.append(byte)
            } else {
                lineOverflow = true
            }
        }
    }

    private mutating func endLine(into events: inout [ServerSentEvent]) {
        defer {
            line.removeAll(keepingCapacity: line.count <= 4096)
            lineOverflow = false
        }
        var start = 0
        if atStreamStart {
            atStreamStart = false
            if line.starts(with: [0xEF, 0xBB, 0xBF]) { start = 3 }
        }
        let text = line[start...]
        if text.isEmpty && !lineOverflow {
            dispatch(into: &events)
            return
        }
        if text.first == UInt8(ascii: ":") { return }  // a comment, however long
        if lineOverflow {
            drop()
            return
        }
        let colon = text.firstIndex(of: UInt8(ascii: ":"))
        let name = text[..<(colon ?? text.endIndex)]
        var value = colon.map { text[($0 + 1)...] } ?? text[text.endIndex...]
        if value.first == UInt8(ascii: " ") { value = value.dropFirst() }
        switch Array(name) {
        case Array("data".utf8):
            guard !eventOverflow else { return }
            // The data so far, a line feed and this value.
            guard data.count + (hasData ? 1 : 0) + value.count <= maximumEventBytes else {
                drop()
                return
            }
            if hasData { data.append(0x0A) }
            data += value
            hasData = true
        case Array("event".utf8):
            eventType = Array(value)
        case Array("id".utf8):
            if !value.contains(0) { lastEventIDBuffer = Array(value) }
        case Array("retry".utf8):
            guard !value.isEmpty, value.allSatisfy({ (0x30...0x39).contains($0) }) else { return }
            var milliseconds = 0
            for digit in value {
                milliseconds = min(milliseconds * 10 + Int(digit - 0x30), Self.maximumRetryMilliseconds)
            }
            retryMilliseconds = milliseconds
        default:
            break
        }
    }

    /// Drops the current event: its data is freed now, and its blank line dispatches nothing.
    private mutating func drop() {
        eventOverflow = true
        data = []
        hasData = false
    }

    /// The blank line: delivers the event if it has data, then starts a new one.
    private mutating func dispatch(into events: inout [ServerSentEvent]) {
        lastEventID = String(decoding: lastEventIDBuffer, as: UTF8.self)
        defer {
            data.removeAll(keepingCapacity: data.count <= 4096)
            hasData = false
            eventType = []
            eventOverflow = false
        }
        if eventOverflow {
            droppedEvents += 1
            return
        }
        guard hasData else { return }
        events.append(
            ServerSentEvent(
                type: eventType.isEmpty ? "message" : String(decoding: eventType, as: UTF8.self),
                data: String(decoding: data, as: UTF8.self),
                lastEventID: lastEventID
            )
        )
    }
}
