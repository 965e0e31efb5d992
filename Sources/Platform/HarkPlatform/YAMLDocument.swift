import CYAML

/// A node of a YAML document as composed from libyaml's events: aliases are replaced by the node their
/// anchor names, and every node knows the 1-based line where it starts.
public enum YAMLNode: Sendable {
    /// How a scalar was written: plain, or in a form that always reads as text.
    public enum Style: Sendable, Hashable {
        /// Written as is: YAML reads it as a number, a boolean or null when it looks like one.
        case plain
        /// Quoted (`'…'`, `"…"`), a block (`|`, `>`) or tagged `!!str` or `!`: always text.
        case quoted
    }

    /// A scalar: its text, how it was written, and its line.
    case scalar(text: String, style: Style, line: Int)
    /// A mapping: its entries in file order, and its line.
    case mapping([(key: YAMLNode, value: YAMLNode)], line: Int)
    /// A sequence: its items, and its line.
    case sequence([YAMLNode], line: Int)

    /// The 1-based line where the node starts.
    public var line: Int {
        switch self {
        case .scalar(_, _, let line), .mapping(_, let line), .sequence(_, let line): line
        }
    }

    /// The scalar's text; nil for a mapping or a sequence.
    public var text: String? {
        guard case .scalar(let text, _, _) = self else { return nil }
        return text
    }

    /// The mapping's entries; nil for a scalar or a sequence.
    public var mapping: [(key: YAMLNode, value: YAMLNode)]? {
        guard case .mapping(let pairs, _) = self else { return nil }
        return pairs
    }

    /// The sequence's items; nil for a scalar or a mapping.
    public var sequence: [YAMLNode]? {
        guard case .sequence(let items, _) = self else { return nil }
        return items
    }

    /// The plain scalar's text; nil for a quoted scalar, a mapping or a sequence.
    private var plainText: String? {
        guard case .scalar(let text, .plain, _) = self else { return nil }
        return text
    }

    /// True for a plain scalar that is YAML's null: `~`, `null`, `Null`, `NULL` or nothing.
    public var isNull: Bool {
        guard let text = plainText else { return false }
        return ["", "~", "null", "Null", "NULL"].contains(text)
    }

    /// The plain scalar as a boolean: `true`, `yes`, `on`, `false`, `no`, `off`, in any case (YAML 1.1).
    public var bool: Bool? {
        switch plainText?.lowercased() {
        case "true", "yes", "on": true
        case "false", "no", "off": false
        default: nil
        }
    }

    /// The plain scalar as a whole number, YAML 1.1 style: `_` between digits, a sign, `0x` (hexadecimal),
    /// `0b` (binary), `0o` or a leading `0` (octal), and base 60 (`1:30` is 90).
    public var int: Int? {
        guard let text = plainText else { return nil }
        let signed = Self.removingUnderscores(text)
        if signed == "0" { return 0 }
        let negative = signed.hasPrefix("-")
        let sign = negative ? "-" : ""
        let digits = signed.dropFirst(negative || signed.hasPrefix("+") ? 1 : 0)
        for (prefix, radix) in [("0x", 16), ("0b", 2), ("0o", 8), ("0", 8)] where digits.hasPrefix(prefix) {
            return Int(sign + digits.dropFirst(prefix.count), radix: radix)
        }
        if digits.contains(":") { return Self.sexagesimalInt(signed) }
        return Int(signed)
    }

    /// The plain scalar as a number with a fraction, YAML 1.1 style: `_` between digits, `.inf`, `-.inf`,
    /// `.nan` and base 60 (`1:30.5`).
    public var float: Double? {
        guard let text = plainText else { return nil }
        switch text.lowercased() {
        case ".inf", "+.inf": return .infinity
        case "-.inf": return -.infinity
        case ".nan": return .nan
        default:
            let number = Self.removingUnderscores(text)
            if number.contains(":") { return Self.sexagesimalDouble(number) }
            return Double(number)
        }
    }

