import ArgumentParser
import HarkAppliance
import HarkAudio
import HarkBackends
import HarkBoard
import HarkBoardIO
import HarkConfig
import HarkControl
import HarkCore
import HarkIndicators
import HarkMCP
import HarkNet
import HarkPlatform
import HarkSystemd
import Logging
import ServiceLifecycle
import Synchronization
import UnixSignals

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// `hark run`: the appliance daemon.
struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the voice appliance (the daemon systemd starts).",
        discussion: """
            Opens the board's microphone, speaker, LEDs and button, then holds conversations with the \
            configured agent as the mode says:
              speaker       hands-free: speech opens a session (its first words included), the agent answers \
            and can be interrupted by voice; a tap mutes; the session closes after session.idle_timeout of quiet.
              push-to-talk  hold the button to talk, release to hear the answer; pressing interrupts the agent.
              kiosk         a visitor starts by voice or button, the agent greets first, the next visitor gets \
            a fresh conversation.

            The configuration is /etc/hark/hark.yaml (or --config, or $HARK_CONFIG); `hark config check` \
            validates it and shows every key. Any key can be overridden from the environment \
            (HARK_MODE=push-to-talk, HARK_SESSION_IDLE_TIMEOUT=20s, ...). The agent is one of these backends \
            (`backend:` in the file):
            \(Backends.listing())
            API keys are never read from the configuration file itself; each comes, in this order, from:
            \(Backends.secretSources())

            Under systemd (Type=notify) it reports READY=1 once its devices are open, a STATUS= line a person \
            can read, and WATCHDOG=1 only while every part shows progress. SIGTERM stops it cleanly; SIGHUP \
            reloads the configuration. The control socket (--control-socket, control_socket in the file, else \
            control.sock in $RUNTIME_DIRECTORY or /run/hark; mode 0660: the service's user and group) is where \
            `hark reload`, `hark timers`, `hark alarms` and `hark announce` reach it; `hark status` shows what it \
            is doing.

            Without hardware or a key, scripts/run runs it against the bundled simulator with file-backed \
            audio (audio.capture_file, audio.playback_file) on the host board; the configuration it writes is \
            out/demo/hark.yaml.

            Exit codes: 0 stopped; 1 a failure a restart may mend: devices that failed again and again, no \
            board detected yet (systemd restarts it); 78 a configuration that cannot run, said with its file, \
            line and key (systemd does not restart it: fix the file, then systemctl start hark).
            """
    )

    @Option(
        help: ArgumentHelp(
            "The configuration file (default: $HARK_CONFIG, else /etc/hark/hark.yaml).",
            valueName: "PATH"
        )
    )
    var config: String?

    @Option(help: "Use this board file's name instead of the configuration's board (e.g. host).")
    var board: String?

    @Option(
        help: ArgumentHelp(
            "The control socket (default: control_socket in the configuration, else control.sock in "
                + "$RUNTIME_DIRECTORY, else /run/hark/control.sock).",
            valueName: "PATH"
        )
    )
    var controlSocket: String?

    @Option(help: "Stop after this many answers have been played to their end (demos, tests).")
    var turns: Int?

    @Option(help: "Stop after this many seconds (demos, tests).")
    var duration: Double?

    @Flag(name: .shortAndLong, help: "Log debug detail.")
    var verbose = false

    func validate() throws {
        if let turns, turns < 1 { throw ValidationError("--turns must be at least 1") }
        if let duration { _ = try CommandLineDuration.seconds(duration, option: "--duration", in: 0.001...31_536_000) }
    }

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        let loaded: LoadedConfiguration
        do {
            loaded = try ConfigurationLoader.load(path: config, environment: environment)
        } catch {
            printError("hark run: \(error)")
            throw ExitCode(RunExit.configuration)
        }
        var level = Logger.Level(rawValue: loaded.configuration.logLevel) ?? .info
        if verbose { level = .debug }
        HarkLogHandler.bootstrap(level: level, environment: environment)
        let logger = Logger(label: "hark")
        for note in loaded.notes { logger.notice("\(note)") }
        var options = ApplianceRunner.Options(configPath: config, environment: environment)
        options.boardOverride = board
        options.controlSocket = controlSocket
        options.stopAfterTurns = turns
        options.duration = try duration.map {
            try CommandLineDuration.seconds($0, option: "--duration", in: 0.001...31_536_000)
        }
        let runner = ApplianceRunner(options: options, notifier: SystemdNotifier(), logger: logger)
        let code = await runner.run(loaded)
        if code != 0 { throw ExitCode(code) }
    }
}

