import HarkAppliance
import HarkAudio
import HarkBoard
import HarkBoardIO
import HarkConfig
import HarkCore
import HarkDSP
import HarkDatagrid
import HarkGemini
import HarkHTTP
import HarkIndicators
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

/// A configuration the appliance cannot run with: one line for a person (exit code 2).
struct ApplianceSetupError: Error, CustomStringConvertible {
    var description: String
}

/// The opened devices: the supervisor's view of them, and the LED driver whose animation runs as a service.
struct OpenedDevices: Sendable {
    var parts: ApplianceDevices
    var leds: LEDDriver?
}

/// Turns a configuration and a board into the appliance's parts: devices, and how sessions are made.
struct ApplianceSetup {
    let configuration: ApplianceConfiguration
    let board: BoardProfile
    let environment: [String: String]
    let logger: Logger
    /// Where a terminal board draws its LEDs and reads its key.
    var terminalOutput: any ByteSink
    var terminalInput: Int32 = 0

    /// The behaviour the configuration asks for (what a reload may change).
    func behaviour() throws -> ApplianceBehaviour {
        let configuration = self.configuration
        let makeSession = try sessionFactory()
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
        var settings = ApplianceMachine.Settings(
            mode: Self.interactionMode(configuration.mode),
            idleTimeout: configuration.session.idleTimeout,
            earcons: earcons
        )
        if let greeting = configuration.session.greeting { settings.greeting = greeting }
        var vad = EnergyVAD()
        vad.threshold = configuration.session.vadThreshold
        let store = resumptionStore()
        return ApplianceBehaviour(
            settings: settings,
            makeSession: makeSession,
            forgetConversation: { store.clear() },
            tools: tools,
            earconLevel: Double(configuration.earcons.volume) / 100 * 0.5,
            vad: vad,
            preRoll: configuration.session.preRoll,
            logTranscripts: configuration.logTranscripts,
            mode: configuration.mode.rawValue,
            backend: configuration.backend.rawValue
        )
    }

    static func interactionMode(_ mode: ApplianceMode) -> InteractionMode {
        switch mode {
        case .speaker: .alwaysListening
        case .pushToTalk: .pushToTalk
        case .kiosk: .kiosk
        }
    }

    private func resumptionStore() -> ResumptionStore {
        ResumptionStore(path: configuration.stateDirectory + "/resumption.json")
    }

    // MARK: - Sessions

    /// How sessions are made for the configured backend; throws when the configuration cannot work
    /// (no key for the real service, a bad endpoint).
    func sessionFactory() throws
        -> @Sendable (Bool, ToolRegistry, @escaping @Sendable (AudioChunk) -> Void) -> any VoiceSession
    {
        let logger = self.logger
        switch configuration.backend {
        case .gemini:
            let base = try geminiConfiguration()
            let store = resumptionStore()
            let model = base.setup.model
            let caFile = configuration.gemini.caFile
            return { fresh, tools, audioSent in
                var live = base
                live.initialHandle = fresh ? nil : store.load(model: model, now: Date().timeIntervalSince1970)
                live.audioSent = audioSent
                return GeminiLiveSession(
                    configuration: live,
                    transport: NIOWebSocketTransport(caFile: caFile, logger: logger),
                    tokens: EphemeralTokenSource(http: NIOHTTPClient(caFile: caFile)),
                    tools: tools,
                    logger: logger
                )
            }
        case .datagrid:
            let base = try datagridConfiguration()
            return { _, _, audioSent in
                var configuration = base
                configuration.audioSent = audioSent
                return DatagridSession(
                    configuration: configuration,
                    transport: NIOWebSocketTransport(logger: logger),
                    http: NIOHTTPClient(),
                    logger: logger
                )
            }
        }
    }

