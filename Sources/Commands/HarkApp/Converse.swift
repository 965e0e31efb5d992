import HarkAppliance
import HarkAudio
import HarkBackends
import HarkCore
import HarkDSP
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

    /// Opens the input file as 16 kHz mono (nothing when a microphone replaces it): read a block at a time as it is
    /// sent, in any sample format, its rate converted block by block when it is not 16 kHz (never the whole file
    /// in memory).
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

    /// The input audio, 16 kHz mono, read in order by the one task that feeds the session.
    final class ConverseInput: @unchecked Sendable {
        /// Samples in all (at 16 kHz).
        let total: Int
        private let reader: WAVStreamReader?
        /// Converts the file's rate to 16 kHz, block by block (nil at 16 kHz).
        private let resampler: Resampler?
        /// Converted samples not handed out yet, and whether the resampler's tail was taken.
        private var pending: [Int16] = []
        private var flushed = false
        private let samples: [Int16]
        private var offset = 0

        init(reader: WAVStreamReader) throws {
            self.reader = reader
            samples = []
            total = reader.frames * 16_000 / max(reader.sampleRate, 1)
            resampler =
                reader.sampleRate == 16_000 ? nil : try Resampler(inputRate: reader.sampleRate, outputRate: 16_000)
        }

        init(samples: [Int16]) {
            reader = nil
            resampler = nil
            self.samples = samples
            total = samples.count
        }

        /// The next `count` samples at most; empty at the end (or when the file ends early).
        func read(_ count: Int) throws -> [Int16] {
            if let reader {
                guard let resampler else { return try reader.readMono(count) }
                while pending.count < count, !flushed {
                    // About as many of the file's frames as make `count` samples at 16 kHz.
                    let frames = max(1, (count - pending.count) * reader.sampleRate / 16_000 + 1)
                    let block = try reader.readMono(frames)
                    if block.isEmpty {
                        pending += resampler.flush()
                        flushed = true
                    } else {
                        pending += try resampler.process(block)
                    }
                }
                let taken = Array(pending.prefix(count))
                pending.removeFirst(taken.count)
                return taken
            }
            let end = min(offset + count, samples.count)
            defer { offset = end }
            return Array(samples[offset..<end])
        }
    }

    /// The run's shared state, behind a lock.
    final class ProgressBox: Sendable {
        private let state = Mutex(Progress())
        func withLock<T>(_ body: (inout Progress) -> T) -> T { state.withLock { body(&$0) } }
    }

    /// Shared between the feeder, the event reader and the idle watcher.
    struct Progress {
        var inputDone = false
        var inputDoneAt: ContinuousClock.Instant?
        var lastEventAt = ContinuousClock.now
        var turnsCompleted = 0
        var turnInFlight = false
        /// Model audio received (samples at ``outputRate``).
        var outputSamples = 0
        /// The rate the output is written at: the backend's.
        var outputRate = 24_000
        /// Where it goes as it comes (nil without an output file).
        var output: WAVStreamWriter?
        /// The output could not be written.
        var outputError: String?
        var failure: SessionFailure?
        var timedOut = false
        /// The run was stopped early (SIGINT, SIGTERM).
        var interrupted = false

        var isDone: Bool { inputDone && turnsCompleted > 0 && !turnInFlight }
    }

    /// Runs the conversation to its end.
    public func run() async -> ConverseOutcome {
        do {
            let backend = try makeBackend()
            let samples = try loadInput()
            let progress = ProgressBox()
            var tools = ToolRegistry()
            if options.tools {
                guard type(of: backend).capabilities.contains(.deviceTools) else {
                    throw ConverseUsageError(
                        "--tools: backend \(options.backend) offers no device tools (its agent runs its tools on the service)"
                    )
                }
                tools = ToolRegistry(DeviceTools.make(controls: InMemoryDeviceControls()))
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
    /// sends (it holds smaller chunks until that much is queued): the paced feeder hands it that much per wake-up
    /// rather than waking for chunks that would only wait.
    func converse(
        session: any VoiceSession,
        samples: ConverseInput,
        gather: Duration = .zero,
        outputRate: Int = 24_000,
        progress: ProgressBox
    ) async -> ConverseOutcome {
        let options = self.options
        let chunkSamples = max(160, Int(options.chunk.milliseconds) * 16)
        let chunksPerWake = max(1, (Int(gather.milliseconds) * 16 + chunkSamples - 1) / chunkSamples)
        let total = samples.total
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
            devices = try ConverseDevices.open(options)
        } catch let error as ConverseUsageError {
            return ConverseOutcome(exitCode: 2, message: error.message, outputSamples: 0, inputSamplesSent: 0)
        } catch {
            return ConverseOutcome(exitCode: 2, message: "\(error)", outputSamples: 0, inputSamplesSent: 0)
        }
        if let capture = devices.capture {
            logger.info(
                "listening on \(options.captureDevice?.description ?? "") (\(capture.format.map { "\($0)" } ?? "")) for \(options.listen.humanDescription)"
            )
        } else {
            logger.info(
                "streaming \(options.input) (\(Duration.milliseconds(total / 16).humanDescription) at 16 kHz) in \(options.chunk.humanDescription) chunks\(options.fast ? ", as fast as the service takes it" : "")"
            )
        }

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
            // The microphone stand-in: the file, paced in real time unless --fast.
            group.addTask {
                let start = ContinuousClock.now
                if let greeting = options.greeting { session.send(.text(greeting)) }
                if options.manualActivity { session.send(.activityStart) }
                if devices.capture != nil {
                    _ = await devices.feedMicrophone(
                        into: session,
                        for: options.listen,
                        manualActivity: options.manualActivity,
                        backpressure: options.captureBackpressure
                    )
                    await session.waitForInputRoom(below: 1)
                    progress.withLock {
                        $0.inputDone = true
                        $0.inputDoneAt = ContinuousClock.now
                        $0.lastEventAt = ContinuousClock.now
                    }
                    return
                }
                var offset = 0
                while offset < total, !Task.isCancelled {
                    if options.fast {
                        await session.waitForInputRoom(below: 16_000 * 2)
                    } else {
                        // Each chunk goes when its time comes; a group's chunks all go at the last one's.
                        let last = offset + (chunksPerWake - 1) * chunkSamples
                        let due = start + .nanoseconds(Int64(min(last, total - 1)) * 62_500)
                        try? await clock.sleep(for: ContinuousClock.now.duration(to: due))
                    }
                    var ended = false
                    for _ in 0..<(options.fast ? 1 : chunksPerWake) where offset < total {
                        let block: [Int16]
                        do {
                            block = try samples.read(min(chunkSamples, total - offset))
                        } catch {
                            logger.error("\(error)")
                            ended = true
                            break
                        }
                        if block.isEmpty {  // the file ended before its header said
                            ended = true
                            break
                        }
                        session.send(.audio(AudioChunk(samples: block, sampleRate: 16_000)))
                        offset += block.count
                    }
                    if ended { break }
                }
                session.send(options.manualActivity ? .activityEnd : .audioStreamEnd)
                // "Sent" means on the wire, not queued: an empty queue is not enough, since the sender may
                // hold the last chunk back for the next connection (a goAway). Check the count it sent.
                await session.waitForInputRoom(below: 1)
                while session.statistics.audioSamplesSent < offset, !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(20))
                }
                progress.withLock {
                    $0.inputDone = true
                    $0.inputDoneAt = ContinuousClock.now
                    $0.lastEventAt = ContinuousClock.now
                }
            }
            // Quiet after the last answer, or the overall timeout, ends the run.
            group.addTask {
                let deadline = ContinuousClock.now + options.timeout
                while !Task.isCancelled {
                    let now = ContinuousClock.now
                    let (isDone, due) = progress.withLock { state -> (Bool, ContinuousClock.Instant) in
                        let quietSince = max(state.lastEventAt, state.inputDoneAt ?? state.lastEventAt)
                        return (state.isDone, quietSince + options.idleTimeout)
                    }
                    if isDone && now >= due || progress.withLock({ $0.failure != nil }) { break }
                    if stop.isPulled {
                        progress.withLock { $0.interrupted = true }
                        break
                    }
                    if now >= deadline {
                        progress.withLock { $0.timedOut = true }
                        break
                    }
                    // Until the input is done a quarter second is soon enough to look again (a wake-up
                    // each 50 ms cost more than the rest of the paced run); then the quiet's end.
                    let wake = min(deadline, isDone ? max(due, now + .milliseconds(50)) : now + .milliseconds(250))
                    try? await clock.sleep(for: now.duration(to: wake))
                }
                session.finish()
                // --timeout bounds the whole run: past it, a close the server does not answer promptly is not
                // waited for.
                if progress.withLock({ $0.timedOut }) {
                    try? await clock.sleep(for: .milliseconds(500))
                    sessionRun.cancel()
                }
            }
            // The session's events.
            for await event in session.events {
                devices.play(event)
                handle(event, progress: progress)
            }
            group.cancelAll()
        }
        await devices.finish(within: .seconds(60))

        let (writer, outputSamples, outputError, failure, timedOut, isDone, interrupted) = progress.withLock {
            ($0.output, $0.outputSamples, $0.outputError, $0.failure, $0.timedOut, $0.isDone, $0.interrupted)
        }
        // What was received is kept whatever ended the run (a failed write keeps what reached the disk).
        var writeError = outputError
        do { try writer?.finish() } catch { writeError = writeError ?? "\(error)" }
        let statistics = session.statistics
        if let writeError {
            return ConverseOutcome(
                exitCode: 2,
                message: writeError,
                outputSamples: outputSamples,
                inputSamplesSent: statistics.audioSamplesSent,
                statistics: statistics
            )
        }
        var outcome = ConverseOutcome(
            exitCode: 0,
            message: nil,
            outputSamples: outputSamples,
            inputSamplesSent: statistics.audioSamplesSent,
            statistics: statistics
        )
        if interrupted {
            outcome.exitCode = 130
            outcome.message =
                "interrupted"
                + (options.output.isEmpty ? "" : "; the answer received so far is in \(options.output)")
        } else if let failure, !isDone {
            switch failure.kind {
            case .authentication: outcome.exitCode = 3
            case .configuration: outcome.exitCode = 2
            case .transient: outcome.exitCode = 4
            case .untrusted: outcome.exitCode = 5
            }
            outcome.message = failure.message
        } else if timedOut {
            outcome.exitCode = 4
            outcome.message = "timed out after \(options.timeout.humanDescription) without a finished answer"
        }
        logger.info(
            "wrote \(Duration.milliseconds(Int64(outputSamples) * 1000 / Int64(max(1, outputRate))).humanDescription) of model audio to \(options.output); sent \(Duration.milliseconds(statistics.audioSamplesSent / 16).humanDescription) over \(statistics.readies) connection(s)"
        )
        return outcome
    }

    private func handle(_ event: SessionEvent, progress: ProgressBox) {
        var lines: [String] = []
        progress.withLock { state in
            state.lastEventAt = ContinuousClock.now
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