func printError(_ text: String) {
    writeAll(STDERR_FILENO, text + "\n")
}

/// How `hark run` ends, for the service manager (the unit's `Restart=on-failure` and `RestartPreventExitStatus=`).
public enum RunExit {
    /// Stopped as asked (SIGTERM, --turns, --duration): not restarted.
    public static let stopped: Int32 = 0
    /// A failure a restart may mend (audio devices that would not open or went away, no board detected yet, a
    /// stall): the unit starts the daemon again.
    public static let failed: Int32 = 1
    /// The configuration cannot run (a malformed or misspelt key, a missing key file, a wake word without its
    /// runtime): the same file fails the same way on every start, so the unit does not restart on it, and
    /// `systemctl status` keeps the failed start's message in view. sysexits' EX_CONFIG, which systemd shows as
    /// `status=78/CONFIG`.
    public static let configuration: Int32 = 78
}

/// Runs the appliance from a loaded configuration: opens the devices (retrying a while at boot), then runs
/// the core, the LEDs, the watchdog and the reload handler as one service group until stopped.
public struct ApplianceRunner: Sendable {
    /// What the command line adds to the configuration.
    public struct Options: Sendable {
        public var configPath: String?
        public var environment: [String: String]
        public var boardOverride: String?
        /// The control socket's path instead of the configuration's.
        public var controlSocket: String?
        public var stopAfterTurns: Int?
        public var duration: Duration?
        /// SIGTERM/SIGINT stop the run and SIGHUP reloads (off for in-process tests).
        public var handleSignals = true
        /// Where a terminal board reads its key (standard input by default; a pipe in tests).
        public var terminalInput: Int32 = STDIN_FILENO
        /// Where a terminal board draws its LEDs: this inherited descriptor, only while it is a terminal
        /// (standard output by default; redirected to a pipe or a file, or -1, it draws nothing).
        public var terminalOutput: Int32 = STDOUT_FILENO
        /// How many times opening the devices is tried at start before giving up.
        public var openAttempts = 5
        /// Stops the run as SIGTERM does (tests, embedding).
        public var stopSwitch: StopSwitch?

        public init(configPath: String?, environment: [String: String]) {
            self.configPath = configPath
            self.environment = environment
        }
    }

    let options: Options
    let notifier: any ServiceNotifier
    let logger: Logger
    /// Sees each change of what the LEDs show, in order.
    var onShown: @Sendable (ShownState) -> Void = { _ in }

    public init(
        options: Options,
        notifier: any ServiceNotifier,
        logger: Logger,
        onShown: @escaping @Sendable (ShownState) -> Void = { _ in }
    ) {
        self.options = options
        self.notifier = notifier
        self.logger = logger
        self.onShown = onShown
    }

