import Glibc

/// Facts about the machine Hark runs on.
public enum Host {
    /// The host's name (`gethostname(2)`), at most 255 bytes, or nil when it cannot be read or is empty.
    public static func name() -> String? {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return nil }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? nil : name
    }
}
