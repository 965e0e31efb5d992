import HarkBoard
import HarkCore
import HarkPlatform

/// A configuration that cannot be used. Names where the bad value came from (the file and its line, or
/// the environment variable), the key as a dotted path, and what is allowed:
/// `/etc/hark/hark.yaml:12: session.idle_timeout: must be a duration like 30s or 500ms (got "soon")`.
/// Where the value came from the command line, the option: `option --board: no board file ...`.
public struct ConfigurationError: YAMLFieldError, CustomStringConvertible, Sendable, Hashable {
    /// The file the value was read from; nil when it came from the environment or no file is involved.
    public var file: String?
    /// The dotted key path, e.g. `session.idle_timeout`; empty for the file itself.
    public var key: String
    /// 1-based line in the file, when known.
    public var line: Int?
    /// What is wrong, and what is allowed.
    public var problem: String
    /// The environment variable the value came from (`HARK_MODE`), when it did.
    public var variable: String?
    /// The command-line option the value came from (`--board`), when it did.
    public var option: String?

    /// An error about `key` of `file` at `line`.
    public init(file: String, key: String, line: Int?, problem: String) {
        self.file = file
        self.key = key
        self.line = line
        self.problem = problem
    }

    /// An error about `key`, read from `file` (nil: no file), from the environment `variable` or from the
    /// command-line `option`.
    public init(
        file: String?,
        key: String,
        line: Int? = nil,
        problem: String,
        variable: String? = nil,
        option: String? = nil
    ) {
        self.file = file
        self.key = key
        self.line = line
        self.problem = problem
        self.variable = variable
        self.option = option
    }

    /// The longest ``description``, in Unicode scalars: a value echoed in `problem` is bounded where it is
    /// quoted, and this bounds the rest (a key or a path from the file).
    public static let descriptionLimit = 1000

    /// One line: `FILE:LINE: KEY: PROBLEM`, `environment variable NAME: PROBLEM` or `option --NAME: PROBLEM`,
    /// with control characters escaped (``RemoteText``) and its length bounded.
    public var description: String {
        RemoteText.printable(unbounded, limit: Self.descriptionLimit)
    }

    private var unbounded: String {
        if let variable { return "environment variable \(variable): \(problem)" }
        if let option { return "option \(option): \(problem)" }
        var place = file ?? ""
        if let file, let line { place = "\(file):\(line)" }
        switch (place.isEmpty, key.isEmpty) {
        case (true, true): return problem
        case (true, false): return "\(key): \(problem)"
        case (false, true): return "\(place): \(problem)"
        case (false, false): return "\(place): \(key): \(problem)"
        }
    }
}
