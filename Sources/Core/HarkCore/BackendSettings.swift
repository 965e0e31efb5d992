/// One value of a setting.
public enum SettingValue: Sendable, Hashable {
    case text(String)
    case flag(Bool)
    case number(Int)
    case decimal(Double)
    case duration(Duration)

    /// As the configuration file writes it.
    public var written: String {
        switch self {
        case .text(let text): text
        case .flag(let flag): flag ? "true" : "false"
        case .number(let number): String(number)
        case .decimal(let decimal): DurationText.number(decimal)
        case .duration(let duration): DurationText.format(duration)
        }
    }
}

/// A value that does not fit its key: the problem, without where it came from (the caller says that).
public struct SettingError: Error, Sendable, CustomStringConvertible {
    public var problem: String
    public init(_ problem: String) { self.problem = problem }
    public var description: String { problem }
}

/// One key of a backend's section: its name, what it takes, its default, a line of help. The same key is read
/// from the configuration file (`gemini.model`), its environment variable (`HARK_GEMINI_MODEL`) and, for
/// `hark converse`, a command-line option, always through ``parse(_:)``.
public struct SettingKey: Sendable {
    /// What the key takes.
    public enum Kind: Sendable {
        /// Free text; `required`: it may not be empty; at most `limit` characters.
        case text(required: Bool = false, limit: Int = 4096)
        /// A file or folder (a relative path is resolved by whoever reads it: against the configuration file's
        /// folder, or the current directory).
        case path
        /// A URL with one of these schemes.
        case url(schemes: [String])
        /// true or false (also yes/no, on/off, 1/0).
        case flag
        /// One of these words.
        case choice([String])
        /// A whole number in the range.
        case number(ClosedRange<Int>)
        /// A number in the range.
        case decimal(ClosedRange<Double>)
        /// A duration (`30s`, `500ms`, `2m`) in the range.
        case duration(ClosedRange<Duration>)
        /// A BCP-47 language code (`en-US`, `ml-IN`).
        case languageCode
        /// Comma-separated BCP-47 language codes (`ml-IN, en-IN`), at most `count` of them.
        case languageCodes(count: Int)
        /// A comma-separated list of at most `count` items (words or phrases), each at most `length` characters.
        case list(count: Int, length: Int)
        /// Text given inline or, with the companion key `NAME_file`, read from a file (at most ``instructionLimit``).
        case instruction
    }

    /// The largest instruction, inline or in its file (256 KiB of UTF-8).
    public static let instructionLimit = 256 * 1024

    public var name: String
    public var kind: Kind
    /// The value when the key is not set (nil: not set).
    public var defaultValue: SettingValue?
    /// One line for a person: what the key does.
    public var help: String

    public init(_ name: String, _ kind: Kind, default defaultValue: SettingValue? = nil, help: String) {
        self.name = name
        self.kind = kind
        self.defaultValue = defaultValue
        self.help = help
    }

    /// The command-line option of a key named `name`: `--api-key-file` for `api_key_file`.
    public static func flagName(_ name: String) -> String {
        "--" + String(name.map { $0 == "_" ? "-" : $0 })
    }

    /// The key names a file or folder (resolved relative to where it was written).
    public var isPath: Bool {
        if case .path = kind { return true }
        return false
    }