    /// Runs until stopped; returns the exit code.
    public func run(_ loaded: LoadedConfiguration) async -> Int32 {
        // SIGHUP is trapped before the core can send READY=1: from then on systemd may send a reload, and a
        // SIGHUP not yet trapped ends the process (a clean exit to systemd, which then does not restart it).
        let hangups = options.handleSignals ? await UnixSignalsSequence(trapping: .sighup) : nil
        var loaded = loaded
        // One player for the whole run, its ring attached to the playback's media lane once the devices are open.
        let mediaLane = MediaLane()
        let media: ApplianceMedia? =
            loaded.configuration.media.enabled
            ? ApplianceMedia(
                settings: loaded.configuration.media,
                outputRate: AudioPlayback.Configuration().inputRate,
                logger: logger,
                attach: { mediaLane.attach($0) }
            ) : nil
        defer { media?.shutdown() }
        let setup: ApplianceSetup
        let behaviour: ApplianceBehaviour
        let toolHub: MCPToolHub?
        do {
            if let board = options.boardOverride { try loaded.override("board", with: board, option: "--board") }
            // The MCP servers' tools, for every session of the run (a reload keeps the servers it started with).
            toolHub = try MCPSetup.hub(
                loaded.configuration.mcpServers,
                environment: options.environment,
                network: .nio(logger: logger),
                logTranscripts: loaded.configuration.logTranscripts,
                logger: logger
            )
            setup = try makeSetup(loaded, toolCatalog: toolHub?.catalog, media: media)
            behaviour = try setup.behaviour()
        } catch {
            logger.error("cannot start: \(error)")
            notifier.status("error: \(error)")
            return (error as? ApplianceSetupError)?.restartMayHelp == true ? RunExit.failed : RunExit.configuration
        }
        notifier.status("booting: opening the audio devices")
        var devices: OpenedDevices?
        var backoff = Backoff(initial: .seconds(1), cap: .seconds(8))
        var random = SystemRandomNumberGenerator()
        for attempt in 1...max(1, options.openAttempts) {
            do {
                devices = try setup.openDevices()
                break
            } catch {
                logger.error("\(error) (attempt \(attempt) of \(options.openAttempts))")
                notifier.status("booting: \(error)")
                guard attempt < options.openAttempts else { break }
                try? await Task.sleep(for: backoff.next(using: &random))
            }
        }
        guard let devices else {
            logger.critical("giving up: the audio devices would not open")
            return RunExit.failed
        }
        mediaLane.playback = devices.playback
        let core = Supervisor(
            devices: devices.parts,
            behaviour: behaviour,
            notifier: notifier,
            statusFile: loaded.configuration.statusFile,
            logger: logger,
            environment: SupervisorEnvironment(
                clock: EventLoopClock(),
                monotonicNanoseconds: monotonicNanoseconds,
                wallClock: { Date().timeIntervalSince1970 },
                processID: getpid(),
                deviceFacts: {
                    [
                        "firmware_version": .string(HarkVersion.current),
                        "operating_system": .string(HarkVersion.operatingSystem()),
                        "network": .string(HarkVersion.networkSummary()),
                    ]
                },
                processStartTicks: DaemonProcess.ownStartTicks,
                toolServers: { toolHub?.statuses.map(\.summary) ?? [] },
                media: { media?.summary }
            ),
            stopAfterTurns: options.stopAfterTurns,
            onShown: onShown
        )
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [
            .init(service: CoreService(core: core), successTerminationBehavior: .gracefullyShutdownGroup),
            .init(
                service: WatchdogService(core: core, notifier: notifier, logger: logger),
                successTerminationBehavior: .ignore
            ),
        ]
        if let leds = devices.leds {
            services.append(.init(service: LEDService(driver: leds), successTerminationBehavior: .ignore))
        }
        if let toolHub {
            services.append(.init(service: MCPService(hub: toolHub), successTerminationBehavior: .ignore))
        }
        // The metrics for node_exporter (metrics.textfile), every 15 s; the last at exit, below.
        let metrics = loaded.configuration.metrics.textfile.map {
            MetricsFile(
                path: $0,
                stateDirectory: loaded.configuration.stateDirectory,
                version: HarkVersion.current,
                logger: logger
            )
        }
        if let metrics {
            services.append(
                .init(
                    service: MetricsService(core: core, file: metrics, clock: EventLoopClock()),
                    successTerminationBehavior: .ignore
                )
            )
        }
        if let duration = options.duration {
            // It asks the core to stop politely; the core's end then stops the group.
            services.append(
                .init(service: TimerService(duration: duration, core: core), successTerminationBehavior: .ignore)
            )
        }
        let startedServers = loaded.configuration.mcpServers
        let startedMedia = loaded.configuration.media
        let reload: @Sendable () -> Result<ApplianceBehaviour, ReloadFailure> = { [options, logger] in
            do {
                var reloaded = try ConfigurationLoader.load(
                    path: options.configPath,
                    environment: options.environment
                )
                if let board = options.boardOverride {
                    try reloaded.override("board", with: board, option: "--board")
                }
                if reloaded.configuration.mcpServers != startedServers {
                    logger.warning(
                        "the mcp: section changed; a reload keeps the MCP servers the daemon started with, a restart (systemctl restart hark) applies it"
                    )
                }
                if reloaded.configuration.media != startedMedia {
                    logger.warning(
                        "the media: section changed; a reload keeps the player and stations the daemon started with, a restart (systemctl restart hark) applies it"
                    )
                }
                return .success(try makeSetup(reloaded, toolCatalog: toolHub?.catalog, media: media).behaviour())
            } catch {
                logger.error("reload failed, keeping the running configuration: \(error)")
                return .failure(ReloadFailure(description: "\(error)"))
            }
        }
        if let hangups {
            services.append(
                .init(
                    service: ReloadService(core: core, hangups: hangups, reload: reload),
                    successTerminationBehavior: .ignore
                )
            )
        }
        // The operations of the supervisor's side: timers, alarms, announcements.
        let supervisorOperations: (any ControlService)? = ApplianceControl(core: core, media: media)
        let control = DaemonControl(core: core, reload: reload, others: supervisorOperations)
        let controlPath =
            options.controlSocket ?? loaded.configuration.controlSocketPath(environment: options.environment)
        var server: ControlServer?
        do {
            server = try await ControlServer.open(path: controlPath, service: control, logger: logger)
            logger.info("control socket: \(RemoteText.printable(controlPath, limit: 200))")
        } catch let error as ControlSocketError where error.kind == .inUse {
            logger.critical("\(error.description)")
            return RunExit.failed
        } catch {
            // The appliance works without it (a development run without /run/hark): only the commands that talk
            // to it do not.
            logger.warning(
                "no control socket (hark reload, hark timers and hark announce cannot reach this daemon): \(error)"
            )
        }
        if let server {
            services.append(.init(service: ControlSocketService(server: server), successTerminationBehavior: .ignore))
        }
        var group = ServiceGroupConfiguration(services: services, logger: logger)
        if options.handleSignals { group.gracefulShutdownSignals = [.sigterm, .sigint] }
        group.maximumGracefulShutdownDuration = .seconds(8)
        let serviceGroup = ServiceGroup(configuration: group)
        options.stopSwitch?.attach(serviceGroup)
        let code: Int32
        do {
            try await serviceGroup.run()
            code = RunExit.stopped
        } catch let error as Supervisor.GaveUp {
            logger.critical("giving up: \(error.description)")
            code = RunExit.failed
        } catch {
            logger.critical("stopped on an error: \(error)")
            code = RunExit.failed
        }
        // Its service closed it on a graceful shutdown; a group that ended on an error did not.
        await server?.close()
        if let metrics { await metrics.write(core.currentStatus()) }
        return code
    }