    private static func removingUnderscores(_ text: String) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.filter { $0 != "_" }))
    }

    /// `text` (`[-+]digit:digit:…`) as its sign and its base-60 digits.
    private static func sexagesimalDigits(_ text: String) -> (negative: Bool, digits: [Substring]) {
        var body = Substring(text)
        let negative = body.hasPrefix("-")
        if negative || body.hasPrefix("+") { body = body.dropFirst() }
        return (negative, body.split(separator: ":", omittingEmptySubsequences: false))
    }

    /// `text` read as a whole number in base 60; nil when a digit does not read or the value overflows.
    private static func sexagesimalInt(_ text: String) -> Int? {
        let (negative, digits) = sexagesimalDigits(text)
        var value = 0
        for digit in digits {
            guard let digit = Int(digit, radix: 10) else { return nil }
            let (shifted, overflow) = value.multipliedReportingOverflow(by: 60)
            let (sum, carry) = shifted.addingReportingOverflow(digit)
            guard !overflow, !carry else { return nil }
            value = sum
        }
        return negative ? -value : value
    }

    /// `text` read as a number with a fraction in base 60; nil when a digit does not read.
    private static func sexagesimalDouble(_ text: String) -> Double? {
        let (negative, digits) = sexagesimalDigits(text)
        var value = 0.0
        for digit in digits {
            guard let digit = Double(digit) else { return nil }
            value = value * 60 + digit
        }
        return negative ? -value : value
    }

    /// True when the node reads back as text: a quoted scalar, or a plain one that is not null, a
    /// boolean or a number. Two scalar keys of a mapping are the same key when their text is the same
    /// and both read as text, or neither does.
    public var isText: Bool {
        guard case .scalar(_, let style, _) = self else { return false }
        return style == .quoted || (!isNull && bool == nil && int == nil && float == nil)
    }

    /// True when `self` and `other` are the same key of a mapping: the same content, wherever written.
    fileprivate func isSameKey(as other: YAMLNode) -> Bool {
        switch (self, other) {
        case (.scalar(let left, _, _), .scalar(let right, _, _)):
            return left == right && isText == other.isText
        case (.sequence(let left, _), .sequence(let right, _)):
            return left.count == right.count && zip(left, right).allSatisfy { $0.isSameKey(as: $1) }
        case (.mapping(let left, _), .mapping(let right, _)):
            return left.count == right.count
                && zip(left, right).allSatisfy { $0.key.isSameKey(as: $1.key) && $0.value.isSameKey(as: $1.value) }
        default:
            return false
        }
    }
}

extension YAMLNode: Equatable {
    /// The same content at the same lines.
    public static func == (left: YAMLNode, right: YAMLNode) -> Bool {
        switch (left, right) {
        case (.scalar(let a, let aStyle, let aLine), .scalar(let b, let bStyle, let bLine)):
            return a == b && aStyle == bStyle && aLine == bLine
        case (.sequence(let a, let aLine), .sequence(let b, let bLine)):
            return a == b && aLine == bLine
        case (.mapping(let a, let aLine), .mapping(let b, let bLine)):
            return aLine == bLine && a.count == b.count
                && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        default:
            return false
        }
    }
}

/// Text that is not one valid YAML document: the 1-based line when known, and libyaml's description.
public struct YAMLError: Error, Sendable, Hashable {
    /// The 1-based line of the problem, when known.
    public var line: Int?
    /// What is wrong, as libyaml says it (`mapping values are not allowed in this context`).
    public var problem: String

    /// An error at `line` saying `problem`.
    public init(line: Int?, problem: String) {
        self.line = line
        self.problem = problem
    }
}

