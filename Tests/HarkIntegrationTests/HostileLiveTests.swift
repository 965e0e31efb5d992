import Foundation
import HarkApp
import HarkCore
import HarkGemini
import HarkLiveSimulator
import HarkTestKit
import Testing

/// A hostile Live service, over loopback: a link it keeps alive without progress is left like a silent one.
@Suite(.timeLimit(.minutes(2))) struct HostileLiveTests {
    @Test func aLinkKeptAliveWithoutProgressWhileAReplyIsOwedIsLeft() async throws {
        let simulator = try await startSimulator {
            // Mid answer 1 on connection 1, nothing but usageMetadata every 300 ms from then on.
            $0.scenario.faults = [try SimulatorFault.parse("answer=1:keep-alive=300ms:conn=1")]
        }
        defer { Task { try? await simulator.stop() } }
        let session = makeSession(simulator) { $0.stallTimeout = .seconds(1) }
        session.send(speech(1.6))
        session.send(silence(1.0))
        let run = Task { try await session.run() }
        let reason = try await withDeadline(.seconds(30), "the stall check") {
            for await event in session.events {
                if case .link(.offline(let reason, _)) = event { return reason }
            }
            return ""
        }
        #expect(reason.contains("mid-turn"), "\(reason)")
        session.finish()
        try await run.value
    }
}
