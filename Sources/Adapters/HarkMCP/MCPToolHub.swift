import HarkCore
import Logging
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// One configured MCP server (`mcp.servers` in the configuration, `--mcp NAME=URL` on the command line).
public struct MCPServerSettings: Sendable {
    /// Where the server is.
    public enum Endpoint: Sendable, Hashable {
        /// Streamable HTTP at this URL (https, or http to this machine).
        case url(String)
        /// A local server started as a child: the program and its arguments.
        case command([String])
    }

    /// Its name: the namespace of its tools (letters, digits, `_`).
    public var name: String
    public var endpoint: Endpoint
    /// The bearer token sent as `Authorization` (HTTP), or nil.
    public var credential: Secret?
    /// The tools offered: names or globs (`*`, `?`); empty offers every tool.
    public var allow: [String] = []
    /// Tools the server marks destructive that may still be offered (names or globs).
    public var allowDestructive: [String] = []
    /// How long one call may take.
    public var callTimeout: Duration = .seconds(30)
    /// The largest result accepted, in bytes.
    public var maximumResultBytes = 256 << 10
    /// Which protocol revision to speak.
    public var revision = MCPClient.Revision.session
    /// Extra CA certificates to trust (a PEM file), or nil.
    public var caFile: String?

    /// A server called `name` at `endpoint`; see the properties for the rest.
    public init(name: String, endpoint: Endpoint) {
        self.name = name
        self.endpoint = endpoint
    }

    /// True for a name usable as a namespace: 1-24 letters, digits or `_`, starting with a letter.
    public static func isValidName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, first.isASCII, first.properties.isAlphabetic, name.count <= 24
        else { return false }
        return name.unicodeScalars.allSatisfy {
            $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "_")
        }
    }
}

/// How one server stands, for `hark status`.
public struct MCPServerStatus: Sendable, Hashable {
    /// Where the link is.
    public enum State: Sendable, Hashable {
        case connecting
        case ready
        case offline(reason: String)
    }

    public var name: String
    public var state: State
    /// Tools offered to the agent.
    public var tools: Int
    /// Tools the server has that are not offered, and why.
    public var notOffered: [MCPToolRefusal]
    /// The server's name and the revision spoken, once connected.
    public var server: String

    /// One line: `ha: ready, 12 tools (2 not offered)`.
    public var summary: String {
        let where_: String =
            switch state {
            case .connecting: "connecting"
            case .ready: "ready"
            case .offline(let reason): "offline (\(reason))"
            }
        let refused = notOffered.isEmpty ? "" : " (\(notOffered.count) not offered)"
        return "\(name): \(where_), \(tools) tool\(tools == 1 ? "" : "s")\(refused)"
    }
}

/// What a check of one server found (`hark config check`, `hark doctor`).
public struct MCPServerReport: Sendable {
    public var name: String
    /// The server, or why it could not be reached.
    public var outcome: Result<MCPServerInfo, MCPError>
    /// The tools offered, by declared name (and their name on the server).
    public var offered: [(declared: String, tool: String)]
    /// The tools not offered, and why.
    public var notOffered: [MCPToolRefusal]
}

/// The agent's MCP tools: one link per configured server, each connected, listed and watched, reconnected with
/// backoff when it fails; the tools each offers are published in a ``ToolCatalog`` (under the server's name) that
/// sessions declare and watch. A server that is down, slow or talks garbage only lacks its tools; nothing waits
/// for it. Every call is logged (server, tool, duration, outcome; arguments and results only when `logContent`).
public final class MCPToolHub: Sendable {
    /// The tools of every server, as they come.
    public let catalog: ToolCatalog
    private let servers: [MCPServerSettings]
    private let makeHTTP: @Sendable (MCPServerSettings) -> any HTTPClient
    private let environment: [String: String]
    private let clock: any Clock<Duration>
    private let logger: Logger
    private let logContent: Bool
    private let state: Mutex<[String: Link]>

    /// How often a connected server is pinged.
    public static let pingInterval = Duration.seconds(30)

    private struct Link {
        var status: MCPServerStatus
        var client: MCPClient?
        /// Declared name → name on the server.
        var names: [String: String] = [:]
        var broken: AsyncStream<String>.Continuation?
    }

