import Foundation
import HarkApp
import HarkBackendKit
import HarkCore
import HarkGemini
import HarkLiveSimulator
import HarkTestKit
import Testing

/// A hostile Live service, over loopback: what it names reaches no log raw, and a link it keeps alive without
/// progress is left like a silent one.
@Suite(.timeLimit(.minutes(2))) struct HostileLiveTests {
    /// Each scalar that must never reach a log or a terminal raw: C1's CSI, a bidi override, the line and paragraph
    /// separators.
    static let forbidden: Set<UInt32> = [0x9B, 0x202E, 0x2028, 0x2029, 0x1B]

    @Test func aToolNameWithControlsAndNoEndIsLoggedPrintableAndBounded() async throws {
        let name = "get_\u{9B}31m\u{202E}time\u{2028}forged line\u{2029}" + String(repeating: "x", count: 100_000)
        let simulator = try await startSimulator {
            $0.scenario.toolCalls = [ScriptedToolCall(turn: 1, name: name, args: [:])]
        }
        defer { Task { try? await simulator.stop() } }
        let run = try await converse(simulator, input: TestSignals.speech(total: .seconds(4))) { $0.tools = true }
        let lines = run.logs.filter { $0.contains("tool") }
        #expect(!lines.isEmpty)
        for line in run.logs + run.transcript {
            let raw = line.unicodeScalars.filter { Self.forbidden.contains($0.value) }
            #expect(raw.isEmpty, "\(line.prefix(200).debugDescription)")
            #expect(line.utf8.count < 4096, "a line of \(line.utf8.count) bytes")
        }
    }

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
