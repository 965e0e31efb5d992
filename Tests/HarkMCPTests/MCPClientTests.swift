import HarkCore
import HarkHTTP
import HarkMCP
import HarkTestKit
import Logging
import Synchronization
import Testing

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Every tool the test server offers (scripts/lib/mcp-test-server.py), written out here independently of it.
let testServerTools: Set<String> = [
    "echo", "add", "count", "wait", "waiting", "cancelled", "huge", "die", "grow", "wipe", "lights.on/off-π",
    "filler_0", "filler_1", "filler_2", "filler_3", "filler_4", "filler_5",
]

let quiet = Logger(label: "test.mcp") { _ in SwiftLogNoOpLogHandler() }

/// A client of `url` (streamable HTTP) or, when nil, of the test server started over stdio.
func makeClient(
    url: String?,
    revision: MCPClient.Revision = .session,
    maximumBytes: Int = 1 << 20
) -> MCPClient {
    var options = MCPClient.Options()
    options.revision = revision
    options.maximumMessageBytes = maximumBytes
    options.requestTimeout = .seconds(20)
    let transport: any MCPTransport =
        if let url {
            MCPHTTPTransport(url: url, http: NIOHTTPClient(maxResponseBytes: 64 << 20), logger: quiet)
        } else {
            MCPStdioTransport(
                command: MCPTestServer.stdioCommand,
                environment: ["PATH": "/usr/bin:/bin"],
                name: "test",
                maximumLineBytes: maximumBytes,
                logger: quiet
            )
        }
    return MCPClient(transport: transport, options: options, logger: quiet)
}

/// The text of a tools/call result's first content item.
func text(_ result: JSONValue) -> String? { result["content"]?.arrayValue?.first?["text"]?.stringValue }

/// Against the official Python SDK's server, over streamable HTTP (event streams and JSON answers) and stdio.
@Suite(.serialized, .enabled(if: MCPTestServer.available, Comment(rawValue: MCPTestServer.missing)))
struct MCPClientTests {
    enum Link: String, CaseIterable, CustomTestStringConvertible {
        case httpStream, httpJSON, stdio
        var testDescription: String { rawValue }
    }

    /// Runs `body` with a connected client over `link`.
    func withClient<T: Sendable>(
        _ link: Link,
        revision: MCPClient.Revision = .session,
        maximumBytes: Int = 1 << 20,
        _ body: (MCPClient, MCPTestServer?) async throws -> T
    ) async throws -> T {
        let server: MCPTestServer? =
            switch link {
            case .httpStream: try await MCPTestServer.startHTTP()
            case .httpJSON: try await MCPTestServer.startHTTP(["--json"])
            case .stdio: nil
            }
        defer { server?.stop() }
        let client = makeClient(url: server?.url, revision: revision, maximumBytes: maximumBytes)
        try await client.connect()
        do {
            let result = try await body(client, server)
            await client.close()
            return result
        } catch {
            await client.close()
            throw error
        }
    }

    @Test("the handshake agrees on 2025-11-25 and tools/list reads every page", arguments: Link.allCases)
    func listsEveryPage(_ link: Link) async throws {
        try await withClient(link) { client, _ in
            #expect(client.server?.protocolVersion == "2025-11-25")
            #expect(client.server?.name == "hark-test 1.0")
            let tools = try await client.listTools()
            // 17 tools in pages of 5: four pages, all read, none twice.
            #expect(tools.count == 17)
            #expect(Set(tools.compactMap { $0["name"]?.stringValue }) == testServerTools)
        }
    }

    @Test("a call answers with its result", arguments: Link.allCases)
    func callAnswers(_ link: Link) async throws {
        try await withClient(link) { client, _ in
            let result = try await client.callTool("add", arguments: ["a": 2, "b": 40], timeout: .seconds(10))
            #expect(text(result) == "42")
            #expect(MCPToolResult.forModel(result).succeeded)
        }
    }

    // A server answering with plain JSON has no stream to send progress on: only the streams are checked.
    @Test("progress reaches the caller before the result", arguments: [Link.httpStream, .stdio])
    func progress(_ link: Link) async throws {
        try await withClient(link) { client, _ in
            let reports = Mutex<[JSONValue]>([])
            let result = try await client.callTool("count", arguments: ["steps": 4], timeout: .seconds(10)) { report in
                reports.withLock { $0.append(report) }
            }
            #expect(text(result) == "counted to 4")
            let seen = reports.withLock { $0 }
            #expect(seen.compactMap { $0["progress"]?.numberValue } == [1, 2, 3, 4])
            #expect(seen.last?["total"]?.numberValue == 4)
            #expect(seen.first?["message"]?.stringValue == "step 1")
        }
    }