    /// The value of `text`; nil (not set) for nil or empty text, unless the key is required.
    public func parse(_ text: String?) throws(SettingError) -> SettingValue? {
        let trimmed = text?.trimmedWhitespace
        guard let trimmed, !trimmed.isEmpty else {
            if case .text(required: true, _) = kind { throw SettingError("must not be empty \(Self.got(text))") }
            if case .flag = kind, text != nil { throw SettingError("must be true or false \(Self.got(text))") }
            return nil
        }
        switch kind {
        case .text(_, let limit):
            guard trimmed.count <= limit else {
                throw SettingError("is longer than \(limit) characters (\(trimmed.count))")
            }
            return .text(trimmed)
        case .path:
            return .text(trimmed)
        case .instruction:
            guard trimmed.utf8.count <= Self.instructionLimit else {
                throw SettingError(
                    "is \(trimmed.utf8.count) bytes, longer than \(Self.instructionLimit / 1024) KiB; "
                        + "a system instruction is text"
                )
            }
            return .text(trimmed)
        case .url(let schemes):
            guard let url = EndpointURL(trimmed), schemes.contains(url.scheme) else {
                let names = schemes.map { $0 + "://" }.joined(separator: " or ")
                throw SettingError("must be a \(names) URL \(Self.got(URLRedaction.redact(trimmed)))")
            }
            guard !url.hasUserInfo else {
                throw SettingError(
                    "must not carry a user name or password in the URL \(Self.got(URLRedaction.redact(trimmed)))"
                )
            }
            return .text(trimmed)
        case .flag:
            switch trimmed.lowercased() {
            case "true", "yes", "on", "1": return .flag(true)
            case "false", "no", "off", "0": return .flag(false)
            default: throw SettingError("must be true or false \(Self.got(trimmed))")
            }
        case .choice(let allowed):
            guard allowed.contains(trimmed) else {
                throw SettingError("must be one of \(allowed.joined(separator: ", ")) \(Self.got(trimmed))")
            }
            return .text(trimmed)
        case .number(let range):
            guard let value = Int(trimmed), range.contains(value) else {
                throw SettingError(
                    "must be a whole number from \(range.lowerBound) to \(range.upperBound) \(Self.got(trimmed))"
                )
            }
            return .number(value)
        case .decimal(let range):
            guard let value = Double(trimmed), value.isFinite, range.contains(value) else {
                throw SettingError(
                    "must be a number from \(DurationText.number(range.lowerBound)) to "
                        + "\(DurationText.number(range.upperBound)) \(Self.got(trimmed))"
                )
            }
            return .decimal(value)
        case .duration(let range):
            guard let value = DurationText.parse(trimmed) else {
                throw SettingError("must be a duration like 30s or 500ms \(Self.got(trimmed))")
            }
            guard range.contains(value) else {
                throw SettingError(
                    "must be from \(DurationText.format(range.lowerBound)) to \(DurationText.format(range.upperBound)) "
                        + Self.got(trimmed)
                )
            }
            return .duration(value)
        case .languageCode:
            guard Self.isLanguageCode(trimmed) else {
                throw SettingError("must be a BCP-47 language code like en-US or ml-IN \(Self.got(trimmed))")
            }
            return .text(trimmed)
        case .languageCodes(let count):
            let codes = Self.items(trimmed)
            guard codes.count <= count else { throw SettingError("holds more than \(count) language codes") }
            if let bad = codes.first(where: { !Self.isLanguageCode($0) }) {
                throw SettingError(
                    "must be BCP-47 language codes like en-US or ml-IN, separated by commas \(Self.got(bad))"
                )
            }
            return codes.isEmpty ? nil : .text(codes.joined(separator: ", "))
        case .list(let count, let length):
            let items = Self.items(trimmed)
            guard items.count <= count else { throw SettingError("holds more than \(count) items") }
            if let long = items.first(where: { $0.count > length }) {
                throw SettingError("has an item longer than \(length) characters \(Self.got(long))")
            }
            return items.isEmpty ? nil : .text(items.joined(separator: ", "))
        }
    }

    /// The items of a comma-separated list, without the white space around them; empty items are dropped.
    public static func items(_ text: String) -> [String] {
        text.split(separator: ",").map { String($0).trimmedWhitespace }.filter { !$0.isEmpty }
    }

    /// `(got "value")` (printable and bounded), or `(got nothing)`.
    public static func got(_ text: String?) -> String {
        guard let text else { return "(got nothing)" }
        return "(got \"\(RemoteText.printable(text, limit: 120))\")"
    }

    private static func isLanguageCode(_ text: String) -> Bool {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        return (2...3).contains(parts[0].count) && parts[0].allSatisfy { $0.isASCII && $0.isLetter }
            && parts.dropFirst().allSatisfy {
                !$0.isEmpty && $0.count <= 8 && $0.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) }
            }
    }
}

/// The values of one backend's section, key by key, after validation; what a key's default gives when unset.
public struct BackendSettings: Sendable, Hashable {
    /// The values set, by key name (defaults included).
    public private(set) var values: [String: SettingValue]

