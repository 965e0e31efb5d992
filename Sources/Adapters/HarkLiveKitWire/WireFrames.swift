/// The protocol between `hark` and its LiveKit helper, `hark-livekit`, over a Unix socket pair: length-prefixed
/// frames, each one message. A frame is a 32-bit little-endian length (the bytes that follow it: at least one, at
/// most ``LiveKitWire/maximumFrameBytes``), a type byte and the message's fields. Integers are little-endian; text
/// is a 32-bit length and UTF-8 (checked); samples are a 32-bit count and 16-bit little-endian values. Each side
/// sends a hello first (the magic bytes and its version): a peer of another version is refused by name.
///
/// Everything here is a value: the encoder never produces a frame the decoder refuses (text from the room is cut to
/// its field's limit), and the decoder refuses a frame too large, an unknown type, a field out of bounds, invalid
/// UTF-8 or bytes left over with a ``LiveKitWireError`` — it never traps, and never allocates more than a frame's
/// bound, whatever it is given.
public enum LiveKitWire {
    /// The protocol's version; both sides must speak the same (the packages `hark` and `hark-livekit` are
    /// released together).
    public static let version: UInt16 = 1
    /// The first bytes of every hello: a peer that is not a Hark LiveKit helper is told apart at once.
    public static let magic: [UInt8] = Array("HARK-LK".utf8)
    /// The largest frame after its length, in bytes: a second of 48 kHz stereo audio with room to spare.
    public static let maximumFrameBytes = 256 << 10
    /// The most samples in one audio message (a second of 48 kHz stereo).
    public static let maximumSamples = 96_000
    /// The longest identity, track id, topic, reason or room name, in bytes.
    public static let maximumNameBytes = 256
    /// The longest attribute value and log line, in bytes.
    public static let maximumValueBytes = 4096
    /// The longest typed text, transcript chunk, URL or token, in bytes.
    public static let maximumTextBytes = 64 << 10
    /// The most attributes of a participant or stream.
    public static let maximumAttributes = 64
    /// The most participants a join reports.
    public static let maximumParticipants = 256
    /// The most bytes of one ``LiveKitCommand/bytes(_:)`` part.
    public static let maximumBytesPart = 128 << 10

    /// The bytes of one frame holding `body` (type and fields): its length first.
    static func frame(_ body: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(body.count + 4)
        let length = UInt32(body.count)
        for shift in stride(from: 0, to: 32, by: 8) { out.append(UInt8(truncatingIfNeeded: length >> UInt32(shift))) }
        out.append(contentsOf: body)
        return out
    }
}

/// Why bytes from the other side could not be read as a message. The link cannot be trusted after one (framing is
/// lost, or the peer is not what it should be): it is closed.
public struct LiveKitWireError: Error, Sendable, Hashable, CustomStringConvertible {
    enum Code: Sendable, Hashable {
        case frameTooLarge(Int)
        case emptyFrame
        case unknownType(UInt8)
        case truncated(String)
        case tooLarge(String, Int)
        case invalidText(String)
        case invalidValue(String)
        case trailingBytes(String, Int)
        case notHello
        case version(UInt16)
    }

    let code: Code

    init(_ code: Code) { self.code = code }

    /// The peer speaks another version of the protocol (its version given).
    public var isVersionMismatch: Bool {
        if case .version = code { true } else { false }
    }

    public var description: String {
        switch code {
        case .frameTooLarge(let size):
            "a frame of \(size) bytes is larger than the protocol allows (\(LiveKitWire.maximumFrameBytes))"
        case .emptyFrame: "an empty frame"
        case .unknownType(let type): "a message of unknown type \(type)"
        case .truncated(let what): "\(what) is cut short"
        case .tooLarge(let what, let size): "\(what) is too large (\(size))"
        case .invalidText(let what): "\(what) is not UTF-8"
        case .invalidValue(let what): "\(what) has a value out of range"
        case .trailingBytes(let what, let count): "\(count) bytes follow \(what)"
        case .notHello: "the peer's first message is not a Hark LiveKit hello (not hark-livekit?)"
        case .version(let theirs):
            "the peer speaks version \(theirs) of the hark-livekit protocol, this side \(LiveKitWire.version): "
                + "install hark and hark-livekit of the same release"
        }
    }
}

