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
        guard let detections = try await hark(["--input", clip, "--word", "hey_jarvis", "--word", "okay_nabu"]) else {
            return
        }
        #expect(detections.status == 0, "\(detections.errorText)")
        let lines = detections.text.split(separator: "\n")
        #expect(lines.count == 1 && lines[0].hasPrefix("1.79 hey_jarvis 0.9"), "\(detections.text)")

        guard let scores = try await hark(["--input", clip, "--scores", "--word", "hey_jarvis"]) else { return }
        #expect(scores.status == 0, "\(scores.errorText)")
        let printed = scores.text.split(separator: "\n").map { $0.split(separator: " ") }
        let reference = try WakeFixtures.reference("hey-jarvis").filter { $0.word == "hey_jarvis" }
        #expect(printed.count == reference.count)
        for (fields, frame) in zip(printed, reference) {
            #expect(fields.count == 3 && fields[1] == "hey_jarvis")
            #expect(Double(fields[0]) == frame.seconds, "\(fields)")
            #expect(abs((Double(fields[2]) ?? -1) - frame.probability) <= 1e-4, "\(fields) vs \(frame)")
        }

        let negative = try await hark(["--input", WakeFixtures.folder + "/hello-there.wav"])
        #expect(negative?.status == 0)
        #expect(negative?.text == "")
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
        guard let result = try await hark(["--input", path]) else { return }
        #expect(result.status == 0, "\(result.errorText)")
        let lines = result.text.split(separator: "\n")
        #expect(lines.count == 1 && lines.first?.contains(" hey_jarvis ") == true, "\(result.text)")
    }

    @Test func aMissingRuntimeOrABadWordIsAClearError() async throws {
        let clip = WakeFixtures.folder + "/hey-jarvis.wav"
        var environment = ChildProcess.inheritedEnvironment
        environment["HARK_LIB_DIR"] = "/nonexistent/hark-lib"
        guard let missing = try await hark(["--input", clip], environment: environment) else { return }
        #expect(missing.status == 1)
        #expect(missing.errorText.contains("scripts/setup"), "\(missing.errorText)")

        guard let unknown = try await hark(["--input", clip, "--word", "hey_siri"]) else { return }
        #expect(unknown.status == 1)
        #expect(unknown.errorText.contains("unknown wake word"), "\(unknown.errorText)")

        guard let usage = try await hark(["--input", clip, "--threshold", "2"]) else { return }
        #expect(usage.status == 2, "\(usage.errorText)")
        guard let unreadable = try await hark(["--input", "/nonexistent.wav"]) else { return }
        #expect(unreadable.status == 2, "\(unreadable.errorText)")
    }
}
