import ArgumentParser
import HarkCascade
import HarkCore

/// `hark converse --backend cascade`: the cascade's options (each is the `cascade.` key of the same name).
public struct CascadeOptions: ParsableArguments, BackendOptionGroup {
    public static let backendName = CascadeBackend.name

    @Option(name: .long, help: ArgumentHelp("Sarvam's base URL (https://HOST:PORT).", valueName: "URL"))
    public var sarvamEndpoint: String?

    @Option(name: .long, help: ArgumentHelp("Gemini's base URL (https://HOST:PORT).", valueName: "URL"))
    public var geminiEndpoint: String?

    @Option(name: .long, help: ArgumentHelp("A file holding the Sarvam API key.", valueName: "PATH"))
    public var sarvamKeyFile: String?

    @Option(name: .long, help: ArgumentHelp("What the user speaks (ml-IN, en-IN, unknown).", valueName: "CODE"))
    public var sttLanguage: String?

    @Option(name: .long, help: ArgumentHelp("The text model (gemini-3.8-flash).", valueName: "NAME"))
    public var llmModel: String?

    @Option(name: .long, help: ArgumentHelp("The voice (kavitha, priya, ...).", valueName: "NAME"))
    public var speaker: String?

    @Option(name: .long, help: ArgumentHelp("The language the voice speaks (ml-IN).", valueName: "CODE"))
    public var ttsLanguage: String?

    public init() {}
}