/// Cuts a byte stream into frames: bytes go in as they arrive (in any pieces), whole frame bodies (type and fields)
/// come out. A length out of bounds is an error as soon as its four bytes are in, before anything is kept for it;
/// after an error the decoder stays failed.
public struct LiveKitFrameDecoder: Sendable {
    private var buffer: [UInt8] = []
    private var start = 0
    private var failure: LiveKitWireError?

    /// A decoder with nothing in it.
    public init() {}

    /// Bytes held that are not yet a whole frame.
    public var pendingBytes: Int { buffer.count - start }

    /// Adds bytes that arrived.
    public mutating func append(_ bytes: [UInt8]) {
        append(bytes[...])
    }

    /// Adds bytes that arrived. (Concrete, not generic: it is called for every read from another module, where an
    /// unspecialised generic call would look up its conformances each time.)
    public mutating func append(_ bytes: ArraySlice<UInt8>) {
        if start > 0, start >= buffer.count / 2 {
            buffer.removeFirst(start)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next whole frame's body, nil when it has not all arrived; throws when the stream is not frames.
    public mutating func next() throws(LiveKitWireError) -> ArraySlice<UInt8>? {
        if let failure { throw failure }
        guard buffer.count - start >= 4 else { return nil }
        var length = 0
        for index in 0..<4 { length |= Int(buffer[start + index]) << (8 * index) }
        guard length >= 1 else { return try fail(.emptyFrame) }
        guard length <= LiveKitWire.maximumFrameBytes else { return try fail(.frameTooLarge(length)) }
        guard buffer.count - start - 4 >= length else { return nil }
        let body = buffer[(start + 4)..<(start + 4 + length)]
        start += 4 + length
        if start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        }
        return body
    }

    private mutating func fail(_ code: LiveKitWireError.Code) throws(LiveKitWireError) -> ArraySlice<UInt8>? {
        let error = LiveKitWireError(code)
        failure = error
        buffer = []
        start = 0
        throw error
    }
}

/// Writes one message's fields.
struct WireWriter {
    var bytes: [UInt8]

    init(type: UInt8, capacity: Int = 64) {
        bytes = []
        bytes.reserveCapacity(capacity + 1)
        bytes.append(type)
    }

    mutating func u8(_ value: UInt8) { bytes.append(value) }

    mutating func bool(_ value: Bool) { bytes.append(value ? 1 : 0) }

    mutating func u16(_ value: UInt16) {
        bytes.append(UInt8(truncatingIfNeeded: value))
        bytes.append(UInt8(truncatingIfNeeded: value >> 8))
    }

    mutating func u32(_ value: UInt32) {
        for shift in stride(from: 0, to: 32, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt32(shift))) }
    }

    /// `text`, cut to `limit` bytes on a character boundary.
    mutating func text(_ text: String, limit: Int) {
        var utf8 = Array(text.utf8)
        if utf8.count > limit {
            var end = limit
            // Back to the first byte of a scalar (continuation bytes are 10xxxxxx).
            while end > 0, utf8[end] & 0xC0 == 0x80 { end -= 1 }
            utf8.removeSubrange(end...)
        }
        u32(UInt32(utf8.count))
        bytes.append(contentsOf: utf8)
    }

    mutating func optionalText(_ value: String?, limit: Int) {
        bool(value != nil)
        if let value { text(value, limit: limit) }
    }

    /// At most ``LiveKitWire/maximumAttributes`` entries (in key order, so the same map always encodes the same).
    mutating func attributes(_ attributes: [String: String]) {
        let entries = attributes.sorted { $0.key < $1.key }.prefix(LiveKitWire.maximumAttributes)
        u16(UInt16(entries.count))
        for (key, value) in entries {
            text(key, limit: LiveKitWire.maximumNameBytes)
            text(value, limit: LiveKitWire.maximumValueBytes)
        }
    }

    mutating func samples(_ samples: [Int16]) {
        u32(UInt32(samples.count))
        let offset = bytes.count
        bytes.append(contentsOf: repeatElement(0, count: samples.count * 2))
        bytes.withUnsafeMutableBytes { raw in
            samples.withUnsafeBufferPointer { source in
                for (index, sample) in source.enumerated() {
                    raw.storeBytes(of: sample.littleEndian, toByteOffset: offset + index * 2, as: Int16.self)
                }
            }
        }
    }

    mutating func raw(_ part: [UInt8]) {
        u32(UInt32(part.count))
        bytes.append(contentsOf: part)
    }
}

