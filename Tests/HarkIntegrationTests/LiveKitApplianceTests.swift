import Foundation
import HarkAppliance
import HarkCore
import HarkTestKit
import Testing

/// `hark run` on the LiveKit backend: the appliance in push-to-talk mode on the `host` board (file-backed ALSA
/// devices) in the stand-in's room, through LiveKit's real library.
@Suite(.serialized, .enabled(if: LiveKitStandIn.available, "\(LiveKitStandIn.missing)"), .timeLimit(.minutes(2)))
struct LiveKitApplianceTests {
    @Test func aPushToTalkTurnThroughALiveKitRoom() async throws {
        let standIn = try await LiveKitStandIn.start()
        defer { standIn.stop() }
        // The microphone hears speech throughout; only what is said while the button is held reaches the agent.
        let harness = try ApplianceHarness(
            microphone: TestSignals.speech(total: .seconds(120), burst: .seconds(120), gap: .zero),
            service: """
                backend: livekit
                livekit:
                  livekit_url: \(standIn.url)
                  api_key: \(LiveKitStandIn.apiKey)
                  api_secret_file: \(standIn.secretFile)
                """
        )
        let run = Task { try await harness.run(mode: "push-to-talk", turns: 1) }
        harness.toggleButton()  // press
        try await standIn.waitForRecord("the question on the agent's side", within: .seconds(30)) {
            ($0["microphone"]?["peak"]?.numberValue ?? 0) > 0.1
        }
        let heard = standIn.record()["microphone"]?["seconds"]?.numberValue ?? 0
        try await standIn.waitForRecord("a second of the question") {
            ($0["microphone"]?["seconds"]?.numberValue ?? 0) > heard + 1
        }
        harness.toggleButton()  // release: the agent's turn detection ends the turn in the silence after it
        let code = try await withDeadline(.seconds(60), "the appliance to stop") { try await run.value }
        #expect(code == 0, "\(harness.logs.all.joined(separator: "\n"))")

        let record = standIn.record()
        #expect(record["turns"]?.numberValue == 1)
        // The microphone track was muted until the press, unmuted while held, muted again after the release.
        #expect(record["mutes"]?.arrayValue == [.bool(true), .bool(false), .bool(true)], "\(record["mutes"] ?? .null)")
        let utterances = record["utterances"]?.arrayValue?.compactMap(\.numberValue) ?? []
        #expect(utterances.count == 1 && (utterances.first ?? 0) >= 0.8, "\(utterances)")
        // The agent's answer (two half-second tones) was played.
        let loud = harness.played.filter { abs(Int($0)) > 3000 }
        #expect(loud.count > 12_000, "\(loud.count) loud samples played")
        #expect(
            harness.states.containsInOrder(["idle", "listening", "thinking", "speaking", "listening"]),
            "\(harness.states)"
        )
        let status = try ApplianceStatus.read(from: harness.directory + "/status.json")
        #expect(status.mode == "push-to-talk")
        #expect(status.sessions == 1)
    }
}
