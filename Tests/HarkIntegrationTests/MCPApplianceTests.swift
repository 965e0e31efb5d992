import Foundation
import HarkApp
import HarkCore
import HarkGemini
import HarkLiveSimulator
import HarkMCP
import HarkSimulatorKit
import HarkTestKit
import Testing

/// `hark run` with an MCP server configured: the official Python SDK's test server over streamable HTTP, the Live
/// simulator as gemini-3.8-live, the appliance over file-backed devices.
@Suite(.timeLimit(.minutes(3)), .enabled(if: MCPTestServer.available, Comment(rawValue: MCPTestServer.missing)))
struct MCPApplianceTests {
    @Test func theAgentCallsAnMCPToolMidTurnAndSpeaksItsResult() async throws {
        let server = try await MCPTestServer.startHTTP()
        defer { server.stop() }
        let simulator = try await startSimulator {
            // An acting tool (NON_BLOCKING on 3.8): the model answers at once and speaks of the result when it comes.
            $0.scenario.toolCalls = [ScriptedToolCall(turn: 1, name: "home__wait", args: ["seconds": 0.3])]
        }
        defer { Task { try? await simulator.stop() } }
        var microphone = TestSignals.speech(total: .milliseconds(1600), burst: .milliseconds(1600), gap: .zero)
        microphone += [Int16](repeating: 0, count: 16_000 * 12)
        let harness = try ApplianceHarness(
            microphone: microphone,
            service: "gemini:\n  endpoint: \(simulator.baseURL)\n  model: gemini-3.8-live"
        )
        let extra = "mcp:\n  servers:\n    - name: home\n      url: \(server.url)\n"
        let code = try await withDeadline(.seconds(120), "the run") {
            try await harness.run(mode: "speaker", turns: 1, extra: extra)
        }
        #expect(code == 0, "\(harness.logs.all.joined(separator: "\n"))")
        let snapshot = try await simulator.recorder.waitFor("the result spoken", within: .seconds(30)) {
            $0.connection(1)?.toolResults.isEmpty == false
        }
        let connection = try #require(snapshot.connection(1))
        #expect(connection.family == .gemini38)
        // Declared beside the device tools: in the setup when the server had answered by then, else in a
        // contextUpdate on the same connection as soon as it did (the session never waits for a server).
        let atSetup = (connection.setup?.tools ?? []).flatMap { $0.functionDeclarations ?? [] }.map(\.name)
        let declared = atSetup + connection.contextUpdates.flatMap { $0 }
        #expect(declared.contains("home__wait"))
        #expect(atSetup.contains("set_volume"))
        #expect(connection.turns.first?.toolCalls == ["home__wait"])
        #expect(connection.toolResponses.map(\.scheduling) == ["WHEN_IDLE"])
        #expect(connection.toolResults.map(\.outcome) == ["spoken"])
        #expect(connection.turnCompletes.map(\.interactionStatus).first == "IN_PROGRESS")
        // Every call is logged: server, tool, duration, outcome.
        #expect(harness.logs.all.contains { $0.contains("MCP call home/wait: ok in") }, "\(harness.logs.all)")
        // hark status shows the server and its tools.
        let status = try String(contentsOfFile: harness.directory + "/status.json", encoding: .utf8)
        #expect(status.contains("home: ready, 16 tools (1 not offered)"), "\(status)")
    }

    @Test func converseOffersAnMCPServersToolsFromTheCommandLine() async throws {
        let server = try await MCPTestServer.startHTTP()
        defer { server.stop() }
        let simulator = try await startSimulator {
            $0.scenario.toolCalls = [ScriptedToolCall(turn: 1, name: "home__add", args: ["a": 20, "b": 22])]
        }
        defer { Task { try? await simulator.stop() } }
        let mcp = try #require(try? MCPSetup.commandLineServer("home=\(server.url)"))
        let run = try await converse(simulator, input: TestSignals.speech(total: .seconds(4))) { options in
            options.tools = true
            options.mcp = [mcp]
        }
        #expect(run.outcome.exitCode == 0, "\(run.outcome.message ?? "")")
        let connection = try #require(simulator.recorder.snapshot().connections.first)
        let declared = connection.setup?.tools?.flatMap { $0.functionDeclarations ?? [] }.map(\.name) ?? []
        #expect(declared.contains("home__add") && declared.contains("set_volume"))
        #expect(run.transcript.contains { $0.contains(#"tool home__add said {"result":"42""#) }, "\(run.transcript)")
        #expect(run.logs.contains { $0.contains("MCP server home: ready, 16 tools (1 not offered)") }, "\(run.logs)")
        #expect(run.logs.contains { $0.contains("not offered: wipe: the server marks it destructive") })
    }

    @Test(arguments: ["home", "home=ftp://a/mcp", "9x=https://a/mcp", "home=http://192.0.2.1/mcp"])
    func converseRefusesAnUnusableMCPOption(_ option: String) {
        #expect(throws: (any Error).self) { try MCPSetup.commandLineServer(option) }
    }
}
