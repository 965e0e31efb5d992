import HarkBackends
import HarkBoard
import HarkCore
import HarkPlatform

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Where a value of the effective configuration came from.
public enum ConfigurationOrigin: Sendable, Hashable {
    /// The built-in default.
    case standard
    /// The configuration file, at this 1-based line when known.
    case file(line: Int?)
    /// An environment variable.
    case environment(String)
    /// A command-line option (`--board`).
    case commandLine(String)
}

/// A configuration as loaded: the values, and where they came from.
public struct LoadedConfiguration: Sendable {
    /// The effective configuration: defaults, then the file, then the environment overrides.
    public var configuration: ApplianceConfiguration
    /// The file actually read; nil when there was none (defaults only).
    public var file: String?
    /// The environment variables applied, in key order (`HARK_MODE`, ...).
    public var overrides: [String]
    /// Things worth telling that are not errors ("no configuration file at ...; using defaults").
    public var notes: [String]
    /// Where each key that is not at its default came from, by dotted path.
    public var origins: [String: ConfigurationOrigin]

    /// A loaded configuration (the loader makes these; tests may too).
    public init(
        configuration: ApplianceConfiguration,
        file: String? = nil,
        overrides: [String] = [],
        notes: [String] = [],
        origins: [String: ConfigurationOrigin] = [:]
    ) {
        self.configuration = configuration
        self.file = file
        self.overrides = overrides
        self.notes = notes
        self.origins = origins
    }

    /// Where the value of `key` (a dotted path) came from.
    public func origin(of key: String) -> ConfigurationOrigin { origins[key] ?? .standard }

    /// An error about the value of `key`, naming where that value came from (the file and line, the
    /// environment variable, the command-line option, or the file alone for a default): for problems found
    /// after loading, e.g. a board that does not exist or a device that cannot be opened.
    public func error(key: String, _ problem: String) -> ConfigurationError {
        switch origin(of: key) {
        case .standard: ConfigurationError(file: file, key: key, problem: problem + " (the default)")
        case .file(let line): ConfigurationError(file: file, key: key, line: line, problem: problem)
        case .environment(let name): ConfigurationError(file: nil, key: key, problem: problem, variable: name)
        case .commandLine(let option): ConfigurationError(file: nil, key: key, problem: problem, option: option)
        }
    }

    /// Sets `key` (a dotted path) to `value` given by the command-line `option` (`--board`), checked as the
    /// file's values are; errors about it from now on name the option.
    public mutating func override(_ key: String, with value: String, option: String) throws(ConfigurationError) {
        guard let entry = ConfigurationKeys.key(key) else {
            throw ConfigurationError(file: nil, key: key, problem: "not a configuration key", option: option)
        }
        do {
            try entry.set(&configuration, value)
        } catch {
            throw ConfigurationError(file: nil, key: key, problem: ConfigurationLoader.problem(error), option: option)
        }
        origins[key] = .commandLine(option)
    }

    /// Where the value of `key` came from, for a person: `hark.yaml:3`, `HARK_BOARD_DIR`, `--board`, or
    /// `the default`.
    func place(of key: String) -> String {
        switch origin(of: key) {
        case .standard: "the default"
        case .file(let line): (file ?? "the file") + (line.map { ":\($0)" } ?? "")
        case .environment(let name): name
        case .commandLine(let option): option
        }
    }
}

/// Reads the appliance's configuration file (YAML), applies the environment overrides and validates
/// every value, with errors that name the file, the line, the key and what is allowed.
///
/// Keys are snake_case as `hark.yaml` shows them. Every key `SECTION.KEY` can be overridden by the
/// environment variable `HARK_SECTION_KEY` (uppercased; `HARK_MODE`, `HARK_GEMINI_MODEL`,
/// `HARK_SESSION_IDLE_TIMEOUT`). Secrets are never in the file: only where to read them.
public enum ConfigurationLoader {
    /// Where the configuration file lives unless `--config` or `$HARK_CONFIG` names another.
    public static let defaultPath = "/etc/hark/hark.yaml"

    /// The environment variable naming the configuration file.
    public static let pathVariable = "HARK_CONFIG"

