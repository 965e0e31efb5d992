import HarkAppliance
import HarkAudio
import HarkBackends
import HarkCore
import HarkDSP
import HarkMCP
import HarkPlatform
import Logging
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What `hark converse` was asked to do, after parsing.
public struct ConverseOptions: Sendable {
    public var input: String
    public var output: String
    /// The backend (a name in the registry).
    public var backend = Backends.all[0].name
    /// The backend's settings given on the command line, by key name (`endpoint` for `--endpoint`): read through
    /// the same keys as the configuration file's section.
    public var settings: [String: String] = [:]
    public var greeting: String?
    public var manualActivity = false
    /// Offer the agent the device tools, acting on a device kept in memory (``InMemoryDeviceControls``).
    public var tools = false
    /// MCP servers whose tools the agent may call (`--mcp NAME=URL`).
    public var mcp: [MCPServerSettings] = []
    public var idleTimeout: Duration = .seconds(2)
    public var timeout: Duration = .seconds(300)
    public var fast = false
    public var chunk: Duration = .milliseconds(40)
    public var maxRetries = 6
    /// A microphone (ALSA PCM) to talk into instead of `input`.
    public var captureDevice: AudioDevice?
    /// A speaker (ALSA PCM) that plays the answer as it arrives; `output` may then be empty.
    public var playbackDevice: AudioDevice?
    /// How long the microphone stays open.
    public var listen: Duration = .seconds(30)
    /// The format, channels and rates to ask the capture device for (the engine's defaults when nil).
    public var captureRequest: PCMRequest?
    /// The format, channels and rates to ask the playback device for (the engine's defaults when nil).
    public var playbackRequest: PCMRequest?
    /// For file-backed capture devices (tests): wait for the session instead of dropping frames.
    public var captureBackpressure = false

    public init(input: String, output: String) {
        self.input = input
        self.output = output
    }

    /// `--endpoint`: the service's base URL.
    public var endpoint: String? {
        get { settings["endpoint"] }
        set { settings["endpoint"] = newValue }
    }

    /// `--ca-file`: extra CA certificates to trust.
    public var caFile: String? {
        get { settings["ca_file"] }
        set { settings["ca_file"] = newValue }
    }

    /// Samples in one chunk of the input (`--chunk-ms`; a file microphone's frame).
    var chunkSamples: Int { max(160, AudioFormat.microphone.samples(in: chunk)) }

    /// `--api-key-file`: a file holding the key.
    public var apiKeyFile: String? {
        get { settings["api_key_file"] }
        set { settings["api_key_file"] = newValue }
    }
}

/// How a converse run ended; `exitCode` follows the documented table.
public struct ConverseOutcome: Sendable {
    /// 0 done; 2 usage or configuration; 3 authentication rejected; 4 network gave up or timed out.
    public var exitCode: Int32
    /// One line for stderr when the run failed.
    public var message: String?
    /// Model audio samples written (at the backend's output rate: 24 kHz, or the cascade's speech rate).
    public var outputSamples: Int
    /// Input samples sent (16 kHz).
    public var inputSamplesSent: Int
    /// The session's counters (nil when the run ended before a session was made).
    public var statistics: SessionStatistics? = nil
}

/// Streams a file through a live session and writes the answer to a file: the developer's tool and
/// the harness for everything else. Any backend of the registry.
public struct ConverseRunner: Sendable {
    let options: ConverseOptions
    let network: NetworkClients
    let environment: [String: String]
    let logger: Logger
    let transcriptSink: @Sendable (String) -> Void
    /// The most characters of one transcript line printed (the service's words, bounded as any remote text).
    static let transcriptLineLimit = 2000
    /// What the microphone stand-in's pacing and the quiet watcher sleep on.
    let clock: any Clock<Duration>
    /// Ends the run early, keeping what was received (SIGINT, SIGTERM).
    let stop: ConverseStop

