import Foundation
import HarkLiveSimulator
import HarkTestKit
import Testing

/// Music in `hark run` end to end: a station named in the configuration, played through `hark media` on the control
/// socket, mixed into the one speaker path (found in what the speaker played), its status in `hark media status`,
/// stopped; a station that is not there and a URL the allow-list refuses are refused with a clear message.
@Suite(
    .timeLimit(.minutes(2)),
    .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/ffmpeg"), "needs the ffmpeg command")
)
struct MediaApplianceTests {
    @Test func aStationPlaysThroughTheSpeakerPathFromTheControlSocket() async throws {
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        let hark = try builtHark()
        let harness = try ApplianceHarness(microphone: [Int16](repeating: 0, count: 16_000 * 60), simulator: simulator)
        // A 440 Hz sine, stereo MP3 at 44.1 kHz, 6 s: decoded, mixed to mono 24 kHz, played.
        let tone = harness.directory + "/tone.mp3"
        let made = try await ChildProcess.run(
            "/usr/bin/ffmpeg",
            [
                "-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i", "sine=frequency=440:duration=6", "-ac", "2",
                "-ar", "44100", "-b:a", "128k", tone,
            ]
        )
        #expect(made.status == 0, "\(made.text)")
        let socket = harness.directory + "/control.sock"
        let run = Task {
            try await harness.run(
                mode: "speaker",
                turns: nil,
                extra: """
                    control_socket: \(socket)
                    media:
                      stations:
                        Test Tone: \(tone)
                      allow_schemes: file
                    """,
                duration: .seconds(20)
            )
        }
        try await withDeadline(.seconds(30), "the control socket") {
            while !FileManager.default.fileExists(atPath: socket) { try await Task.sleep(for: .milliseconds(20)) }
        }
        let missing = try await ChildProcess.run(hark, ["media", "play", "jazz", "--control-socket", socket])
        #expect(missing.status == 1)
        #expect(missing.text.contains("no station called jazz; the stations are Test Tone"), "\(missing.text)")
        let refused = try await ChildProcess.run(
            hark,
            ["media", "play", "https://radio.example/live", "--control-socket", socket]
        )
        #expect(refused.status == 1)
        #expect(refused.text.contains("media.allow_schemes"), "\(refused.text)")

        let played = try await ChildProcess.run(hark, ["media", "play", "test tone", "--control-socket", socket])
        #expect(played.status == 0, "\(played.text)")
        #expect(played.text.contains("Playing Test Tone"), "\(played.text)")
        let status = try await ChildProcess.run(hark, ["media", "status", "--control-socket", socket])
        #expect(status.text.contains("Test Tone"), "\(status.text)")
        #expect(status.text.contains("mp3"), "\(status.text)")
        // The file device plays 4 times faster than real time: 6 s of audio in 1.5 s. Wait for its end, then stop.
        let ended = try await withDeadline(.seconds(20), "the tone's end") {
            while true {
                let text = try await ChildProcess.run(hark, ["media", "status", "--control-socket", socket]).text
                if text.contains("(ended)") { return text }
                try await Task.sleep(for: .milliseconds(200))
            }
        }
        #expect(ended.contains("stopped Test Tone"), "\(ended)")
        let stopped = try await ChildProcess.run(hark, ["media", "stop", "--control-socket", socket])
        #expect(stopped.status == 1)  // nothing plays any more
        run.cancel()
        _ = try? await withDeadline(.seconds(30), "the appliance to stop") { try await run.value }

        // The speaker played the tone: a stretch with a level well above silence whose zero crossings say 440 Hz.
        let samples = harness.played
        let window = 12_000
        let start = try #require(
            stride(from: 0, to: max(0, samples.count - window), by: window).first { start in
                samples[start..<start + window].map { abs(Int($0)) }.max() ?? 0 > 2000
            },
            "no loud stretch in the \(samples.count) samples played"
        )
        let stretch = samples[start + window..<min(samples.count, start + 2 * window)]
        var crossings = 0
        for index in stretch.indices.dropFirst() where (stretch[index - 1] < 0) != (stretch[index] < 0) {
            crossings += 1
        }
        let frequency = Double(crossings) / 2 / (Double(stretch.count) / 24_000)
        #expect(abs(frequency - 440) < 10, "measured \(frequency) Hz")
    }
}
