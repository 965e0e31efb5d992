/// Text that came from outside the process (the network, a model, a file, the environment) made safe to
/// put in a log line, on a terminal or in a file a person reads.
///
/// ``printable(_:limit:)``:
/// - escapes every control character visibly, so a newline cannot start a forged log line and an ANSI or
///   OSC escape never reaches a terminal: `\n`, `\r`, `\t` and `\0` as written in Swift, any other C0
///   control, DEL and the C1 controls (U+0080–U+009F) as `\u{1B}`; likewise the line and paragraph
///   separators (U+2028, U+2029) and the bidirectional controls (U+061C, U+200E, U+200F, U+202A–U+202E,
///   U+2066–U+2069), which reorder or split what a viewer shows;
/// - keeps everything else, a backslash included (so the result of `printable` is printable as it is:
///   applying it twice gives the same text);
/// - bounds the length: at most `limit` Unicode scalars come out, and a cut text ends with
///   `…[cut, N bytes in all]`. Only the scalars that fit are read, so a huge text costs no more than a
///   short one.
///
/// Invalid UTF-8 cannot reach a `String` (decoding replaces it with U+FFFD); ``printable(bytes:limit:)``
/// takes raw bytes and does that replacement itself.
public enum RemoteText {
    /// The limit ``printable(_:limit:)`` uses unless told otherwise: enough for an error message from a
    /// service, short enough for one log line.
    public static let defaultLimit = 500

    /// The smallest limit honoured: room for some text and the cut marker.
    public static let minimumLimit = 48

    /// `text` with control characters escaped and its length bounded to `limit` Unicode scalars (at
    /// least ``minimumLimit``), a cut text ending in `…[cut, N bytes in all]`.
    public static func printable(_ text: some StringProtocol, limit: Int = defaultLimit) -> String {
        printable(scalars: text.unicodeScalars, limit: limit) { text.utf8.count }
    }

    /// `bytes` read as UTF-8 (each invalid sequence replaced by U+FFFD), then ``printable(_:limit:)``. Reads
    /// only as many bytes as can come out, whatever the input's size; a cut counts all of its bytes.
    public static func printable(bytes: some Collection<UInt8>, limit: Int = defaultLimit) -> String {
        // Every scalar takes one to four bytes (an invalid sequence, replaced, at most three): four bytes
        // per scalar of the limit, and one more, decode to more scalars than fit, so a sequence the window
        // splits at its end is never shown.
        let head = bytes.prefix(max(limit, minimumLimit) * 4 + 1)
        return printable(scalars: String(decoding: head, as: UTF8.self).unicodeScalars, limit: limit) {
            bytes.count
        }
    }

    private static func printable(
        scalars: some Collection<Unicode.Scalar>,
        limit: Int,
        byteCount: () -> Int
    ) -> String {
        let limit = max(limit, minimumLimit)
        // First see whether it fits, reading no more than `limit` scalars' worth.
        var length = 0
        var fits = true
        for scalar in scalars {
            length += escapedLength(scalar)
            if length > limit {
                fits = false
                break
            }
        }
        var result = String.UnicodeScalarView()
        if fits {
            for scalar in scalars { append(scalar, to: &result) }
            return String(result)
        }
        let marker = "…[cut, \(byteCount()) bytes in all]"
        let budget = limit - marker.unicodeScalars.count
        var used = 0
        for scalar in scalars {
            let cost = escapedLength(scalar)
            guard used + cost <= budget else { break }
            used += cost
            append(scalar, to: &result)
        }
        return String(result) + marker
    }

    /// Whether `scalar` is written escaped.
    public static func needsEscaping(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F: true
        case 0x2028, 0x2029: true
        case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }

    private static func escapedLength(_ scalar: Unicode.Scalar) -> Int {
        guard needsEscaping(scalar) else { return 1 }
        switch scalar {
        case "\n", "\r", "\t", "\0": return 2
        default: return max(2, String(scalar.value, radix: 16, uppercase: true).count) + 4
        }
    }

    private static func append(_ scalar: Unicode.Scalar, to result: inout String.UnicodeScalarView) {
        guard needsEscaping(scalar) else {
            result.append(scalar)
            return
        }
        let escape: String
        switch scalar {
        case "\n": escape = "\\n"
        case "\r": escape = "\\r"
        case "\t": escape = "\\t"
        case "\0": escape = "\\0"
        default:
            let hex = String(scalar.value, radix: 16, uppercase: true)
            escape = "\\u{" + (hex.count < 2 ? "0" + hex : hex) + "}"
        }
        result.append(contentsOf: escape.unicodeScalars)
    }
}

extension ToolEvent {
    /// The event for a log line: its names and ids as a service sent them, printable and bounded (``RemoteText``),
    /// `started(id: call-1, name: get_time)`.
    public var printable: String {
        func id(_ id: String) -> String { RemoteText.printable(id, limit: RemoteText.idLimit) }
        func name(_ name: String) -> String { RemoteText.printable(name, limit: RemoteText.nameLimit) }
        switch self {
        case .started(let callID, let callName): return "started(id: \(id(callID)), name: \(name(callName)))"
        case .finished(let callID, let callName, let succeeded):
            return "finished(id: \(id(callID)), name: \(name(callName)), succeeded: \(succeeded))"
        case .cancelled(let callID): return "cancelled(id: \(id(callID)))"
        }
    }
}

extension RemoteText {
    /// The limit for a name a service gives (a tool's, a message kind's) in a log line.
    public static let nameLimit = 128
    /// The limit for an id a service gives (a call's) in a log line.
    public static let idLimit = 80
}