/// Reads one message's fields, each checked against its bound.
struct WireReader {
    private let bytes: ArraySlice<UInt8>
    private var index: Int
    /// The message being read: "command" or "event", and the name of its kind (made into text only for an error:
    /// interpolating an enum's case reflects on it, which would cost more than reading the message).
    private let side: StaticString
    private let kind: Any

    init(_ bytes: ArraySlice<UInt8>, side: StaticString, kind: Any) {
        self.bytes = bytes
        index = bytes.startIndex
        self.side = side
        self.kind = kind
    }

    /// The message being read, for errors.
    var what: String { "the \(side) \(String(describing: kind))" }

    private mutating func take(_ count: Int, _ field: String) throws(LiveKitWireError) -> ArraySlice<UInt8> {
        guard count >= 0, bytes.endIndex - index >= count else {
            throw LiveKitWireError(.truncated("\(what) (\(field))"))
        }
        defer { index += count }
        return bytes[index..<(index + count)]
    }

    mutating func u8(_ field: String) throws(LiveKitWireError) -> UInt8 {
        try take(1, field).first ?? 0
    }

    mutating func bool(_ field: String) throws(LiveKitWireError) -> Bool {
        switch try u8(field) {
        case 0: return false
        case 1: return true
        default: throw LiveKitWireError(.invalidValue("\(what) (\(field))"))
        }
    }

    mutating func u16(_ field: String) throws(LiveKitWireError) -> UInt16 {
        let part = try take(2, field)
        return UInt16(part[part.startIndex]) | UInt16(part[part.startIndex + 1]) << 8
    }

    mutating func u32(_ field: String) throws(LiveKitWireError) -> UInt32 {
        let part = try take(4, field)
        var value: UInt32 = 0
        for (shift, byte) in part.enumerated() { value |= UInt32(byte) << UInt32(8 * shift) }
        return value
    }

    /// A count, at most `limit`.
    mutating func count(_ field: String, limit: Int) throws(LiveKitWireError) -> Int {
        let value = Int(try u32(field))
        guard value <= limit else { throw LiveKitWireError(.tooLarge("\(what) (\(field))", value)) }
        return value
    }

    mutating func text(_ field: String, limit: Int) throws(LiveKitWireError) -> String {
        let length = try count(field, limit: limit)
        guard let text = String(validating: try take(length, field), as: UTF8.self) else {
            throw LiveKitWireError(.invalidText("\(what) (\(field))"))
        }
        return text
    }

    mutating func optionalText(_ field: String, limit: Int) throws(LiveKitWireError) -> String? {
        try bool(field) ? try text(field, limit: limit) : nil
    }

    mutating func attributes(_ field: String) throws(LiveKitWireError) -> [String: String] {
        let count = Int(try u16(field))
        guard count <= LiveKitWire.maximumAttributes else {
            throw LiveKitWireError(.tooLarge("\(what) (\(field))", count))
        }
        var result: [String: String] = [:]
        for _ in 0..<count {
            let key = try text(field, limit: LiveKitWire.maximumNameBytes)
            result[key] = try text(field, limit: LiveKitWire.maximumValueBytes)
        }
        return result
    }

    mutating func samples(_ field: String) throws(LiveKitWireError) -> [Int16] {
        let count = try count(field, limit: LiveKitWire.maximumSamples)
        let part = try take(count * 2, field)
        return [Int16](unsafeUninitializedCapacity: count) { buffer, initialized in
            part.withUnsafeBytes { raw in
                for index in 0..<count {
                    buffer[index] = Int16(littleEndian: raw.loadUnaligned(fromByteOffset: index * 2, as: Int16.self))
                }
            }
            initialized = count
        }
    }

    mutating func raw(_ field: String, limit: Int) throws(LiveKitWireError) -> [UInt8] {
        Array(try take(try count(field, limit: limit), field))
    }

    /// The hello's magic bytes and version: throws when they are not a Hark LiveKit hello of this version.
    mutating func hello() throws(LiveKitWireError) {
        guard bytes.endIndex - index >= LiveKitWire.magic.count,
            bytes[index..<(index + LiveKitWire.magic.count)].elementsEqual(LiveKitWire.magic)
        else { throw LiveKitWireError(.notHello) }
        index += LiveKitWire.magic.count
        let version = try u16("version")
        guard version == LiveKitWire.version else { throw LiveKitWireError(.version(version)) }
    }

    /// Checks that the message was read to its end.
    func end() throws(LiveKitWireError) {
        guard index == bytes.endIndex else { throw LiveKitWireError(.trailingBytes(what, bytes.endIndex - index)) }
    }
}
