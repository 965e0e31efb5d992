import HarkAudio
import HarkCore
import HarkTestKit
import HarkWake
import Testing

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// `hark wake` end to end: the built binary over the clips.
@Suite(.enabled(if: WakeFixtures.runtime != nil, "\(WakeFixtures.missing)"))
struct WakeCommandTests {
    private func hark(_ arguments: [String], environment: [String: String]? = nil) async throws -> ChildProcess? {
        guard let hark = BuiltProducts.executable("hark") else {
            Issue.record("no built hark next to the tests: swift build --build-tests")
            return nil
        }
        return try await ChildProcess.run(hark, ["wake"] + arguments, environment: environment, separateErrors: true)
    }

    @Test func printsDetectionsAndScores() async throws {
        let clip = WakeFixtures.folder + "/hey-jarvis.wav"
        guard
            let detections = try await hark(["--input", clip, "--word", "oww_hey_jarvis", "--word", "oww_okay_nabu"])
        else {
            return
        }
        #expect(detections.status == 0, "\(detections.errorText)")
        let lines = detections.text.split(separator: "\n")
        #expect(lines.count == 1 && lines[0].hasPrefix("1.79 oww_hey_jarvis 0.9"), "\(detections.text)")

        guard let scores = try await hark(["--input", clip, "--scores", "--word", "oww_hey_jarvis"]) else { return }
        #expect(scores.status == 0, "\(scores.errorText)")
        let printed = scores.text.split(separator: "\n").map { $0.split(separator: " ") }
        let reference = try WakeFixtures.reference("hey-jarvis").filter { $0.word == "oww_hey_jarvis" }
        #expect(printed.count == reference.count)
        for (fields, frame) in zip(printed, reference) {
            #expect(fields.count == 3 && fields[1] == "oww_hey_jarvis")
            #expect(Double(fields[0]) == frame.seconds, "\(fields)")
            #expect(abs((Double(fields[2]) ?? -1) - frame.probability) <= 1e-4, "\(fields) vs \(frame)")
        }

        let negative = try await hark(["--input", WakeFixtures.folder + "/hello-there.wav"])
        #expect(negative?.status == 0)
        #expect(negative?.text == "")

        // Where the appliance would begin sending: in the pause after "jarvis," (1.46 to 1.67 s), before "what".
        guard let start = try await hark(["--input", clip, "--question-start", "--word", "oww_hey_jarvis"]) else {
            return
        }
        let fields = start.text.split(separator: "\n").map { $0.split(separator: " ") }
        #expect(fields.count == 1 && fields[0].count == 4 && fields[0][1] == "oww_hey_jarvis", "\(start.text)")
        let from = try #require(fields.first.flatMap { $0.count == 4 ? Double($0[3]) : nil })
        #expect(from > 1.46 && from < 1.67, "from \(from) s")
        let both = try await hark(["--input", clip, "--question-start", "--scores"])
        #expect(both?.status == 2)
    }

    /// The front end: noise suppression keeps the detection; with the speaker playing the other clip loudly
    /// at the microphone, the echo canceller given what it played finds the word the raw audio hides.
    @Test func theFrontEndHearsAsTheApplianceDoes() async throws {
        let clip = WakeFixtures.folder + "/hey-jarvis.wav"
        guard let plain = try await hark(["--input", clip, "--front-end", "--word", "oww_hey_jarvis"]) else { return }
        #expect(plain.status == 0, "\(plain.errorText)")
        #expect(plain.text.hasPrefix("1.") && plain.text.contains(" oww_hey_jarvis 0."), "\(plain.text)")

        // The microphone hears the talker and, as loud, the speaker playing other speech 30 ms late;
        // the speaker has been playing for 4 s when the talker begins (the canceller has adapted, as on a device).
        let talker = [Int16](repeating: 0, count: 64_000) + (try WakeFixtures.samples("hey-jarvis"))
        let far = try WakeFixtures.samples("hello-there")
        let farLoud = far + far
        var microphone = talker
        for index in microphone.indices where index >= 480 && index - 480 < farLoud.count {
            microphone[index] = Int16(clamping: Int(microphone[index]) + Int(farLoud[index - 480]))
        }
        let folder = FileManager.default.temporaryDirectory.path + "/hark-wake-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try WAVFile.write(path: folder + "/mic.wav", samples: microphone, sampleRate: 16_000)
        try WAVFile.write(path: folder + "/far.wav", samples: farLoud, sampleRate: 16_000)
        guard let scores = try await hark(["--input", folder + "/mic.wav", "--scores", "--word", "oww_hey_jarvis"])
        else {
            return
        }
        guard
            let cancelled = try await hark([
                "--input", folder + "/mic.wav", "--scores", "--word", "oww_hey_jarvis", "--playback",
                folder + "/far.wav", "--front-end-output", folder + "/heard.wav",
            ])
        else { return }
        #expect(scores.status == 0 && cancelled.status == 0, "\(cancelled.errorText)")
        func peak(_ text: String) -> Double {
            text.split(separator: "\n").compactMap { Double($0.split(separator: " ").last ?? "") }.max() ?? 0
        }
        #expect(peak(scores.text) < 0.5, "raw \(peak(scores.text))")
        #expect(peak(cancelled.text) > 0.9, "cancelled \(peak(cancelled.text))")
        // What the detector heard, kept: as long as the recording, and in the 4 s of the speaker alone (after the
        // first second, the canceller's adaptation) the echo is far below the microphone's (here over 10 dB).
        let heard = try WAVFile.read(path: folder + "/heard.wav")
        #expect(heard.sampleRate == 16_000 && heard.samples.count == microphone.count)
        func energy(_ samples: ArraySlice<Int16>) -> Double { samples.reduce(0) { $0 + Double($1) * Double($1) } }
        let echoAlone = 16_000..<64_000
        #expect(energy(heard.samples[echoAlone]) * 10 < energy(microphone[echoAlone]))

        let missing = try await hark(["--input", clip, "--playback", folder + "/absent.wav"])
        #expect(missing?.status == 2)
        #expect(missing?.errorText.contains("cannot use the playback") == true)
    }

