import Foundation
import HarkApp
import HarkCascadeSimulator
import HarkCore
import HarkTestKit
import Logging
import Testing

/// `hark converse --backend cascade` against the cascade simulator, with the command line the README gives.
@Suite(.timeLimit(.minutes(2))) struct CascadeConverseTests {
    func start(_ configure: (inout CascadeSimulatorConfiguration) -> Void = { _ in }) async throws -> CascadeSimulator {
        var configuration = CascadeSimulatorConfiguration()
        configuration.sarvamKey = Secret("sarvam-key")
        configuration.geminiKey = Secret("gemini-key")
        configuration.transcripts = ["how do I say thank you"]
        configure(&configuration)
        let simulator = CascadeSimulator(configuration: configuration, logger: quietLogger)
        try await simulator.start()
        return simulator
    }

    func run(_ simulator: CascadeSimulator, sarvamKey: String = "sarvam-key") async throws -> ConverseRun {
        let sarvam = try writeKey(sarvamKey)
        let gemini = try writeKey("gemini-key")
        defer {
            try? FileManager.default.removeItem(atPath: sarvam)
            try? FileManager.default.removeItem(atPath: gemini)
        }
        // A second of speech, then quiet for the service's endpointing.
        let input = TestSignals.speech(total: .seconds(1)) + [Int16](repeating: 0, count: 24_000)
        return try await converse(endpoint: nil, input: input) { options in
            options.backend = "cascade"
            options.settings["sarvam_endpoint"] = simulator.httpBaseURL
            options.settings["gemini_endpoint"] = simulator.httpBaseURL
            options.settings["sarvam_key_file"] = sarvam
            options.apiKeyFile = gemini
        }
    }

    @Test func aTurnFromAFileToAFile() async throws {
        let simulator = try await start()
        defer { Task { try? await simulator.stop() } }
        let run = try await run(simulator)
        #expect(run.outcome.exitCode == 0, "\(run.outcome.message ?? "")")
        #expect(run.transcript.first == "user: how do I say thank you")
        #expect(run.transcript.contains { $0.hasPrefix("model: I heard you.") })
        // Every synthesized sample that was played is in the output, in order.
        #expect(run.outcome.outputSamples > 0)
        #expect(run.output?.samples.count == run.outcome.outputSamples)
        #expect(simulator.snapshot.textRequests.count == 1)
        #expect(simulator.snapshot.flushes >= 1)  // the end of the input flushes the speech-to-text
    }

    @Test func aRejectedSarvamKeyIsAnAuthenticationError() async throws {
        let simulator = try await start()
        defer { Task { try? await simulator.stop() } }
        let run = try await run(simulator, sarvamKey: "wrong")
        #expect(run.outcome.exitCode == 3, "\(run.outcome.message ?? "")")
        let closing = try await start { $0.refuseBadKeyAtUpgrade = false }
        defer { Task { try? await closing.stop() } }
        let closed = try await self.run(closing, sarvamKey: "wrong")
        #expect(closed.outcome.exitCode == 3, "\(closed.outcome.message ?? "")")
        #expect(closed.outcome.message?.contains("4003") == true)
    }
}
