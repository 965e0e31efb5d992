/// Request targets (`/path?query`): split, and their query read, as both simulators route them.
package enum RequestTarget {
    /// Splits a request target into its path and query.
    package static func split(_ target: String) -> (path: String, query: String?) {
        guard let question = target.firstIndex(of: "?") else { return (target, nil) }
        return (String(target[..<question]), String(target[target.index(after: question)...]))
    }

    /// The query's name/value pairs, percent-decoded (`+` as space).
    package static func queryItems(_ query: String?) -> [(name: String, value: String)] {
        guard let query, !query.isEmpty else { return [] }
        return query.split(separator: "&").map { item in
            let parts = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = percentDecode(parts[0])
            let value = parts.count > 1 ? percentDecode(parts[1]) : ""
            return (name, value)
        }
    }

    /// The value of the first query item called `name`, if any.
    package static func queryValue(_ name: String, in query: String?) -> String? {
        queryItems(query).first { $0.name == name }?.value
    }

    /// Percent-decodes `text` (`+` as space); a `%` not followed by two hex digits stays as it is.
    package static func percentDecode<S: StringProtocol>(_ text: S) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = text.utf8.makeIterator()
        func hex(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%"), let high = iterator.next(), let low = iterator.next() {
                if let h = hex(high), let l = hex(low) {
                    bytes.append(h << 4 | l)
                } else {
                    bytes.append(contentsOf: [byte, high, low])
                }
            } else if byte == UInt8(ascii: "+") {
                bytes.append(UInt8(ascii: " "))
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
