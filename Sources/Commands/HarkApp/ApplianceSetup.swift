import HarkAppliance
import HarkAudio
import HarkBackends
import HarkBoard
import HarkBoardIO
import HarkConfig
import HarkCore
import HarkDSP
import HarkHTTP
import HarkIndicators
import HarkNet
import HarkPlatform
import Logging

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// A configuration the appliance cannot run with: one line for a person (`hark run` exits with
/// ``RunExit/configuration``, or ``RunExit/failed`` when a restart may find what was missing).
struct ApplianceSetupError: Error, CustomStringConvertible {
    var description: String
    /// A secret was found nowhere (under systemd a credential may still provide it).
    var missingSecret = false
    /// What was missing may appear by itself (a board not detected yet: its sound card still being announced),
    /// so the service manager should start the daemon again rather than wait for the owner.
    var restartMayHelp = false
}

/// The opened devices: the supervisor's view of them, and the LED driver whose animation runs as a service.
struct OpenedDevices: Sendable {
    var parts: ApplianceDevices
    var leds: LEDDriver?
    /// The playback, whose media lane plays music and radio.
    var playback: AudioPlayback?
}

/// Turns a configuration and a board into the appliance's parts: devices, and how sessions are made.
struct ApplianceSetup {
    let loaded: LoadedConfiguration
    var configuration: ApplianceConfiguration { loaded.configuration }
    let board: BoardProfile
    let environment: [String: String]
    let logger: Logger
    /// Where a terminal board draws its LEDs and reads its key.
    var terminalOutput: any ByteSink
    var terminalInput: Int32 = 0
    /// The MCP servers' tools, declared beside the device's in every session.
    var toolCatalog: ToolCatalog?
    /// The music and radio player (nil: media.enabled is off, or before the devices are open).
    var media: (any MediaControls)?

    /// The behaviour the configuration asks for (what a reload may change).
    func behaviour() throws -> ApplianceBehaviour {
        let configuration = self.configuration
        let backend = try makeBackend()
        let kind = type(of: backend)
        var earcons: Set<Earcon> = []
        if configuration.earcons.listeningStart { earcons.insert(.listeningStart) }
        if configuration.earcons.cancel { earcons.insert(.cancel) }
        if configuration.earcons.error { earcons.insert(.error) }
        if configuration.earcons.offline { earcons.insert(.offline) }
        var tools: DeviceToolSet = []
        if configuration.tools.volume { tools.insert(.volume) }
        if configuration.tools.mute { tools.insert(.mute) }
        if configuration.tools.clock { tools.insert(.clock) }
        if configuration.tools.status { tools.insert(.status) }
        if configuration.tools.timers, configuration.timers.enabled { tools.insert(.timers) }
        if configuration.tools.media, media != nil { tools.insert(.media) }
        if !tools.isEmpty, !kind.capabilities.contains(.deviceTools) {
            // Said, not silently skipped: the agent of this backend runs its tools on the service.
            logger.notice(
                "the device tools (volume, mute, time, status, timers and alarms, music and radio) are not available with backend \(kind.name): its agent runs its tools on the service; timers and alarms still work from the button and hark timers, music and radio from hark media"
            )
            tools = []
        }
        var timers: TimerBehaviour?
        if configuration.timers.enabled {
            timers = TimerBehaviour(
                ringFor: configuration.timers.ringFor,
                level: Double(configuration.timers.volume) / 100 * 0.8,
                store: TimerStore(path: configuration.stateDirectory + "/timers.json"),
                calendar: SystemCalendar()
            )
        }
        var settings = ApplianceMachine.Settings(
            mode: Self.interactionMode(configuration.mode),
            idleTimeout: configuration.session.idleTimeout,
            earcons: earcons
        )
        if let greeting = configuration.session.greeting { settings.greeting = greeting }
        var wake: WakeBehaviour?
        switch try WakeSetup.trigger(configuration, environment: environment) {
        case .wake(let runtime):
            wake = try WakeSetup.behaviour(loaded, runtime: runtime)
            settings.wakeWord = true
            settings.followUps = configuration.wake.followUps
        case .voice(let note?):
            logger.notice("\(note)")
        case .voice(nil), .button:
            break
        }
        let stopWord = try WakeSetup.stopBehaviour(loaded, environment: environment)
        var vad = EnergyVAD()
        vad.threshold = configuration.session.vadThreshold
        let logger = self.logger
        let manualActivity = configuration.mode == .pushToTalk
        let greetsFirst = configuration.mode == .kiosk
        let catalog = kind.capabilities.contains(.deviceTools) ? toolCatalog : nil
        if toolCatalog != nil, catalog == nil {
            logger.notice(
                "the MCP servers' tools are not available with backend \(kind.name): its agent runs its tools on the service"
            )
        }
        return ApplianceBehaviour(
            settings: settings,
            makeSession: { fresh, tools, audioSent in
                var tools = tools
                tools.catalog = catalog
                return backend.makeSession(
                    SessionRequest(
                        fresh: fresh,
                        tools: tools,
                        manualActivity: manualActivity,
                        greetsFirst: greetsFirst,
                        carriesConversation: !greetsFirst,
                        audioSent: audioSent,
                        logger: logger
                    )
                )
            },
            forgetConversation: { backend.forgetConversation() },
            tools: tools,
            toolBehaviors: configuration.tools.behaviors,
            earconLevel: Double(configuration.earcons.volume) / 100 * 0.5,
            vad: vad,
            preRoll: configuration.session.preRoll,
            wake: wake,
            stopWord: stopWord,
            timers: timers,
            media: tools.contains(.media) ? media : nil,
            logTranscripts: configuration.logTranscripts,
            mode: configuration.mode.rawValue,
            backend: kind.name
        )
    }