    private func makeSetup(
        _ loaded: LoadedConfiguration,
        toolCatalog: ToolCatalog?,
        media: ApplianceMedia?
    ) throws -> ApplianceSetup {
        let selection = try loaded.selectBoard(facts: SystemFacts.read())
        guard let profile = selection.profile else {
            throw ApplianceSetupError(
                description: "\(selection.summary); name the board in the configuration (board: NAME)",
                restartMayHelp: true
            )
        }
        logger.info("board: \(selection.summary)")
        return ApplianceSetup(
            loaded: loaded,
            board: profile,
            environment: options.environment,
            logger: logger,
            terminalOutput: TerminalSink(descriptor: options.terminalOutput),
            terminalInput: options.terminalInput,
            toolCatalog: toolCatalog,
            media: media
        )
    }
}

/// The supervisor as a service: a graceful shutdown (SIGTERM) asks it to stop politely.
struct CoreService: Service {
    let core: Supervisor
    func run() async throws {
        try await withGracefulShutdownHandler {
            try await core.run()
        } onGracefulShutdown: {
            core.stop()
        }
    }
}

/// Stops a running appliance the way SIGTERM does: a graceful shutdown of its service group.
public final class StopSwitch: Sendable {
    private let state = Mutex<(group: ServiceGroup?, pulled: Bool)>((nil, false))

