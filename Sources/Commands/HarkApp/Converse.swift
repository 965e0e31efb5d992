import ArgumentParser
import HarkAudio
import HarkBackends
import HarkCore
import HarkNet
import Logging
import UnixSignals

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// `hark converse`: one conversation from a WAV file to a WAV file.
struct Converse: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Talk to a voice agent from an audio file and record its answer.",
        discussion: """
            Streams IN.wav (any rate and channel count; converted to 16 kHz mono) to the agent (--backend, \
            \(Backends.names[0]) by default) in real time (or as fast as the service takes it with --fast), writes \
            every bit of model audio to OUT.wav and prints each finished transcript as "user: ..." / \
            "model: ...". Logs go to standard error.

            The run is done when the input has been sent and the agent's answer has been followed by \
            --idle-timeout of quiet. A dropped connection is joined again without losing input.

            Each backend has its own options (listed below under its name); each is the key of the same name in \
            its section of the configuration file and is checked the same way.

            \(Backends.converseHelp())

            Ctrl-C (or SIGTERM) ends the run politely and keeps the answer received so far in OUT.wav; a second \
            one ends it at once.

            Exit codes: 0 done; 2 usage or configuration error; 3 authentication rejected; \
            4 network gave up or timed out; 5 the server's certificate is not trusted (see --ca-file); \
            130 interrupted.
            """
    )

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The audio to say (WAV: PCM 8/16/24/32-bit or float, any rate); not with --capture-device.",
            valueName: "IN.wav"
        )
    )
    var input: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Where to write the model's audio (WAV, 24 kHz mono); optional with --playback-device.",
            valueName: "OUT.wav"
        )
    )
    var output: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Talk into this ALSA capture PCM (hw:1,0, plughw:CARD=Mic, default, ...) instead of --input.",
            valueName: "PCM"
        )
    )
    var captureDevice: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Play the answer on this ALSA playback PCM as it arrives (an interruption silences it at once).",
            valueName: "PCM"
        )
    )
    var playbackDevice: String?

    @Option(
        name: .long,
        help: ArgumentHelp("With --capture-device: seconds the microphone stays open.", valueName: "SECONDS")
    )
    var listen: Double = 30

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Base URL of the service (gemini: wss://host[:port][/prefix], the standard path is appended; datagrid: "
                + "the REST base, http(s)://host[:port]); default: the service's own.",
            valueName: "URL"
        )
    )
    var endpoint: String?

    @Option(
        name: .long,
        help: ArgumentHelp("Extra CA certificates (PEM) to trust, e.g. the simulator's.", valueName: "PEM")
    )
    var caFile: String?

    @Option(name: .long, help: ArgumentHelp("A file holding the API key.", valueName: "PATH"))
    var apiKeyFile: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Your backend's token endpoint (gemini: an ephemeral token for each session; livekit: the room's token).",
            valueName: "URL"
        )
    )
    var tokenURL: String?

    @Flag(
        name: .long,
        help: "Allow plain ws:// or http:// to a host that is not this machine (the key travels in clear text)."
    )
    var allowInsecure = false

    @Option(
        name: .long,
        help: ArgumentHelp("The system instruction (Datagrid: the agent's system prompt).", valueName: "TEXT")
    )
    var systemInstruction: String?

    @Option(name: .long, help: ArgumentHelp("Send this text turn first (the agent greets first).", valueName: "TEXT"))
    var greeting: String?

    @Flag(name: .long, help: "Mark the speech with activityStart/activityEnd instead of the service's voice detection.")
    var manualActivity = false

    @Flag(
        name: .long,
        help: ArgumentHelp(
            "Offer the agent the device tools (volume, mute, time, status).",
            discussion: "Volume and mute act on a state kept in memory for the run; the time and the status are real. "
                + "Each call is logged."
        )
    )
    var tools = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Offer the agent the tools of an MCP server at URL, namespaced NAME (repeatable).",
            discussion: "Streamable HTTP; https, or http to this machine. Tools marked destructive are not offered.",
            valueName: "NAME=URL"
        )
    )
    var mcp: [String] = []

    @Option(
        name: .long,
        help: ArgumentHelp("Seconds of quiet after the answer that end the run (0 to 3600).", valueName: "SECONDS")
    )
    var idleTimeout: Double = 2

    @Option(name: .long, help: ArgumentHelp("Give up after this many seconds (at most a day).", valueName: "SECONDS"))
    var timeout: Double = 300

    @Flag(name: .long, help: "Send the input as fast as the service takes it instead of in real time.")
    var fast = false

    @Option(name: .long, help: ArgumentHelp("Audio chunk length in milliseconds (20-100).", valueName: "MS"))
    var chunkMs: Int = 40

    @Option(
        name: .long,
        help: ArgumentHelp("Failed connection attempts in a row before giving up (1-100).", valueName: "N")
    )
    var maxRetries: Int = 6

    @Flag(name: .shortAndLong, help: "Log more (debug level).")
    var verbose = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The service: \(Backends.all.map { "\($0.name) (\($0.summary))" }.joined(separator: "; ")).",
            valueName: "NAME"
        )
    )
    var backend: String = Backends.all[0].name

    @OptionGroup var backends: BackendOptionGroups

    func validate() throws {
        guard (20...100).contains(chunkMs) else { throw ValidationError("--chunk-ms must be between 20 and 100") }
        guard (1...100).contains(maxRetries) else { throw ValidationError("--max-retries must be between 1 and 100") }
        _ = try CommandLineDuration.seconds(idleTimeout, option: "--idle-timeout", in: 0...3600)
        _ = try CommandLineDuration.seconds(timeout, option: "--timeout", in: 0.001...86_400)
        _ = try CommandLineDuration.seconds(listen, option: "--listen", in: 0.001...86_400)
        guard Backends.named(backend) != nil else {
            throw ValidationError("--backend must be one of \(Backends.names.joined(separator: ", "))")
        }
        let foreign = backends.settings(for: backend).foreign
        guard foreign.isEmpty else {
            throw ValidationError("\(foreign.joined(separator: ", ")) do not apply to --backend \(backend)")
        }
        guard (input == nil) != (captureDevice == nil) else {
            throw ValidationError("give exactly one of --input IN.wav and --capture-device PCM")
        }
        guard output != nil || playbackDevice != nil else {
            throw ValidationError("give --output OUT.wav, --playback-device PCM, or both")
        }
        if let output, output.isEmpty { throw ValidationError("--output must name a file") }
        if let input, input.isEmpty { throw ValidationError("--input must name a file") }
    }

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        HarkLogHandler.bootstrap(level: verbose ? .debug : .info, environment: environment)
        let logger = Logger(label: "hark")
        var options = ConverseOptions(input: input ?? "", output: output ?? "")
        options.backend = backend
        options.settings = backends.settings(for: backend).settings
        options.endpoint = endpoint
        options.caFile = caFile
        options.apiKeyFile = apiKeyFile
        if let tokenURL { options.settings["token_url"] = tokenURL }
        if allowInsecure { options.settings["allow_insecure"] = "true" }
        if let systemInstruction, let kind = Backends.named(backend),
            let key = kind.settingKeys.first(where: { if case .instruction = $0.kind { true } else { false } })
        {
            options.settings[key.name] = systemInstruction
        }
        options.captureDevice = captureDevice.map { .named($0) }
        options.playbackDevice = playbackDevice.map { .named($0) }
        options.listen = try CommandLineDuration.seconds(listen, option: "--listen", in: 0.001...86_400)
        options.greeting = greeting
        options.manualActivity = manualActivity
        options.tools = tools
        options.mcp = try mcp.map(MCPSetup.commandLineServer)
        options.idleTimeout = try CommandLineDuration.seconds(idleTimeout, option: "--idle-timeout", in: 0...3600)
        options.timeout = try CommandLineDuration.seconds(timeout, option: "--timeout", in: 0.001...86_400)
        options.fast = fast
        options.chunk = .milliseconds(chunkMs)
        options.maxRetries = maxRetries
        // SIGINT or SIGTERM ends the run politely and keeps the answer received so far; a second one ends it now.
        let stop = ConverseStop()
        let signals = Task {
            for await _ in await UnixSignalsSequence(trapping: .sigint, .sigterm) {
                if stop.isPulled { Glibc.exit(130) }
                stop.pull()
            }
        }
        defer { signals.cancel() }
        let runner = ConverseRunner(
            options: options,
            network: .nio(logger: logger),
            environment: environment,
            logger: logger,
            clock: EventLoopClock(),
            stop: stop,
            transcriptSink: { printLine(RemoteText.printable($0, limit: 100_000)) }
        )
        let outcome = await runner.run()
        if let message = outcome.message {
            writeAll(STDERR_FILENO, "hark converse: \(RemoteText.printable(message, limit: 2000))\n")
        }
        if outcome.exitCode != 0 { throw ExitCode(outcome.exitCode) }
    }
}