    /// The configured backend, made from its section.
    func makeBackend() throws -> any Backend {
        let backend = try loaded.makeBackend(environment: environment, logger: logger)
        for (key, note) in type(of: backend).advice(loaded.configuration.backendSettings) {
            logger.warning("\(type(of: backend).name).\(key): \(note)")
        }
        return backend
    }

    static func interactionMode(_ mode: ApplianceMode) -> InteractionMode {
        switch mode {
        case .speaker: .alwaysListening
        case .pushToTalk: .pushToTalk
        case .kiosk: .kiosk
        }
    }

    // MARK: - Devices

    /// Opens the audio devices, the LEDs and the button the board (and the configuration's overrides)
    /// name. Throws a message naming the device that failed.
    func openDevices() throws -> OpenedDevices {
        let audio = configuration.audio
        // A HAT's card has another name under the kernel's driver than under its vendor's: open the one present.
        let cards = SystemFacts.read().alsaCards
        let reference = audio.echoCancellation ? EchoReference() : nil

        var playbackConfiguration = AudioPlayback.Configuration(
            device: .named(audio.playbackDevice ?? board.audio.playback.resolved(cards: cards)),
            request: PCMRequest(channels: board.audio.playback.channels, rates: [board.audio.playback.rate]),
            prebuffer: audio.prebuffer,
            volumeFile: VolumeFile(path: configuration.stateDirectory + "/volume"),
            mixerControl: audio.mixerControl
        )
        playbackConfiguration.duckDecibels = configuration.media.duckDecibels
        var captureConfiguration = AudioCapture.Configuration(
            device: .named(audio.captureDevice ?? board.audio.capture.resolved(cards: cards)),
            request: PCMRequest(channels: board.audio.capture.channels, rates: [board.audio.capture.rate]),
            channelMap: board.audio.capture.channelMap.count == 1
                ? .pick(board.audio.capture.channelMap[0]) : .average(board.audio.capture.channelMap)
        )
        captureConfiguration.frontEnd.echoCancellation = reference != nil
        captureConfiguration.frontEnd.noiseSuppression = audio.noiseSuppression
        captureConfiguration.frontEnd.automaticGain = audio.automaticGain
        // On a sound card, the stream runs between answers, so the echo reference's alignment holds from one to
        // the next (a file has no echo to cancel).
        playbackConfiguration.keepRunning = reference != nil && audio.playbackFile == nil
        if let file = audio.playbackFile {
            playbackConfiguration.device = .rawFile(output: file, name: "hark_speaker_file")
            playbackConfiguration.request = PCMRequest(formats: [.s16LE], channels: 1, rates: [24_000])
            playbackConfiguration.pace = audio.filePace
            playbackConfiguration.mixerControl = nil  // a file has no volume control
        }
        if let file = audio.captureFile {
            let raw = try rawMicrophoneFile(file)
            captureConfiguration.device = .rawFile(
                output: "/dev/null",
                input: raw,
                name: "hark_microphone_file"
            )
            captureConfiguration.request = PCMRequest(
                formats: [.s16LE],
                channels: 1,
                rates: [AudioFormat.microphone.sampleRate]
            )
            captureConfiguration.channelMap = .pick(0)
            captureConfiguration.pace = audio.filePace
            captureConfiguration.backpressure = audio.filePace == 0
        }

        let playback = AudioPlayback(configuration: playbackConfiguration, echoReference: reference)
        do {
            try playback.start()
        } catch {
            throw ApplianceSetupError(
                description: "cannot open the playback device \(playbackConfiguration.device): \(error)"
            )
        }
        if playbackConfiguration.volumeFile?.load() == nil {
            playback.volume = Float(audio.volume ?? board.audio.defaultVolume) / 100
        }
        let capture = AudioCapture(configuration: captureConfiguration, echoReference: reference)
        do {
            try capture.start()
        } catch {
            playback.stop()
            throw ApplianceSetupError(
                description: "cannot open the capture device \(captureConfiguration.device): \(error)"
            )
        }

        let io = BoardIO(
            gpio: GPIOBackends.named("auto")!,
            terminal: terminalOutput,
            terminalInput: terminalInput
        )
        var leds: LEDDriver?
        var button: ButtonReader?
        do {
            if let output = try io.ledOutput(for: board) {
                leds = LEDDriver(engine: board.makeLEDEngine(), output: output)
            }
            if let source = try io.buttonSource(for: board) {
                var gestures = board.gestures
                // In speaker mode a tap mutes, unless the board file says otherwise. Set whatever the mode: a
                // reload may switch to speaker mode, and only speaker mode reads these gestures.
                if gestures.actions[.alwaysListening]?[.tap] == nil {
                    gestures.actions[.alwaysListening, default: [:]][.tap] = .muteToggle
                }
                let interpreter = ButtonInterpreter(
                    map: gestures,
                    mode: Self.interactionMode(configuration.mode),
                    timing: BoardIO.gestureTiming(for: board)
                )
                button = ButtonReader(source: source, interpreter: interpreter)
            }
        } catch {
            capture.stop()
            playback.stop()
            throw ApplianceSetupError(description: "cannot open the board's LEDs or button (\(board.name)): \(error)")
        }
        logger.info(
            "audio: capture \(captureConfiguration.device) \(capture.format.map { "\($0)" } ?? ""), playback \(playbackConfiguration.device) \(playback.format.map { "\($0)" } ?? "")"
        )
        return OpenedDevices(
            parts: ApplianceDevices(
                microphone: capture,
                speaker: playback,
                indicator: leds,
                button: button,
                board: board.name
            ),
            leds: leds,
            playback: playback
        )
    }