    @Test("a cancelled call is cancelled at the server", arguments: Link.allCases)
    func cancellation(_ link: Link) async throws {
        try await withClient(link) { client, _ in
            let call = Task { try await client.callTool("wait", arguments: ["seconds": 30], timeout: .seconds(60)) }
            // The server has the call once it is in flight; cancel it as a barge-in would.
            try await Task.sleep(for: .milliseconds(300))
            call.cancel()
            let outcome = await call.result
            #expect(throws: MCPError.self) { try outcome.get() }
            if case .failure(let error as MCPError) = outcome { #expect(error.kind == .cancelled) }
            try await withDeadline(.seconds(10), "the server to count the cancellation") {
                while true {
                    let count = try await client.callTool("cancelled", arguments: [:], timeout: .seconds(5))
                    if text(count) == "1" { return }
                    try await Task.sleep(for: .milliseconds(50))
                }
            }
        }
    }

    @Test("a result past the size bound (50 MB) is an error, and the link goes on", arguments: Link.allCases)
    func oversized(_ link: Link) async throws {
        try await withClient(link, maximumBytes: 1 << 20) { client, _ in
            let error = await #expect(throws: MCPError.self) {
                try await client.callTool("huge", arguments: ["megabytes": 50], timeout: .seconds(60))
            }
            #expect(error?.kind == .tooLarge)
            let after = try await client.callTool("echo", arguments: ["text": "still here"], timeout: .seconds(10))
            #expect(text(after) == "still here")
        }
    }

    @Test(
        "a server that dies mid-call fails the call at once, not at its deadline",
        arguments: [Link.httpStream, .stdio]
    )
    func serverDies(_ link: Link) async throws {
        try await withClient(link) { client, _ in
            let started = ContinuousClock.now
            let error = await #expect(throws: MCPError.self) {
                try await client.callTool("die", arguments: [:], timeout: .seconds(60))
            }
            #expect(error?.kind == .unreachable)
            #expect(ContinuousClock.now - started < .seconds(10))
        }
    }

    @Test("list_changed arrives mid-session and the new list holds the new tool", arguments: Link.allCases)
    func listChanged(_ link: Link) async throws {
        try await withClient(link) { client, _ in
            #expect(try await client.listTools().count == 17)
            _ = try await client.callTool("grow", arguments: [:], timeout: .seconds(10))
            try await withDeadline(.seconds(10), "list_changed") {
                for await event in client.events where event == .toolsChanged { return }
            }
            let names = try await client.listTools().compactMap { $0["name"]?.stringValue }
            #expect(names.contains("late"))
        }
    }

    @Test("the stateless revision (2026-07-28): server/discover, and every request identifies itself")
    func stateless() async throws {
        try await withClient(.httpJSON, revision: .stateless) { client, _ in
            #expect(client.server?.protocolVersion == "2026-07-28")
            #expect(client.server?.stateless == true)
            #expect(try await client.listTools().count == 17)
            let result = try await client.callTool("add", arguments: ["a": 1, "b": 2], timeout: .seconds(10))
            #expect(text(result) == "3")
        }
    }

    @Test(
        "the stateless revision hears list_changed on its subscriptions/listen stream",
        arguments: [Link.httpStream, .stdio]
    )
    func statelessListChanged(_ link: Link) async throws {
        try await withClient(link, revision: .stateless) { client, _ in
            #expect(client.server?.stateless == true)
            #expect(client.server?.toolsListChanged == true)
            #expect(try await client.listTools().count == 17)
            // The server tells only the streams open when the change happens: the client says when one is.
            let heard = try await withDeadline(.seconds(20), "list_changed on the listen stream") {
                var events = client.events.makeAsyncIterator()
                var listening = false
                while !listening, let event = await events.next() { listening = event == .listening }
                guard listening else { return false }
                _ = try await client.callTool("grow", arguments: [:], timeout: .seconds(10))
                while let event = await events.next() { if event == .toolsChanged { return true } }
                return false
            }
            #expect(heard)
            let names = try await client.listTools().compactMap { $0["name"]?.stringValue }
            #expect(names.contains("late"))
        }
    }

    @Test("auto picks the stateless revision where the server offers it")
    func automatic() async throws {
        try await withClient(.httpStream, revision: .auto) { client, _ in
            #expect(client.server?.protocolVersion == "2026-07-28")
        }
    }

    @Test("nothing listening: connecting fails within its deadline with a clear error")
    func unreachable() async throws {
        let client = makeClient(url: "http://127.0.0.1:9/mcp")
        let error = await #expect(throws: MCPError.self) { try await client.connect() }
        #expect(error?.kind == .unreachable || error?.kind == .timeout)
    }
}