    /// A hub over `servers`; nothing connects before ``run()``. `makeHTTP` gives the HTTP client of a server (its
    /// CA file, the result bound); `environment` is what a local server is started with.
    public init(
        servers: [MCPServerSettings],
        catalog: ToolCatalog = ToolCatalog(),
        environment: [String: String],
        clock: any Clock<Duration> = ContinuousClock(),
        logger: Logger,
        logContent: Bool = false,
        makeHTTP: @escaping @Sendable (MCPServerSettings) -> any HTTPClient
    ) {
        self.servers = servers
        self.catalog = catalog
        self.environment = environment
        self.clock = clock
        self.logger = logger
        self.logContent = logContent
        self.makeHTTP = makeHTTP
        var links: [String: Link] = [:]
        for server in servers {
            links[server.name] = Link(
                status: MCPServerStatus(name: server.name, state: .connecting, tools: 0, notOffered: [], server: "")
            )
        }
        self.state = Mutex(links)
    }

    /// Every server's standing, in configuration order.
    public var statuses: [MCPServerStatus] {
        state.withLock { links in servers.compactMap { links[$0.name]?.status } }
    }

    /// Waits until every server has answered (ready or failed once) or `deadline` passed: a session starts with
    /// the tools that came by then, and hears of the others when they come.
    public func waitForFirstTools(within deadline: Duration) async {
        let elapsed = clock.stopwatch()
        while elapsed() < deadline {
            let waiting = state.withLock { $0.values.contains { $0.status.state == .connecting } }
            if !waiting { return }
            try? await clock.sleep(for: .milliseconds(20))
        }
    }

    /// Keeps every server's link until cancelled.
    public func run() async {
        await withTaskGroup(of: Void.self) { group in
            for server in servers {
                group.addTask { [self] in await keep(server) }
            }
        }
        for server in servers {
            if let client = state.withLock({ $0[server.name]?.client }) { await client.close() }
        }
    }

    /// Makes the client of `server` (not connected).
    public func makeClient(_ server: MCPServerSettings) -> MCPClient {
        let transport: any MCPTransport
        switch server.endpoint {
        case .url(let url):
            var headers: [(name: String, value: String)] = []
            if let credential = server.credential { headers.append(("Authorization", "Bearer \(credential.reveal())")) }
            transport = MCPHTTPTransport(
                url: url,
                http: makeHTTP(server),
                headers: headers,
                clock: clock,
                logger: logger
            )
        case .command(let command):
            transport = MCPStdioTransport(
                command: command,
                environment: environment,
                name: server.name,
                maximumLineBytes: server.maximumResultBytes + (16 << 10),
                logger: logger
            )
        }
        var options = MCPClient.Options()
        options.revision = server.revision
        options.maximumMessageBytes = server.maximumResultBytes + (16 << 10)
        return MCPClient(transport: transport, options: options, clock: clock, logger: logger)
    }

    private func keep(_ server: MCPServerSettings) async {
        var backoff = Backoff(initial: .seconds(1), cap: .seconds(60))
        var random = SystemRandomNumberGenerator()
        while !Task.isCancelled {
            let client = makeClient(server)
            let (broken, breaker) = AsyncStream.makeStream(of: String.self, bufferingPolicy: .bufferingNewest(1))
            update(server.name) { link in
                link.client = client
                link.broken = breaker
                if case .offline = link.status.state {} else { link.status.state = .connecting }
            }
            var reason: String
            do {
                let info = try await client.connect()
                try await refresh(server, client: client, info: info)
                backoff.reset()
                reason = await watch(server, client: client, broken: broken)
            } catch {
                reason = error.message
            }
            update(server.name) { link in
                link.client = nil
                link.broken = nil
                link.status.state = .offline(reason: RemoteText.printable(reason, limit: 160))
            }
            await client.close()
            if Task.isCancelled { return }
            let wait = backoff.next(using: &random)
            logger.warning(
                "MCP server \(server.name): \(RemoteText.printable(reason, limit: 200)); retrying in \(wait.humanDescription)"
            )
            try? await clock.sleep(for: wait)
        }
    }