    /// Every key of the file as a dotted path (`session.idle_timeout`), in the example file's order.
    public static var keys: [String] { ConfigurationKeys.all.map(\.path) }

    /// The environment variable that overrides `key` (`session.idle_timeout` → `HARK_SESSION_IDLE_TIMEOUT`).
    public static func environmentVariable(for key: String) -> String { ConfigurationKey.environmentName(key) }

    /// Loads the configuration.
    ///
    /// - Parameters:
    ///   - path: the file to read; nil takes `$HARK_CONFIG` when set, else ``defaultPath``. A named file
    ///     (by `path` or `$HARK_CONFIG`) must exist; when the default file does not, the defaults are used
    ///     and a note says so.
    ///   - environment: the process environment: overrides (`HARK_...`) and `HARK_CONFIG`.
    ///   - defaultPath: the file read when neither `path` nor `$HARK_CONFIG` names one.
    public static func load(
        path: String?,
        environment: [String: String],
        defaultPath: String = ConfigurationLoader.defaultPath
    ) throws(ConfigurationError) -> LoadedConfiguration {
        let named = path ?? environment[pathVariable].flatMap { $0.isEmpty ? nil : $0 }
        let file = named ?? defaultPath
        let currentDirectory = FileManager.default.currentDirectoryPath
        var isDirectory = false
        guard FileManager.default.fileExists(atPath: file, isDirectory: &isDirectory) else {
            if named == nil {
                var loaded = try apply(environment: environment, to: LoadedConfiguration(configuration: .init()))
                loaded.notes.insert("no configuration file at \(file); using defaults", at: 0)
                return loaded
            }
            let why = path == nil ? " (named by \(pathVariable))" : ""
            throw ConfigurationError(file: file, key: "", problem: "no such file\(why)")
        }
        guard !isDirectory else {
            throw ConfigurationError(file: file, key: "", problem: "is a folder; name the configuration file in it")
        }
        // A regular file of sane size: never a device or a FIFO that would hang or fill memory (a link is followed).
        let attributes = try? ReadableFile.attributes(atPath: file)
        if let attributes {
            guard (attributes[.type] as? FileAttributeType) == .typeRegular else {
                throw ConfigurationError(file: file, key: "", problem: "is not a regular file")
            }
            if let size = fileSize(attributes), size > fileLimit {
                throw ConfigurationError(file: file, key: "", problem: tooLarge(size))
            }
        }
        guard let data = FileManager.default.contents(atPath: file) else {
            throw ConfigurationError(file: file, key: "", problem: "cannot read the file (check its permissions)")
        }
        guard data.count <= fileLimit else {
            throw ConfigurationError(file: file, key: "", problem: tooLarge(data.count))
        }
        let absolute = file.hasPrefix("/") ? file : currentDirectory + "/" + file
        let folder = String(absolute[..<absolute.lastIndex(of: "/")!])
        return try parse(
            String(decoding: data, as: UTF8.self),
            file: file,
            folder: folder.isEmpty ? "/" : folder,
            environment: environment
        )
    }

    /// Parses configuration text as if read from `file`, whose relative paths are taken relative to
    /// `folder`, then applies the overrides in `environment`.
    public static func parse(
        _ text: String,
        file: String,
        folder: String,
        environment: [String: String]
    ) throws(ConfigurationError) -> LoadedConfiguration {
        guard text.utf8.count <= fileLimit else {
            throw ConfigurationError(file: file, key: "", problem: tooLarge(text.utf8.count))
        }
        var loaded = LoadedConfiguration(configuration: ApplianceConfiguration(), file: file)
        try read(text, file: file, folder: folder, into: &loaded)
        return try apply(environment: environment, to: loaded)
    }

    // MARK: The file