    /// - Parameters:
    ///   - network: the network clients (``NetworkClients/nio(logger:)`` outside tests).
    ///   - stop: pulled to end the run early; the answer received so far is still written.
    public init(
        options: ConverseOptions,
        network: NetworkClients,
        environment: [String: String],
        logger: Logger,
        clock: any Clock<Duration> = ContinuousClock(),
        stop: ConverseStop = ConverseStop(),
        transcriptSink: @escaping @Sendable (String) -> Void
    ) {
        self.clock = clock
        self.stop = stop
        self.options = options
        self.network = network
        self.environment = environment
        self.logger = logger
        self.transcriptSink = transcriptSink
    }

    /// The backend the options ask for, made from the settings given (each read through its key, as the
    /// configuration file's would be); throws a usage error (exit 2) naming the option.
    func makeBackend() throws -> any Backend {
        guard let kind = Backends.named(options.backend) else {
            throw ConverseUsageError("--backend must be one of \(Backends.names.joined(separator: ", "))")
        }
        var settings = kind.defaultSettings
        let keys = Dictionary(kind.settingKeys.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        for (name, text) in options.settings.sorted(by: { $0.key < $1.key }) {
            let flag = SettingKey.flagName(name)
            guard let key = keys[name] else {
                throw ConverseUsageError("\(flag) does not apply to --backend \(kind.name)")
            }
            do {
                settings[name] = try key.parse(text)
            } catch {
                throw ConverseUsageError("\(flag) \(error.problem)")
            }
        }
        if let (key, problem) = kind.crossCheck(settings) {
            throw ConverseUsageError("\(SettingKey.flagName(key)) \(problem)")
        }
        for (key, note) in kind.advice(settings) {
            logger.warning("\(SettingKey.flagName(key)): \(note)")
        }
        do {
            return try kind.init(
                context: BackendContext(
                    settings: settings,
                    environment: environment,
                    network: network,
                    usage: .oneShot(maxRetries: options.maxRetries, fast: options.fast),
                    logger: logger,
                    hostName: Host.name() ?? "device"
                )
            )
        } catch {
            let flag = error.key.map { SettingKey.flagName($0) + ": " } ?? ""
            throw ConverseUsageError(error.missingSecret ? error.message : flag + error.message)
        }
    }

    /// Opens the input file at the microphone's rate, mono (nothing when a microphone replaces it): read a block at
    /// a time as it is sent, in any sample format, its rate converted block by block when it is not the
    /// microphone's (never the whole file in memory).
    func loadInput() throws -> ConverseInput {
        if options.captureDevice != nil { return ConverseInput(samples: []) }
        do {
            return try ConverseInput(reader: try WAVStreamReader(anyFormat: options.input))
        } catch let error as WAVError {
            throw ConverseUsageError("cannot use the input: \(error.description)")
        } catch {
            throw ConverseUsageError("cannot use the input: \(error)")
        }
    }

    /// Runs the conversation to its end.
    public func run() async -> ConverseOutcome {
        do {
            let backend = try makeBackend()
            let samples = try loadInput()
            let progress = ConverseProgressBox()
            var tools = ToolRegistry()
            if options.tools {
                guard type(of: backend).capabilities.contains(.deviceTools) else {
                    throw ConverseUsageError(
                        "--tools: backend \(options.backend) offers no device tools (its agent runs its tools on the service)"
                    )
                }
                tools = ToolRegistry(DeviceTools.make(controls: InMemoryDeviceControls()))
            }
            var hubRun: Task<Void, Never>?
            defer { hubRun?.cancel() }
            if !options.mcp.isEmpty {
                guard type(of: backend).capabilities.contains(.deviceTools) else {
                    throw ConverseUsageError(
                        "--mcp: backend \(options.backend) offers no device tools (its agent runs its tools on the service)"
                    )
                }
                let hub = MCPSetup.hub(options.mcp, environment: environment, network: network, logger: logger)
                hubRun = Task { await hub.run() }
                // The conversation starts with the tools that came by then; the others are declared when they come.
                await hub.waitForFirstTools(within: .seconds(3))
                for status in hub.statuses {
                    logger.info("MCP server \(status.summary)")
                    for refusal in status.notOffered { logger.info("  not offered: \(refusal)") }
                }
                tools.catalog = hub.catalog
            }
            let session = backend.makeSession(
                SessionRequest(
                    fresh: true,
                    tools: tools,
                    manualActivity: options.manualActivity,
                    greetsFirst: options.greeting != nil,
                    continueAfterSwitch: { [progress] in !progress.withLock { $0.isDone } },
                    clock: ContinuousClock(),
                    logger: logger
                )
            )
            return await converse(
                session: session,
                samples: samples,
                gather: .milliseconds(60),
                outputRate: backend.outputSampleRate,
                progress: progress
            )
        } catch let error as ConverseUsageError {
            return ConverseOutcome(exitCode: 2, message: error.message, outputSamples: 0, inputSamplesSent: 0)
        } catch {
            return ConverseOutcome(exitCode: 2, message: "\(error)", outputSamples: 0, inputSamplesSent: 0)
        }
    }

    /// Streams the input through `session` (any backend) and collects the answer, written as mono 16-bit at
    /// `outputRate` (the session's audio at another rate is converted). `gather` is the smallest message the session
    /// sends (it holds smaller chunks until that much is queued): the paced file hands it that much per wake-up
    /// rather than waking for chunks that would only wait.
    func converse(
        session: any VoiceSession,
        samples: ConverseInput,
        gather: Duration = .zero,
        outputRate: Int = 24_000,
        progress: ConverseProgressBox
    ) async -> ConverseOutcome {
        let options = self.options
        let clock = self.clock
        let elapsed = clock.stopwatch()
        progress.withLock { $0.outputRate = outputRate }
        if !options.output.isEmpty {
            do {
                let writer = try WAVStreamWriter(path: options.output, sampleRate: outputRate)
                progress.withLock { $0.output = writer }
            } catch let error as WAVError {
                return ConverseOutcome(exitCode: 2, message: error.description, outputSamples: 0, inputSamplesSent: 0)
            } catch {
                return ConverseOutcome(exitCode: 2, message: "\(error)", outputSamples: 0, inputSamplesSent: 0)
            }
        }
        let devices: ConverseDevices
        do {
            let chunk = options.chunkSamples
            let burst = max(1, (AudioFormat.microphone.samples(in: gather) + chunk - 1) / chunk)
            devices = try ConverseDevices.open(options, input: samples, burst: burst, clock: clock)
        } catch let error as ConverseUsageError {
            return ConverseOutcome(exitCode: 2, message: error.message, outputSamples: 0, inputSamplesSent: 0)
        } catch {
            return ConverseOutcome(exitCode: 2, message: "\(error)", outputSamples: 0, inputSamplesSent: 0)
        }
        let capturing = options.captureDevice != nil
        if capturing, let capture = devices.microphone as? AudioCapture {
            logger.info(
                "listening on \(options.captureDevice?.description ?? "") (\(capture.format.map { "\($0)" } ?? "")) for \(options.listen.humanDescription)"
            )
        } else {
            let length = AudioFormat.microphone.duration(of: samples.total).humanDescription
            logger.info(
                "streaming \(options.input) (\(length) at 16 kHz) in \(options.chunk.humanDescription) chunks\(options.fast ? ", as fast as the service takes it" : "")"
            )
        }
        let feeder = ConverseFeeder(
            greeting: options.greeting,
            manualActivity: options.manualActivity,
            backpressure: capturing ? options.captureBackpressure : options.fast,
            listen: capturing ? options.listen : nil
        )
        let watcher = QuietWatcher(idleTimeout: options.idleTimeout, timeout: options.timeout)
        // The session, in a task of its own: the overall timeout may have to end it without waiting for a polite
        // close (a server that floods and never answers the close frame).
        let sessionRun = Task {
            do {
                try await session.run()
            } catch let failure as SessionFailure {
                progress.withLock { $0.failure = failure }
            } catch {
                progress.withLock { $0.failure = SessionFailure(.transient, "\(error)") }
            }
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await withTaskCancellationHandler {
                    await sessionRun.value
                } onCancel: {
                    sessionRun.cancel()
                }
            }
            group.addTask {
                _ = await feeder.run(devices.microphone, into: session, clock: clock)
                if let file = devices.microphone as? FileMicrophone, let error = file.condition.lastError {
                    logger.error("\(error)")
                }
                let now = elapsed()
                progress.withLock {
                    $0.inputDone = true
                    $0.inputDoneAt = now
                    $0.lastEventAt = now
                }
            }
            group.addTask {
                await watcher.watch(progress, stop: stop, clock: clock, elapsed: elapsed)
                session.finish()
                // --timeout bounds the whole run: past it, a close the server does not answer promptly is not
                // waited for.
                if progress.withLock({ $0.timedOut }) {
                    try? await clock.sleep(for: .milliseconds(500))
                    sessionRun.cancel()
                }
            }
            for await event in session.events {
                devices.play(event)
                handle(event, at: elapsed(), progress: progress)
            }
            group.cancelAll()
        }
        await devices.finish(within: .seconds(60), clock: clock)
        return finished(session: session, progress: progress)
    }