    /// Waits for the link to end, re-listing the tools when the server says they changed.
    private func watch(_ server: MCPServerSettings, client: MCPClient, broken: AsyncStream<String>) async -> String {
        enum Happening: Sendable { case client(MCPClientEvent?), broken(String) }
        let (merged, sink) = AsyncStream.makeStream(of: Happening.self)
        let forward = Task {
            for await event in client.events { sink.yield(.client(event)) }
            sink.yield(.client(nil))
        }
        let forwardBroken = Task {
            for await why in broken {
                sink.yield(.broken(why))
                return
            }
        }
        // A server that went away while idle (nothing else tells over HTTP) or hangs: a ping now and then.
        let pinger = Task { [clock] in
            while !Task.isCancelled {
                try? await clock.sleep(for: Self.pingInterval)
                if Task.isCancelled { return }
                do throws(MCPError) {
                    try await client.ping()
                } catch {
                    sink.yield(.broken("it did not answer a ping: \(error.message)"))
                    return
                }
            }
        }
        defer {
            forward.cancel()
            forwardBroken.cancel()
            pinger.cancel()
        }
        for await happening in merged {
            switch happening {
            case .client(.toolsChanged?):
                logger.info("MCP server \(server.name): its tools changed; listing them again")
                do {
                    try await refresh(server, client: client, info: client.server)
                } catch {
                    return error.message
                }
            case .client(.listening?):
                logger.debug("MCP server \(server.name): listening for its tool changes")
            case .client(.closed(let why)?):
                return why
            case .client(nil):
                return "the link ended"
            case .broken(let why):
                return why
            }
        }
        return "stopped"
    }

    /// Lists the tools, chooses what to offer, publishes it.
    private func refresh(_ server: MCPServerSettings, client: MCPClient, info: MCPServerInfo?) async throws(MCPError) {
        let listed = try await client.listTools()
        let (offered, refused) = Self.choose(listed, server: server)
        let tools = offered.map { makeTool($0.tool, declared: $0.declared, server: server) }
        update(server.name) { link in
            link.names = Dictionary(
                offered.map { ($0.declared, $0.tool.name) },
                uniquingKeysWith: { first, _ in first }
            )
            link.status.state = .ready
            link.status.tools = offered.count
            link.status.notOffered = refused
            if let info { link.status.server = "\(info.name) (\(info.protocolVersion))" }
        }
        catalog.set(tools, for: server.name)
        logger.info("MCP server \(server.name): \(offered.count) tools offered, \(refused.count) not offered")
        for refusal in refused { logger.info("MCP server \(server.name): not offered: \(refusal)") }
    }

    /// Which of `listed` are offered, under which names, and why the others are not.
    public static func choose(_ listed: [JSONValue], server: MCPServerSettings) -> (
        offered: [(declared: String, tool: MCPToolDescription)], refused: [MCPToolRefusal]
    ) {
        var offered: [(declared: String, tool: MCPToolDescription)] = []
        var refused: [MCPToolRefusal] = []
        var taken: Set<String> = []
        for entry in listed {
            let tool: MCPToolDescription
            switch MCPToolDescription.read(entry) {
            case .failure(let refusal):
                refused.append(refusal)
                continue
            case .success(let read):
                tool = read
            }
            let shown = RemoteText.printable(tool.name, limit: 80)
            if !server.allow.isEmpty, !server.allow.contains(where: { MCPToolNaming.glob($0, matches: tool.name) }) {
                refused.append(MCPToolRefusal(tool: shown, reason: "not in the allow-list (tools)"))
                continue
            }
            if tool.destructive,
                !server.allowDestructive.contains(where: { MCPToolNaming.glob($0, matches: tool.name) })
            {
                refused.append(
                    MCPToolRefusal(
                        tool: shown,
                        reason: "the server marks it destructive and allow_destructive does not name it"
                    )
                )
                continue
            }
            let declared = MCPToolNaming.declaredName(server: server.name, tool: tool.name)
            guard taken.insert(declared).inserted else {
                refused.append(
                    MCPToolRefusal(tool: shown, reason: "its declared name \(declared) is taken by another tool")
                )
                continue
            }
            offered.append((declared, tool))
        }
        return (offered, refused)
    }