    private static func read(
        _ text: String,
        file: String,
        folder: String,
        into loaded: inout LoadedConfiguration
    ) throws(ConfigurationError) {
        guard let root = try YAMLField<ConfigurationError>.document(text, file: file) else { return }
        if root.isNull { return }
        try root.allow(ConfigurationKeys.names(in: ""))
        let keys = ConfigurationKeys.all
        var seen: [String: YAMLField<ConfigurationError>] = [:]
        for section in ConfigurationKeys.sections {
            var mapping = root
            if section == "mcp" {
                // A list of servers, each a mapping: read as a whole.
                if let field = try root.optional(section), !field.isNull {
                    loaded.configuration.mcpServers = try MCPConfigurationReader.read(field) { resolve($0, in: folder) }
                }
                continue
            }
            if !section.isEmpty {
                guard let field = try root.optional(section), !field.isNull else { continue }
                mapping = field
                if section == "media", let stations = try field.optional("stations") {
                    // A mapping of name to URL: read as a whole.
                    loaded.configuration.media.stations = try MediaConfigurationReader.stations(stations)
                    loaded.origins["media.stations"] = .file(line: stations.line)
                }
                for (_, field) in try mapping.entries() where ConfigurationKeys.secrets[field.key] != nil {
                    let credential = ConfigurationKeys.secrets[field.key]!
                    throw field.error(
                        "keys are not written in this file; put the key in a file named by \(section).api_key_file "
                            + "(readable only by the service) or in the systemd credential \(credential) "
                            + "(LoadCredential=\(credential):PATH)"
                    )
                }
                try mapping.allow(ConfigurationKeys.names(in: section))
            }
            for key in keys where key.section == section {
                guard let field = try mapping.optional(key.name) else { continue }
                let text: String
                if let scalar = field.node.text {
                    text = scalar
                } else if key.isList, let items = field.node.sequence?.compactMap(\.text),
                    items.count == field.node.sequence?.count
                {
                    guard items.allSatisfy({ !$0.contains(",") }) else {
                        throw field.error("a list item must not hold a comma")
                    }
                    text = items.joined(separator: ", ")
                } else {
                    throw field.error(
                        key.isList
                            ? "must be a list of single values" : "must be a single value, not a list or a mapping"
                    )
                }
                var value: String? = field.isNull ? nil : text
                if key.isPath, let path = value, !path.isEmpty { value = resolve(path, in: folder, list: key.isList) }
                do {
                    try key.set(&loaded.configuration, value)
                } catch {
                    throw field.error(problem(error))
                }
                loaded.origins[key.path] = .file(line: field.line)
                seen[key.path] = field
            }
        }
        for path in ConfigurationKeys.instructionPaths {
            if let inline = seen[path], !inline.isNull, let instructionFile = seen[path + "_file"],
                !instructionFile.isNull
            {
                throw inline.error("give either \(path) or \(path)_file, not both")
            }
            if let instructionFile = seen[path + "_file"], !instructionFile.isNull {
                try readInstruction(&loaded, path: path) { problem in instructionFile.error(problem) }
            }
        }
        try crossChecks(loaded)
    }

    // MARK: The environment

    private static func apply(
        environment: [String: String],
        to loaded: LoadedConfiguration
    ) throws(ConfigurationError) -> LoadedConfiguration {
        var loaded = loaded
        let keys = ConfigurationKeys.all
        try refuseUnknownVariables(environment, keys: keys)
        var instructionSet: [String: [String]] = [:]
        var instructionCleared: Set<String> = []
        for key in keys {
            let name = key.environmentName
            guard var value = environment[name] else { continue }
            value = value.trimmedWhitespace
            var text: String? = value.isEmpty ? nil : value
            if key.isPath, let path = text {
                text = resolve(path, in: FileManager.default.currentDirectoryPath, list: key.isList)
            }
            do {
                try key.set(&loaded.configuration, text)
            } catch {
                throw ConfigurationError(file: nil, key: key.path, problem: problem(error), variable: name)
            }
            loaded.origins[key.path] = .environment(name)
            loaded.overrides.append(name)
            if let instruction = ConfigurationKeys.instructionPaths.first(where: { key.path.hasPrefix($0) }) {
                if text == nil {
                    instructionCleared.insert(instruction)
                } else {
                    instructionSet[instruction, default: []].append(key.path)
                }
            }
        }
        for path in ConfigurationKeys.instructionPaths {
            let (section, name) = ConfigurationKeys.split(path)
            switch instructionSet[path] ?? [] {
            case [path]:
                // An inline instruction from the environment replaces the file's, whichever form it had.
                loaded.configuration.backends[section]?[name + "_file"] = nil
                loaded.origins[path + "_file"] = nil
            case [path + "_file"]:
                let variable = ConfigurationKey.environmentName(path + "_file")
                if loaded.configuration.text(path + "_file") == nil {
                    loaded.configuration.backends[section]?[name] = nil
                } else {
                    try readInstruction(&loaded, path: path) { problem in
                        ConfigurationError(file: nil, key: path + "_file", problem: problem, variable: variable)
                    }
                }
                loaded.origins[path] = nil
            case []:
                if instructionCleared.contains(path) {
                    loaded.configuration.backends[section]?[name] = nil
                    loaded.configuration.backends[section]?[name + "_file"] = nil
                }
            default:
                throw ConfigurationError(
                    file: nil,
                    key: path,
                    problem: "give either it or \(ConfigurationKey.environmentName(path + "_file")), not both",
                    variable: ConfigurationKey.environmentName(path)
                )
            }
        }
        try crossChecks(loaded)
        // After the environment, which may widen the allow-list the stations must fit.
        if let (station, problem) = loaded.configuration.media.refusedStation() {
            throw loaded.error(key: "media.stations", "the station \(got(station)) is refused: \(problem)")
        }
        return loaded
    }

