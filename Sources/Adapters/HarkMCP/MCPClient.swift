import HarkCore
import Logging
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What the server said of itself when the client connected.
public struct MCPServerInfo: Sendable, Hashable {
    /// The protocol revision spoken (`2025-11-25`, `2026-07-28`, ...).
    public var protocolVersion: String
    /// Its name and version, printable (empty when it gave none).
    public var name: String
    /// It announces `notifications/tools/list_changed`.
    public var toolsListChanged: Bool
    /// The revision is the stateless one: no session, every request identifies itself.
    public var stateless: Bool
}

/// What a client reports as it happens.
public enum MCPClientEvent: Sendable, Hashable {
    /// The server announced that its tools changed (`notifications/tools/list_changed`).
    case toolsChanged
    /// The server acknowledged a `subscriptions/listen` stream: it now tells this client of tool changes (the
    /// stateless revision).
    case listening
    /// The link ended: why.
    case closed(String)
}

/// A Model Context Protocol client of one server, over any ``MCPTransport``: the handshake (`initialize` /
/// `notifications/initialized`, or `server/discover` on the stateless revision), `tools/list` page by page,
/// `tools/call` with progress and cancellation, `ping`, and the server's own `ping`. Every request has a deadline;
/// every message a size bound. Nothing from the server is trusted: see ``MCPToolDescription`` and ``MCPToolResult``.
public final class MCPClient: Sendable {
    /// The revisions of the session protocol this client speaks, newest first (`initialize` proposes the first).
    public static let sessionRevisions = ["2025-11-25", "2025-06-18", "2025-03-26"]
    /// The stateless revision (`server/discover`, each request carrying its `_meta`).
    public static let statelessRevision = "2026-07-28"
    /// Pages of `tools/list` read at most (a server that pages forever is cut off).
    public static let maximumPages = 16
    /// Tools read at most from one server.
    public static let maximumTools = 256
    /// How long one `subscriptions/listen` stream is kept before it is opened again (a server that sends nothing
    /// for this long is asked again; nothing is missed, as the stream was open throughout).
    public static let listenSpan = Duration.seconds(1800)

    /// Which revision to speak.
    public enum Revision: String, Sendable, Hashable, CaseIterable {
        /// The stateless revision when the server answers `server/discover`, else the session revision.
        case auto
        /// `initialize` and a session (2025-11-25 and earlier).
        case session
        /// The stateless revision only.
        case stateless
    }

    /// The client's settings.
    public struct Options: Sendable {
        /// Sent as `clientInfo`.
        public var clientName = "hark"
        public var clientVersion = "1"
        /// Which revision to speak.
        public var revision = Revision.session
        /// The deadline of the handshake and of `tools/list` (each page) and `ping`.
        public var requestTimeout = Duration.seconds(5)
        /// The largest message accepted (a `tools/call` result included).
        public var maximumMessageBytes = 1 << 20

        public init() {}
    }

    /// What happens, as it happens (tools changed, link closed); buffered, newest kept.
    public let events: AsyncStream<MCPClientEvent>
    private let eventSink: AsyncStream<MCPClientEvent>.Continuation
    private let transport: any MCPTransport
    private let options: Options
    private let clock: any Clock<Duration>
    private let logger: Logger
    private let state = Mutex(State())

    private struct State {
        var nextID = 1
        var pending: [MCPRequestID: Reply] = [:]
        var progress: [String: @Sendable (JSONValue) -> Void] = [:]
        var server: MCPServerInfo?
        var closed: String?
        var garbage = 0
        /// The stateless revision's `subscriptions/listen` loop, while it runs.
        var listener: Task<Void, Never>?
        /// Set when a stream is opened again after one ended: its acknowledgement means changes may have been
        /// missed meanwhile (the server replays nothing).
        var relistening = false
        /// Set when the server acknowledged a stream without tool changes, or refused it: not asked again.
        var listenRefused = false
        /// True while an acknowledged `subscriptions/listen` stream is open.
        var listening = false
    }

