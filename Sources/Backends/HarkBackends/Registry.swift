import ArgumentParser
import HarkCascade
import HarkCore
import HarkDatagrid
import HarkGemini
import HarkLiveKitAgent

/// The one list of backends: `hark run`, `hark converse`, `hark config check` and `hark doctor` all find a backend
/// here, by its name. Adding one: a module of its own that implements ``Backend`` (and ``BackendOptionGroup``
/// for its `hark converse` options), then its line in ``Backends/all`` and its option group in
/// ``BackendOptionGroups`` below (Sources/README.md says it step by step).
public enum Backends {
    /// Every backend, the default first.
    public static let all: [any Backend.Type] = [
        GeminiBackend.self,
        DatagridBackend.self,
        CascadeBackend.self,
        LiveKitAgentBackend.self,
    ]

    /// The backend named `name`, or nil.
    public static func named(_ name: String) -> (any Backend.Type)? {
        all.first { $0.name == name }
    }

    /// The names, in order.
    public static var names: [String] { all.map { $0.name } }

    /// Every backend with its summary, for a command's help: `gemini (the default): Gemini Live API, ...`, one line
    /// each, indented by `indent`.
    public static func listing(indent: String = "  ") -> String {
        all.enumerated().map { index, backend in
            "\(indent)\(backend.name)\(index == 0 ? " (the default)" : ""): \(backend.summary)"
        }.joined(separator: "\n")
    }

    /// Where each backend's secrets come from, in the order they are tried, for a command's help (`gemini: Gemini
    /// API key from gemini.api_key_file, the systemd credential gemini-api-key or GEMINI_API_KEY`), one line each.
    /// `flags`: name the file keys as `hark converse`'s flags instead of configuration keys.
    public static func secretSources(indent: String = "  ", flags: Bool = false) -> String {
        all.flatMap { backend in
            backend.secrets.map { secret in
                let file = flags ? SettingKey.flagName(secret.fileKey) : "\(backend.name).\(secret.fileKey)"
                return "\(indent)\(backend.name): \(secret.what) from \(file), the systemd credential "
                    + "\(secret.credential) or \(secret.environment)"
            }
        }.joined(separator: "\n")
    }

    /// What `hark converse --help` says of each backend: its summary, its secrets and what else a person should know
    /// (``Backend/details``), one paragraph each.
    public static func converseHelp() -> String {
        all.map { backend in
            var paragraph = "--backend \(backend.name): \(backend.summary)."
            let keys = backend.secrets.map { secret in
                "\(secret.what): \(SettingKey.flagName(secret.fileKey)), \(secret.environment) or the systemd "
                    + "credential \(secret.credential)"
            }
            if !keys.isEmpty { paragraph += " " + keys.joined(separator: "; ") + "." }
            if !backend.details.isEmpty { paragraph += " " + backend.details }
            return paragraph
        }.joined(separator: "\n\n")
    }
}

/// Every backend's own options of `hark converse`, one group each.
public struct BackendOptionGroups: ParsableArguments {
    @OptionGroup(title: "With --backend gemini (Gemini Live)") public var gemini: GeminiOptions
    @OptionGroup(title: "With --backend datagrid (Datagrid Voice)") public var datagrid: DatagridOptions
    @OptionGroup(title: "With --backend cascade (Sarvam and Gemini text)") public var cascade: CascadeOptions
    @OptionGroup(title: "With --backend livekit (a LiveKit room with an agent)") public var livekit: LiveKitAgentOptions

    public init() {}

    /// The groups, each of one backend.
    public var groups: [any BackendOptionGroup] { [gemini, datagrid, cascade, livekit] }

    /// The settings given for backend `name`, and the options given for another backend (a mistake to report).
    public func settings(for name: String) -> (settings: [String: String], foreign: [String]) {
        var settings: [String: String] = [:]
        var foreign: [String] = []
        for group in groups {
            if type(of: group).backendName == name {
                settings = group.settings
            } else {
                foreign += group.settings.keys.sorted().map(SettingKey.flagName)
            }
        }
        return (settings, foreign)
    }
}
