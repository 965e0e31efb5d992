import Foundation
import HarkTestKit
import Testing

/// `hark doctor` end to end: the built `hark` binary in a child process whose ALSA configuration
/// (ALSA_CONFIG_PATH, only in the child) defines a file-backed PCM, so capture, the 1 s level check
/// and playback run the real alsa-lib code paths without a sound card.
@Suite struct DoctorCommandTests {
    static let hark = BuiltProducts.executable("hark")

    func runDoctor(_ arguments: [String], environment: [String: String]) async throws -> (Int32, String) {
        let child = try await ChildProcess.run(
            Self.hark!,
            ["doctor"] + arguments,
            environment: ChildProcess.inheritedEnvironment.merging(environment) { $1 }
        )
        return (child.status, child.text)
    }

    @Test(
        .enabled(
            if: DoctorCommandTests.hark != nil,
            "needs the hark binary next to the test bundle: build it with the tests (swift build --build-tests)"
        )
    )
    func reportsEachItemAndExitsZeroWhenTheBoardWorks() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "hark-doctor-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        )
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        // Three seconds of a 16 kHz tone at a quarter of full scale, as the microphone.
        var samples = Data()
        for index in 0..<48_000 {
            let value = Int16(8192 * sin(Double(index) * 2 * Double.pi * 440 / 16_000))
            withUnsafeBytes(of: value.littleEndian) { samples.append(contentsOf: $0) }
        }
        try samples.write(to: folder.appendingPathComponent("mic.raw"))
        let config = """
            </usr/share/alsa/alsa.conf>
            pcm.harkdoctor {
                type file
                slave.pcm null
                file "/dev/null"
                infile "\(folder.path)/mic.raw"
                format raw
            }
            """
        try Data(config.utf8).write(to: folder.appendingPathComponent("asound.conf"))
        let boards = folder.appendingPathComponent("board")
        try FileManager.default.createDirectory(at: boards, withIntermediateDirectories: true)
        let board = """
            name: bench
            description: a file-backed microphone and a null speaker
            audio:
              capture: {pcm: harkdoctor, channels: 1, rate: 16000, channel_map: [0]}
              playback: {pcm: harkdoctor, channels: 1, rate: 16000, channel_map: [0]}
              default_volume: 50
            button: {kind: none}
            leds: {kind: none}
            """
        try Data(board.utf8).write(to: boards.appendingPathComponent("bench.yaml"))
        let environment = ["ALSA_CONFIG_PATH": folder.path + "/asound.conf"]

        let (status, text) = try await runDoctor(
            ["--board", "bench", "--board-dir", boards.path],
            environment: environment
        )
        #expect(status == 0, "\(text)")
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("[ok  ] board: bench selected") })
        #expect(lines.contains("[ok  ] button: none on this board (push-to-talk is unavailable)"))
        #expect(lines.contains("[ok  ] LEDs: none on this board"))
        // The wake word: timed where scripts/setup installed its runtime, else a warning that says what to install.
        let wake = try #require(lines.first { $0.contains("] wake word: ") }, "\(text)")
        #expect(
            wake.hasPrefix("[ok  ] wake word: okay_nabu (microWakeWord, Apache-2.0) from ")
                && wake.hasSuffix("% of one core)")
                || wake.hasPrefix("[warn] wake word: ") && wake.contains("scripts/setup"),
            "\(wake)"
        )
        let capture = try #require(lines.first { $0.hasPrefix("[ok  ] capture: harkdoctor (S16_LE 1 ch 16000 Hz") })
        #expect(capture.hasSuffix("% of full scale over 1000 ms"), "\(capture)")
        // The tone is a quarter of full scale; the capture front end may shape it a little.
        let peak = capture.split(separator: " ").firstIndex(of: "peak").flatMap { index in
            Int(capture.split(separator: " ")[index + 1].dropLast())
        }
        #expect((15...35).contains(peak ?? -1), "\(capture)")
        #expect(lines.contains { $0.hasPrefix("[ok  ] playback: harkdoctor (S16_LE 1 ch 16000 Hz") })

        // A PCM that does not exist fails, says how to fix it, and the exit code says the appliance cannot run.
        let broken = board.replacingOccurrences(of: "playback: {pcm: harkdoctor", with: "playback: {pcm: nosuchpcm")
        try Data(broken.utf8).write(to: boards.appendingPathComponent("bench.yaml"))
        let (failed, failure) = try await runDoctor(
            ["--board", "bench", "--board-dir", boards.path],
            environment: environment
        )
        #expect(failed == 1)
        #expect(failure.contains("[FAIL] playback: nosuchpcm: "))
        #expect(failure.contains("(fix: is the sound card there (aplay -l)?"))
    }
}
