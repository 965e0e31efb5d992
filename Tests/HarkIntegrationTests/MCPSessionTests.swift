import Foundation
import HarkBackendKit
import HarkCore
import HarkGemini
import HarkHTTP
import HarkLiveSimulator
import HarkMCP
import HarkSimulatorKit
import HarkTestKit
import Logging
import Testing

/// MCP tools in a Gemini Live session: the official Python SDK's server (scripts/lib/mcp-test-server.py) behind the
/// tool hub, the session against the simulator in gemini-3.8-live mode, over real loopback sockets.
@Suite(
    .serialized,
    .timeLimit(.minutes(3)),
    .enabled(if: MCPTestServer.available, Comment(rawValue: MCPTestServer.missing))
)
struct MCPSessionTests {
    static let model = "models/gemini-3.8-live"

    /// A hub of the HTTP server as `test` (every tool, `wipe` not allowed).
    func startHub(_ server: MCPTestServer) -> (MCPToolHub, Task<Void, Never>) {
        var settings = MCPServerSettings(name: "test", endpoint: .url(server.url))
        settings.callTimeout = .seconds(60)
        let hub = MCPToolHub(
            servers: [settings],
            environment: [:],
            logger: Logger(label: "test.mcp") { _ in SwiftLogNoOpLogHandler() }
        ) { _ in NIOHTTPClient() }
        let run = Task { await hub.run() }
        return (hub, run)
    }

    func declared(_ tools: [Tool]?) -> [FunctionDeclaration] {
        (tools ?? []).flatMap { $0.functionDeclarations ?? [] }
    }

    @Test func anMCPToolCalledMidTurnIsRunAtTheServerAndItsResultSpoken() async throws {
        let server = try await MCPTestServer.startHTTP()
        defer { server.stop() }
        let (hub, hubRun) = startHub(server)
        defer { hubRun.cancel() }
        await hub.waitForFirstTools(within: .seconds(20))
        #expect(hub.statuses.first?.state == .ready)
        let simulator = try await startSimulator {
            $0.scenario.toolCalls = [ScriptedToolCall(turn: 1, name: "test__add", args: ["a": 2, "b": 40])]
        }
        defer { Task { try? await simulator.stop() } }
        var tools = ToolRegistry()
        tools.catalog = hub.catalog
        let session = makeSession(simulator, tools: tools) { $0.setup.model = Self.model }
        let run = Task { try await session.run() }
        var events = session.events.makeAsyncIterator()
        session.send(speech(1.6))
        session.send(silence(1.0))
        let seen = await collect(&events) { event in
            guard case .transcript(let piece) = event else { return false }
            return piece.role == .agent && piece.isFinal && piece.text.contains("tool test__add said")
        }
        #expect(agentText(seen).contains(#"tool test__add said {"result":"42""#))
        let connection = try #require(simulator.recorder.snapshot().connection(1))
        let declarations = declared(connection.setup?.tools)
        let names = declarations.map(\.name)
        // Namespaced by server; the name with '.', '/', '-' and 'π' made valid; the destructive tool left out.
        #expect(names.contains("test__add"))
        #expect(names.contains("test__lights_on_off__"))
        #expect(!names.contains("test__wipe"))
        #expect(names.count == 16)
        #expect(names.allSatisfy { $0.range(of: "^[A-Za-z][A-Za-z0-9_]{0,63}$", options: .regularExpression) != nil })
        // The MCP schema goes as JSON Schema, untranslated; read-only tools block, the others do not.
        let add = try #require(declarations.first { $0.name == "test__add" })
        #expect(add.parameters == nil)
        #expect(add.parametersJsonSchema?["properties"]?["a"]?["type"] == "integer")
        #expect(add.behavior == "BLOCKING")
        #expect(declarations.first { $0.name == "test__wait" }?.behavior == "NON_BLOCKING")
        session.finish()
        try await run.value
    }