    /// A WAV file is converted once to the raw 16 kHz mono PCM16 a file device reads; a raw file is used
    /// as it is.
    private func rawMicrophoneFile(_ path: String) throws -> String {
        guard path.hasSuffix(".wav") else { return path }
        let audio: WAVAudio
        do {
            audio = try WAVFile.read(path: path)
        } catch let error as WAVError {
            throw ApplianceSetupError(description: "audio.capture_file: \(error.description)")
        }
        // Silence after the words: a file device that runs past its end repeats its last buffer.
        let samples =
            try Resampler.convert(audio.mono, from: audio.sampleRate, to: AudioFormat.microphone.sampleRate)
            + [Int16](repeating: 0, count: AudioFormat.microphone.samples(in: .seconds(3)))
        let raw = FileManager.default.temporaryDirectory.path + "/hark-microphone-\(getpid()).raw"
        try PCM16.bytes(samples).write(to: URL(fileURLWithPath: raw))
        return raw
    }
}

extension LoadedConfiguration {
    /// The configured backend for the daemon, made from its section; a setting it refuses is an error naming the
    /// key, the file and the line.
    func makeBackend(environment: [String: String], logger: Logger) throws -> any Backend {
        guard let kind = Backends.named(configuration.backend) else {
            throw error(key: "backend", "must be one of \(Backends.names.joined(separator: ", "))")
        }
        let pace = configuration.audio.captureFile == nil ? 1 : configuration.audio.filePace
        do {
            return try kind.init(
                context: BackendContext(
                    settings: configuration.backendSettings,
                    environment: environment,
                    network: .nio(logger: logger),
                    usage: .daemon(stateDirectory: configuration.stateDirectory, pace: pace),
                    logger: logger,
                    hostName: Host.name() ?? "device"
                )
            )
        } catch {
            if error.missingSecret { throw ApplianceSetupError(description: error.message, missingSecret: true) }
            guard let key = error.key else { throw ApplianceSetupError(description: error.message) }
            throw self.error(key: kind.name + "." + key, error.message)
        }
    }
}
