import ArgumentParser
import HarkCore
import HarkGemini

/// `hark converse --backend gemini`: the Gemini Live options (each is the `gemini.` key of the same name).
public struct GeminiOptions: ParsableArguments, BackendOptionGroup {
    public static let backendName = GeminiBackend.name

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The model (with or without models/); default \(GeminiBackend.defaultModel).",
            valueName: "NAME"
        )
    )
    public var model: String?

    @Option(
        name: .long,
        help: ArgumentHelp("API version in the path: v1beta (default), v1 or v1alpha.", valueName: "V")
    )
    public var apiVersion: String?

    @Flag(name: .long, help: "Mint an ephemeral token from the API key for each session (development).")
    public var mintToken = false

    @Option(name: .long, help: ArgumentHelp("A prebuilt voice (Kore, Puck, Charon, Aoede, ...).", valueName: "NAME"))
    public var voice: String?

    @Option(name: .long, help: ArgumentHelp("The language of speech (BCP-47, e.g. en-US).", valueName: "CODE"))
    public var language: String?

    public init() {}
}
