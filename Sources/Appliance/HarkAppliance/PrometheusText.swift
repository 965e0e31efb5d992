import HarkCore

/// Metric families in Prometheus's text exposition format (version 0.0.4), as node_exporter's textfile collector
/// reads them: each family once, its `# HELP` and `# TYPE` lines, then its samples.
///
/// Every name is checked (a family with a name Prometheus would refuse is left out, and counted in ``refused``);
/// label values are made printable, bounded and escaped, so that no text from outside can break a line or forge a
/// series.
public struct PrometheusText: Sendable, Hashable {
    /// The kind of a family (`# TYPE`).
    public enum Kind: String, Sendable, Hashable {
        /// A value that only grows (resets when the process starts again).
        case counter
        /// A value that goes up and down.
        case gauge
        /// Quantiles of observed values, with their sum and count.
        case summary
    }

    /// One line of a family: the family's name plus `suffix` (`_sum`, `_count` or nothing), labels and a value.
    public struct Sample: Sendable, Hashable {
        /// Added to the family's name (`""`, `"_sum"`, `"_count"`).
        public var suffix: String
        /// The labels, in the order written.
        public var labels: [Label]
        /// The value.
        public var value: Double

        /// A sample of `value` with `labels`.
        public init(suffix: String = "", labels: [Label] = [], value: Double) {
            self.suffix = suffix
            self.labels = labels
            self.value = value
        }
    }

    /// A label: a name and a value.
    public struct Label: Sendable, Hashable {
        /// The label's name (`[a-zA-Z_][a-zA-Z0-9_]*`, not starting with `__`).
        public var name: String
        /// The value, any text: written printable, at most ``valueLimit`` characters, escaped.
        public var value: String

        /// A label `name="value"`.
        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    /// One family: its name, help text, kind and samples.
    public struct Family: Sendable, Hashable {
        /// The family's name (`[a-zA-Z_:][a-zA-Z0-9_:]*`).
        public var name: String
        /// One line saying what it measures.
        public var help: String
        /// Counter, gauge or summary.
        public var kind: Kind
        /// Its samples.
        public var samples: [Sample]
    }

    /// The longest label value written (longer ones are cut).
    public static let valueLimit = 120
    /// The most families kept (more are refused).
    public static let familyLimit = 256
    /// The most samples a family keeps (more are left out).
    public static let sampleLimit = 64

    /// The families, in the order added.
    public private(set) var families: [Family] = []
    /// Names of families refused: a name Prometheus would not take, one added twice, a label name it would not
    /// take, or one past ``familyLimit``.
    public private(set) var refused: [String] = []

    /// No families yet.
    public init() {}

    /// Adds a family of `kind` named `name` with `samples`; refused (and named in ``refused``) when its name or a
    /// label name is not valid, or the name is taken.
    public mutating func add(_ name: String, _ kind: Kind, help: String, samples: [Sample]) {
        guard families.count < Self.familyLimit, Self.isMetricName(name),
            !families.contains(where: { $0.name == name }),
            samples.allSatisfy({ sample in
                Self.suffixes(kind).contains(sample.suffix)
                    && sample.labels.allSatisfy { Self.isLabelName($0.name) }
                    && (kind != .summary || sample.suffix != "" || sample.labels.contains { $0.name == "quantile" })
            })
        else {
            refused.append(RemoteText.printable(name, limit: 80))
            return
        }
        families.append(Family(name: name, help: help, kind: kind, samples: Array(samples.prefix(Self.sampleLimit))))
    }

    /// Adds a family of one sample without labels.
    public mutating func add(_ name: String, _ kind: Kind, help: String, value: Double) {
        add(name, kind, help: help, samples: [Sample(value: value)])
    }

    /// The text node_exporter reads: each family's `# HELP`, `# TYPE` and samples, ending with a line feed.
    public var rendered: String {
        var text = ""
        for family in families {
            text += "# HELP \(family.name) \(Self.escapedHelp(family.help))\n"
            text += "# TYPE \(family.name) \(family.kind.rawValue)\n"
            for sample in family.samples {
                text += family.name + sample.suffix
                if !sample.labels.isEmpty {
                    text += "{"
                    text += sample.labels.map { "\($0.name)=\"\(Self.escapedValue($0.value))\"" }
                        .joined(separator: ",")
                    text += "}"
                }
                text += " \(Self.number(sample.value))\n"
            }
        }
        return text
    }

    /// True for a valid metric name: `[a-zA-Z_:][a-zA-Z0-9_:]*`, at most 200 characters.
    public static func isMetricName(_ name: String) -> Bool {
        guard let first = name.utf8.first, name.utf8.count <= 200 else { return false }
        return (isLetter(first) || first == UInt8(ascii: "_") || first == UInt8(ascii: ":"))
            && name.utf8.allSatisfy {
                isLetter($0) || isDigit($0) || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ":")
            }
    }

    /// True for a valid label name: `[a-zA-Z_][a-zA-Z0-9_]*`, not starting with `__` (reserved), at most 100.
    public static func isLabelName(_ name: String) -> Bool {
        guard let first = name.utf8.first, name.utf8.count <= 100, !name.hasPrefix("__") else { return false }
        return (isLetter(first) || first == UInt8(ascii: "_"))
            && name.utf8.allSatisfy { isLetter($0) || isDigit($0) || $0 == UInt8(ascii: "_") }
    }

    /// A label value as written between the quotes: printable, bounded, `\`, `"` and line feeds escaped.
    public static func escapedValue(_ value: String) -> String {
        var text = ""
        for character in RemoteText.printable(value, limit: valueLimit) {
            switch character {
            case "\\": text += "\\\\"
            case "\"": text += "\\\""
            case "\n": text += "\\n"
            default: text.append(character)
            }
        }
        return text
    }

    /// The help text as written: printable, at most 300 characters, `\` and line feeds escaped.
    static func escapedHelp(_ help: String) -> String {
        var text = ""
        for character in RemoteText.printable(help, limit: 300) {
            switch character {
            case "\\": text += "\\\\"
            case "\n": text += "\\n"
            default: text.append(character)
            }
        }
        return text
    }

    /// A value as Prometheus reads it: integers without a fraction, `NaN`, `+Inf`, `-Inf`.
    static func number(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return "\(value)"
    }

    private static func suffixes(_ kind: Kind) -> [String] {
        switch kind {
        case .counter, .gauge: [""]
        case .summary: ["", "_sum", "_count"]
        }
    }

    private static func isLetter(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
    }

    private static func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }
}