extension YAMLNode {
    /// Parses `text` as one YAML document; nil when it holds no document (empty, or only comments).
    /// Throws when the text is not valid YAML, holds more than one document, names an anchor it has not
    /// defined, or has a mapping that repeats a key.
    public static func document(_ text: String) throws(YAMLError) -> YAMLNode? {
        // A byte order mark some editors write first is not part of the YAML: libyaml, told the text is
        // UTF-8, reads it as a character and fails on the next line.
        var utf8 = Substring(text).utf8
        if utf8.starts(with: [0xEF, 0xBB, 0xBF]) { utf8 = utf8.dropFirst(3) }
        // A NUL after the text: the buffer is never empty, so its address is never nil.
        let bytes = Array(utf8) + [0]
        let parser = UnsafeMutablePointer<yaml_parser_t>.allocate(capacity: 1)
        defer { parser.deallocate() }
        guard yaml_parser_initialize(parser) == 1 else { throw YAMLError(line: nil, problem: "out of memory") }
        defer { yaml_parser_delete(parser) }
        let result: Result<YAMLNode?, YAMLError> = bytes.withUnsafeBufferPointer { buffer in
            yaml_parser_set_encoding(parser, YAML_UTF8_ENCODING)
            yaml_parser_set_input_string(parser, buffer.baseAddress, buffer.count - 1)
            var composer = YAMLComposer(parser: parser, bytes: buffer)
            do throws(YAMLError) {
                return .success(try composer.document())
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }
}

/// One libyaml event, copied out of the C structure.
private enum YAMLEvent {
    case streamStart
    case streamEnd
    case documentStart(line: Int)
    case documentEnd
    case alias(anchor: String, line: Int)
    case scalar(text: String, style: YAMLNode.Style, anchor: String?, line: Int)
    case sequenceStart(anchor: String?, line: Int)
    case sequenceEnd
    case mappingStart(anchor: String?, line: Int)
    case mappingEnd
}

/// Builds nodes from libyaml's events, without recursion, so deep nesting cannot exhaust the stack.
private struct YAMLComposer {
    /// A collection being read: its items so far, its line and anchor.
    private enum Open {
        case sequence([YAMLNode], line: Int, anchor: String?)
        case mapping([(key: YAMLNode, value: YAMLNode)], key: YAMLNode?, line: Int, anchor: String?)
    }

    let parser: UnsafeMutablePointer<yaml_parser_t>
    let bytes: UnsafeBufferPointer<UInt8>
    private var anchors: [String: YAMLNode] = [:]

    init(parser: UnsafeMutablePointer<yaml_parser_t>, bytes: UnsafeBufferPointer<UInt8>) {
        self.parser = parser
        self.bytes = bytes
    }

    /// The stream's only document; nil when the stream holds none.
    mutating func document() throws(YAMLError) -> YAMLNode? {
        guard case .streamStart = try next() else { throw unexpected() }
        switch try next() {
        case .streamEnd: return nil
        case .documentStart: break
        default: throw unexpected()
        }
        let root = try node()
        guard case .documentEnd = try next() else { throw unexpected() }
        switch try next() {
        case .streamEnd:
            return root
        case .documentStart(let line):
            throw YAMLError(
                line: line,
                problem: "but found another document (expected a single document in the stream at line 1)"
            )
        default:
            throw unexpected()
        }
    }

    /// The next whole node: a scalar, an alias's node, or a collection up to its end.
    private mutating func node() throws(YAMLError) -> YAMLNode {
        var open: [Open] = []
        while true {
            var done: YAMLNode
            switch try next() {
            case .scalar(let text, let style, let anchor, let line):
                done = .scalar(text: text, style: style, line: line)
                if let anchor { anchors[anchor] = done }
            case .alias(let anchor, let line):
                guard let node = anchors[anchor] else { throw YAMLError(line: line, problem: "found undefined alias") }
                done = node
            case .sequenceStart(let anchor, let line):
                try Self.checkDepth(open.count, line: line)
                open.append(.sequence([], line: line, anchor: anchor))
                continue
            case .mappingStart(let anchor, let line):
                try Self.checkDepth(open.count, line: line)
                open.append(.mapping([], key: nil, line: line, anchor: anchor))
                continue
            case .sequenceEnd:
                guard case .sequence(let items, let line, let anchor) = open.popLast() else { throw unexpected() }
                done = .sequence(items, line: line)
                if let anchor { anchors[anchor] = done }
            case .mappingEnd:
                guard case .mapping(let pairs, nil, let line, let anchor) = open.popLast() else { throw unexpected() }
                try Self.checkKeys(pairs)
                done = .mapping(pairs, line: line)
                if let anchor { anchors[anchor] = done }
            default:
                throw unexpected()
            }
            switch open.popLast() {
            case nil:
                return done
            case .sequence(var items, let line, let anchor):
                items.append(done)
                open.append(.sequence(items, line: line, anchor: anchor))
            case .mapping(var pairs, let key, let line, let anchor):
                if let key {
                    pairs.append((key, done))
                    open.append(.mapping(pairs, key: nil, line: line, anchor: anchor))
                } else {
                    open.append(.mapping(pairs, key: done, line: line, anchor: anchor))
                }
            }
        }
    }

    /// How deep collections may nest: no board or configuration file comes near it, and it bounds the
    /// work on text that is nothing but opening brackets.
    static let maximumDepth = 1000

    private static func checkDepth(_ depth: Int, line: Int) throws(YAMLError) {
        guard depth >= maximumDepth else { return }
        throw YAMLError(line: line, problem: "collections nest more than \(maximumDepth) deep")
    }

    /// Fails when the mapping repeats a key, naming the keys repeated, at the first one's first line.
    private static func checkKeys(_ pairs: [(key: YAMLNode, value: YAMLNode)]) throws(YAMLError) {
        var firsts: [YAMLNode] = []
        var repeated: [YAMLNode] = []
        var seen: [String: [Int]] = [:]
        for (key, _) in pairs {
            let text = key.text ?? ""
            if let first = seen[text, default: []].first(where: { firsts[$0].isSameKey(as: key) }) {
                if !repeated.contains(where: { $0.isSameKey(as: firsts[first]) }) { repeated.append(firsts[first]) }
            } else {
                seen[text, default: []].append(firsts.count)
                firsts.append(key)
            }
        }
        guard !repeated.isEmpty else { return }
        let sorted = repeated.sorted { ($0.text ?? "") < ($1.text ?? "") }
        let names = sorted.map { "'\($0.text ?? ($0.sequence == nil ? "<mapping>" : "<list>"))'" }
        throw YAMLError(line: sorted[0].line, problem: "a mapping repeats the key \(names.joined(separator: ", "))")
    }

    private func unexpected() -> YAMLError {
        YAMLError(line: nil, problem: "unexpected parser event")
    }

    /// The next event, or the parser's error.
    private mutating func next() throws(YAMLError) -> YAMLEvent {
        var event = yaml_event_t()
        guard yaml_parser_parse(parser, &event) == 1 else { throw failure() }
        defer { yaml_event_delete(&event) }
        let line = Int(event.start_mark.line) + 1
        switch event.type {
        case YAML_STREAM_START_EVENT:
            return .streamStart
        case YAML_STREAM_END_EVENT:
            return .streamEnd
        case YAML_DOCUMENT_START_EVENT:
            return .documentStart(line: line)
        case YAML_DOCUMENT_END_EVENT:
            return .documentEnd
        case YAML_ALIAS_EVENT:
            return .alias(anchor: Self.string(event.data.alias.anchor) ?? "", line: line)
        case YAML_SCALAR_EVENT:
            let scalar = event.data.scalar
            let text = String(decoding: UnsafeBufferPointer(start: scalar.value, count: scalar.length), as: UTF8.self)
            let tag = Self.string(scalar.tag)
            let textTag = tag == "tag:yaml.org,2002:str" || tag == "!"
            let style: YAMLNode.Style = scalar.style == YAML_PLAIN_SCALAR_STYLE && !textTag ? .plain : .quoted
            return .scalar(text: text, style: style, anchor: Self.string(scalar.anchor), line: line)
        case YAML_SEQUENCE_START_EVENT:
            return .sequenceStart(anchor: Self.string(event.data.sequence_start.anchor), line: line)
        case YAML_SEQUENCE_END_EVENT:
            return .sequenceEnd
        case YAML_MAPPING_START_EVENT:
            return .mappingStart(anchor: Self.string(event.data.mapping_start.anchor), line: line)
        case YAML_MAPPING_END_EVENT:
            return .mappingEnd
        default:
            throw unexpected()
        }
    }

    private static func string(_ pointer: UnsafeMutablePointer<yaml_char_t>?) -> String? {
        pointer.map { String(cString: $0) }
    }

    /// The parser's error: libyaml's problem, with its context and the line of each.
    private func failure() -> YAMLError {
        let state = parser.pointee
        let problem = state.problem.map { String(cString: $0) } ?? "unknown error"
        switch state.error {
        case YAML_MEMORY_ERROR:
            return YAMLError(line: nil, problem: "out of memory")
        case YAML_READER_ERROR:
            let offset = min(Int(state.problem_offset), bytes.count)
            let line = bytes[..<offset].reduce(1) { $0 + ($1 == UInt8(ascii: "\n") ? 1 : 0) }
            return YAMLError(line: line, problem: problem)
        default:
            var text = problem
            if let context = state.context {
                text += " (\(String(cString: context)) at line \(Int(state.context_mark.line) + 1))"
            }
            return YAMLError(line: Int(state.problem_mark.line) + 1, problem: text)
        }
    }
}