    /// The outcome once the run is over: what was received is kept whatever ended it (a failed write keeps what
    /// reached the disk).
    private func finished(session: any VoiceSession, progress: ConverseProgressBox) -> ConverseOutcome {
        let (seen, writer) = progress.withLock { ($0, $0.output) }
        var writeError = seen.outputError
        do { try writer?.finish() } catch { writeError = writeError ?? "\(error)" }
        let statistics = session.statistics
        let outcome = ConverseOutcome(
            seen,
            writeError: writeError,
            statistics: statistics,
            output: options.output,
            timeout: options.timeout
        )
        if writeError == nil {
            let wrote = Duration.milliseconds(Int64(seen.outputSamples) * 1000 / Int64(max(1, seen.outputRate)))
            let sent = AudioFormat.microphone.duration(of: statistics.audioSamplesSent)
            logger.info(
                "wrote \(wrote.humanDescription) of model audio to \(options.output); sent \(sent.humanDescription) over \(statistics.readies) connection(s)"
            )
        }
        return outcome
    }

    private func handle(_ event: SessionEvent, at now: Duration, progress: ConverseProgressBox) {
        var lines: [String] = []
        progress.withLock { state in
            state.lastEventAt = now
            switch event {
            case .audio(let chunk):
                state.turnInFlight = true
                let rate = state.outputRate
                let samples =
                    chunk.sampleRate == rate
                    ? chunk.samples : (try? Resampler.convert(chunk.samples, from: chunk.sampleRate, to: rate)) ?? []
                state.outputSamples += samples.count
                if state.outputError == nil, let output = state.output {
                    do {
                        try output.write(samples)
                    } catch {
                        state.outputError = "\(error)"
                    }
                }
            case .transcript(let piece):
                // Each finished segment is printed once; interim text is only a sign of life.
                if piece.role == .agent { state.turnInFlight = true }
                if piece.isFinal {
                    // The service's words, on a terminal: printable and bounded as all remote text is.
                    let text = RemoteText.printable(piece.text.trimmedWhitespace, limit: Self.transcriptLineLimit)
                    lines.append("\(piece.role == .user ? "user" : "model"): \(text)")
                }
            case .turnComplete, .interrupted:
                if case .turnComplete = event { state.turnsCompleted += 1 }
                state.turnInFlight = false
            case .notice(let text):
                logger.notice("\(text)")
            case .answerFailed(let why):
                logger.warning("the answer failed: \(RemoteText.printable(why))")
            case .tool(let tool):
                // A call under way is part of the exchange: its result may still be spoken.
                if case .started = tool { state.turnInFlight = true }
                logger.info("tool: \(tool.printable)")
            case .link, .conversation, .usage:
                break
            }
        }
        for line in lines { transcriptSink(line) }
    }
}

/// Ends a converse run early (a signal), keeping what was received.
public final class ConverseStop: Sendable {
    private let pulled = Atomic(false)

    public init() {}

    /// Ends the run: the session closes politely and the answer so far is written.
    public func pull() { pulled.store(true, ordering: .relaxed) }

    /// True once pulled.
    public var isPulled: Bool { pulled.load(ordering: .relaxed) }
}

/// A usage or configuration problem found before connecting (exit code 2).
struct ConverseUsageError: Error {
    let message: String
    init(_ message: String) { self.message = message }
}
