import Foundation
import HarkAppliance
import HarkAudio
import HarkCore
import HarkLiveSimulator
import HarkSimulatorKit
import HarkTestKit
import HarkWake
import Testing

/// `hark run` in speaker mode on the host board, listening for a wake word with the real detector: a file
/// microphone says "hey jarvis, what time is it" in one breath (Tests/Fixtures/wake, spoken by espeak-ng), heard by
/// openWakeWord's hey_jarvis; and "okay nabu, what time is it" (spoken by flite), heard by the default word,
/// microWakeWord's okay_nabu.
@Suite(
    .timeLimit(.minutes(2)),
    .enabled(
        if: (try? WakeRuntime.locate(environment: ProcessInfo.processInfo.environment)) != nil,
        "the wake-word runtime is not installed: scripts/setup puts it in .hark-lib"
    )
)
struct WakeApplianceTests {
    static let fixtures: String = {
        var path = #filePath
        for _ in 0..<3 { path = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)]) }
        return path + "/Tests/Fixtures/wake"
    }()

    /// The clip, then seconds of silence for the answer.
    func microphone(_ clip: String, silence seconds: Int) throws -> (clip: [Int16], all: [Int16]) {
        let samples = try WAVFile.read(path: "\(Self.fixtures)/\(clip).wav").samples
        return (samples, samples + [Int16](repeating: 0, count: 16_000 * seconds))
    }

    /// The front end off, so the audio sent is the file's own samples and can be found in it.
    let plainAudio = ["HARK_AUDIO_ECHO_CANCELLATION": "false", "HARK_AUDIO_NOISE_SUPPRESSION": "false"]

    @Test func theWakeWordOpensOneSessionAndTheQuestionAfterItIsSentFirst() async throws {
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        let (clip, all) = try microphone("hey-jarvis", silence: 12)
        let harness = try ApplianceHarness(microphone: all, simulator: simulator)
        let code = try await withDeadline(.seconds(90), "the appliance to stop") {
            try await harness.run(
                mode: "speaker",
                turns: 1,
                extra: "wake:\n  words: [oww_hey_jarvis]\n",
                trigger: "wake",
                environment: plainAudio
            )
        }
        let logs = harness.logs.all.joined(separator: "\n")
        #expect(code == 0, "\(logs)")
        let snapshot = simulator.recorder.snapshot()
        #expect(snapshot.connections.count == 1, "\(logs)")
        let connection = try #require(snapshot.connection(1))
        #expect(connection.turns.first?.outcome == "completed")
        // The first audio sent is the clip from the pause after "hey jarvis," (1.46 to 1.67 s): none of the
        // question ("what time is it", from 1.67 s) is lost, and the wake word (0.52 to 1.46 s) is not sent.
        // (espeak's pauses are digital silence: the sent audio is placed by its first sound.)
        let sentAudio = connection.firstAudio
        let sound = try #require(sentAudio.firstIndex { $0 != 0 })
        let probe = sentAudio[sound..<min(sound + 320, sentAudio.count)]
        #expect(probe.count == 320)
        let found = try #require(
            (0...(clip.count - probe.count)).first { start in clip[start..<(start + probe.count)].elementsEqual(probe) }
        )
        let offset = found - sound
        let seconds = Double(offset) / 16_000
        #expect(seconds >= 1.40 && seconds <= 1.67, "the sent audio starts at \(seconds) s")
        // Then everything after it, in order.
        let sent = sentAudio.prefix(clip.count - offset)
        let inOrder = sent.elementsEqual(clip[offset..<(offset + sent.count)])
        #expect(inOrder, "the sent audio is the clip from \(seconds) s on")
        // The appliance played the answer and says what it heard.
        #expect(harness.played.contains { $0 != 0 })
        #expect(harness.logs.all.contains { $0.contains("wake word oww_hey_jarvis") })
        let status = try ApplianceStatus.read(from: harness.directory + "/status.json")
        let wake = try #require(status.wake)
        #expect(wake.words == ["oww_hey_jarvis"])
        #expect(wake.detections == 1)
        #expect(wake.falseStarts == 0)
        #expect(wake.cpuSeconds > 0 && wake.audioSeconds > 2)
    }

    /// The default word, microWakeWord's okay_nabu: "okay nabu, what time is it" (flite; the word from 0.70 to
    /// 1.45 s, a pause, the question from 1.60 s) opens one session, and what is sent begins at the pause.
    @Test func theDefaultMicroWakeWordOpensASessionWithTheQuestion() async throws {
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        let (clip, all) = try microphone("okay-nabu", silence: 12)
        let harness = try ApplianceHarness(microphone: all, simulator: simulator)
        let code = try await withDeadline(.seconds(90), "the appliance to stop") {
            try await harness.run(mode: "speaker", turns: 1, trigger: "wake", environment: plainAudio)
        }
        let logs = harness.logs.all.joined(separator: "\n")
        #expect(code == 0, "\(logs)")
        #expect(harness.logs.all.contains { $0.contains("wake word okay_nabu") }, "\(logs)")
        let snapshot = simulator.recorder.snapshot()
        #expect(snapshot.connections.count == 1, "\(logs)")
        let sentAudio = try #require(snapshot.connection(1)).firstAudio
        let probe = sentAudio.prefix(320)
        #expect(probe.count == 320)
        let found = try #require(
            (0...(clip.count - probe.count)).first { start in clip[start..<(start + probe.count)].elementsEqual(probe) }
        )
        let seconds = Double(found) / 16_000
        #expect(seconds >= 1.40 && seconds <= 1.62, "the sent audio starts at \(seconds) s")
        let status = try ApplianceStatus.read(from: harness.directory + "/status.json")
        #expect(status.wake?.words == ["okay_nabu"] && status.wake?.detections == 1)
    }

    @Test func theSameQuestionWithoutTheWakeWordOpensNoSession() async throws {
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        let (_, all) = try microphone("hello-there", silence: 4)
        let harness = try ApplianceHarness(microphone: all, simulator: simulator)
        // At four times real time the 7.5 s file takes under 2 s; the run lasts longer.
        let code = try await withDeadline(.seconds(60), "the appliance to stop") {
            try await harness.run(mode: "speaker", turns: 1, trigger: "wake", duration: .seconds(4))
        }
        let logs = harness.logs.all.joined(separator: "\n")
        #expect(code == 0, "\(logs)")
        #expect(harness.logs.all.contains { $0.contains("listening for the wake word okay_nabu") }, "\(logs)")
        #expect(simulator.recorder.snapshot().connections.count == 0)
        let status = try ApplianceStatus.read(from: harness.directory + "/status.json")
        #expect(status.sessions == 0)
        #expect(status.wake?.detections == 0)
        #expect((status.wake?.audioSeconds ?? 0) > 5, "the detector heard the whole file")
    }

    @Test func theWakeWordStopsARingUnderHarkRunAndOpensNothing() async throws {
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        // A timer that came due while the device was off rings at the start; "hey jarvis" follows two seconds of
        // silence (half a second at the harness's file pace of 4).
        let (clip, _) = try microphone("hey-jarvis", silence: 0)
        let silence = [Int16](repeating: 0, count: 16_000 * 2)
        let harness = try ApplianceHarness(
            microphone: silence + clip + [Int16](repeating: 0, count: 16_000 * 40),
            simulator: simulator
        )
        var book = TimerBook()
        _ = try book.setTimer(seconds: 1, label: "pasta", now: Date().timeIntervalSince1970 - 10)
        try TimerStore(path: harness.directory + "/timers.json").save(book)
        let code = try await withDeadline(.seconds(90), "the appliance to stop") {
            try await harness.run(
                mode: "speaker",
                turns: nil,
                extra: "wake:\n  words: [oww_hey_jarvis]\n",
                trigger: "wake",
                duration: .seconds(40),
                environment: plainAudio,
                stopWhenShown: "idle"
            )
        }
        let logs = harness.logs.all.joined(separator: "\n")
        #expect(code == 0, "\(logs)")
        #expect(logs.contains("stopped the pasta timer (the wake word)"), "\(logs)")
        #expect(harness.states.containsInOrder(["alert", "idle"]), "\(harness.states)")
        // The wake word stopped the ring and did nothing else: no session, no question sent.
        #expect(simulator.recorder.snapshot().connections.count == 0)
        #expect(harness.played.contains { $0 != 0 }, "the alert was played")
    }
}
