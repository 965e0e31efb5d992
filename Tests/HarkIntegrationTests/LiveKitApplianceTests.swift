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

    func livekit(_ standIn: LiveKitStandIn) -> String {
        """
        backend: livekit
        livekit:
          livekit_url: \(standIn.url)
          api_key: \(LiveKitStandIn.apiKey)
          api_secret_file: \(standIn.secretFile)
        """
    }

    @Test func aSpeakerTurnThroughALiveKitRoom() async throws {
        let standIn = try await LiveKitStandIn.start()
        defer { standIn.stop() }
        // Quiet, then a question the voice gate opens the session on, then quiet for the answer.
        let microphone =
            [Int16](repeating: 0, count: 16_000)
            + TestSignals.speech(total: .seconds(2), burst: .seconds(2), gap: .zero)
            + [Int16](repeating: 0, count: 16_000 * 60)
        let harness = try ApplianceHarness(microphone: microphone, service: livekit(standIn))
        let code: Int32
        do {
            code = try await withDeadline(.seconds(90), "the appliance to stop") {
                try await harness.run(mode: "speaker", turns: 1)
            }
        } catch {
            Issue.record("\(error)\n\(harness.logs.all.joined(separator: "\n"))\nthe room: \(standIn.record())")
            return
        }
        #expect(code == 0, "\(harness.logs.all.joined(separator: "\n"))")
        let record = standIn.record()
        #expect(record["turns"]?.numberValue == 1)
        // The question reached the agent whole: what came before it was in the room and what the track carried.
        let early = record["pre_connect"]?.arrayValue?.compactMap { $0["seconds"]?.numberValue }.reduce(0, +) ?? 0
        let heard = record["utterances"]?.arrayValue?.compactMap(\.numberValue).reduce(0, +) ?? 0
        #expect(early + heard >= 1.6, "\(early) s before the agent, \(heard) s after")
        #expect(harness.played.filter { abs(Int($0)) > 3000 }.count > 12_000)
        #expect(harness.states.containsInOrder(["idle", "listening", "thinking", "speaking"]), "\(harness.states)")
    }

    @Test func theKioskGreetsEachVisitorInARoomOfItsOwn() async throws {
        let standIn = try await LiveKitStandIn.start()
        defer { standIn.stop() }
        // A visitor's voice starts the visit, then quiet (speech over the answer would cut it, as it should).
        let microphone =
            TestSignals.speech(total: .milliseconds(1500), burst: .milliseconds(1500), gap: .zero)
            + [Int16](repeating: 0, count: 16_000 * 120)
        let harness = try ApplianceHarness(microphone: microphone, service: livekit(standIn))
        let code = try await withDeadline(.seconds(90), "the kiosk run") {
            try await harness.run(mode: "kiosk", turns: 1, extra: "  greeting: Greet the visitor.")
        }
        #expect(code == 0, "\(harness.logs.all.joined(separator: "\n"))")
        let record = standIn.record()
        // The greeting went to the agent as typed input, and its answer was played.
        #expect(record["chats"]?.arrayValue?.first == .string("Greet the visitor."), "\(record["chats"] ?? .null)")
        let rooms = record["joins"]?.arrayValue?.compactMap { $0["room"]?.stringValue } ?? []
        #expect(rooms.count == 1 && rooms.allSatisfy { $0.contains("-") }, "\(rooms)")
        #expect(harness.played.filter { abs(Int($0)) > 3000 }.count > 12_000)
    }
}
