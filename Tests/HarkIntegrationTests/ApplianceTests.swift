import Foundation
import HarkApp
import HarkAppliance
import HarkBackendKit
import HarkConfig
import HarkCore
import HarkGemini
import HarkIndicators
import HarkLiveSimulator
import HarkSimulatorKit
import HarkTestKit
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The repository's root, for its board files.
let repositoryRoot: String = {
    var url = URL(fileURLWithPath: #filePath)
    while url.path != "/" {
        url.deleteLastPathComponent()
        if FileManager.default.fileExists(atPath: url.path + "/Package.swift") { return url.path }
    }
    return FileManager.default.currentDirectoryPath
}()

/// One `hark run` in this process on the `host` board: file-backed ALSA devices, the terminal key read from
/// a pipe the test writes to, a simulator as the service (the Live simulator unless the configuration's `service`
/// lines say another backend's).
final class ApplianceHarness: Sendable {
    let directory: String
    /// The configuration's lines that choose and point to the service.
    let service: String
    let logs = LogCapture()
    let shown = Mutex<[ShownState]>([])
    private let pipeEnds: (read: Int32, write: Int32)

    convenience init(microphone: [Int16], simulator: LiveSimulator) throws {
        try self.init(microphone: microphone, service: "gemini:\n  endpoint: \(simulator.baseURL)")
    }

    init(microphone: [Int16], service: String) throws {
        directory = FileManager.default.temporaryDirectory.path + "/hark-appliance-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try PCM16.bytes(microphone).write(to: URL(fileURLWithPath: directory + "/mic.raw"))
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { throw POSIXError(.EIO) }
        pipeEnds = (ends[0], ends[1])
        self.service = service
    }

    deinit {
        close(pipeEnds.read)
        close(pipeEnds.write)
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// The configuration file's text for `mode`, with everything pointing into the test's folder.
    /// `trigger` is `session.trigger`: voice unless a test is about the wake word.
    /// `speakerDevice`, when given, is an ALSA playback PCM used instead of the speaker file (a device that keeps
    /// running between sounds, as a sound card does).
    func configuration(mode: String, extra: String = "", trigger: String = "voice", speakerDevice: String? = nil)
        -> String
    {
        let speaker = speakerDevice.map { "playback_device: \"\($0)\"" } ?? "playback_file: \(directory)/speaker.raw"
        return """
            mode: \(mode)
            board: host
            board_dir: \(repositoryRoot)/board
            state_dir: \(directory)
            status_file: \(directory)/status.json
            \(service)
            audio:
              capture_file: \(directory)/mic.raw
              \(speaker)
              file_pace: 4
              volume: 100
            session:
              idle_timeout: 30s
              trigger: \(trigger)
            \(extra)
            """
    }

    /// Presses (or releases) the terminal key: the host board's button.
    func toggleButton() {
        var space = UInt8(ascii: " ")
        _ = write(pipeEnds.write, &space, 1)
    }

    /// Runs the appliance until it stops by itself (`turns` answers played) and returns its exit code.
    func run(
        mode: String,
        turns: Int?,
        extra: String = "",
        trigger: String = "voice",
        duration: Duration? = nil,
        environment: [String: String] = [:],
        stopWhenShown stopState: String? = nil,
        speakerDevice: String? = nil
    ) async throws -> Int32 {
        let loaded = try ConfigurationLoader.parse(
            configuration(mode: mode, extra: extra, trigger: trigger, speakerDevice: speakerDevice),
            file: directory + "/hark.yaml",
            folder: directory,
            environment: environment
        )
        var options = ApplianceRunner.Options(configPath: nil, environment: environment)
        options.stopAfterTurns = turns
        options.duration = duration
        options.handleSignals = false
        options.terminalInput = pipeEnds.read
        options.terminalOutput = -1  // no LEDs drawn
        options.openAttempts = 1
        // Stops the run the way SIGTERM does, the first time the LEDs show `stopState`.
        let stop = StopSwitch()
        if stopState != nil { options.stopSwitch = stop }
        let runner = ApplianceRunner(options: options, notifier: SilentNotifier(), logger: logs.logger("hark")) {
            [self] state in
            self.shown.withLock { $0.append(state) }
            if state.name == stopState { stop.pull() }
        }
        return await runner.run(loaded)
    }

    /// What the speaker played.
    var played: [Int16] {
        PCM16.samples((try? Data(contentsOf: URL(fileURLWithPath: directory + "/speaker.raw"))) ?? Data())
    }

    /// The shown states, in order, without repeats.
    var states: [String] { shown.withLock { $0.map(\.name) } }
}

extension Array where Element: Equatable {
    /// True when `other` appears in order within this array (not necessarily adjacent).
    func containsInOrder(_ other: [Element]) -> Bool {
        var index = startIndex
        for element in other {
            guard let found = self[index...].firstIndex(of: element) else { return false }
            index = found + 1
        }
        return true
    }
}

@Suite(.timeLimit(.minutes(2))) struct ApplianceTests {
    @Test func aPushToTalkTurnSendsActivityAndPlaysTheAnswer() async throws {
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        // The microphone hears speech throughout; only what is said while the button is held is sent.
        let harness = try ApplianceHarness(
            microphone: TestSignals.speech(total: .seconds(30), burst: .seconds(30), gap: .zero),
            simulator: simulator
        )
        let run = Task { try await harness.run(mode: "push-to-talk", turns: 1) }
        harness.toggleButton()  // press
        _ = try await simulator.recorder.waitForAudio(samples: 16_000 * 3 / 2, within: .seconds(20))
        harness.toggleButton()  // release
        let code = try await withDeadline(.seconds(60), "the appliance to stop") { try await run.value }
        #expect(code == 0, "\(harness.logs.all.joined(separator: "\n"))")

        let connection = try #require(simulator.recorder.snapshot().connection(1))
        #expect(connection.setup?.realtimeInputConfig?.automaticActivityDetection?.disabled == true)
        let kinds = connection.messageKinds
        let start = try #require(kinds.firstIndex(of: "realtimeInput.activityStart"))
        let end = try #require(kinds.firstIndex(of: "realtimeInput.activityEnd"))
        let audio = try #require(kinds.firstIndex(of: "realtimeInput.audio"))
        #expect(start < audio && audio < end)
        #expect(connection.audioSeconds >= 1.5)
        #expect(connection.turns.first?.outcome == "completed")
        // The device tools were declared.
        let declared = connection.setup?.tools?.first?.functionDeclarations?.map(\.name) ?? []
        #expect(declared.contains("set_volume") && declared.contains("get_time"))

        // The speaker played the whole answer (its earcon first), with nothing lost.
        let beep = ModelAudio.beep(turn: 1).filter { $0 != 0 }
        let played = harness.played.filter { $0 != 0 }
        let answerSeconds = connection.turns.first?.answerAudioSeconds ?? 0
        #expect(answerSeconds > 1)
        #expect(played.count >= beep.count * Int(answerSeconds * 24_000) / ModelAudio.beepSamples)
        #expect(Array(played.suffix(beep.count)) == beep)

        #expect(harness.states.containsInOrder(["booting", "idle", "listening", "thinking", "speaking", "idle"]))
        let status = try ApplianceStatus.read(from: harness.directory + "/status.json")
        #expect(status.sessions == 1)
        #expect(status.mode == "push-to-talk")
        // Its own latency figures: each live frame from its capture to the wire (at least the 1.5 s awaited
        // above, in 20 ms frames), and the answer from its arrival to the speaker.
        let wire = try #require(status.captureToWire)
        #expect(wire.count >= 75)
        #expect(wire.p50 > 0 && wire.p50 <= wire.p99 && wire.p99 <= wire.max && wire.max < 5_000)
        let speaker = try #require(status.receivedToSpeaker)
        #expect(speaker.count > 0 && speaker.p50 > 0)
    }

    @Test func aSpeakerTurnOpensOnSpeechAndTheUserCanBargeIn() async throws {
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        // Speech, a pause in which the agent starts answering, speech again over the answer, then quiet. The first
        // utterance is long, so its answer (1 s + 3 s) still plays when the second begins, even on a loaded machine.
        var microphone = TestSignals.speech(
            total: .milliseconds(7_500),
            burst: .milliseconds(3000),
            gap: .milliseconds(1500)
        )
        microphone += [Int16](repeating: 0, count: 16_000 * 10)
        let harness = try ApplianceHarness(microphone: microphone, simulator: simulator)
        let code = try await withDeadline(.seconds(60), "the appliance to stop") {
            try await harness.run(mode: "speaker", turns: 1)
        }
        #expect(code == 0, "\(harness.logs.all.joined(separator: "\n"))")

        let connection = try #require(simulator.recorder.snapshot().connection(1))
        #expect(connection.setup?.realtimeInputConfig?.automaticActivityDetection?.disabled != true)
        #expect(connection.setup?.contextWindowCompression != nil)
        // The first answer was interrupted by the second utterance; the second was answered in full.
        #expect(connection.sentMessageKinds.contains("serverContent.interrupted"))
        #expect(connection.turns.map(\.outcome).prefix(2) == ["interrupted", "completed"])
        // The pre-roll went first: the session heard the whole first utterance.
        #expect((connection.turns.first?.speechSeconds ?? 0) >= 1.4)
        // The speaker played the second answer to its end, and less than all of the first.
        let second = ModelAudio.beep(turn: 2).filter { $0 != 0 }
        let played = harness.played.filter { $0 != 0 }
        #expect(Array(played.suffix(second.count)) == second)
        let firstAnswer = Int((connection.turns.first?.answerAudioSeconds ?? 0) * 24_000)
        #expect(firstAnswer > 0)
        #expect(
            harness.states.containsInOrder(["idle", "listening", "speaking", "listening", "speaking", "listening"])
        )
    }

    @Test func aStopWhileTheAgentSpeaksClosesTheConnectionOnceAndDoesNotResume() async throws {
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        var microphone = TestSignals.speech(total: .milliseconds(1600), burst: .milliseconds(1600), gap: .zero)
        microphone += [Int16](repeating: 0, count: 16_000 * 30)
        let harness = try ApplianceHarness(microphone: microphone, simulator: simulator)
        // SIGTERM's path: a graceful shutdown of the service group, here while the answer plays.
        let code = try await withDeadline(.seconds(60), "the run") {
            try await harness.run(mode: "speaker", turns: nil, stopWhenShown: "speaking")
        }
        #expect(code == 0, "\(harness.logs.all.joined(separator: "\n"))")
        let connections = simulator.recorder.snapshot().connections
        #expect(connections.count == 1, "\(harness.logs.all.joined(separator: "\n"))")
        #expect(connections.first?.close?.initiator == "client")
        #expect(connections.first?.close?.code == 1000)
        #expect(!harness.logs.all.contains { $0.contains("switching to a new connection") })
    }

    @Test func aStopBeforeTheSetDurationIsUpEndsTheRunCleanly() async throws {
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        let harness = try ApplianceHarness(microphone: [Int16](repeating: 0, count: 16_000 * 10), simulator: simulator)
        // SIGTERM's path with --duration's timer in the group: the group stops the timer before the core, and
        // the timer must not stop the core as well (the group would fail: "a service has finished unexpectedly").
        let code = try await withDeadline(.seconds(30), "the run") {
            try await harness.run(mode: "speaker", turns: nil, duration: .seconds(60), stopWhenShown: "idle")
        }
        #expect(code == 0, "\(harness.logs.all.joined(separator: "\n"))")
        #expect(!harness.logs.all.contains { $0.contains("finished unexpectedly") })
    }

    @Test func aRestartResumesTheConversationWithTheStoredHandle() async throws {
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        var microphone = TestSignals.speech(total: .milliseconds(1600), burst: .milliseconds(1600), gap: .zero)
        microphone += [Int16](repeating: 0, count: 16_000 * 10)
        let harness = try ApplianceHarness(microphone: microphone, simulator: simulator)
        #expect(
            try await withDeadline(.seconds(60), "the first run") { try await harness.run(mode: "speaker", turns: 1) }
                == 0
        )
        let issued = try #require(simulator.recorder.snapshot().connection(1)?.lastHandleIssued)
        // The process restarts (same state folder): its first session resumes the conversation.
        #expect(
            try await withDeadline(.seconds(60), "the second run") { try await harness.run(mode: "speaker", turns: 1) }
                == 0
        )
        let second = try #require(simulator.recorder.snapshot().connection(2))
        #expect(second.resumptionHandle == issued)
        #expect(second.resumed)
    }

    @Test func theKioskGreetsEachVisitorInAFreshConversation() async throws {
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        var microphone = TestSignals.speech(total: .milliseconds(1600), burst: .milliseconds(1600), gap: .zero)
        microphone += [Int16](repeating: 0, count: 16_000 * 10)
        let harness = try ApplianceHarness(microphone: microphone, simulator: simulator)
        // A handle left by an earlier visitor must not be used.
        try ResumptionStore(path: harness.directory + "/resumption.json")
            .save(
                handle: "earlier-visitor",
                model: "models/gemini-2.5-flash-native-audio-preview-09-2025",
                now: Date().timeIntervalSince1970
            )
        let code = try await withDeadline(.seconds(60), "the kiosk run") {
            try await harness.run(
                mode: "kiosk",
                turns: 1,
                extra: "  greeting: Welcome the visitor in one short sentence."
            )
        }
        #expect(code == 0, "\(harness.logs.all.joined(separator: "\n"))")
        let connection = try #require(simulator.recorder.snapshot().connection(1))
        #expect(connection.resumptionHandle == nil)
        // The greeting goes first as a text turn, and its answer is the one played.
        #expect(connection.messageKinds.first { $0 != "setup" } == "clientContent")
        #expect(connection.turns.first?.kind == "text")
        #expect(connection.turns.first?.outcome == "completed")
    }

    @Test func theAgentCallsADeviceToolAndItActsOnTheDevice() async throws {
        let simulator = try await startSimulator {
            $0.scenario.toolCalls = [ScriptedToolCall(turn: 1, name: "set_volume", args: ["percent": 30])]
        }
        defer { Task { try? await simulator.stop() } }
        var microphone = TestSignals.speech(total: .milliseconds(1600), burst: .milliseconds(1600), gap: .zero)
        microphone += [Int16](repeating: 0, count: 16_000 * 10)
        let harness = try ApplianceHarness(microphone: microphone, simulator: simulator)
        let code = try await withDeadline(.seconds(60), "the run") { try await harness.run(mode: "speaker", turns: 1) }
        #expect(code == 0, "\(harness.logs.all.joined(separator: "\n"))")
        let connection = try #require(simulator.recorder.snapshot().connection(1))
        #expect(connection.toolResponseIDs.count == 1)
        #expect(connection.turns.first?.toolCalls == ["set_volume"])
        // The speaker's volume changed and was saved for the next start.
        let saved = try String(contentsOfFile: harness.directory + "/volume", encoding: .utf8)
        #expect(Double(saved.trimmingCharacters(in: .whitespacesAndNewlines)).map { abs($0 - 0.3) < 0.001 } == true)
        #expect(harness.logs.all.contains { $0.contains("tool call: set_volume") })
    }

    @Test func aRejectedKeyShowsTheErrorStateAndNeverTheKey() async throws {
        let simulator = try await startSimulator { $0.requiredKey = Secret("the-right-key") }
        defer { Task { try? await simulator.stop() } }
        var microphone = TestSignals.speech(total: .milliseconds(1600), burst: .milliseconds(1600), gap: .zero)
        microphone += [Int16](repeating: 0, count: 16_000 * 30)
        let harness = try ApplianceHarness(microphone: microphone, simulator: simulator)
        let keyFile = harness.directory + "/gemini-api-key"
        try "a-wrong-key-4711".write(toFile: keyFile, atomically: true, encoding: .utf8)
        let code = try await withDeadline(.seconds(60), "the run") {
            // Until the error shows (on a loaded machine that may take a while), not for a set time.
            try await harness.run(
                mode: "speaker",
                turns: nil,
                duration: .seconds(40),
                environment: ["HARK_GEMINI_API_KEY_FILE": keyFile],
                stopWhenShown: "error"
            )
        }
        #expect(code == 0, "\(harness.logs.all.joined(separator: "\n"))")
        #expect(harness.states.containsInOrder(["idle", "offline", "error"]), "\(harness.states)")
        #expect(harness.logs.all.contains { $0.contains("state: error: API key rejected") })
        #expect(!harness.logs.all.contains { $0.contains("a-wrong-key-4711") })
        let status = try String(contentsOfFile: harness.directory + "/status.json", encoding: .utf8)
        #expect(!status.contains("a-wrong-key-4711"))
        // It does not hammer a service that said no: one refused connection in the run.
        #expect(simulator.recorder.snapshot().connections.count == 1)
    }

    @Test func aMissingKeyForTheRealServiceIsAClearConfigurationError() async throws {
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        let harness = try ApplianceHarness(microphone: [], simulator: simulator)
        let loaded = try ConfigurationLoader.parse(
            "mode: speaker\nboard: host\nboard_dir: \(repositoryRoot)/board\n",
            file: harness.directory + "/hark.yaml",
            folder: harness.directory,
            environment: [:]
        )
        let runner = ApplianceRunner(
            options: .init(configPath: nil, environment: [:]),
            notifier: SilentNotifier(),
            logger: harness.logs.logger("hark")
        )
        // A configuration error: systemd is not to restart it (the next start fails the same way).
        #expect(await runner.run(loaded) == RunExit.configuration)
        #expect(harness.logs.all.contains { $0.contains("no Gemini API key") })
    }

    @Test func noBoardDetectedIsAFailureARestartMayMend() async throws {
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        let harness = try ApplianceHarness(microphone: [], simulator: simulator)
        // Only a board that is never detected: none matches this machine (its sound card may still be coming).
        let boards = harness.directory + "/boards"
        try FileManager.default.createDirectory(atPath: boards, withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            atPath: repositoryRoot + "/board/qemu-virt.yaml",
            toPath: boards + "/qemu-virt.yaml"
        )
        let loaded = try ConfigurationLoader.parse(
            "mode: speaker\nboard: auto\nboard_dir: \(boards)\n",
            file: harness.directory + "/hark.yaml",
            folder: harness.directory,
            environment: ["GEMINI_API_KEY": "test-key"]
        )
        let runner = ApplianceRunner(
            options: .init(configPath: nil, environment: ["GEMINI_API_KEY": "test-key"]),
            notifier: SilentNotifier(),
            logger: harness.logs.logger("hark")
        )
        #expect(await runner.run(loaded) == RunExit.failed)
        #expect(harness.logs.all.contains { $0.contains("no board detected") }, "\(harness.logs.all)")
    }
}