    /// The `HARK_` variables that are not configuration keys and are not refused: ``pathVariable``, the
    /// switches of the real-time audio tests (set for the tests and whatever they start), where the wake word's
    /// TensorFlow Lite library and models are (HarkWake's `WakeRuntime.libraryVariable` and `.modelsVariable`; the
    /// first is also where HarkLiveKit looks for `liblivekit_ffi.so`, `LiveKitLibrary.libraryVariable`), and where
    /// the LiveKit backend's helper is when it is not installed beside `hark` (`LiveKitHelperProgram.variable`).
    public static let otherVariables: Set<String> = [
        pathVariable, "HARK_REALTIME_TESTS", "HARK_PULSE_SINK", "HARK_LIB_DIR", "HARK_MODELS_DIR",
        "HARK_LIVEKIT_HELPER",
    ]

    /// Every `HARK_` variable must name a key or be one of ``otherVariables``: a typo would silently do
    /// nothing, at the top level (`HARK_MOOD`) as in a section (`HARK_GEMINI_MODLE`).
    private static func refuseUnknownVariables(
        _ environment: [String: String],
        keys: [ConfigurationKey]
    ) throws(ConfigurationError) {
        let known = Set(keys.map(\.environmentName))
        for name in environment.keys.sorted()
        where name.hasPrefix("HARK_") && !known.contains(name) && !otherVariables.contains(name) {
            let section = ConfigurationKeys.sections.dropFirst().first {
                name.hasPrefix("HARK_" + $0.uppercased() + "_")
            }
            if let section, name == "HARK_" + section.uppercased() + "_API_KEY" {
                throw ConfigurationError(
                    file: nil,
                    key: section + ".api_key",
                    problem: "keys are not read from HARK_ variables; use \(section.uppercased())_API_KEY, "
                        + "\(section).api_key_file or the systemd credential \(section)-api-key",
                    variable: name
                )
            }
            var problem = "not a configuration key"
            if let guess = closest(to: name, among: known.union(otherVariables)) {
                problem += "; did you mean \(guess)?"
            }
            if let section {
                let allowed = keys.filter { $0.section == section }.map(\.environmentName)
                problem += " allowed: \(allowed.joined(separator: ", "))"
            } else {
                let allowed = keys.filter { $0.section.isEmpty }.map(\.environmentName) + [pathVariable]
                let sections = ConfigurationKeys.sections.dropFirst().map { $0.uppercased() }
                problem +=
                    " allowed: \(allowed.joined(separator: ", ")), "
                    + "and HARK_<SECTION>_<KEY> for a key in a section (\(sections.joined(separator: ", ")))"
            }
            throw ConfigurationError(file: nil, key: "", problem: problem, variable: name)
        }
    }

    /// The name in `names` nearest to `name` by edit distance, when at most two edits away.
    private static func closest(to name: String, among names: Set<String>) -> String? {
        let target = Array(name.utf8)
        guard target.count <= 64 else { return nil }
        var best: (name: String, distance: Int)?
        for candidate in names.sorted() {
            let distance = editDistance(target, Array(candidate.utf8))
            if distance <= 2, distance < best?.distance ?? .max { best = (candidate, distance) }
        }
        return best?.name
    }