    /// A client over `transport`; nothing is sent before ``connect()``.
    public init(
        transport: any MCPTransport,
        options: Options = Options(),
        clock: any Clock<Duration> = ContinuousClock(),
        logger: Logger
    ) {
        self.transport = transport
        self.options = options
        self.clock = clock
        self.logger = logger
        (events, eventSink) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(16))
    }

    /// The server, once connected.
    public var server: MCPServerInfo? { state.withLock { $0.server } }

    /// True while the server holds a `subscriptions/listen` stream open for this client's tool changes (the
    /// stateless revision).
    public var isListening: Bool { state.withLock { $0.listening } }

    /// Messages from the server that were not JSON-RPC (dropped).
    public var garbageMessages: Int { state.withLock { $0.garbage } }

    // MARK: - Handshake

    /// Opens the link and agrees on a revision; throws when the server cannot be reached, does not answer in
    /// time, or speaks no revision this client does.
    @discardableResult
    public func connect() async throws(MCPError) -> MCPServerInfo {
        try await transport.open { [weak self] event in self?.receive(event) }
        if options.revision != .session {
            do {
                return try await discover()
            } catch let error where options.revision == .auto && error.kind != .timeout && error.kind != .unauthorized {
                logger.debug("server/discover refused (\(error)); trying initialize")
            }
        }
        let result = try await request(
            "initialize",
            params: [
                "protocolVersion": .string(Self.sessionRevisions[0]),
                "capabilities": [:],
                "clientInfo": clientInfo,
            ],
            timeout: options.requestTimeout
        )
        guard let version = result["protocolVersion"]?.stringValue, Self.sessionRevisions.contains(version) else {
            let said = RemoteText.printable(result["protocolVersion"]?.stringValue ?? "none", limit: 40)
            throw MCPError(.unsupported, "the server speaks protocol revision \(said), which this client does not")
        }
        let info = MCPServerInfo(
            protocolVersion: version,
            name: Self.serverName(result["serverInfo"]),
            toolsListChanged: result["capabilities"]?["tools"]?["listChanged"]?.boolValue ?? false,
            stateless: false
        )
        transport.negotiated(protocolVersion: version)
        state.withLock { $0.server = info }
        try await notify("notifications/initialized", params: nil)
        transport.listen()
        return info
    }

    private var clientInfo: JSONValue {
        ["name": .string(options.clientName), "version": .string(options.clientVersion)]
    }

    /// The stateless revision's probe.
    private func discover() async throws(MCPError) -> MCPServerInfo {
        let revision = Self.statelessRevision
        transport.negotiated(protocolVersion: revision)
        state.withLock {
            $0.server = MCPServerInfo(protocolVersion: revision, name: "", toolsListChanged: false, stateless: true)
        }
        let result: JSONValue
        do {
            result = try await request("server/discover", params: [:], timeout: options.requestTimeout)
        } catch {
            state.withLock { $0.server = nil }
            throw error
        }
        guard let versions = result["supportedVersions"]?.arrayValue, versions.contains(.string(revision)) else {
            state.withLock { $0.server = nil }
            throw MCPError(.unsupported, "the server does not offer revision \(revision)")
        }
        let info = MCPServerInfo(
            protocolVersion: revision,
            name: Self.serverName(result["_meta"]?["io.modelcontextprotocol/serverInfo"]),
            toolsListChanged: result["capabilities"]?["tools"]?["listChanged"]?.boolValue ?? false,
            stateless: true
        )
        state.withLock { $0.server = info }
        if info.toolsListChanged { startListening() }
        return info
    }

    /// The stateless revision has no stream of the server's own: the client asks for one with
    /// `subscriptions/listen` (tool changes only), whose answer is that stream — acknowledged first, then a
    /// `notifications/tools/list_changed` per change, and a result when the server ends it. A stream that ends or
    /// breaks is asked for again with backoff; as the server replays nothing, each stream after the first is
    /// followed by ``MCPClientEvent/toolsChanged`` (list again: what changed meanwhile). A server that refuses
    /// the request, or acknowledges it without tool changes, is not asked again.
    private func startListening() {
        let task = Task { [weak self] () -> Void in await self?.listenLoop() }
        let previous = state.withLock { state -> Task<Void, Never>? in
            defer { state.listener = task }
            return state.listener
        }
        previous?.cancel()
    }

    private func listenLoop() async {
        var backoff = Backoff(initial: .seconds(1), cap: .seconds(60))
        var random = SystemRandomNumberGenerator()
        var first = true
        while !Task.isCancelled {
            let go = state.withLock { state -> Bool in
                guard state.closed == nil, !state.listenRefused else { return false }
                state.relistening = !first
                return true
            }
            guard go else { return }
            first = false
            let opened = ContinuousClock.now
            do {
                _ = try await request(
                    "subscriptions/listen",
                    params: ["notifications": ["toolsListChanged": true]],
                    timeout: Self.listenSpan,
                    headTimeout: options.requestTimeout
                )
                state.withLock { $0.listening = false }
                logger.debug("the server ended its subscriptions/listen stream")
            } catch {
                state.withLock { $0.listening = false }
                if Task.isCancelled || state.withLock({ $0.closed != nil }) { return }
                switch error.kind {
                case .remote, .unsupported, .unauthorized:
                    logger.info(
                        "the server refused subscriptions/listen (\(error)); its tool changes are seen on a reconnect"
                    )
                    state.withLock { $0.listenRefused = true }
                    return
                case .timeout where ContinuousClock.now - opened >= Self.listenSpan:
                    backoff.reset()
                    continue  // the stream's span ended: asked again at once
                default:
                    logger.debug("the subscriptions/listen stream broke: \(error)")
                }
            }
            if ContinuousClock.now - opened > .seconds(60) { backoff.reset() }
            try? await clock.sleep(for: backoff.next(using: &random))
        }
    }

    private static func serverName(_ value: JSONValue?) -> String {
        let name = RemoteText.printable(value?["name"]?.stringValue ?? "", limit: 80)
        let version = RemoteText.printable(value?["version"]?.stringValue ?? "", limit: 40)
        return version.isEmpty ? name : "\(name) \(version)"
    }

    // MARK: - Calls

    /// Every tool the server offers, page by page (at most ``maximumPages`` pages and ``maximumTools`` tools),
    /// unread: ``MCPToolDescription`` reads each.
    public func listTools() async throws(MCPError) -> [JSONValue] {
        var tools: [JSONValue] = []
        var cursor: String?
        for _ in 0..<Self.maximumPages {
            var params: [String: JSONValue] = [:]
            if let cursor { params["cursor"] = .string(cursor) }
            let result = try await request("tools/list", params: .object(params), timeout: options.requestTimeout)
            guard let page = result["tools"]?.arrayValue else {
                throw MCPError(.garbage, "the server's tools/list result has no tools array")
            }
            tools += page.prefix(Self.maximumTools - tools.count)
            guard tools.count < Self.maximumTools, let next = result["nextCursor"]?.stringValue, !next.isEmpty,
                next.utf8.count <= 1024
            else { return tools }
            cursor = next
        }
        logger.warning("the server kept paging tools/list past \(Self.maximumPages) pages; the rest is left out")
        return tools
    }

    /// Calls the tool `name` (its name on the server) with `arguments`, within `timeout`; progress the server
    /// reports goes to `progress`. A tool's own failure is a result (``MCPToolResult/isError``); a cancelled
    /// task cancels the call at the server.
    public func callTool(
        _ name: String,
        arguments: JSONValue,
        timeout: Duration,
        progress: (@Sendable (JSONValue) -> Void)? = nil
    ) async throws(MCPError) -> JSONValue {
        var params: [String: JSONValue] = ["name": .string(name), "arguments": arguments]
        var token: String?
        if let progress {
            let made = state.withLock { state in
                let token = "hark-\(state.nextID)"
                state.progress[token] = progress
                return token
            }
            params["_meta"] = ["progressToken": .string(made)]
            token = made
        }
        defer { if let token { _ = state.withLock { $0.progress.removeValue(forKey: token) } } }
        return try await request("tools/call", params: .object(params), timeout: timeout, toolName: name)
    }

    /// Asks the server whether it is there.
    public func ping() async throws(MCPError) {
        _ = try await request("ping", params: nil, timeout: options.requestTimeout)
    }

    /// Ends the link (the HTTP session is deleted, a child process ends); pending requests fail.
    public func close() async {
        failAll(MCPError(.unreachable, "the client closed the link"), closing: "closed")
        state.withLock { $0.listener }?.cancel()
        await transport.close()
    }

    // MARK: - Requests

    /// Sends a request and waits for its answer within `timeout`. A timeout or a cancelled task sends
    /// `notifications/cancelled` and stops reading the answer.
    func request(
        _ method: String,
        params: JSONValue?,
        timeout: Duration,
        headTimeout: Duration? = nil,
        toolName: String? = nil
    ) async throws(MCPError) -> JSONValue {
        let reply = Reply()
        let opened = state.withLock { state -> (MCPRequestID, MCPServerInfo?)? in
            guard state.closed == nil else { return nil }
            let id = MCPRequestID.number(state.nextID)
            state.nextID += 1
            state.pending[id] = reply
            return (id, state.server)
        }
        guard let (id, server) = opened else {
            throw MCPError(.unreachable, "the link to the server is closed")
        }
        var params = params
        if let server, server.stateless { params = withEnvelope(params, revision: server.protocolVersion) }
        let data = MCPEncoding.request(id: id, method: method, params: params)
        let context = MCPSendContext(
            method: method,
            requestID: id,
            toolName: toolName,
            timeout: timeout,
            headTimeout: headTimeout,
            maximumBytes: options.maximumMessageBytes,
            answered: { reply.isSettled }
        )
        let sending = Task { [transport] in
            do throws(MCPError) {
                try await transport.send(data, context: context)
            } catch {
                reply.settle(.failure(error))
            }
        }
        let deadline = Task { [clock] in
            try? await clock.sleep(for: timeout)
            if !Task.isCancelled {
                reply.settle(.failure(MCPError(.timeout, "\(method) got no answer within \(timeout.humanDescription)")))
            }
        }
        let outcome = await withTaskCancellationHandler {
            await reply.value()
        } onCancel: {
            reply.settle(.failure(MCPError(.cancelled, "\(method) was cancelled")))
        }
        deadline.cancel()
        _ = state.withLock { $0.pending.removeValue(forKey: id) }
        switch outcome {
        case .success(let result):
            return result
        case .failure(let error):
            if error.kind == .timeout || error.kind == .cancelled {
                // The answer is no longer wanted: stop reading it, and tell a session server to stop working on it.
                sending.cancel()
                if !(server?.stateless ?? false) {
                    let reason = error.kind == .timeout ? "timed out" : "cancelled by the user"
                    Task {
                        try? await self.notify(
                            "notifications/cancelled",
                            params: ["requestId": id.json, "reason": .string(reason)]
                        )
                    }
                }
            }
            throw error
        }
    }

    /// The stateless revision: every request carries the protocol version, the client's capabilities and name.
    private func withEnvelope(_ params: JSONValue?, revision: String) -> JSONValue {
        var members: [String: JSONValue] = [:]
        if case .object(let given)? = params { members = given }
        var meta: [String: JSONValue] = [:]
        if case .object(let given)? = members["_meta"] { meta = given }
        meta["io.modelcontextprotocol/protocolVersion"] = .string(revision)
        meta["io.modelcontextprotocol/clientCapabilities"] = [:]
        meta["io.modelcontextprotocol/clientInfo"] = clientInfo
        members["_meta"] = .object(meta)
        return .object(members)
    }

    /// Sends a notification (no answer).
    func notify(_ method: String, params: JSONValue?) async throws(MCPError) {
        let context = MCPSendContext(
            method: method,
            requestID: nil,
            timeout: options.requestTimeout,
            maximumBytes: 64 << 10
        )
        try await transport.send(MCPEncoding.notification(method: method, params: params), context: context)
    }

    // MARK: - What arrives

    private func receive(_ event: MCPTransportEvent) {
        switch event {
        case .closed(let reason):
            failAll(MCPError(.unreachable, "the link to the server ended: \(reason)"), closing: reason)
        case .oversized(let bytes):
            // Whose answer it was cannot be read: every request waiting fails (a tools/call in practice).
            let replies = state.withLock { Array($0.pending.values) }
            let error = MCPError(
                .tooLarge,
                "the server answered with \(bytes) bytes or more, past the limit of \(options.maximumMessageBytes)"
            )
            for reply in replies { reply.settle(.failure(error)) }
        case .message(let bytes):
            let message: MCPIncoming
            do {
                message = try MCPIncoming.decode(bytes)
            } catch {
                let count = state.withLock { state in
                    state.garbage += 1
                    return state.garbage
                }
                if count == 1 { logger.warning("\(error) (dropped; further ones are counted, not logged)") }
                return
            }
            handle(message)
        }
    }

    private func handle(_ message: MCPIncoming) {
        switch message {
        case .response(let id, let result):
            let reply = state.withLock { $0.pending[id] }
            reply?.settle(result.mapError { MCPError(.remote, "the server refused: \($0)") })
        case .request(let id, let method, _):
            let answer =
                method == "ping"
                ? MCPEncoding.response(id: id, result: [:])
                : MCPEncoding.errorResponse(id: id, code: -32601, message: "not served by this client")
            let context = MCPSendContext(
                method: nil,
                requestID: nil,
                timeout: options.requestTimeout,
                maximumBytes: 64 << 10
            )
            Task { [transport] in try? await transport.send(answer, context: context) }
        case .notification(let method, let params):
            switch method {
            case "notifications/progress":
                let token: String? =
                    switch params?["progressToken"] {
                    case .string(let text)?: text
                    case .number(let number)?: "\(Int(exactly: number) ?? -1)"
                    default: nil
                    }
                guard let token, let params, let sink = state.withLock({ $0.progress[token] }) else { return }
                sink(Self.progressReport(params))
            case "notifications/tools/list_changed":
                eventSink.yield(.toolsChanged)
            case "notifications/subscriptions/acknowledged":
                acknowledged(params)
            default:
                break  // logging, resources, cancelled: nothing this client acts on
            }
        }
    }

    /// The first message on a `subscriptions/listen` stream: which changes the server will send on it.
    private func acknowledged(_ params: JSONValue?) {
        let honoured = params?["notifications"]?["toolsListChanged"]?.boolValue == true
        let again = state.withLock { state -> Bool in
            if !honoured { state.listenRefused = true }
            state.listening = honoured
            defer { state.relistening = false }
            return state.relistening
        }
        if !honoured {
            logger.info("the server will not announce tool changes on its subscriptions/listen stream")
            return
        }
        eventSink.yield(.listening)
        if again { eventSink.yield(.toolsChanged) }
    }

    /// A progress notification as a partial result for the model: numbers and a printable message.
    static func progressReport(_ params: JSONValue) -> JSONValue {
        var report: [String: JSONValue] = [:]
        if let progress = params["progress"]?.numberValue, progress.isFinite { report["progress"] = .number(progress) }
        if let total = params["total"]?.numberValue, total.isFinite { report["total"] = .number(total) }
        if let message = params["message"]?.stringValue {
            report["message"] = .string(RemoteText.printable(message, limit: 300))
        }
        return .object(report)
    }

    private func failAll(_ error: MCPError, closing reason: String) {
        let replies = state.withLock { state -> [Reply] in
            if state.closed == nil { state.closed = reason }
            defer { state.pending.removeAll() }
            return Array(state.pending.values)
        }
        for reply in replies { reply.settle(.failure(error)) }
        eventSink.yield(.closed(RemoteText.printable(reason, limit: 200)))
        eventSink.finish()
    }
}

/// One answer awaited: settled once (the response, an error, a timeout or a cancellation, whichever comes first).
final class Reply: Sendable {
    private let state = Mutex<
        (result: Result<JSONValue, MCPError>?, waiter: CheckedContinuation<Result<JSONValue, MCPError>, Never>?)
    >((nil, nil))

    /// True once settled.
    var isSettled: Bool { state.withLock { $0.result != nil } }

    /// Settles it (the first call wins).
    func settle(_ result: Result<JSONValue, MCPError>) {
        let waiter = state.withLock { state -> CheckedContinuation<Result<JSONValue, MCPError>, Never>? in
            guard state.result == nil else { return nil }
            state.result = result
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: result)
    }

    /// Waits until settled.
    func value() async -> Result<JSONValue, MCPError> {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Result<JSONValue, MCPError>? in
                if let result = state.result { return result }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
