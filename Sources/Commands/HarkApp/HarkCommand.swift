import ArgumentParser
import HarkAudio
import HarkCore
import HarkGemini
import HarkHTTP
import HarkNet
import Logging

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// `hark`: the voice appliance and its tools.
public struct HarkCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "hark",
        abstract: "A voice appliance that holds a live spoken conversation with a cloud voice agent.",
        discussion: """
            On a board, systemd runs `hark run` (configured in /etc/hark/hark.yaml; check it with \
            `hark config check`, watch it with `hark status`).

            Try it without hardware or an API key: scripts/run starts the bundled simulator and runs the \
            appliance on file-backed audio. One conversation from a file:
              hark-live-sim --port 9000 &
              hark converse --input question.wav --output answer.wav --endpoint ws://127.0.0.1:9000
            """,
        subcommands: [Run.self, Converse.self, Status.self, ConfigCommand.self, Doctor.self]
    )

    public init() {}
}

/// `hark converse`: one conversation from a WAV file to a WAV file.
struct Converse: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Talk to a Live agent from an audio file and record its answer.",
        discussion: """
            Streams IN.wav (any rate and channel count; converted to 16 kHz mono) to the Gemini Live API in \
            real time (or as fast as the service takes it with --fast), writes every bit of model audio \
            (24 kHz mono) to OUT.wav and prints each finished transcript as "user: ..." / "model: ...". \
            Logs go to standard error.

            The run is done when the input has been sent and the agent's answer has been followed by \
            --idle-timeout of quiet. If the service asks the client to move (goAway) or the connection \
            drops mid-way, it resumes the session on a new connection without losing input.

            Authentication, in order: --token-url (ephemeral token from your backend), --api-key-file, \
            the GEMINI_API_KEY environment variable, the systemd credential "gemini-api-key". The key \
            travels in the x-goog-api-key header, never in the URL, and is never logged.

            --backend datagrid talks to a Datagrid voice agent instead (--agent-id, --voice-preset, \
            --teamspace, --silent-start; --system-instruction overrides its prompt, --greeting is a first text \
            turn). Key: --api-key-file, DATAGRID_API_KEY or the systemd credential "datagrid-api-key". Each \
            connection starts with POST /v1/voice (key in the Authorization header) and opens the WebSocket URL \
            it returns; --direct (or a service without that endpoint) connects with the key as token in the \
            URL, which is then only logged redacted. --endpoint is the REST base, e.g. http://127.0.0.1:PORT \
            of hark-datagrid-sim. Dropped connections continue the same conversation.

            Exit codes: 0 done; 2 usage or configuration error; 3 authentication rejected; \
            4 network gave up or timed out; 5 the server's certificate is not trusted (see --ca-file).
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
            "Base URL of the service (wss://host[:port][/prefix]); the standard path is appended.",
            valueName: "URL"
        )
    )
    var endpoint: String = ConverseOptions.realEndpoint

    @Option(
        name: .long,
        help: ArgumentHelp("Extra CA certificates (PEM) to trust, e.g. the simulator's.", valueName: "PEM")
    )
    var caFile: String?

    @Option(name: .long, help: ArgumentHelp("A file holding the API key.", valueName: "PATH"))
    var apiKeyFile: String?

    @Option(name: .long, help: ArgumentHelp("The model (with or without models/).", valueName: "NAME"))
    var model: String = ConverseOptions.defaultModel

    @Option(name: .long, help: "API version in the path: v1beta, v1 or v1alpha.")
    var apiVersion: String = "v1beta"

    @Option(
        name: .long,
        help: ArgumentHelp("Fetch an ephemeral token for each session from this URL (your backend).", valueName: "URL")
    )
    var tokenURL: String?

    @Flag(name: .long, help: "Mint an ephemeral token from the API key for each session (development).")
    var mintToken = false

    @Option(name: .long, help: ArgumentHelp("A prebuilt voice (Kore, Puck, Charon, Aoede, ...).", valueName: "NAME"))
    var voice: String?

    @Option(name: .long, help: ArgumentHelp("The system instruction.", valueName: "TEXT"))
    var systemInstruction: String?

    @Option(name: .long, help: ArgumentHelp("Send this text turn first (the agent greets first).", valueName: "TEXT"))
    var greeting: String?

    @Flag(name: .long, help: "Mark the speech with activityStart/activityEnd instead of the service's voice detection.")
    var manualActivity = false

    @Option(
        name: .long,
        help: ArgumentHelp("Seconds of quiet after the answer that end the run.", valueName: "SECONDS")
    )
    var idleTimeout: Double = 2

    @Option(name: .long, help: ArgumentHelp("Give up after this many seconds.", valueName: "SECONDS"))
    var timeout: Double = 300

    @Flag(name: .long, help: "Send the input as fast as the service takes it instead of in real time.")
    var fast = false

    @Option(name: .long, help: ArgumentHelp("Audio chunk length in milliseconds (20-100).", valueName: "MS"))
    var chunkMs: Int = 40

    @Option(name: .long, help: ArgumentHelp("Failed connection attempts in a row before giving up.", valueName: "N"))
    var maxRetries: Int = 6

    @Flag(name: .shortAndLong, help: "Log more (debug level).")
    var verbose = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The service: gemini, or datagrid (key from --api-key-file or DATAGRID_API_KEY, sent only in the "
                + "Authorization header of the REST hand-off unless --direct; --endpoint is then the REST base, "
                + "e.g. http://127.0.0.1:PORT of hark-datagrid-sim).",
            valueName: "NAME"
        )
    )
    var backend: String = "gemini"

    @Option(name: .long, help: ArgumentHelp("Datagrid: the agent to talk to.", valueName: "ID"))
    var agentId: String?

    @Option(name: .long, help: ArgumentHelp("Datagrid: the voice preset.", valueName: "NAME"))
    var voicePreset: String?

    @Option(name: .long, help: ArgumentHelp("Datagrid: the teamspace (Datagrid-Teamspace header).", valueName: "ID"))
    var teamspace: String?

    @Flag(name: .long, help: "Datagrid: connect with the key as token in the URL (a fallback; redacted in logs).")
    var direct = false

    @Flag(name: .long, help: "Datagrid: skip the agent's greeting.")
    var silentStart = false

    func validate() throws {
        guard (20...100).contains(chunkMs) else { throw ValidationError("--chunk-ms must be between 20 and 100") }
        guard LiveAPIVersion(rawValue: apiVersion) != nil else {
            throw ValidationError("--api-version must be v1beta, v1 or v1alpha")
        }
        guard idleTimeout >= 0, timeout > 0 else {
            throw ValidationError("--idle-timeout and --timeout must be positive")
        }
        guard ConverseBackend(rawValue: backend) != nil else {
            throw ValidationError("--backend must be gemini or datagrid")
        }
        guard (input == nil) != (captureDevice == nil) else {
            throw ValidationError("give exactly one of --input IN.wav and --capture-device PCM")
        }
        guard output != nil || playbackDevice != nil else {
            throw ValidationError("give --output OUT.wav, --playback-device PCM, or both")
        }
        guard listen > 0 else { throw ValidationError("--listen must be positive") }
    }

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        HarkLogHandler.bootstrap(level: verbose ? .debug : .info, environment: environment)
        let logger = Logger(label: "hark")
        var options = ConverseOptions(input: input ?? "", output: output ?? "")
        options.captureDevice = captureDevice.map { .named($0) }
        options.playbackDevice = playbackDevice.map { .named($0) }
        options.listen = .milliseconds(Int64(listen * 1000))
        options.endpoint = endpoint
        options.caFile = caFile
        options.apiKeyFile = apiKeyFile
        options.model = model
        options.apiVersion = LiveAPIVersion(rawValue: apiVersion) ?? .v1beta
        options.tokenURL = tokenURL
        options.mintToken = mintToken
        options.voice = voice
        options.systemInstruction = systemInstruction
        options.greeting = greeting
        options.manualActivity = manualActivity
        options.idleTimeout = .milliseconds(Int64(idleTimeout * 1000))
        options.timeout = .milliseconds(Int64(timeout * 1000))
        options.fast = fast
        options.chunk = .milliseconds(chunkMs)
        options.maxRetries = maxRetries
        options.backend = ConverseBackend(rawValue: backend) ?? .gemini
        options.agentId = agentId
        options.voicePreset = voicePreset
        options.teamspace = teamspace
        options.direct = direct
        options.silentStart = silentStart ? true : nil
        let runner = ConverseRunner(
            options: options,
            transport: NIOWebSocketTransport(caFile: caFile, logger: logger),
            http: NIOHTTPClient(caFile: caFile),
            environment: environment,
            logger: logger,
            clock: EventLoopClock(),
            transcriptSink: { printLine($0) }
        )
        let outcome = await runner.run()
        if let message = outcome.message {
            writeAll(STDERR_FILENO, "hark converse: \(message)\n")
        }
        if outcome.exitCode != 0 { throw ExitCode(outcome.exitCode) }
    }
}

extension HarkCommand {
    /// Parses the process's arguments and runs the chosen command (the executable's whole `main`).
    public static func start() async {
        // One thread runs the tasks and the sockets (see ConcurrencyExecutor); the audio and GPIO threads
        // stay their own.
        ConcurrencyExecutor.installEventLoop()
        // A write to a pipe or socket whose reader went away (a speaker FIFO, the journal's stream, a file
        // device's sink) must fail with EPIPE, which each part handles, not end the process. NIO ignores
        // SIGPIPE only once it opens its first socket.
        signal(SIGPIPE, SIG_IGN)
        await main()
    }
}
