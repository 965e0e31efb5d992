import Foundation
import HarkAppliance
import HarkCore
import HarkLiveSimulator
import HarkSimulatorKit
import HarkTestKit
import Testing

/// Timers in `hark run` end to end: set by the agent's tool call (the Live simulator's scripted call), kept across
/// a restart in the state folder, rung at the next start with no session and no network needed, heard in what the
/// speaker played, and stopped by the button.
@Suite(.timeLimit(.minutes(2))) struct TimerApplianceTests {
    @Test func aTimerSetByTheAgentRingsAfterARestartThroughTheSpeakerAndTheButtonStopsIt() async throws {
        let simulator = try await startSimulator {
            $0.scenario.toolCalls = [
                ScriptedToolCall(turn: 1, name: "set_timer", args: ["seconds": 1, "label": "pasta"])
            ]
        }
        defer { Task { try? await simulator.stop() } }
        var microphone = TestSignals.speech(total: .milliseconds(1600), burst: .milliseconds(1600), gap: .zero)
        microphone += [Int16](repeating: 0, count: 16_000 * 10)
        let harness = try ApplianceHarness(microphone: microphone, simulator: simulator)
        let first = try await withDeadline(.seconds(60), "the first run") {
            try await harness.run(mode: "speaker", turns: 1)
        }
        #expect(first == 0, "\(harness.logs.all.joined(separator: "\n"))")
        #expect(simulator.recorder.snapshot().connection(1)?.turns.first?.toolCalls == ["set_timer"])
        let stored = try String(contentsOfFile: harness.directory + "/timers.json", encoding: .utf8)
        #expect(stored.contains("\"pasta\""), "\(stored)")
        // Make sure the deadline has passed while the device is "off" (the first run may end within the second).
        let deadline = Date().addingTimeInterval(1.5)
        while Date() < deadline { try await Task.sleep(for: .milliseconds(100)) }

        // The second start: no speech, the simulator never needed. The timer rings at once (missed while off);
        // a tap on the button stops it.
        let quiet = try ApplianceHarness(microphone: [Int16](repeating: 0, count: 16_000 * 60), simulator: simulator)
        try FileManager.default.copyItem(
            atPath: harness.directory + "/timers.json",
            toPath: quiet.directory + "/timers.json"
        )
        let presser = Task {
            // Waits (with a deadline) until the LEDs show the alert, then taps the button: press and release.
            let until = ContinuousClock.now + .seconds(30)
            while !quiet.states.contains("alert"), ContinuousClock.now < until { await Task.yield() }
            quiet.toggleButton()
            quiet.toggleButton()
        }
        let second = try await withDeadline(.seconds(60), "the second run") {
            try await quiet.run(mode: "speaker", turns: nil, duration: .seconds(40), stopWhenShown: "idle")
        }
        _ = await presser.value
        let logs = quiet.logs.all.joined(separator: "\n")
        #expect(second == 0, "\(logs)")
        #expect(logs.contains("the pasta timer rings late: it was due at"), "\(logs)")
        #expect(logs.contains("stopped the pasta timer (the button)"), "\(logs)")
        #expect(quiet.states.containsInOrder(["alert", "idle"]), "\(quiet.states)")
        #expect(simulator.recorder.snapshot().connections.count == 1)  // no session opened for the ring
        // The speaker played the alert itself: a stretch of its loop, sample for sample (volume 100; the alert at
        // timers.volume 70 of the 0.8 full-scale bound).
        let alert = Earcon.alert(sampleRate: 24_000, level: 0.7 * 0.8).samples
        let played = quiet.played
        let probe = Array(alert[1000..<1100])
        let found = (0..<max(0, played.count - probe.count)).first { start in
            played[start] == probe[0] && Array(played[start..<start + probe.count]) == probe
        }
        #expect(found != nil, "the alert is not in the \(played.count) samples played")
    }
}
