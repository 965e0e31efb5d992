import Foundation
import HarkAppliance
import HarkCore
import HarkLiveSimulator
import HarkSimulatorKit
import HarkTestKit
import Testing

/// Timers in `hark run` end to end: set by the agent's tool call (the Live simulator's scripted call), kept across
/// a restart in the state folder, rung at the next start with no session and no network needed, heard in what the
/// speaker played, and stopped by the button; and one that comes due while the appliance runs, found in the audio
/// time of a speaker stream that keeps running within 50 ms of its second.
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
        // Late at this start, or (on a machine slow enough that it came due before the first run ended) still ringing
        // from before the restart.
        #expect(
            logs.contains("the pasta timer rings late: it was due at") || logs.contains("the pasta timer still rings"),
            "\(logs)"
        )
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

    @Test func aTimerRingsAtItsSecondInTheAudioTimeOfAStreamThatKeepsRunning() async throws {
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        let harness = try ApplianceHarness(microphone: [Int16](repeating: 0, count: 16_000 * 60), simulator: simulator)
        // The speaker is alsa-lib's file plugin over null under its own name: not the speaker file, so the stream
        // keeps running on silence from the moment it opens, paced by the wall clock (24 kHz mono S16 on the host
        // board). Its position in audio time is then the bytes written.
        let speaker = harness.directory + "/stream.raw"
        let due = Date().timeIntervalSince1970 + 5
        var book = TimerBook()
        _ = try book.setTimer(seconds: 5, label: "pasta", now: due - 5)
        try TimerStore(path: harness.directory + "/timers.json").save(book)
        // Where the stream is, against the wall clock, while it runs.
        let positions = Task {
            var seen: [(wall: Double, frames: Int)] = []
            let until = ContinuousClock.now + .seconds(9)
            while ContinuousClock.now < until {
                let size = (try? FileManager.default.attributesOfItem(atPath: speaker)[.size] as? Int) ?? nil
                if let size, size > 0 { seen.append((Date().timeIntervalSince1970, size / 2)) }
                try? await Task.sleep(for: .milliseconds(5))
            }
            return seen
        }
        let code = try await withDeadline(.seconds(60), "the run") {
            try await harness.run(
                mode: "speaker",
                turns: nil,
                duration: .seconds(8),
                speakerDevice: "file:FILE=\(speaker),FORMAT=raw"
            )
        }
        let logs = harness.logs.all.joined(separator: "\n")
        #expect(code == 0, "\(logs)")
        #expect(logs.contains("the pasta timer rings"), "\(logs)")
        let seen = await positions.value
        let written = PCM16.samples((try? Data(contentsOf: URL(fileURLWithPath: speaker))) ?? Data())
        let onset = try #require(written.firstIndex { $0 != 0 }, "no alert in the \(written.count) samples written")
        // Where the stream was in audio time at the due second, from the readings of the half second before it:
        // each says the stream's frame 0 was due `frames / rate` before the reading; the earliest of those is the
        // reading least delayed (the writer sleeps up to a period between its writes). Readings from just before
        // the due second, not from the start: a late playback thread underruns and restarts the stream as a card
        // would, and what it lost moves the stream's audio time against the wall clock for good.
        // alsa-lib's file plugin writes its file one device buffer behind the stream (it keeps the newest buffer
        // of frames and writes the oldest period out as each new one comes): what was written is the file's
        // length plus that buffer, the one the log says was negotiated.
        let opened = try #require(logs.components(separatedBy: "playback file:").last)
        let buffer = try #require(
            opened.components(separatedBy: "buffer ").dropFirst().first?.split(separator: " ").first.flatMap { Int($0) }
        )
        let near = seen.filter { $0.wall > due - 0.6 && $0.wall < due - 0.05 }
        let start = try #require(
            near.map { $0.wall - Double($0.frames + buffer) / 24_000 }.min(),
            "\(seen.count) readings"
        )
        let expected = (due - start) * 24_000
        let offset = (Double(onset) - expected) / 24_000
        #expect(abs(offset) <= 0.05, "the ring began \(Int((offset * 1000).rounded())) ms of audio from its second")
    }
}