    public init() {}

    /// Stops the run (at once if it has not started yet).
    public func pull() {
        let group = state.withLock { state -> ServiceGroup? in
            state.pulled = true
            return state.group
        }
        if let group { Task { await group.triggerGracefulShutdown() } }
    }

    func attach(_ group: ServiceGroup) {
        let pulled = state.withLock { state -> Bool in
            state.group = group
            return state.pulled
        }
        if pulled { Task { await group.triggerGracefulShutdown() } }
    }
}

/// The LED driver as a service (stops on graceful shutdown).
struct LEDService: Service {
    let driver: LEDDriver
    func run() async throws {
        try? await cancelWhenGracefulShutdown { try await driver.run(clock: EventLoopClock()) }
    }
}

/// Stops the appliance after a set time (demos, tests). Shut down before its time is up, it leaves the core
/// alone: the group stops the core itself, last, and a core that ended earlier would fail the shutdown.
struct TimerService: Service {
    let duration: Duration
    let core: Supervisor
    func run() async throws {
        do {
            try await cancelWhenGracefulShutdown { try await Task.sleep(for: duration) }
        } catch {
            return
        }
        core.stop()
    }
}

/// Feeds the service manager's watchdog, only when every part of the appliance showed progress since
/// the last ping; names the parts that stalled.
struct WatchdogService: Service {
    let core: Supervisor
    let notifier: any ServiceNotifier
    let logger: Logger

    func run() async throws {
        guard let interval = notifier.watchdogInterval else {
            try? await gracefulShutdown()
            return
        }
        try? await cancelWhenGracefulShutdown {
            var watchdog = ProgressWatchdog()
            var stalledBefore: [String] = []
            while !Task.isCancelled {
                try await Task.sleep(for: interval)
                switch watchdog.check(await core.readings()) {
                case .ping:
                    notifier.watchdog()
                    await core.pinged()
                    if !stalledBefore.isEmpty { logger.notice("watchdog: progress again; pinging") }
                    stalledBefore = []
                case .stalled(let names):
                    if names != stalledBefore {
                        logger.error("watchdog: no progress from \(names.joined(separator: ", ")); not pinging")
                    }
                    stalledBefore = names
                }
            }
        }
    }
}

/// Reloads the configuration on each SIGHUP of `hangups` (trapped before the group runs) without dropping the
/// process.
struct ReloadService: Service {
    let core: Supervisor
    let hangups: UnixSignalsSequence
    let reload: @Sendable () -> Result<ApplianceBehaviour, ReloadFailure>

    func run() async throws {
        await cancelWhenGracefulShutdown { [hangups] in
            for await _ in hangups {
                switch reload() {
                case .success(let behaviour): core.reload(behaviour)
                case .failure(let failure): core.reloadFailed(failure.description)
                }
            }
        }
    }
}

/// Why a reloaded configuration cannot run (the file, line and key when the file is at fault).
struct ReloadFailure: Error, CustomStringConvertible {
    var description: String
}
