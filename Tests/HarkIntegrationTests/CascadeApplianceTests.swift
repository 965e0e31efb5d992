import Foundation
import HarkCascadeSimulator
import HarkCore
import HarkTestKit
import Testing

/// `hark run` on the cascade: the appliance in kiosk mode on the `host` board (file-backed ALSA devices) against the
/// cascade simulator, as the tutor runs.
@Suite(.timeLimit(.minutes(2))) struct CascadeApplianceTests {
    @Test func theKioskGreetsFirstThenAnswersASpokenQuestion() async throws {
        var configuration = CascadeSimulatorConfiguration()
        configuration.transcripts = ["how do I say water"]
        let simulator = CascadeSimulator(configuration: configuration, logger: quietLogger)
        try await simulator.start()
        defer { Task { try? await simulator.stop() } }
        // A visitor's voice starts the visit; the microphone opens once the greeting has been heard, and the
        // visitor speaks again every 40 seconds of audio (10 s of the harness's fourfold pace), so a question follows
        // whenever that is, and its answer has time to be played whole before the next (on a loaded machine too).
        let microphone = TestSignals.speech(total: .seconds(120), burst: .milliseconds(1600), gap: .seconds(40))
        let harness = try ApplianceHarness(
            microphone: microphone,
            service: """
                backend: cascade
                cascade:
                  sarvam_endpoint: \(simulator.httpBaseURL)
                  gemini_endpoint: \(simulator.httpBaseURL)
                """
        )
        let greeting = "A visitor is here. Greet them in one short sentence."
        let code = try await withDeadline(.seconds(90), "the kiosk run") {
            // Two answers played to their end: the greeting, and the answer to the question.
            try await harness.run(mode: "kiosk", turns: 2, extra: "  greeting: \(greeting)\nlog_transcripts: true")
        }
        let logs = harness.logs.all
        #expect(code == 0, "\(logs.joined(separator: "\n"))")

        // The greeting went first, as a user turn of its own; the question came after it, with the history.
        let requests = try simulator.snapshot.textRequests.map {
            try JSONDecoder().decode(JSONValue.self, from: Data($0.utf8))["contents"]?.arrayValue ?? []
        }
        #expect(requests.count == 2, "\(logs.joined(separator: "\n"))")
        #expect(requests.first?.map { $0["parts"]?.arrayValue?.first?["text"]?.stringValue } == [greeting])
        let second = try #require(requests.dropFirst().first)
        #expect(second.map { $0["role"]?.stringValue } == ["user", "model", "user"])
        #expect(second.last?["parts"]?.arrayValue?.first?["text"] == "how do I say water")
        // The visitor was heard only once the greeting had been spoken.
        let turns = simulator.snapshot.turns
        #expect(turns.first?.endpoint == nil)
        let greeted = try #require(turns.first?.firstAudioSent)
        let heard = try #require(turns.dropFirst().first?.endpointed)
        #expect(greeted < heard)
        #expect(harness.states.containsInOrder(["idle", "speaking", "listening", "thinking", "speaking"]))

        // The transcripts reached the log, and both answers the speaker, whole and in order.
        #expect(logs.contains { $0.contains("info user: how do I say water") }, "\(logs.joined(separator: "\n"))")
        #expect(
            logs.contains {
                $0.contains("info agent: I heard you. Here is my answer: you said how do I say water. That is all.")
            }
        )
        // Each reply's first sentence is synthesized on its own (flushed at once).
        let syntheses = simulator.snapshot.syntheses
        let answerStart = try #require(syntheses.lastIndex(of: "I heard you."))
        #expect(answerStart > 0)
        let greetingAudio = CascadeConverseTests.synthesized(Array(syntheses[..<answerStart]), rate: 24_000).filter {
            $0 != 0
        }
        let answerAudio = CascadeConverseTests.synthesized(Array(syntheses[answerStart...]), rate: 24_000).filter {
            $0 != 0
        }
        let played = harness.played.filter { $0 != 0 }
        // Both begin with the same sentence's speech: the answer is looked for after the greeting.
        let greetingPlayed = try #require(played.firstRange(of: greetingAudio), "the greeting was not played whole")
        #expect(
            played[greetingPlayed.upperBound...].firstRange(of: answerAudio) != nil,
            "the answer was not played whole after the greeting"
        )
    }
}
