import ArgumentParser
import HarkCore
import HarkLiveKitAgent

/// `hark converse --backend livekit`: the LiveKit backend's options (each is the `livekit.` key of the same name).
public struct LiveKitAgentOptions: ParsableArguments, BackendOptionGroup {
    public static let backendName = LiveKitAgentBackend.name

    @Option(
        name: .long,
        help: ArgumentHelp("A file holding the device's token endpoint credential.", valueName: "PATH")
    )
    public var tokenKeyFile: String?

    @Option(name: .long, help: ArgumentHelp("LiveKit Cloud's sandbox token server (development).", valueName: "ID"))
    public var sandboxID: String?

    @Option(
        name: .long,
        help: ArgumentHelp("The LiveKit server (ws:// or wss://; a token endpoint may name another).", valueName: "URL")
    )
    public var livekitURL: String?

    @Option(name: .long, help: ArgumentHelp("Mint tokens here with this API key (development only).", valueName: "KEY"))
    public var apiKey: String?

    @Option(name: .long, help: ArgumentHelp("A file holding the API secret that signs them.", valueName: "PATH"))
    public var apiSecretFile: String?

    @Option(name: .long, help: ArgumentHelp("The room to join (default: a new one).", valueName: "NAME"))
    public var room: String?

    @Option(name: .long, help: ArgumentHelp("The device's identity in the room.", valueName: "NAME"))
    public var identity: String?

    @Option(name: .long, help: ArgumentHelp("The agent to dispatch to the room.", valueName: "NAME"))
    public var agentName: String?

    @Option(name: .long, help: ArgumentHelp("Send what was said before the agent joined.", valueName: "BOOL"))
    public var preConnectAudio: String?

    public init() {}
}
