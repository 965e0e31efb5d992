import ArgumentParser
import HarkCore
import HarkDatagrid

/// `hark converse --backend datagrid`: the Datagrid Voice options (each is the `datagrid.` key of the same name).
public struct DatagridOptions: ParsableArguments, BackendOptionGroup {
    public static let backendName = DatagridBackend.name

    @Option(name: .long, help: ArgumentHelp("The agent to talk to.", valueName: "ID"))
    public var agentId: String?

    @Option(name: .long, help: ArgumentHelp("The agent's voice preset.", valueName: "NAME"))
    public var voicePreset: String?

    @Option(name: .long, help: ArgumentHelp("The teamspace (Datagrid-Teamspace header).", valueName: "ID"))
    public var teamspace: String?

    @Flag(name: .long, help: "Connect with the key as token in the URL (a fallback; redacted in logs).")
    public var direct = false

    @Flag(name: .long, help: "Skip the agent's greeting.")
    public var silentStart = false

    public init() {}
}