    /// Any rate and channel count: the clip as 48 kHz stereo is converted to 16 kHz mono and still detected.
    @Test func convertsTheInput() async throws {
        let samples = try WakeFixtures.samples("hey-jarvis")
        var stereo: [Int16] = []
        stereo.reserveCapacity(samples.count * 6)
        for sample in samples {
            for _ in 0..<3 { stereo += [sample, sample] }
        }
        let path = FileManager.default.temporaryDirectory.path + "/hark-wake-\(UUID().uuidString).wav"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try WAVFile.write(path: path, samples: stereo, sampleRate: 48_000, channels: 2)
        guard let result = try await hark(["--input", path, "--word", "oww_hey_jarvis"]) else { return }
        #expect(result.status == 0, "\(result.errorText)")
        let lines = result.text.split(separator: "\n")
        #expect(lines.count == 1 && lines.first?.contains(" oww_hey_jarvis ") == true, "\(result.text)")
    }

    /// `--list`: every built-in word with its family and licence (microWakeWord's Apache-2.0, openWakeWord's
    /// non-commercial), a microWakeWord word's threshold from its manifest, the default named; and the default word,
    /// microWakeWord's okay_nabu, fires on the clip that says it where its reference does (1.55 s).
    @Test func listsTheBuiltInWordsWithTheirLicences() async throws {
        guard let listed = try await hark(["--list"]) else { return }
        #expect(listed.status == 0, "\(listed.errorText)")
        let lines = listed.text.split(separator: "\n")
        for name in WakeRuntime.builtInWords {
            let line = lines.first { $0.hasPrefix(name + " ") } ?? ""
            let micro = !name.hasPrefix("oww_")
            #expect(line.contains(micro ? "microWakeWord" : "openWakeWord"), "\(line)")
            #expect(line.contains(micro ? "Apache-2.0" : "CC BY-NC-SA 4.0 (non-commercial)"), "\(line)")
        }
        #expect(lines.contains { $0.hasPrefix("okay_nabu ") && $0.contains("0.85 over 5 runs") }, "\(listed.text)")
        #expect(listed.text.contains("The default is okay_nabu"))
        #expect(listed.text.contains("No stop model comes with Hark"))
        let both = try await hark(["--list", "--input", WakeFixtures.folder + "/okay-nabu.wav"])
        #expect(both?.status == 2)

        guard let detected = try await hark(["--input", WakeFixtures.folder + "/okay-nabu.wav"]) else { return }
        #expect(detected.status == 0 && detected.text.hasPrefix("1.55 okay_nabu 0.8"), "\(detected.text)")
    }

    @Test func aMissingRuntimeOrABadWordIsAClearError() async throws {
        let clip = WakeFixtures.folder + "/hey-jarvis.wav"
        var environment = ChildProcess.inheritedEnvironment
        environment["HARK_LIB_DIR"] = "/nonexistent/hark-lib"
        guard let missing = try await hark(["--input", clip], environment: environment) else { return }
        #expect(missing.status == 1)
        #expect(missing.errorText.contains("scripts/setup"), "\(missing.errorText)")

        // A word that is not one is a usage error, as every other (2); the runtime's trouble is not (1).
        guard let unknown = try await hark(["--input", clip, "--word", "hey_siri"]) else { return }
        #expect(unknown.status == 2)
        #expect(unknown.errorText.contains("unknown wake word"), "\(unknown.errorText)")

        guard let usage = try await hark(["--input", clip, "--threshold", "2"]) else { return }
        #expect(usage.status == 2, "\(usage.errorText)")
        guard let own = try await hark(["--input", clip, "--word", "oww_alexa:2"]) else { return }
        #expect(own.status == 2 && own.errorText.contains("must be from 0.01 to 0.99"), "\(own.errorText)")
        guard let twice = try await hark(["--input", clip, "--word", "oww_alexa", "--word", "oww_alexa:0.7"]) else {
            return
        }
        let refused = twice.errorText.contains("given twice, with different thresholds")
        #expect(twice.status == 2 && refused, "\(twice.errorText)")
        guard let unreadable = try await hark(["--input", "/nonexistent.wav"]) else { return }
        #expect(unreadable.status == 2, "\(unreadable.errorText)")
    }
}
