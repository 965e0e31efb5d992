import ArgumentParser
import HarkAudio
import HarkBackends
import HarkBoard
import HarkBoardIO
import HarkConfig
import HarkCore
import HarkWake
import Logging

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// `hark doctor`: checks the hardware a board file describes, one line per item with a verdict and a
/// fix; the exit code says whether the appliance can run (0) or not (1).
struct Doctor: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check the hardware a board file describes.",
        discussion: """
            Detects the board (or takes --board), then checks: the board files, ALSA capture and playback \
            (opened with the board's format; one second of capture level), the button line, the LEDs \
            (a short red, green, blue test pattern) and the SPI device; then the backends: each one the \
            build has with what it offers, and the configured one made as hark run makes it (its settings, its \
            key); then the wake word: whether its TensorFlow Lite library and models are installed, and what \
            the detector costs here (the default word, okay_nabu, over a few seconds of audio, in CPU time); then \
            whether the LiveKit backend's helper (hark-livekit) is installed and loads LiveKit's library, and its \
            version. Exit code 0 when the appliance can run, 1 when an item failed.
            """
    )

    @Option(
        name: .customLong("config"),
        help: ArgumentHelp(
            "The configuration whose backend is checked (default: $HARK_CONFIG, else /etc/hark/hark.yaml).",
            valueName: "PATH"
        )
    )
    var configPath: String?

    @Option(help: "The board to check (a file name in --board-dir without .yaml); detected when left out.")
    var board: String?

    @Option(name: .customLong("board-dir"), help: "The folder of board files.")
    var boardDirectory = "board"

    @Option(
        help: """
            GPIO access: libgpiod (libgpiod 1.6, bookworm), uapi (the kernel's GPIO v2 interface, trixie), \
            or auto (libgpiod when this build has it).
            """
    )
    var gpio = "auto"

    @Flag(help: "Skip the ALSA checks.")
    var noAudio = false

    func run() async throws {
        guard let backend = GPIOBackends.named(gpio) else {
            throw ValidationError("--gpio must be libgpiod, uapi or auto")
        }
        let io = BoardIO(gpio: backend, terminal: TerminalSink())
        var (items, profile) = BoardDoctor(boardDirectory: boardDirectory, io: io).run(board: board)
        if let profile, !noAudio {
            items += await AudioDoctor.check(profile.audio)
        }
        items += BackendDoctor.check(configPath: configPath, environment: ProcessInfo.processInfo.environment)
        items.append(WakeDoctor.check(environment: ProcessInfo.processInfo.environment))
        items += await MCPCheck.items(configPath: configPath, environment: ProcessInfo.processInfo.environment)
        for backend in Backends.all { items += await backend.doctor(environment: ProcessInfo.processInfo.environment) }
        print("")
        for item in items { print(item) }
        if items.contains(where: { $0.verdict == .failed }) { throw ExitCode(1) }
    }
}

/// The wake-word line of `hark doctor`: is the runtime installed, and what does the detector cost on this board.
/// A missing runtime is a warning, not a failure: every mode but the wake word works without it.
enum WakeDoctor {
    /// Seconds of audio the detector is timed over.
    static let seconds = 4

    static func check(environment: [String: String]) -> DoctorItem {
        let runtime: WakeRuntime
        let detector: WakeWordDetector
        let started = processCPUSeconds()
        do {
            runtime = try WakeRuntime.locate(environment: environment)
            detector = try WakeWordDetector(runtime: runtime, words: [try runtime.word(WakeRuntime.defaultWord)])
        } catch {
            // Missing is a warning (only the wake word needs it); there but damaged is a failure to repair.
            let missing = error.isRuntimeMissing
            return DoctorItem(
                "wake word",
                missing ? .warning : .failed,
                RemoteText.printable("\(error)", limit: 1000),
                fix: "only the wake word needs it; every other mode works without it"
            )
        }
        let loaded = processCPUSeconds()
        // A quiet tone stands in for a room: the models' cost does not depend on what they hear.
        let samples = (0..<(seconds * WakeWordDetector.sampleRate)).map { index in
            Int16(300 * sin(2 * Double.pi * 220 * Double(index) / Double(WakeWordDetector.sampleRate)))
        }
        let detections: Int
        do {
            detections = try detector.process(samples).filter(\.isDetection).count
        } catch {
            return DoctorItem("wake word", .failed, "the detector failed: \(error)", fix: "reinstall the hark package")
        }
        let ran = processCPUSeconds() - loaded
        let share = ran / Double(seconds) * 100
        return DoctorItem(
            "wake word",
            detections == 0 ? .ok : .warning,
            "\(WakeRuntime.defaultWord) (\(detector.words[0].family), \(detector.words[0].licence)) from "
                + "\(runtime.microModels) (TensorFlow Lite \(runtime.library)): loaded in "
                + "\(Int(((loaded - started) * 1000).rounded())) ms of CPU; \(seconds) s of audio in "
                + "\(Int((ran * 1000).rounded())) ms of CPU (\(Wake.fixed(share, decimals: 1)) % of one core)"
                + (detections == 0 ? "" : "; it fired \(detections) time(s) on a plain tone")
        )
    }

    /// CPU time of the whole process so far, user and system (`getrusage(RUSAGE_SELF)`).
    private static func processCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
            + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }
}

/// The audio half of `hark doctor`.
enum AudioDoctor {
    static func check(_ audio: AudioDevices) async -> [DoctorItem] {
        // A HAT's card has another name under the kernel's driver than under its vendor's: open the one present.
        let cards = SystemFacts.read().alsaCards
        var capturing = audio.capture
        capturing.alternatives = [capturing.resolved(cards: cards)]
        var playing = audio.playback
        playing.alternatives = [playing.resolved(cards: cards)]
        return [await capture(capturing), playback(playing)]
    }

