import HarkCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A coding key made from any string: lets a decoder look a field up under more than one spelling.
public struct FlexKey: CodingKey, Hashable, Sendable {
    public var stringValue: String
    public var intValue: Int? { nil }

    public init(_ string: String) { self.stringValue = string }
    public init(stringValue: String) { self.stringValue = stringValue }
    public init?(intValue: Int) { nil }

    /// `lowerCamelCase` spelled `snake_case` (`turnComplete` → `turn_complete`). Field names are ASCII: only
    /// `A`–`Z` are uppercase here (a name without them comes back as it is, without copying). Looked up for
    /// every field a message may hold, so it works on bytes.
    public static func snakeCase(_ camel: String) -> String {
        let isUpper = { (byte: UInt8) in byte >= 0x41 && byte <= 0x5A }
        var uppers = 0
        for byte in camel.utf8 where isUpper(byte) { uppers += 1 }
        guard uppers > 0 else { return camel }
        var out: [UInt8] = []
        out.reserveCapacity(camel.utf8.count + uppers)
        for byte in camel.utf8 {
            if isUpper(byte) {
                out.append(0x5F)
                out.append(byte + 0x20)
            } else {
                out.append(byte)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// Collects the field names a tolerant decoder met but does not know, so they can be logged once
/// at debug level instead of failing the message. Pass one through `JSONDecoder.userInfo`.
public final class UnknownFieldCollector: @unchecked Sendable {
    /// The key under which a decoder's `userInfo` carries the collector.
    public static let userInfoKey = CodingUserInfoKey(rawValue: "hark.unknownFields")!

    /// Dotted paths of the unknown fields, in the order met.
    public private(set) var paths: [String] = []

    public init() {}

    func record(_ path: String) {
        if paths.count < 64 { paths.append(path) }
    }
}

extension Decoder {
    /// A keyed container for a message struct whose known fields are `known` (lowerCamelCase).
    /// Fields it does not know, in either casing, are reported to the ``UnknownFieldCollector``
    /// in `userInfo`, if any, and otherwise ignored.
    public func flexContainer(known: Set<String>) throws -> KeyedDecodingContainer<FlexKey> {
        let container = try self.container(keyedBy: FlexKey.self)
        if let collector = userInfo[UnknownFieldCollector.userInfoKey] as? UnknownFieldCollector {
            for key in container.allKeys where !known.contains(key.stringValue) {
                if !known.contains(FlexKey.camelCase(key.stringValue)) {
                    let path = (codingPath.map(\.stringValue) + [key.stringValue]).joined(separator: ".")
                    collector.record(path)
                }
            }
        }
        return container
    }
}

extension FlexKey {
    /// `snake_case` spelled `lowerCamelCase` (`turn_complete` → `turnComplete`): a letter `a`–`z` after `_`
    /// is raised; other bytes are kept (field names are ASCII).
    public static func camelCase(_ snake: String) -> String {
        guard snake.utf8.contains(0x5F) else { return snake }
        var out: [UInt8] = []
        out.reserveCapacity(snake.utf8.count)
        var upper = false
        for byte in snake.utf8 {
            if byte == 0x5F {
                upper = true
            } else if upper {
                out.append(byte >= 0x61 && byte <= 0x7A ? byte - 0x20 : byte)
                upper = false
            } else {
                out.append(byte)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

extension KeyedDecodingContainer where Key == FlexKey {
    /// The key under which `camel` is present: its lowerCamelCase or its snake_case spelling.
    @inlinable
    public func presentKey(_ camel: String) -> FlexKey? {
        let key = FlexKey(camel)
        if contains(key) { return key }
        let snake = FlexKey.snakeCase(camel)
        if snake != camel, contains(FlexKey(snake)) { return FlexKey(snake) }
        return nil
    }

    /// Decodes the field `camel` (or its snake_case spelling) if present and not null.
    @inlinable
    public func flex<T: Decodable>(_ type: T.Type, _ camel: String) throws -> T? {
        guard let key = presentKey(camel) else { return nil }
        if try decodeNil(forKey: key) { return nil }
        return try decode(T.self, forKey: key)
    }

    /// A boolean field, accepting JSON booleans and the strings "true"/"false" in any case.
    public func flexBool(_ camel: String) throws -> Bool? {
        guard let key = presentKey(camel), try !decodeNil(forKey: key) else { return nil }
        if let value = try? decode(Bool.self, forKey: key) { return value }
        let text = try decode(String.self, forKey: key)
        switch text.lowercased() {
        case "true": return true
        case "false": return false
        default:
            throw DecodingError.dataCorruptedError(
                forKey: key,
                in: self,
                debugDescription: "expected a boolean, found \"\(text)\""
            )
        }
    }

    /// An integer field (int32 or int64), accepting a JSON number or a decimal string as proto3 JSON does.
    public func flexInt(_ camel: String) throws -> Int64? {
        guard let key = presentKey(camel), try !decodeNil(forKey: key) else { return nil }
        if let value = try? decode(Int64.self, forKey: key) { return value }
        if let value = try? decode(Double.self, forKey: key) {
            // 1e30 is a JSON number too: out of range is an error, not a trap.
            guard let integer = Int64(exactly: value) else {
                throw DecodingError.dataCorruptedError(
                    forKey: key,
                    in: self,
                    debugDescription: "expected an int64, found \(value)"
                )
            }
            return integer
        }
        let text = try decode(String.self, forKey: key)
        guard let value = Int64(text) else {
            throw DecodingError.dataCorruptedError(
                forKey: key,
                in: self,
                debugDescription: "expected an integer, found \"\(text)\""
            )
        }
        return value
    }

    /// A floating-point field, accepting a JSON number or a numeric string.
    public func flexDouble(_ camel: String) throws -> Double? {
        guard let key = presentKey(camel), try !decodeNil(forKey: key) else { return nil }
        if let value = try? decode(Double.self, forKey: key) { return value }
        let text = try decode(String.self, forKey: key)
        guard let value = Double(text) else {
            throw DecodingError.dataCorruptedError(
                forKey: key,
                in: self,
                debugDescription: "expected a number, found \"\(text)\""
            )
        }
        return value
    }

    /// A repeated field, also accepting a single object where a list is expected.
    public func flexArray<T: Decodable>(_ type: T.Type, _ camel: String) throws -> [T]? {
        guard let key = presentKey(camel), try !decodeNil(forKey: key) else { return nil }
        if let list = try? decode([T].self, forKey: key) { return list }
        return [try decode(T.self, forKey: key)]
    }
}

/// Bytes carried as base64 in JSON. Encodes the standard alphabet with padding; decodes the standard
/// and the URL-safe alphabet, with or without padding, as the proto3 JSON parser does.
public struct Base64Bytes: Sendable, Hashable, Codable {
    /// The raw bytes.
    public var data: Data

    public init(_ data: Data) { self.data = data }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let data = Base64Bytes.decode(text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "invalid base64")
        }
        self.data = data
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(data.base64EncodedString())
    }

    /// Decodes standard or URL-safe base64, padded or not. Nil when it is neither.
    public static func decode(_ text: String) -> Data? {
        if let data = Data(base64Encoded: text) { return data }
        var utf8 = Array(text.utf8)
        var changed = false
        for index in utf8.indices {
            switch utf8[index] {
            case UInt8(ascii: "-"):
                utf8[index] = UInt8(ascii: "+")
                changed = true
            case UInt8(ascii: "_"):
                utf8[index] = UInt8(ascii: "/")
                changed = true
            default: break
            }
        }
        let remainder = utf8.count % 4
        if remainder == 1 { return nil }
        if remainder != 0 {
            utf8.append(contentsOf: repeatElement(UInt8(ascii: "="), count: 4 - remainder))
            changed = true
        }
        guard changed else { return nil }
        return Data(base64Encoded: Data(utf8))
    }

    /// Encodes with the URL-safe alphabet and no padding (what python-genai sends).
    public static func urlSafeString(_ data: Data) -> String {
        var text = data.base64EncodedString()
        text = text.replacing("+", with: "-").replacing("/", with: "_")
        while text.hasSuffix("=") { text.removeLast() }
        return text
    }
}

/// A protobuf `Duration` in its JSON form: seconds with an `s` suffix, possibly fractional (`"49.990s"`).
///
/// What a service sends is bounded before any arithmetic: a value past protobuf's own range (±315 576 000 000 s,
/// about 10 000 years: ``limit``) is not a duration (as the service's own parser says), so `"9223372036854775807s"`
/// is refused when decoded, never a trap in a conversion later.
public struct ProtoDuration: Sendable, Hashable, Codable {
    /// The duration.
    public var duration: Duration

    /// Protobuf's range of a `Duration`: ±315 576 000 000 seconds (10 000 years). Values past it are refused.
    public static let limitSeconds: Int64 = 315_576_000_000
    /// ``limitSeconds`` as a duration.
    public static let limit = Duration.seconds(limitSeconds)

    public init(_ duration: Duration) { self.duration = duration }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let seconds = try? container.decode(Double.self) {
            guard seconds.isFinite, abs(seconds) <= Double(Self.limitSeconds) else {
                throw DecodingError.dataCorruptedError(
                    in: container,
                    debugDescription: "duration out of range: \(seconds)"
                )
            }
            self.duration = .milliseconds(Int64((seconds * 1000).rounded()))
            return
        }
        let text = try container.decode(String.self)
        guard let duration = ProtoDuration.parse(text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "invalid duration \"\(text)\"")
        }
        self.duration = duration
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(ProtoDuration.format(duration))
    }

    /// Parses `"30s"`, `"49.990s"`, `"-1.5s"`; nil for anything else, a value past ``limit`` either way included
    /// (and a text longer than 64 characters).
    public static func parse(_ text: String) -> Duration? {
        guard text.utf8.count <= 64, text.hasSuffix("s") else { return nil }
        let number = text.dropLast()
        guard !number.isEmpty, let seconds = Double(number), seconds.isFinite else { return nil }
        guard abs(seconds) <= Double(limitSeconds) else { return nil }
        // ".5s" has an empty whole part; "1e3s" has one that is not digits.
        let parts = number.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard let whole = Int64(parts[0]) ?? Int64(exactly: seconds.rounded(.towardZero)) else { return nil }
        guard abs(whole) <= limitSeconds else { return nil }
        var nanos: Int64 = 0
        if parts.count == 2 {
            let digits = String(parts[1].prefix(9))
            guard digits.allSatisfy(\.isNumber) else { return nil }
            nanos = (Int64(digits) ?? 0) * Int64(pow10(9 - digits.count))
            if number.hasPrefix("-") { nanos = -nanos }
        }
        return .seconds(whole) + .nanoseconds(nanos)
    }

    /// Formats as protobuf JSON: `"30s"` or `"49.990s"`.
    public static func format(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        let millis = attoseconds / 1_000_000_000_000_000
        if millis == 0 { return "\(seconds)s" }
        let fraction = String(abs(millis)).leftPadded(to: 3)
        return "\(seconds).\(fraction)s"
    }

    private static func pow10(_ n: Int) -> Int {
        var value = 1
        for _ in 0..<max(0, n) { value *= 10 }
        return value
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
