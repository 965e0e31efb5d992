import HarkGemini

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Encodes server messages in the current ``OutputStyle``: canonical camelCase through ``LiveCodec``, or the
/// variants faults ask for (snake_case names, URL-safe base64, extra unknown fields).
struct ServerMessageEncoder {
    private let codec = LiveCodec()
    private var snakeCaseEncoder: JSONEncoder?

    init() {}

    /// The JSON text of `message` in `style`.
    mutating func encode(_ message: ServerMessage, style: OutputStyle) throws -> String {
        var text: String
        if style.snakeCase {
            let encoder = snakeCaseEncoder ?? JSONEncoder()
            encoder.keyEncodingStrategy = .convertToSnakeCase
            snakeCaseEncoder = encoder
            text = String(decoding: try encoder.encode(message), as: UTF8.self)
        } else {
            text = try codec.encode(message)
        }
        if style.base64URL { text = Self.urlSafeBase64(in: text) }
        if style.unknownFields { text = Self.withUnknownFields(text) }
        return text
    }

    /// True when `message` goes out in a binary frame in `style`.
    static func isBinary(_ message: ServerMessage, style: OutputStyle) -> Bool {
        if style.binaryFrames { return true }
        if style.binarySetupComplete, case .setupComplete = message.payload { return true }
        return false
    }

    /// Rewrites the values of `"data"` fields to URL-safe base64 without padding.
    static func urlSafeBase64(in text: String) -> String {
        let marker = Array(#""data":""#.utf8)
        let bytes = Array(text.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if bytes[index] == marker[0], index + marker.count <= bytes.count,
                bytes[index..<index + marker.count].elementsEqual(marker)
            {
                out.append(contentsOf: marker)
                index += marker.count
                while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
                    switch bytes[index] {
                    case UInt8(ascii: "+"): out.append(UInt8(ascii: "-"))
                    case UInt8(ascii: "/"): out.append(UInt8(ascii: "_"))
                    case UInt8(ascii: "="): break
                    case UInt8(ascii: "\\"):
                        // An escaped slash (`\/`) is a slash.
                        if index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "/") {
                            out.append(UInt8(ascii: "_"))
                            index += 1
                        } else {
                            out.append(bytes[index])
                        }
                    default: out.append(bytes[index])
                    }
                    index += 1
                }
            } else {
                out.append(bytes[index])
                index += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Adds a top-level field and a field inside the first message object that clients do not know.
    static func withUnknownFields(_ text: String) -> String {
        guard text.hasPrefix("{") else { return text }
        var body = String(text.dropFirst())
        if let open = body.firstRange(of: ":{") {
            let insertAt = open.upperBound
            let empty = body[insertAt...].hasPrefix("}")
            body.insert(contentsOf: #""simulatorFutureField":{"note":"ignore me"}"# + (empty ? "" : ","), at: insertAt)
        }
        return #"{"simulatorFutureTopLevel":1,"# + body
    }
}
