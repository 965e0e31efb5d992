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
