import Foundation
import HarkApp
import HarkAudio
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

    func run(
        _ simulator: CascadeSimulator,
        sarvamKey: String = "sarvam-key",
        geminiKey: String = "gemini-key",
        _ configure: (inout ConverseOptions) -> Void = { _ in }
    ) async throws -> ConverseRun {
        let sarvam = try writeKey(sarvamKey)
        let gemini = try writeKey(geminiKey)
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
            configure(&options)
        }
    }

    /// The speech the simulator synthesized for `syntheses` (the text of each) at `rate`.
    static func synthesized(_ syntheses: [String], rate: Int) -> [Int16] {
        syntheses.flatMap { text in
            TextToSpeechService.tone(
                count: rate * TextToSpeechService.millisecondsPerCharacter * text.count / 1000,
                offset: 0,
                rate: rate
            )
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

    @Test(arguments: [24_000, 22_050, 16_000])
    func theOutputIsMono16BitAtTheSpeechRateAndHoldsEverySampleInOrder(_ rate: Int) async throws {
        let simulator = try await start()
        defer { Task { try? await simulator.stop() } }
        let run = try await run(simulator) { $0.settings["sample_rate"] = "\(rate)" }
        #expect(run.outcome.exitCode == 0, "\(run.outcome.message ?? "")")
        let header = try #require(run.outputHeader)
        let field = { (offset: Int, size: Int) in
            header.dropFirst(offset).prefix(size).reversed().reduce(0) { $0 << 8 | Int($1) }
        }
        #expect(header.count == 44 && String(decoding: header.dropFirst(12).prefix(4), as: UTF8.self) == "fmt ")
        #expect(field(20, 2) == 1)  // PCM
        #expect(field(22, 2) == 1)  // mono
        #expect(field(24, 4) == rate)
        #expect(field(34, 2) == 16)
        // Exactly the speech synthesized for the reply's sentences, in order: nothing resampled, lost or added.
        let output = try #require(run.output)
        let expected = Self.synthesized(simulator.snapshot.syntheses, rate: rate)
        #expect(!expected.isEmpty)
        // Every character sent was synthesized (buffered texts are joined with a space).
        let texts = simulator.snapshot.texts
        let characters = simulator.snapshot.syntheses.reduce(0) { $0 + $1.count }
        #expect((texts.reduce(0) { $0 + $1.count }...texts.reduce(0) { $0 + $1.count + 1 }).contains(characters))
        #expect(output.samples.count == expected.count)
        #expect(output.samples == expected)
        #expect(run.outcome.outputSamples == expected.count)
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

    @Test func aRejectedGeminiKeyIsAnAuthenticationError() async throws {
        // A wrong key (400 with API_KEY_INVALID), and a key refused with 401 or 403.
        let simulator = try await start()
        defer { Task { try? await simulator.stop() } }
        let wrong = try await run(simulator, geminiKey: "wrong-gemini-key")
        #expect(wrong.outcome.exitCode == 3, "\(wrong.outcome.message ?? "")")
        let message = wrong.outcome.message ?? ""
        #expect(message.contains("Gemini refused the API key") && message.contains("--api-key-file"), "\(message)")
        #expect(!wrong.logs.contains { $0.contains("wrong-gemini-key") })
        #expect(!message.contains("wrong-gemini-key"))
        for status in [401, 403] {
            let refusing = try await start { $0.textFaults = [.status(status, retryAfter: nil)] }
            defer { Task { try? await refusing.stop() } }
            let refused = try await run(refusing)
            #expect(refused.outcome.exitCode == 3, "\(status): \(refused.outcome.message ?? "")")
            #expect(refused.outcome.message?.contains("HTTP \(status)") == true, "\(refused.outcome.message ?? "")")
        }
    }
}