    @Test func listChangedMidSessionReachesTheModelAsAContextUpdateOnOneConnection() async throws {
        let server = try await MCPTestServer.startHTTP()
        defer { server.stop() }
        let (hub, hubRun) = startHub(server)
        defer { hubRun.cancel() }
        await hub.waitForFirstTools(within: .seconds(20))
        let simulator = try await startSimulator {
            $0.scenario.toolCalls = [
                ScriptedToolCall(turn: 1, name: "test__grow"),
                ScriptedToolCall(turn: 2, name: "test__late", args: ["room": "kitchen"]),
            ]
        }
        defer { Task { try? await simulator.stop() } }
        var tools = ToolRegistry()
        tools.catalog = hub.catalog
        let session = makeSession(simulator, tools: tools) { $0.setup.model = Self.model }
        let run = Task { try await session.run() }
        var events = session.events.makeAsyncIterator()
        session.send(speech(1.6))
        session.send(silence(1.0))
        // grow adds `late` at the server, which announces list_changed; the model hears the new list.
        _ = try await simulator.recorder.waitFor("the context update", within: .seconds(60)) {
            $0.connection(1)?.contextUpdates.last?.contains("test__late") == true
        }
        _ = await collect(&events) { $0 == .turnComplete }
        session.send(speech(1.6))
        session.send(silence(1.0))
        let seen = await collect(&events) { event in
            guard case .transcript(let piece) = event else { return false }
            return piece.role == .agent && piece.isFinal && piece.text.contains("tool test__late said")
        }
        #expect(agentText(seen).contains("the light in kitchen is on"))
        let snapshot = simulator.recorder.snapshot()
        #expect(snapshot.connection(2) == nil)  // the conversation was never dropped
        #expect(snapshot.connection(1)?.contextUpdates.count == 1)
        #expect(snapshot.connection(1)?.messageKinds.contains("contextUpdate") == true)
        let atSetup = declared(snapshot.connection(1)?.setup?.tools).map(\.name)
        #expect(!atSetup.contains("test__late"))
        #expect(session.statistics.other["contextUpdates"] == 1)
        session.finish()
        try await run.value
    }

    @Test func aBargeInCancelsTheCallAtTheServer() async throws {
        let server = try await MCPTestServer.startHTTP()
        defer { server.stop() }
        let (hub, hubRun) = startHub(server)
        defer { hubRun.cancel() }
        await hub.waitForFirstTools(within: .seconds(20))
        let simulator = try await startSimulator {
            $0.scenario.toolCalls = [ScriptedToolCall(turn: 1, name: "test__wait", args: ["seconds": 30])]
            // Once 3.5 s of audio came (during the silence sent after the call reached the server), the service
            // gives up the call (toolCallCancellation), as when the user barges in.
            $0.scenario.faults = [try SimulatorFault.parse("audio=3.5s:cancel-tools")]
        }
        defer { Task { try? await simulator.stop() } }
        var tools = ToolRegistry()
        tools.catalog = hub.catalog
        let session = makeSession(simulator, tools: tools) { $0.setup.model = Self.model }
        let run = Task { try await session.run() }
        var events = session.events.makeAsyncIterator()
        session.send(speech(1.6))
        session.send(silence(1.0))
        _ = await collect(&events) { if case .tool(.started) = $0 { true } else { false } }
        let probe = makeProbe(server.url)
        try await probe.connect()
        try await withDeadline(.seconds(10), "the call to run at the server") {
            while true {
                let result = try await probe.callTool("waiting", arguments: [:], timeout: .seconds(5))
                if result["content"]?.arrayValue?.first?["text"]?.stringValue == "1" { return }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        session.send(silence(1.0))
        _ = await collect(&events) { if case .tool(.cancelled) = $0 { true } else { false } }
        // The server itself saw the cancellation (notifications/cancelled), long before the wait's 30 s.
        try await withDeadline(.seconds(10), "the server to count the cancellation") {
            while true {
                let result = try await probe.callTool("cancelled", arguments: [:], timeout: .seconds(5))
                if result["content"]?.arrayValue?.first?["text"]?.stringValue == "1" { return }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        await probe.close()
        session.finish()
        try await run.value
    }

    @Test func aModelWithoutContextUpdateRefusesItAsTheServiceDoes() async throws {
        let server = try await MCPTestServer.startHTTP()
        defer { server.stop() }
        let (hub, hubRun) = startHub(server)
        defer { hubRun.cancel() }
        await hub.waitForFirstTools(within: .seconds(20))
        let simulator = try await startSimulator {
            $0.scenario.toolCalls = [ScriptedToolCall(turn: 1, name: "test__grow")]
        }
        defer { Task { try? await simulator.stop() } }
        var tools = ToolRegistry()
        tools.catalog = hub.catalog
        // A name this client does not know is spoken to as the newest family (which takes contextUpdate); the
        // simulator models it as 2.5, which refuses the message: it closes as the service does (1007).
        let session = makeSession(simulator, tools: tools)
        let run = Task { try await session.run() }
        session.send(speech(1.6))
        session.send(silence(1.0))
        let snapshot = try await simulator.recorder.waitFor("the refusal", within: .seconds(60)) {
            $0.connection(1)?.close != nil
        }
        #expect(snapshot.connection(1)?.close?.code == 1007)
        #expect(snapshot.connection(1)?.close?.reason == "Request contains an invalid argument.")
        session.finish()
        try await run.value
    }

    func makeProbe(_ url: String) -> MCPClient {
        MCPClient(
            transport: MCPHTTPTransport(
                url: url,
                http: NIOHTTPClient(),
                logger: Logger(label: "probe") { _ in SwiftLogNoOpLogHandler() }
            ),
            logger: Logger(label: "probe") { _ in SwiftLogNoOpLogHandler() }
        )
    }
}
