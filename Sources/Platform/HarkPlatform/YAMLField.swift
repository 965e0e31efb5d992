import HarkCore

/// An error about one place in a YAML file: what ``YAMLField`` throws. Board files and the appliance's
/// configuration file each have their own error type with this shape.
public protocol YAMLFieldError: Error {
    /// Creates the error for `key` (a dotted path, empty for the document) of `file`, at 1-based `line`
    /// when known, saying what is wrong in `problem`.
    init(file: String, key: String, line: Int?, problem: String)
}

/// A node of a YAML file with its dotted key path, for reading values with precise errors: every error
/// names the file, the key (`button.bias`, `audio.capture.channel_map[1]`), the line, and what is
/// allowed.
public struct YAMLField<Failure: YAMLFieldError> {
    /// The YAML node.
    public var node: YAMLNode
    /// The dotted key path of the node; empty for the document itself.
    public var key: String
    /// The file the node was read from, as errors name it.
    public var file: String

    /// A field for `node` at `key` of `file`.
    public init(node: YAMLNode, key: String, file: String) {
        self.node = node
        self.key = key
        self.file = file
    }

    /// Parses `text` as one YAML document; nil when it holds no document (empty, or only comments).
    /// Text that is not valid YAML, or a mapping that repeats a key, throws with the line libyaml reports.
    public static func document(_ text: String, file: String) throws(Failure) -> YAMLField? {
        do {
            return try YAMLNode.document(text).map { YAMLField(node: $0, key: "", file: file) }
        } catch {
            throw Failure(file: file, key: "", line: error.line, problem: "not valid YAML: \(error.problem)")
        }
    }

    /// The 1-based line of the node.
    public var line: Int? { node.line }

    /// An error about this field.
    public func error(_ problem: String) -> Failure {
        Failure(file: file, key: key, line: line, problem: problem)
    }

    /// The dotted path of the child `name` of this field.
    public func child(_ name: String) -> String { key.isEmpty ? name : key + "." + name }

    /// The mapping's entries in file order as (name, field) pairs; fails if the node is not a mapping or
    /// has a key that is not a string.
    public func entries() throws(Failure) -> [(name: String, field: YAMLField)] {
        guard let mapping = node.mapping else { throw error("must be a mapping (key: value lines)") }
        var result: [(name: String, field: YAMLField)] = []
        for pair in mapping {
            guard let name = pair.key.text else {
                throw Failure(file: file, key: key, line: pair.key.line, problem: "keys must be strings")
            }
            result.append((name, YAMLField(node: pair.value, key: child(name), file: file)))
        }
        return result
    }

    /// Fails on any key not in `allowed`, naming what is allowed.
    public func allow(_ allowed: [String]) throws(Failure) {
        for (name, field) in try entries() where !allowed.contains(name) {
            throw Failure(
                file: file,
                key: child(name),
                line: field.line,
                problem: "unknown key; allowed here: \(allowed.joined(separator: ", "))"
            )
        }
    }

    /// The same mapping with only `names` kept (to read a nested shape from a flat one).
    public func subset(_ names: [String]) throws(Failure) -> YAMLField {
        let kept = try entries().filter { names.contains($0.name) }.map { entry in
            (
                key: YAMLNode.scalar(text: entry.name, style: .quoted, line: entry.field.node.line),
                value: entry.field.node
            )
        }
        var copy = self
        copy.node = .mapping(kept, line: node.line)
        return copy
    }

    /// The child `name`, or nil when the mapping does not have it.
    public func optional(_ name: String) throws(Failure) -> YAMLField? {
        try entries().first { $0.name == name }?.field
    }

    /// The child `name`; fails with "is required" when the mapping does not have it.
    public func required(_ name: String) throws(Failure) -> YAMLField {
        guard let found = try optional(name) else {
            throw Failure(file: file, key: child(name), line: line, problem: "is required")
        }
        return found
    }

    /// True when the node is YAML's null (`~`, `null` or nothing after the colon).
    public var isNull: Bool { node.isNull }

    /// The node as text; fails when it is a mapping or a list.
    public func string() throws(Failure) -> String {
        guard let text = node.text else { throw error("must be a string") }
        return text
    }

    /// The node as a whole number in `range`.
    public func int(in range: ClosedRange<Int>) throws(Failure) -> Int {
        guard let value = node.int else {
            throw error("must be a whole number in \(range.lowerBound)...\(range.upperBound)")
        }
        guard range.contains(value) else {
            throw error("is \(value); allowed: \(range.lowerBound)...\(range.upperBound)")
        }
        return value
    }

    /// The node as `true` or `false`.
    public func bool() throws(Failure) -> Bool {
        guard let value = node.bool else { throw error("must be true or false") }
        return value
    }

    /// The node as one of the strings `allowed`.
    public func oneOf(_ allowed: [String]) throws(Failure) -> String {
        let value = try string()
        guard allowed.contains(value) else {
            throw error("is '\(echo(value))'; allowed: \(allowed.joined(separator: ", "))")
        }
        return value
    }

    /// The node as one of the numbers `allowed`.
    public func oneOf(_ allowed: [Int]) throws(Failure) -> Int {
        guard let value = node.int, allowed.contains(value) else {
            throw error("must be one of \(allowed.map(String.init).joined(separator: ", "))")
        }
        return value
    }

    /// The node as a case of `type`, by raw value.
    public func enumeration<T: RawRepresentable & CaseIterable>(
        _ type: T.Type
    ) throws(Failure) -> T where T.RawValue == String {
        T(rawValue: try oneOf(T.allCases.map(\.rawValue)))!
    }

    /// The node's items, each keyed `key[index]`; fails when the node is not a list.
    public func list() throws(Failure) -> [YAMLField] {
        guard let sequence = node.sequence else { throw error("must be a list") }
        return sequence.enumerated().map { YAMLField(node: $0.element, key: "\(key)[\($0.offset)]", file: file) }
    }

    /// A string or a list of strings.
    public func strings() throws(Failure) -> [String] {
        if case .scalar = node { return [try string()] }
        var result: [String] = []
        for item in try list() { result.append(try item.string()) }
        return result
    }

    /// A list of whole numbers, each in `range`.
    public func ints(in range: ClosedRange<Int>) throws(Failure) -> [Int] {
        var result: [Int] = []
        for item in try list() { result.append(try item.int(in: range)) }
        return result
    }
}

/// A value from a file as an error message quotes it: printable and at most 120 Unicode scalars
/// (``RemoteText``), so a huge or hostile value cannot flood or forge the one-line error.
package func echo(_ text: String) -> String { RemoteText.printable(text, limit: 120) }
