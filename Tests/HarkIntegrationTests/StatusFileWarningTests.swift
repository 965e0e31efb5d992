import Foundation
import HarkLiveSimulator
import HarkSimulatorKit
import HarkTestKit
import Testing

/// A status file the daemon cannot write is worth one warning (`hark status` cannot show the daemon), not
/// one per write: again only after a write worked in between.
@Suite(.timeLimit(.minutes(2))) struct StatusFileWarningTests {
    /// Awaits `condition`, checked every few milliseconds, failing after `timeout`.
    private func until(_ what: String, _ condition: @escaping @Sendable () -> Bool) async throws {
        try await withDeadline(.seconds(30), what) {
            while !condition() { try await Task.sleep(for: .milliseconds(10)) }
        }
    }

    @Test func anUnwritableStatusFileIsWarnedOnceAndAgainAfterItWorked() async throws {
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        let harness = try ApplianceHarness(
            microphone: TestSignals.speech(total: .seconds(30), burst: .seconds(30), gap: .zero),
            simulator: simulator
        )
        let folder = harness.directory + "/status"
        let file = folder + "/status.json"
        let logs = harness.logs
        let warnings: @Sendable () -> [String] = {
            logs.all.filter { $0.hasPrefix("warning cannot write the status file \(file)") }
        }
        let run = Task {
            try await harness.run(mode: "push-to-talk", turns: 1, environment: ["HARK_STATUS_FILE": file])
        }
        // Booting and ready: two writes into a folder that does not exist, one warning that says why.
        try await until("the appliance to be ready") { logs.all.contains { $0.hasPrefix("info ready:") } }
        #expect(warnings().count == 1, "\(logs.all.joined(separator: "\n"))")
        #expect(warnings().first?.contains("(the folder does not exist); hark status will not show") == true)

        // The folder appears: pressing the button (listening) writes the file.
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        harness.toggleButton()  // press
        try await until("the status file to be written") { FileManager.default.fileExists(atPath: file) }
        _ = try await simulator.recorder.waitForAudio(samples: 16_000, within: .seconds(20))

        // It goes again: the next write (the release: thinking) warns again, the ones after it do not.
        try FileManager.default.removeItem(atPath: folder)
        harness.toggleButton()  // release
        let code = try await withDeadline(.seconds(60), "the appliance to stop") { try await run.value }
        #expect(code == 0, "\(logs.all.joined(separator: "\n"))")
        #expect(warnings().count == 2, "\(logs.all.joined(separator: "\n"))")
        #expect(!FileManager.default.fileExists(atPath: file))
    }
}