    /// The Levenshtein distance between `a` and `b`.
    private static func editDistance(_ a: [UInt8], _ b: [UInt8]) -> Int {
        var previous = Array(0...b.count)
        for (i, x) in a.enumerated() {
            var current = [i + 1] + Array(repeating: 0, count: b.count)
            for (j, y) in b.enumerated() {
                current[j + 1] = min(previous[j + 1] + 1, current[j] + 1, previous[j] + (x == y ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }

    // MARK: Shared

    /// The largest system instruction, inline or in its file (256 KiB of UTF-8).
    public static let instructionLimit = 256 * 1024

    /// The largest configuration file read (1 MiB: room for the largest instruction written inline).
    public static let fileLimit = 1024 * 1024

    private static func tooLarge(_ size: Int) -> String {
        "is \(size) bytes, larger than \(fileLimit / 1024 / 1024) MiB; a configuration file is a few KiB of text "
            + "(a long system instruction goes in gemini.system_instruction_file)"
    }

    private static func fileSize(_ attributes: [FileAttributeKey: Any]) -> Int? {
        (attributes[.size] as? Int) ?? (attributes[.size] as? UInt64).map { Int(clamping: $0) }
    }

    /// Reads the file named by `instruction`'s companion key (`gemini.system_instruction_file`) into it.
    private static func readInstruction(
        _ loaded: inout LoadedConfiguration,
        path instruction: String,
        error: (String) -> ConfigurationError
    ) throws(ConfigurationError) {
        guard let path = loaded.configuration.text(instruction + "_file") else { return }
        // A regular file of sane size: never /dev/zero or a FIFO that would hang or fill memory (a link is followed).
        let attributes = try? ReadableFile.attributes(atPath: path)
        if let attributes {
            guard (attributes[.type] as? FileAttributeType) == .typeRegular else {
                throw error("\(path) is not a regular file")
            }
            if let size = fileSize(attributes), size > instructionLimit {
                throw error("\(path) is larger than \(instructionLimit / 1024) KiB; a system instruction is text")
            }
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw error("cannot read \(path)")
        }
        guard data.count <= instructionLimit else {
            throw error("\(path) is larger than \(instructionLimit / 1024) KiB; a system instruction is text")
        }
        let text = String(decoding: data, as: UTF8.self).trimmedWhitespace
        guard !text.isEmpty else { throw error("\(path) is empty") }
        let (section, name) = ConfigurationKeys.split(instruction)
        loaded.configuration.backends[section]?[name] = .text(text)
    }

    private static func crossChecks(_ loaded: LoadedConfiguration) throws(ConfigurationError) {
        for backend in Backends.all {
            guard let settings = loaded.configuration.backends[backend.name],
                let (key, problem) = backend.crossCheck(settings)
            else { continue }
            throw loaded.error(key: backend.name + "." + key, problem)
        }
        // What the mode needs, the chosen backend must offer.
        let configuration = loaded.configuration
        if let backend = Backends.named(configuration.backend),
            let missing = configuration.mode.needs.first(where: { !backend.capabilities.contains($0.0) })
        {
            throw loaded.error(
                key: "mode",
                "\(configuration.mode.rawValue) needs \(missing.1), which backend \(backend.name) does not offer; "
                    + "choose another mode or backend"
            )
        }
    }

    private static func resolve(_ path: String, in folder: String, list: Bool = false) -> String {
        if list {
            // Each item with a `/` is a path; the others are names.
            return SettingKey.items(path).map { $0.contains("/") ? resolve($0, in: folder) : $0 }
                .joined(separator: ", ")
        }
        if path.hasPrefix("/") { return path }
        var relative = Substring(path)
        while relative.hasPrefix("./") { relative = relative.dropFirst(2) }
        return folder.hasSuffix("/") ? folder + relative : folder + "/" + relative
    }

    static func problem(_ error: any Error) -> String {
        (error as? InvalidValue)?.problem ?? "\(error)"
    }
}