    private static func request(_ spec: PCMSpec) -> PCMRequest {
        PCMRequest(channels: spec.channels, rates: [spec.rate])
    }

    private static func formatNote(_ format: NegotiatedFormat?, _ spec: PCMSpec) -> (String, Bool) {
        guard let format else { return ("opened", true) }
        let exact = format.channels == spec.channels && format.rate == spec.rate
        return ("\(format)", exact)
    }

    /// Opens the capture PCM and measures one second of level.
    static func capture(_ spec: PCMSpec) async -> DoctorItem {
        let map: ChannelMap = spec.channelMap.count == 1 ? .pick(spec.channelMap[0]) : .average(spec.channelMap)
        let capture = AudioCapture(
            configuration: AudioCapture.Configuration(device: .named(spec.pcm), request: request(spec), channelMap: map)
        )
        do {
            try capture.start()
        } catch {
            return DoctorItem(
                "capture",
                .failed,
                "\(spec.pcm): \(error)",
                fix: "is the sound card there (arecord -l)? is its overlay loaded? is the user in group audio?"
            )
        }
        defer { capture.stop() }
        // A device that opens but delivers nothing must not hang the doctor: stopping the capture after
        // 3 s ends the wait for the next frame.
        let watchdog = Task {
            try await Task.sleep(for: .seconds(3))
            capture.stop()
        }
        defer { watchdog.cancel() }
        var peak: Int32 = 0
        var frames = 0
        while frames < 50 {  // 50 frames of 20 ms: one second
            guard let frame = await capture.next() else { break }
            frames += 1
            for sample in frame.samples { peak = max(peak, abs(Int32(sample))) }
        }
        let (format, exact) = formatNote(capture.statistics.format, spec)
        guard frames > 0 else {
            return DoctorItem(
                "capture",
                .failed,
                "\(spec.pcm) (\(format)) gave no audio in 3 s",
                fix: "check the card's clocking and overlay"
            )
        }
        let peakText = "peak \(peak * 100 / 32767)% of full scale over \(frames * 20) ms"
        if peak < 3 {
            return DoctorItem(
                "capture",
                .warning,
                "\(spec.pcm) (\(format)): silent, \(peakText)",
                fix: "unmute and raise the capture gain (alsamixer), check the microphone wiring"
            )
        }
        if !exact {
            return DoctorItem(
                "capture",
                .warning,
                "\(spec.pcm) gave \(format), not \(spec.channels) ch at \(spec.rate) Hz; \(peakText)"
            )
        }
        return DoctorItem("capture", .ok, "\(spec.pcm) (\(format)), \(peakText)")
    }

    /// Opens the playback PCM with the board's format.
    static func playback(_ spec: PCMSpec) -> DoctorItem {
        let playback = AudioPlayback(
            configuration: AudioPlayback.Configuration(device: .named(spec.pcm), request: request(spec))
        )
        do {
            try playback.start()
        } catch {
            return DoctorItem(
                "playback",
                .failed,
                "\(spec.pcm): \(error)",
                fix: "is the sound card there (aplay -l)? is another program holding it?"
            )
        }
        let (format, exact) = formatNote(playback.statistics.format, spec)
        playback.stop()
        if !exact {
            return DoctorItem(
                "playback",
                .warning,
                "\(spec.pcm) gave \(format), not \(spec.channels) ch at \(spec.rate) Hz"
            )
        }
        return DoctorItem("playback", .ok, "\(spec.pcm) (\(format))")
    }
}

/// The backend half of `hark doctor`: the registry's backends, and the configured one made as `hark run` makes it.
enum BackendDoctor {
    static func check(configPath: String?, environment: [String: String]) -> [DoctorItem] {
        var items: [DoctorItem] = []
        let loaded: LoadedConfiguration
        do {
            loaded = try ConfigurationLoader.load(path: configPath, environment: environment)
        } catch {
            return [DoctorItem("configuration", .failed, "\(error)", fix: "hark config check says more")]
        }
        let chosen = loaded.configuration.backend
        for backend in Backends.all where backend.name != chosen {
            items.append(
                DoctorItem(
                    "backend \(backend.name)",
                    .ok,
                    "available (\(backend.summary)); offers \(backend.capabilities.names.joined(separator: ", "))"
                )
            )
        }
        guard let backend = Backends.named(chosen) else { return items }
        let offers = "offers \(backend.capabilities.names.joined(separator: ", "))"
        do {
            _ = try loaded.makeBackend(
                environment: environment,
                logger: Logger(label: "hark-doctor") { _ in SwiftLogNoOpLogHandler() }
            )
            let keys = loaded.configuration.secretReport(environment: environment)
            let used = keys.first { $0.verdict == .used || $0.verdict == .notNeeded }
            items.insert(
                DoctorItem("backend \(chosen)", .ok, "configured; \(offers); \(used?.description ?? "no key needed")"),
                at: 0
            )
            // What does not stop it working but a person should know (an older model, a key it ignores).
            for (offset, (key, note)) in backend.advice(loaded.configuration.backendSettings).enumerated() {
                items.insert(DoctorItem("backend \(chosen).\(key)", .warning, note), at: 1 + offset)
            }
        } catch let error as ApplianceSetupError where error.missingSecret {
            items.insert(
                DoctorItem(
                    "backend \(chosen)",
                    .warning,
                    "configured; \(offers); \(error.description)",
                    fix: "under systemd the credential may still provide it: systemctl status hark"
                ),
                at: 0
            )
        } catch {
            items.insert(
                DoctorItem("backend \(chosen)", .failed, "\(error)", fix: "hark config check says more"),
                at: 0
            )
        }
        return items
    }
}
