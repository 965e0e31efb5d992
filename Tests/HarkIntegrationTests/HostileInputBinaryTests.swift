import Foundation
import HarkCore
import HarkTestKit
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A scratch folder, removed by ``remove()``.
struct ScratchFolder {
    let path: String

    init(_ name: String) throws {
        path = FileManager.default.temporaryDirectory.path + "/hark-\(name)-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func file(_ name: String) -> String { path + "/" + name }

    func write(_ name: String, _ text: String) throws -> String {
        try text.write(toFile: file(name), atomically: true, encoding: .utf8)
        return file(name)
    }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// What the commands do with hostile files, damaged libraries and strangers' process ids: a clear message and an
/// exit code, never a crash, a signal sent astray or memory spent before a bound is checked. Run on the built
/// binary, since a crash is what is checked for.
@Suite(
    .timeLimit(.minutes(3)),
    .enabled(
        if: HarkBinaryTests.hark != nil,
        "needs the hark binary: build it with the tests (swift build --build-tests)"
    )
)
struct HostileInputBinaryTests {
    let hark: String

    init() throws { hark = try #require(HarkBinaryTests.hark) }

    func run(
        _ arguments: [String],
        environment extra: [String: String] = [:],
        directory: String? = nil
    ) async throws -> ChildProcess {
        var environment = ChildProcess.inheritedEnvironment.filter { !$0.key.hasPrefix("HARK_") }
        for (key, value) in extra { environment[key] = value }
        return try await ChildProcess.run(hark, arguments, environment: environment, directory: directory)
    }

    // MARK: hark reload

    /// A status file naming a process that is not the daemon: nothing is signalled, and the refusal says why.
    @Test func reloadSignalsNoProcessButTheDaemon() async throws {
        let scratch = try ScratchFolder("reload")
        defer { scratch.remove() }
        let stranger = Process()
        stranger.executableURL = URL(fileURLWithPath: "/bin/sleep")
        stranger.arguments = ["60"]
        try stranger.run()
        defer { if stranger.isRunning { stranger.terminate() } }
        let status = try scratch.write(
            "status.json",
            #"{"state":"idle","line":"idle","conversation":"idle","overlays":[],"mode":"speaker","backend":"gemini","#
                + #""board":"host","pid":\#(stranger.processIdentifier),"startedAt":0,"updatedAt":0,"reconnects":0,"#
                + #""sessions":0,"droppedFrames":0,"xruns":0,"underruns":0,"watchdogPings":0}"#
        )
        let refused = try await run(["reload", "--file", status, "--timeout", "1"])
        #expect(refused.status != 0)
        #expect(stranger.isRunning, "hark reload sent SIGHUP to a process that is not the daemon")
        #expect(refused.text.contains("not the hark daemon"), "\(refused.text)")
        let named = try await run([
            "reload", "--file", status, "--pid", "\(stranger.processIdentifier)", "--timeout", "1",
        ])
        #expect(named.status != 0)
        #expect(stranger.isRunning, "hark reload --pid sent SIGHUP to a process that is not the daemon")
        // No process at all, or pid 0 or 1: said as such, not "(Success)".
        for pid in ["0", "1", "-5"] {
            let nobody = try await run([
                "reload", "--file",
                try scratch.write(
                    "nobody-\(pid).json",
                    try String(contentsOfFile: status, encoding: .utf8)
                        .replacingOccurrences(of: "\"pid\":\(stranger.processIdentifier)", with: "\"pid\":\(pid)")
                ),
                "--timeout", "1",
            ])
            #expect(nobody.status == 3, "\(nobody.text)")
            #expect(!nobody.text.contains("Success"), "\(nobody.text)")
        }
    }

    // MARK: Usage errors

    @Test func aWordWithAnEmptyThresholdIsAUsageError() async throws {
        let scratch = try ScratchFolder("word")
        defer { scratch.remove() }
        let wav = scratch.file("question.wav")
        try WAVFile.write(path: wav, samples: TestSignals.speech(total: .seconds(1)), sampleRate: 16_000)
        for word in ["alexa:", "alexa:x", ":0.5"] {
            let result = try await run(["wake", "--input", wav, "--word", word])
            #expect(result.status == 2, "--word \(word): \(result)")
        }
    }
}
