import HarkCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The bounds on what a control client may send and take.
public struct ControlLimits: Sendable, Hashable {
    /// Largest request line, newline included.
    public var requestBytes = 16 * 1024
    /// Deepest nesting of arrays and objects in a request (the request object itself is level 1).
    public var depth = 8
    /// Most arguments in a request.
    public var arguments = 32
    /// Longest operation name.
    public var opLength = 64
    /// How long a client has, from its connection (or its last reply), to send a whole request line: a client
    /// that sends a byte a second is cut here, whatever it has sent.
    public var readDeadline: Duration = .seconds(5)
    /// How long a reply may take to leave: a client that never reads is cut here.
    public var writeDeadline: Duration = .seconds(5)
    /// Most clients connected at once; one more is told the daemon is busy and closed.
    public var clients = 8
    /// Largest reply line a command reads (the daemon's own replies stay far below).
    public var replyBytes = 1 << 20

    /// The defaults.
    public init() {}
}

/// Reads request lines from what a client sends, as a value: bytes in, at most one request out at a time. Nothing
/// it is given makes it hold more than ``ControlLimits/requestBytes``: a longer line is refused before it ends.
public struct ControlRequestReader: Sendable {
    /// What the bytes given so far make.
    public enum Outcome: Sendable, Hashable {
        /// No whole line yet.
        case needMore
        /// A request to perform.
        case request(ControlRequest)
        /// A line that is not a request, with why: answered with `ok: false`, then the client is cut.
        case refused(String)
    }

    /// The bounds.
    public let limits: ControlLimits
    private var buffer: [UInt8] = []

    /// A reader within `limits`.
    public init(limits: ControlLimits = ControlLimits()) {
        self.limits = limits
    }

    /// Bytes held that are not yet a whole line.
    public var pending: Int { buffer.count }

    /// Takes `bytes` and says what they complete. After a `.request`, call ``next()`` for a request that came
    /// in the same read. Requests sent ahead of their replies are held up to four lines' worth; more is refused.
    public mutating func take(_ bytes: some Collection<UInt8>) -> Outcome {
        guard buffer.count + bytes.count <= 4 * limits.requestBytes else {
            buffer = []
            return .refused("more than \(4 * limits.requestBytes) bytes sent ahead of the replies")
        }
        buffer.append(contentsOf: bytes)
        return next()
    }

    /// The next whole line in what was taken, if any.
    public mutating func next() -> Outcome {
        let window = buffer.prefix(limits.requestBytes)
        guard let newline = window.firstIndex(of: UInt8(ascii: "\n")) else {
            if buffer.count >= limits.requestBytes {
                buffer = []
                return .refused("request longer than \(limits.requestBytes) bytes")
            }
            return .needMore
        }
        guard newline < limits.requestBytes else {
            buffer = []
            return .refused("request longer than \(limits.requestBytes) bytes")
        }
        var line = Array(buffer[..<newline])
        buffer.removeFirst(newline + 1)
        if line.last == UInt8(ascii: "\r") { line.removeLast() }
        return Self.parse(line, limits: limits)
    }

    /// One line as a request, or why not.
    public static func parse(_ line: [UInt8], limits: ControlLimits = ControlLimits()) -> Outcome {
        if line.isEmpty { return .refused("empty request: send one JSON object per line") }
        guard String(validating: line, as: UTF8.self) != nil else { return .refused("request is not UTF-8") }
        if let problem = nesting(line, limit: limits.depth) { return .refused(problem) }
        let request: ControlRequest
        do {
            request = try JSONDecoder().decode(ControlRequest.self, from: Data(line))
        } catch {
            return .refused(
                "not a request: send {\"op\": NAME, \"args\": {...}} as one line of JSON (\(reason(error)))"
            )
        }
        let op = request.op
        guard !op.isEmpty, op.utf8.count <= limits.opLength,
            op.utf8.allSatisfy({ byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                    || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
            })
        else {
            return .refused(
                "operation \"\(RemoteText.printable(op, limit: 80))\" is not a name (a-z, 0-9, '.', '_', '-', "
                    + "at most \(limits.opLength))"
            )
        }
        guard request.args.count <= limits.arguments else {
            return .refused("\(request.args.count) arguments, more than \(limits.arguments)")
        }
        return .request(request)
    }

    /// Why `line` nests deeper than `limit` (strings skipped), or nil.
    static func nesting(_ line: [UInt8], limit: Int) -> String? {
        var depth = 0
        var inString = false
        var escaped = false
        for byte in line {
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                depth += 1
                if depth > limit { return "request nested deeper than \(limit) levels" }
            case UInt8(ascii: "]"), UInt8(ascii: "}"): depth -= 1
            default: break
            }
        }
        return nil
    }

    /// A decoding error in a few printable words.
    private static func reason(_ error: any Error) -> String {
        switch error {
        case DecodingError.keyNotFound(let key, _): "no \"\(RemoteText.printable(key.stringValue, limit: 64))\""
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            "wrong type at \(RemoteText.printable(context.codingPath.map(\.stringValue).joined(separator: "."), limit: 80))"
        case DecodingError.dataCorrupted: "malformed JSON"
        default: "malformed JSON"
        }
    }
}

/// Replies as lines: JSON without newlines inside (the encoder escapes them in strings), then one newline.
public enum ControlReplyLine {
    /// `reply` as one line, at most `limit` bytes; a reply too large says so instead.
    public static func encode(_ reply: ControlReply, limit: Int = ControlLimits().replyBytes) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        if let data = try? encoder.encode(reply), data.count < limit {
            return Array(data) + [UInt8(ascii: "\n")]
        }
        let fallback = ControlReply(ok: false, message: "the reply was too large to send (\(limit) bytes at most)")
        return Array((try? encoder.encode(fallback)) ?? Data()) + [UInt8(ascii: "\n")]
    }

    /// A reply line (without its newline) as a reply, or nil.
    public static func decode(_ line: some Collection<UInt8>) -> ControlReply? {
        try? JSONDecoder().decode(ControlReply.self, from: Data(line))
    }
}
