// The latency an MCP tool adds to a conversation, split into the server's own share and Hark's: from the model's
// `toolCall` frame (its bytes, as read off the WebSocket) to the `toolResponse` frame's text ready for it, through
// the tool hub, the MCP client and streamable HTTP on loopback, against the MCP test server
// (scripts/lib/mcp-test-server.py --json --timing, which answers each request with the time it spent on it in
// `X-Server-Time-Us`). Hark's share = the whole - the server's own; it holds the loopback transit too. scripts/bench-mcp
// runs it.
//
//   hark-mcp-bench --url http://127.0.0.1:PORT/mcp [--calls 500]
import ArgumentParser
import HarkCore
import HarkGemini
import HarkHTTP
import HarkMCP
import Logging
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The HTTP client that keeps the server's own time of the last answer (`X-Server-Time-Us`).
final class TimingHTTPClient: HTTPClient {
    let inner = NIOHTTPClient()
    let serverMicroseconds = Mutex<Double?>(nil)

    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let response = try await inner.send(request)
        keep(response.header("X-Server-Time-Us"))
        return response
    }

    func stream(_ request: HTTPRequest) async throws -> HTTPStreamingResponse {
        let response = try await inner.stream(request)
        keep(response.header("X-Server-Time-Us"))
        return response
    }

    private func keep(_ header: String?) {
        if let value = header.flatMap(Double.init) { serverMicroseconds.withLock { $0 = value } }
    }
}

@main
struct MCPBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hark-mcp-bench",
        abstract: "The latency an MCP tool call adds: the server's share and Hark's, p50/p99."
    )

    @Option(help: "The MCP test server's endpoint (started with --json --timing).")
    var url: String

    @Option(help: "Calls measured (after 20 to warm up).")
    var calls = 500

    func run() async throws {
        let logger = Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() }
        let http = TimingHTTPClient()
        let hub = MCPToolHub(
            servers: [MCPServerSettings(name: "bench", endpoint: .url(url))],
            environment: [:],
            logger: logger
        ) { _ in http }
        let hubRun = Task { await hub.run() }
        defer { hubRun.cancel() }
        await hub.waitForFirstTools(within: .seconds(20))
        var registry = ToolRegistry()
        registry.catalog = hub.catalog
        guard registry.tool(named: "bench__echo") != nil else {
            throw ValidationError("the server at \(url) offers no tool echo (\(hub.statuses.first?.summary ?? ""))")
        }
        let codec = LiveCodec()
        let frame = Data(
            #"{"toolCall":{"functionCalls":[{"id":"call-1","name":"bench__echo","args":{"text":"the kitchen light is on"}}]}}"#
                .utf8
        )
        let clock = ContinuousClock()
        var whole: [Double] = []
        var server: [Double] = []
        var own: [Double] = []
        for index in 0..<(calls + 20) {
            http.serverMicroseconds.withLock { $0 = nil }
            let start = clock.now
            guard case .toolCall(let call) = try codec.decodeServer(frame).message.payload,
                let function = call.functionCalls.first
            else { throw ValidationError("the toolCall frame did not decode") }
            let (result, _) = await registry.call(name: function.name, arguments: function.args ?? [:])
            let response = ClientMessage.toolResponse(
                ToolResponse(functionResponses: [
                    FunctionResponse(id: function.id ?? "", name: function.name, response: result)
                ])
            )
            let text = try codec.encode(response)
            let took = start.duration(to: clock.now)
            guard text.contains("the kitchen light is on") else { throw ValidationError("the tool answered \(text)") }
            guard let serverTime = http.serverMicroseconds.withLock({ $0 }) else {
                throw ValidationError("the server sent no X-Server-Time-Us: start it with --json --timing")
            }
            if index < 20 { continue }
            let total = Double(took.nanoseconds) / 1e6
            whole.append(total)
            server.append(serverTime / 1000)
            own.append(total - serverTime / 1000)
        }
        func line(_ name: String, _ values: [Double]) -> String {
            let sorted = values.sorted()
            func at(_ fraction: Double) -> Double {
                sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))]
            }
            func fixed(_ value: Double) -> String {
                let hundredths = Int((value * 100).rounded())
                let fraction = abs(hundredths) % 100
                return "\(hundredths / 100).\(fraction < 10 ? "0" : "")\(fraction)"
            }
            return "\(name) p50 \(fixed(at(0.5))) ms  p99 \(fixed(at(0.99))) ms"
        }
        print("MCP tool call, toolCall frame -> toolResponse text, \(calls) calls over streamable HTTP (JSON answers):")
        print("  " + line("whole        ", whole))
        print("  " + line("server's own ", server))
        print("  " + line("Hark's share ", own) + "  (goal: p99 <= 5 ms)")
    }
}
