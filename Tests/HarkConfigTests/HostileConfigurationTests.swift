import HarkApp
import HarkConfig
import HarkCore
import HarkWake
import Testing

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// `hark config check` gives the daemon's verdict on what the file names, and says it printably with the file, the
/// line and the key.
@Suite struct HostileConfigurationTests {
    static let runtime = (try? WakeRuntime.locate(environment: ProcessInfo.processInfo.environment)) != nil

    @Test(.enabled(if: Self.runtime, "the wake-word runtime is not installed: scripts/setup puts it in .hark-lib"))
    func aWakeWordModelTensorFlowLiteCannotLoadIsRefusedByTheCheckAsByTheDaemon() throws {
        let scratch = try Scratch()
        try scratch.write("models/kitchen.tflite", String(repeating: "not a model ", count: 100))
        let base = "board: host\nboard_dir: \(repositoryRoot())/board\nsession:\n  trigger: wake\n"
        let file = try scratch.write("hark.yaml", base + "wake:\n  words: [hey_jarvis, models/kitchen.tflite]\n")
        let result = ConfigCheck.run(path: file, environment: ["GEMINI_API_KEY": "k"], systemRoot: scratch.path)
        #expect(result.exitCode == 2, "\(result.output)")
        #expect(result.output.contains("\(file):6: wake.words:"), "\(result.output)")
        #expect(result.output.contains("kitchen.tflite"), "\(result.output)")
    }

    @Test func aPathWithEscapesIsShownPrintablyWithItsFileAndLine() throws {
        let scratch = try Scratch()
        let base = "board: host\nboard_dir: \(repositoryRoot())/board\nsession:\n  trigger: wake\n"
        let file = try scratch.write(
            "hark.yaml",
            base + #"wake:\#n  words: "/var/lib/hark/\u001b[31mevil\u009b\u202e.tflite"\#n"#
        )
        // With the runtime (the model is not there) and without it (the runtime is not): either way one line.
        for environment in [["GEMINI_API_KEY": "k"], ["GEMINI_API_KEY": "k", "HARK_LIB_DIR": scratch.path + "/none"]] {
            let result = ConfigCheck.run(path: file, environment: environment, systemRoot: scratch.path)
            #expect(result.exitCode == 2, "\(result.output)")
            let raw = result.output.unicodeScalars.filter {
                $0.value == 0x1B || $0.value == 0x9B || $0.value == 0x202E
            }
            #expect(raw.isEmpty, "\(result.output.debugDescription)")
            if Self.runtime, environment["HARK_LIB_DIR"] == nil {
                #expect(result.output.contains("\(file):6: wake.words:"), "\(result.output.debugDescription)")
                #expect(result.output.contains(#"\u{1B}[31mevil\u{9B}\u{202E}.tflite"#), "\(result.output)")
            }
        }
    }
}