    private func geminiConfiguration() throws -> GeminiLiveConfiguration {
        let gemini = configuration.gemini
        let endpoint = gemini.endpoint ?? ConverseOptions.realEndpoint
        guard endpoint.hasPrefix("ws://") || endpoint.hasPrefix("wss://") else {
            throw ApplianceSetupError(
                description: "gemini.endpoint must start with ws:// or wss:// (got \(URLRedaction.redact(endpoint)))"
            )
        }
        guard let version = LiveAPIVersion(rawValue: gemini.apiVersion) else {
            throw ApplianceSetupError(description: "gemini.api_version must be v1beta, v1 or v1alpha")
        }
        let key: Secret?
        do {
            key = try configuration.geminiAPIKey(environment: environment)
        } catch {
            throw ApplianceSetupError(description: "\(error)")
        }
        let authentication: LiveAuthentication
        do {
            authentication = try SessionChoices.geminiAuthentication(
                tokenURL: gemini.tokenURL,
                mintToken: gemini.mintToken,
                key: key,
                endpoint: endpoint,
                mintNeedsKey: "gemini.mint_token needs an API key (gemini.api_key_file)",
                noKey:
                    "no Gemini API key: set gemini.api_key_file, install the systemd credential gemini-api-key, set GEMINI_API_KEY, or use gemini.token_url"
            )
        } catch {
            throw ApplianceSetupError(description: error.message)
        }
        let model = gemini.model.hasPrefix("models/") ? gemini.model : "models/" + gemini.model
        let manual = configuration.mode == .pushToTalk
        let pace = configuration.audio.captureFile == nil ? 1 : configuration.audio.filePace
        let setup = Setup(
            model: model,
            generationConfig: GenerationConfig(
                responseModalities: [.audio],
                speechConfig: (gemini.voice != nil || gemini.language != nil)
                    ? SpeechConfig(voiceName: gemini.voice, languageCode: gemini.language) : nil
            ),
            systemInstruction: gemini.systemInstruction.map { Content.text($0) },
            realtimeInputConfig: manual ? RealtimeInputConfig(automaticActivityDetection: .init(disabled: true)) : nil,
            contextWindowCompression: gemini.contextCompression ? ContextWindowCompression() : nil
        )
        return GeminiLiveConfiguration(
            endpoint: endpoint,
            apiVersion: version,
            authentication: authentication,
            setup: setup,
            // File-backed audio at `file_pace` runs the device's time that much faster (0: as fast as
            // it can be read, ahead of real time): the margins and the backlog's pace follow it.
            confirmationMargin: pace == 0 ? .zero : .milliseconds(300),
            confirmationLag: pace == 0 ? .zero : .milliseconds(300) / pace,
            catchUpRate: pace == 0 ? nil : 4 * pace,
            giveUpOnRejection: false,
            maxConsecutiveFailures: nil,
            resumptionStore: resumptionStore()
        )
    }

    private func datagridConfiguration() throws -> DatagridConfiguration {
        let datagrid = configuration.datagrid
        let base = datagrid.endpoint ?? DatagridConfiguration.realBaseURL
        let key: Secret?
        do {
            key = try configuration.datagridAPIKey(environment: environment)
        } catch {
            throw ApplianceSetupError(description: "\(error)")
        }
        let apiKey: Secret
        do {
            apiKey = try SessionChoices.datagridKey(
                key,
                base: base,
                noKey:
                    "no Datagrid API key: set datagrid.api_key_file, install the systemd credential datagrid-api-key, or set DATAGRID_API_KEY"
            )
        } catch {
            throw ApplianceSetupError(description: error.message)
        }
        let start = SessionChoices.datagridStart(
            agentID: datagrid.agentID,
            systemPrompt: configuration.gemini.systemInstruction,
            silentStart: configuration.mode != .kiosk,
            voicePreset: datagrid.voicePreset
        )
        return DatagridConfiguration(
            apiKey: apiKey,
            baseURL: SessionChoices.datagridRESTBase(base),
            webSocketBaseURL: DatagridConfiguration.webSocketBase(for: base),
            mode: datagrid.direct ? .direct : .handoff,
            teamspace: datagrid.teamspace,
            start: start,
            conversationStore: resumptionStore(),
            giveUpOnRejection: false,
            maxConsecutiveFailures: nil
        )
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
        var captureConfiguration = AudioCapture.Configuration(
            device: .named(audio.captureDevice ?? board.audio.capture.resolved(cards: cards)),
            request: PCMRequest(channels: board.audio.capture.channels, rates: [board.audio.capture.rate]),
            channelMap: board.audio.capture.channelMap.count == 1
                ? .pick(board.audio.capture.channelMap[0]) : .average(board.audio.capture.channelMap)
        )
        captureConfiguration.frontEnd.echoCancellation = reference != nil
        captureConfiguration.frontEnd.noiseSuppression = audio.noiseSuppression
        captureConfiguration.frontEnd.automaticGain = audio.automaticGain
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
            captureConfiguration.request = PCMRequest(formats: [.s16LE], channels: 1, rates: [16_000])
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
                // In speaker mode a tap mutes, unless the board file says otherwise.
                if configuration.mode == .speaker, gestures.actions[.alwaysListening]?[.tap] == nil {
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
            leds: leds
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
            try Resampler.convert(audio.mono, from: audio.sampleRate, to: 16_000)
            + [Int16](repeating: 0, count: 16_000 * 3)
        let raw = FileManager.default.temporaryDirectory.path + "/hark-microphone-\(getpid()).raw"
        try PCM16.bytes(samples).write(to: URL(fileURLWithPath: raw))
        return raw
    }
}
