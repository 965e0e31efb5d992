import Foundation
import HarkApp
import HarkCore
import HarkGemini
import HarkLiveSimulator
import HarkSimulatorKit
import HarkTestKit
import Testing

/// `hark converse --tools`: the device tools from a file, against the simulator.
@Suite(.timeLimit(.minutes(2))) struct ConverseToolsTests {
    @Test func aToolCallRoundTripsFromAFile() async throws {
        let simulator = try await startSimulator {
            $0.scenario.toolCalls = [ScriptedToolCall(turn: 1, name: "set_volume", args: ["percent": 30])]
        }
        defer { Task { try? await simulator.stop() } }
        let run = try await converse(simulator, input: TestSignals.speech(total: .seconds(4))) { $0.tools = true }
        #expect(run.outcome.exitCode == 0, "\(run.outcome.message ?? "")")
        let connection = try #require(simulator.recorder.snapshot().connections.first)
        let declared = connection.setup?.tools?.flatMap { $0.functionDeclarations ?? [] }.map(\.name) ?? []
        #expect(declared.contains("set_volume") && declared.contains("get_time"))
        #expect(connection.toolResponseIDs.count == 1)
        // The in-memory device took the call and said what the volume became.
        #expect(run.transcript.contains { $0.contains("tool set_volume said") && $0.contains("30") })
        #expect(run.logs.contains { $0.contains("tool: finished") && $0.contains("set_volume") && $0.contains("true") })
    }

    @Test func withoutToolsNoneAreDeclared() async throws {
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        let run = try await converse(simulator, input: TestSignals.speech(total: .seconds(3)))
        #expect(run.outcome.exitCode == 0, "\(run.outcome.message ?? "")")
        let connection = try #require(simulator.recorder.snapshot().connections.first)
        #expect(connection.setup?.tools == nil)
    }
}