    private func makeTool(_ tool: MCPToolDescription, declared: String, server: MCPServerSettings) -> LocalTool {
        // Tools that only read answer as the model asks; tools that act are heard about when the agent is idle.
        var local = LocalTool(
            name: declared,
            description: tool.description,
            behavior: tool.readOnly ? .blocking : .nonBlocking(.whenIdle)
        ) { [self] arguments, progress in
            try await call(server: server, tool: tool.name, arguments: arguments, progress: progress)
        }
        local.parametersJSONSchema = tool.inputSchema
        return local
    }

    /// Calls `tool` on `server`: the result for the model, or an error it can speak about. Logged.
    public func call(
        server: MCPServerSettings,
        tool: String,
        arguments: JSONValue,
        progress: ToolProgress = .ignored
    ) async throws -> JSONValue {
        let elapsed = clock.stopwatch()
        let shownTool = RemoteText.printable(tool, limit: 80)
        func log(_ outcome: String) {
            let took = elapsed()
            logger.notice("MCP call \(server.name)/\(shownTool): \(outcome) in \(took.humanDescription)")
        }
        if logContent {
            logger.info(
                "MCP call \(server.name)/\(shownTool) arguments: \(RemoteText.printable("\(arguments)", limit: 500))"
            )
        }
        guard let client = state.withLock({ $0[server.name]?.client }), client.server != nil else {
            log("server offline")
            throw MCPCallFailure("the \(server.name) service is not reachable right now")
        }
        // Progress goes on as partial results, handed over in order by one task.
        let (reports, sink) = AsyncStream.makeStream(of: JSONValue.self, bufferingPolicy: .bufferingNewest(4))
        let relay = Task {
            for await report in reports { await progress.report(report) }
        }
        defer {
            sink.finish()
            relay.cancel()
        }
        do {
            let raw = try await client.callTool(
                tool,
                arguments: arguments,
                timeout: server.callTimeout,
                progress: { sink.yield($0) }
            )
            let (result, succeeded) = MCPToolResult.forModel(raw)
            log(succeeded ? "ok" : "tool error")
            if logContent {
                logger.info(
                    "MCP call \(server.name)/\(shownTool) result: \(RemoteText.printable("\(result)", limit: 500))"
                )
            }
            return result
        } catch {
            switch error.kind {
            case .cancelled:
                log("cancelled")
                throw CancellationError()
            case .unreachable, .sessionGone, .garbage:
                update(server.name) { $0.broken?.yield(error.message) }
            default:
                break
            }
            log("failed: \(error.kind.rawValue)")
            throw MCPCallFailure(Self.spoken(error, server: server.name))
        }
    }

    /// What the model is told of a failed call.
    static func spoken(_ error: MCPError, server: String) -> String {
        switch error.kind {
        case .timeout: "the \(server) service did not answer in time"
        case .tooLarge: "the \(server) service answered with more data than this device accepts"
        case .unreachable, .sessionGone: "the \(server) service could not be reached"
        case .unauthorized: "the \(server) service refused this device's credential"
        case .remote: "the \(server) service refused the call: \(error.message)"
        default: "the \(server) service answered something this device cannot read"
        }
    }

    /// Connects to every server once, lists its tools and says what would be offered (configuration check).
    public func check(within deadline: Duration) async -> [MCPServerReport] {
        await withTaskGroup(of: MCPServerReport.self) { group in
            for server in servers {
                group.addTask { [self] in
                    let client = makeClient(server)
                    defer { Task { await client.close() } }
                    do throws(MCPError) {
                        let info = try await client.connect()
                        let (offered, refused) = Self.choose(try await client.listTools(), server: server)
                        return MCPServerReport(
                            name: server.name,
                            outcome: .success(info),
                            offered: offered.map { ($0.declared, $0.tool.name) },
                            notOffered: refused
                        )
                    } catch {
                        return MCPServerReport(name: server.name, outcome: .failure(error), offered: [], notOffered: [])
                    }
                }
            }
            var reports: [MCPServerReport] = []
            for await report in group { reports.append(report) }
            return servers.compactMap { server in reports.first { $0.name == server.name } }
        }
    }

    private func update(_ name: String, _ change: (inout Link) -> Void) {
        state.withLock { links in
            if var link = links[name] {
                change(&link)
                links[name] = link
            }
        }
    }
}

/// A call that failed: what the model is told.
public struct MCPCallFailure: Error, Sendable, CustomStringConvertible {
    public var description: String

    init(_ description: String) { self.description = description }
}
