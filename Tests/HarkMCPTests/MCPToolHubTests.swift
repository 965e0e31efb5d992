import HarkCore
import HarkHTTP
import HarkMCP
import HarkTestKit
import Logging
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A port nothing listens on now (bound and released).
func freePort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
            bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
        }
    }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// The tool hub against real servers: late, dying, garbage-talking.
@Suite(.serialized, .enabled(if: MCPTestServer.available, Comment(rawValue: MCPTestServer.missing)))
struct MCPToolHubTests {
    func makeHub(_ servers: [MCPServerSettings]) -> MCPToolHub {
        MCPToolHub(servers: servers, environment: ["PATH": "/usr/bin:/bin"], logger: quiet) { _ in NIOHTTPClient() }
    }

    @Test func aServerThatComesLateAddsItsToolsWhenItComesAndOneThatDiesIsReconnected() async throws {
        let port = freePort()
        let hub = makeHub([MCPServerSettings(name: "late", endpoint: .url("http://127.0.0.1:\(port)/mcp"))])
        let changes = hub.catalog.changes()
        let run = Task { await hub.run() }
        defer { run.cancel() }
        // Nothing listens: the first attempt fails at once, and nothing waits for the server.
        let started = ContinuousClock.now
        await hub.waitForFirstTools(within: .seconds(20))
        #expect(ContinuousClock.now - started < .seconds(10))
        let down = try #require(hub.statuses.first)
        guard case .offline = down.state else {
            Issue.record("expected offline, got \(down.state)")
            return
        }
        #expect(hub.catalog.tools.isEmpty)
        #expect(down.summary.hasPrefix("late: offline ("))
        // It comes: its tools arrive by themselves (backoff), announced as a change.
        var server = try await MCPTestServer.startHTTP(["--port", "\(port)"])
        try await withDeadline(.seconds(30), "the late server's tools") {
            for await _ in changes where !hub.catalog.tools.isEmpty { return }
        }
        #expect(hub.statuses.first?.state == .ready)
        #expect(hub.statuses.first?.tools == 16)
        #expect(hub.statuses.first?.notOffered.map(\.tool) == ["wipe"])
        let echo = try #require(hub.catalog.tools.first { $0.name == "late__echo" })
        #expect(try await echo.handler(["text": "hi"], .ignored) == ["result": "hi"])
        // It dies: a call is an error the model can speak about, and the hub reconnects when it is back.
        server.stop()
        let failure = await #expect(throws: MCPCallFailure.self) { try await echo.handler(["text": "hi"], .ignored) }
        #expect(failure?.description == "the late service could not be reached")
        server = try await MCPTestServer.startHTTP(["--port", "\(port)"])
        defer { server.stop() }
        try await withDeadline(.seconds(60), "the reconnection") {
            while true {
                if hub.statuses.first?.state == .ready,
                    (try? await echo.handler(["text": "back"], .ignored)) == ["result": "back"]
                {
                    return
                }
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    @Test func aServerTalkingGarbageOnlyLacksItsToolsAndTheOtherServersAreThere() async throws {
        var garbage = MCPServerSettings(
            name: "noise",
            endpoint: .command(["/bin/sh", "-c", "while :; do echo 'not json {'; sleep 0.05; done"])
        )
        garbage.callTimeout = .seconds(2)
        let good = MCPServerSettings(name: "local", endpoint: .command(MCPTestServer.stdioCommand))
        let hub = makeHub([garbage, good])
        let run = Task { await hub.run() }
        defer { run.cancel() }
        await hub.waitForFirstTools(within: .seconds(30))
        let statuses = hub.statuses
        #expect(statuses.map(\.name) == ["noise", "local"])
        #expect(statuses[1].state == .ready)
        #expect(hub.catalog.tools.contains { $0.name == "local__add" })
        #expect(!hub.catalog.tools.contains { $0.name.hasPrefix("noise__") })
        try await withDeadline(.seconds(30), "the garbage server to be given up on") {
            while hub.statuses.first?.state == .connecting { try await Task.sleep(for: .milliseconds(50)) }
        }
        guard case .offline(let reason) = hub.statuses[0].state else {
            Issue.record("expected offline, got \(hub.statuses[0].state)")
            return
        }
        #expect(reason.contains("initialize got no answer"))
    }

    @Test func aStdioCallWithProgressReportsPartialResults() async throws {
        let hub = makeHub([MCPServerSettings(name: "local", endpoint: .command(MCPTestServer.stdioCommand))])
        let run = Task { await hub.run() }
        defer { run.cancel() }
        await hub.waitForFirstTools(within: .seconds(30))
        let count = try #require(hub.catalog.tools.first { $0.name == "local__count" })
        let reports = ReportBox()
        let result = try await count.handler(["steps": 3], ToolProgress { await reports.add($0) })
        #expect(result == ["result": "counted to 3"])
        #expect(await reports.values.compactMap { $0["progress"]?.numberValue } == [1, 2, 3])
    }
}

actor ReportBox {
    var values: [JSONValue] = []
    func add(_ value: JSONValue) { values.append(value) }
}

/// Names, globs and results as values.
@Suite struct MCPValueTests {
    @Test(
        "declared names are letters, digits and _, at most 64, namespaced",
        arguments: [
            ("home", "HassTurnOn", "home__HassTurnOn"),
            ("home", "lights.on/off-π", "home__lights_on_off__"),
            ("h", "9lives", "h__9lives"),
        ]
    )
    func names(_ server: String, _ tool: String, _ expected: String) {
        #expect(MCPToolNaming.declaredName(server: server, tool: tool) == expected)
    }

    @Test func longNamesAreCutWithAHashThatKeepsThemApart() {
        let a = MCPToolNaming.declaredName(server: "home", tool: String(repeating: "a", count: 100) + "x")
        let b = MCPToolNaming.declaredName(server: "home", tool: String(repeating: "a", count: 100) + "y")
        #expect(a.count == 64)
        #expect(b.count == 64)
        #expect(a != b)
        #expect(a.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") })
    }

    @Test func globs() {
        #expect(MCPToolNaming.glob("Hass*", matches: "HassTurnOn"))
        #expect(MCPToolNaming.glob("*Light*", matches: "HassLightSet"))
        #expect(MCPToolNaming.glob("get_?", matches: "get_x"))
        #expect(!MCPToolNaming.glob("get_?", matches: "get_xy"))
        #expect(!MCPToolNaming.glob("Hass*", matches: "hassTurnOn"))
        #expect(MCPToolNaming.glob("*", matches: ""))
    }

    @Test func toolsThatCannotBeReadAreRefusedWithTheReason() {
        let server = MCPServerSettings(name: "s", endpoint: .url("https://a/mcp"))
        let listed: [JSONValue] = [
            ["name": "ok", "inputSchema": ["type": "object"]],
            ["name": "bad schema", "inputSchema": ["type": "string"]],
            ["name": "arr", "inputSchema": ["type": "array"]],
            ["inputSchema": ["type": "object"]],
            ["name": "boom", "annotations": ["destructiveHint": true]],
            ["name": "reader", "annotations": ["destructiveHint": true, "readOnlyHint": true]],
        ]
        let (offered, refused) = MCPToolHub.choose(listed, server: server)
        #expect(offered.map(\.declared) == ["s__ok", "s__reader"])
        #expect(refused.map(\.tool) == ["bad schema", "arr", "(no name)", "boom"])
        #expect(refused[0].reason.contains("spaces or control characters"))
        #expect(refused[1].reason.contains("not an object schema"))
        #expect(refused[3].reason.contains("destructive"))
    }

    @Test func resultsBecomeWhatTheModelHearsBoundedAndPrintable() {
        let text = MCPToolResult.forModel([
            "content": [
                ["type": "text", "text": "line one\nline\u{1B}[31m two\u{202E}"],
                ["type": "image", "mimeType": "image/png", "data": "AAAA"],
            ]
        ])
        #expect(text.succeeded)
        #expect(text.result["result"] == "line one\nline[31m two\n[image image/png, not shown]")
        let failed = MCPToolResult.forModel(["content": [["type": "text", "text": "no such room"]], "isError": true])
        #expect(!failed.succeeded)
        #expect(failed.result == ["error": "no such room"])
        let long = MCPToolResult.forModel([
            "content": [["type": "text", "text": .string(String(repeating: "x", count: 100_000))]]
        ])
        #expect((long.result["result"]?.stringValue?.count ?? 0) < 16_500)
    }
}