    /// The keys' defaults.
    public init(keys: [SettingKey]) {
        var values: [String: SettingValue] = [:]
        for key in keys { values[key.name] = key.defaultValue }
        self.values = values
    }

    /// Exactly these values.
    public init(values: [String: SettingValue]) {
        self.values = values
    }

    public subscript(name: String) -> SettingValue? {
        get { values[name] }
        set { values[name] = newValue }
    }

    /// Text (a text, path, URL, choice, language or instruction key), or nil when not set.
    public func text(_ name: String) -> String? {
        if case .text(let text)? = values[name] { return text }
        return nil
    }

    /// The items of a list key (``SettingKey/Kind/list(count:length:)``, ``SettingKey/Kind/languageCodes(count:)``);
    /// empty when unset.
    public func list(_ name: String) -> [String] {
        text(name).map(SettingKey.items) ?? []
    }

    /// A flag; false when not set.
    public func flag(_ name: String) -> Bool {
        if case .flag(let flag)? = values[name] { return flag }
        return false
    }

    /// A flag, or nil when not set (a key without a default: "unset" differs from false).
    public func optionalFlag(_ name: String) -> Bool? {
        if case .flag(let flag)? = values[name] { return flag }
        return nil
    }

    /// A whole number, or nil.
    public func number(_ name: String) -> Int? {
        if case .number(let number)? = values[name] { return number }
        return nil
    }

    /// A number, or nil.
    public func decimal(_ name: String) -> Double? {
        switch values[name] {
        case .decimal(let value)?: value
        case .number(let value)?: Double(value)
        default: nil
        }
    }

    /// A duration, or nil.
    public func duration(_ name: String) -> Duration? {
        if case .duration(let duration)? = values[name] { return duration }
        return nil
    }
}

/// Durations and numbers as the configuration writes them.
public enum DurationText {
    /// `30s`, `500ms`, `2m`, `1h`, `1.5s`, or a bare number of seconds; nil for anything else (and for negative
    /// or absurd durations).
    public static func parse(_ text: String) -> Duration? {
        let text = text.trimmedWhitespace.lowercased()
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600)]
        var number = Substring(text)
        var scale = 1.0
        for (suffix, factor) in units where text.hasSuffix(suffix) {
            number = text.dropLast(suffix.count)
            scale = factor
            break
        }
        number = Substring(number.trimmedWhitespace)
        guard !number.isEmpty, number.count <= 32, number.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
            let value = Double(number), value.isFinite
        else { return nil }
        let nanoseconds = (value * scale * 1e9).rounded()
        guard nanoseconds < 1e18 else { return nil }
        return .nanoseconds(Int64(nanoseconds))
    }

    /// The shortest exact form: `24h`, `2m`, `30s`, `500ms`, else seconds with a fraction.
    public static func format(_ duration: Duration) -> String {
        let nanoseconds = duration.nanoseconds
        if nanoseconds != 0, nanoseconds % 3_600_000_000_000 == 0 { return "\(nanoseconds / 3_600_000_000_000)h" }
        if nanoseconds != 0, nanoseconds % 60_000_000_000 == 0 { return "\(nanoseconds / 60_000_000_000)m" }
        if nanoseconds % 1_000_000_000 == 0 { return "\(nanoseconds / 1_000_000_000)s" }
        if nanoseconds % 1_000_000 == 0 { return "\(nanoseconds / 1_000_000)ms" }
        return number(Double(nanoseconds) / 1e9) + "s"
    }

    /// A number without a needless `.0`.
    public static func number(_ value: Double) -> String {
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(value)
    }
}

extension SettingKey {
    /// `ca_file`: an extra CA certificate to trust, for a backend that connects over TLS.
    public static let caFile = SettingKey(
        "ca_file",
        .path,
        help: "an extra CA certificate (PEM) to trust: a proxy's, or the simulator's"
    )

    /// `allow_insecure`: a plain connection to another host, for a backend whose key would travel in it.
    public static let allowInsecure = SettingKey(
        "allow_insecure",
        .flag,
        default: .flag(false),
        help: "allow plain ws:// or http:// to a host that is not this machine (the key travels in clear text)"
    )
}
