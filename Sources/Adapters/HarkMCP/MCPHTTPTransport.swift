import HarkBackendKit
import HarkCore
import Logging
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// MCP's streamable HTTP transport: every message its own `POST`, answered with one JSON message or an event
/// stream scoped to that request (progress first, then the response); `202` for a notification. The session id
/// the server gives in `initialize` goes back on every request (`Mcp-Session-Id`; a `404` on it means the session is
/// gone), and `MCP-Protocol-Version` once agreed. A broken answer stream is resumed with `GET` and
/// `Last-Event-ID`. What the server sends unasked (`list_changed`) comes on a `GET` stream (`405`: none), reopened
/// with backoff when it breaks. The stateless revision sends no session and no `GET`; each request names its
/// method (`Mcp-Method`) and tool (`Mcp-Name`); what the server sends unasked comes on the answer to the client's
/// `subscriptions/listen` (``MCPClient`` keeps one open).
public final class MCPHTTPTransport: MCPTransport {
    private let url: String
    private let http: any HTTPClient
    private let headers: [(name: String, value: String)]
    private let clock: any Clock<Duration>
    private let logger: Logger
    private let state = Mutex(State())

    private struct State {
        var deliver: (@Sendable (MCPTransportEvent) -> Void)?
        var sessionID: String?
        var protocolVersion: String?
        var listener: Task<Void, Never>?
        var closed = false
    }

    /// Resumptions of one broken answer stream at most.
    static let maximumResumptions = 3

    /// A transport to the endpoint `url`, with `headers` on every request (the credential:
    /// `Authorization: Bearer ...`).
    public init(
        url: String,
        http: any HTTPClient,
        headers: [(name: String, value: String)] = [],
        clock: any Clock<Duration> = ContinuousClock(),
        logger: Logger
    ) {
        self.url = url
        self.http = http
        self.headers = headers
        self.clock = clock
        self.logger = logger
    }

    public func open(deliver: @escaping @Sendable (MCPTransportEvent) -> Void) async throws(MCPError) {
        state.withLock { $0.deliver = deliver }
    }

    public func negotiated(protocolVersion: String) {
        state.withLock { $0.protocolVersion = protocolVersion }
    }

    private var stateless: Bool {
        state.withLock { $0.protocolVersion == MCPClient.statelessRevision }
    }

    private func deliver(_ event: MCPTransportEvent) {
        state.withLock { $0.deliver }?(event)
    }

    private func requestHeaders(accept: String, context: MCPSendContext?) -> [(name: String, value: String)] {
        let (session, version) = state.withLock { ($0.sessionID, $0.protocolVersion) }
        var list = headers + [("Accept", accept)]
        if let session { list.append(("Mcp-Session-Id", session)) }
        if let version { list.append(("MCP-Protocol-Version", version)) }
        if version == MCPClient.statelessRevision, let context {
            if let method = context.method { list.append(("Mcp-Method", method)) }
            if let tool = context.toolName, tool.utf8.allSatisfy({ (0x20...0x7E).contains($0) }) {
                list.append(("Mcp-Name", tool))
            }
        }
        return list
    }

    public func send(_ message: Data, context: MCPSendContext) async throws(MCPError) {
        var list = requestHeaders(accept: "application/json, text/event-stream", context: context)
        list.append(("Content-Type", "application/json"))
        let request = HTTPRequest(
            method: "POST",
            url: url,
            headers: list,
            body: message,
            timeout: context.timeout,
            headTimeout: context.headTimeout.map { min($0, context.timeout) } ?? context.timeout,
            idleTimeout: context.timeout
        )
        let response: HTTPStreamingResponse
        do {
            response = try await http.stream(request)
        } catch {
            throw Self.failure(error, doing: context.method ?? "a response")
        }
        if context.method == "initialize", let session = response.header("Mcp-Session-Id") {
            // Visible ASCII only (the specification's rule); anything else is not echoed.
            if session.utf8.count <= 256, session.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) {
                state.withLock { $0.sessionID = session }
            }
        }
        try await checkStatus(response, doing: context.method ?? "a response")
        guard context.requestID != nil else {
            response.body.cancel()
            return
        }
        let type = response.header("Content-Type")?.lowercased() ?? ""
        if type.hasPrefix("text/event-stream") {
            try await readStream(response.body, context: context)
        } else {
            let body: Data
            do {
                body = try await response.body.collect(upTo: context.maximumBytes)
            } catch {
                throw Self.failure(error, doing: context.method ?? "a request", limit: context.maximumBytes)
            }
            deliver(.message(body))
        }
    }

    /// Maps a status that is not success to an error (the body's first bytes are read for the message).
    private func checkStatus(_ response: HTTPStreamingResponse, doing what: String) async throws(MCPError) {
        guard !(200..<300).contains(response.status) else { return }
        let text = (try? await response.body.collect(upTo: 2048)).map { String(decoding: $0, as: UTF8.self) } ?? ""
        let said = RemoteText.printable(text, limit: 200)
        switch response.status {
        case 401, 403:
            throw MCPError(.unauthorized, "the server refused the credential (HTTP \(response.status)) for \(what)")
        case 404 where state.withLock({ $0.sessionID != nil }):
            state.withLock { $0.sessionID = nil }
            throw MCPError(.sessionGone, "the server's session is gone (HTTP 404)")
        default:
            throw MCPError(.unreachable, "\(what): HTTP \(response.status) \(said)")
        }
    }

    /// Reads an answer's event stream until the awaited response came; a stream that breaks first is resumed
    /// from its last event id.
    private func readStream(_ body: HTTPBodyStream, context: MCPSendContext) async throws(MCPError) {
        var parser = ServerSentEventParser(
            maximumLineBytes: context.maximumBytes + 64,
            maximumEventBytes: context.maximumBytes
        )
        var current = body
        var resumptions = 0
        while true {
            var failure: MCPError?
            do {
                while let chunk = try await current.next() {
                    let dropped = parser.droppedEvents
                    for event in parser.feed(chunk) where !event.data.isEmpty {
                        deliver(.message(Data(event.data.utf8)))
                    }
                    if parser.droppedEvents > dropped { deliver(.oversized(bytes: context.maximumBytes)) }
                    if context.answered() {
                        current.cancel()
                        return
                    }
                }
                for event in parser.finish() where !event.data.isEmpty { deliver(.message(Data(event.data.utf8))) }
                if context.answered() { return }
            } catch is CancellationError {
                current.cancel()
                return
            } catch {
                failure = Self.failure(error, doing: context.method ?? "a request", limit: context.maximumBytes)
                if failure?.kind == .tooLarge { throw failure! }
            }
            if Task.isCancelled { return }
            // The stream ended before the response: resume it where it broke, when the server numbered its events.
            let lastID = parser.lastEventID
            guard !lastID.isEmpty, !stateless, resumptions < Self.maximumResumptions else {
                throw failure
                    ?? MCPError(
                        .unreachable,
                        "the server's answer to \(context.method ?? "a request") ended without a response"
                    )
            }
            resumptions += 1
            let wait = Duration.milliseconds(min(parser.retryMilliseconds ?? 0, 5000))
            if wait > .zero { try? await clock.sleep(for: wait) }
            logger.info("resuming the answer stream after event \(RemoteText.printable(lastID, limit: 64))")
            var list = requestHeaders(accept: "text/event-stream", context: nil)
            list.append(("Last-Event-ID", lastID))
            let request = HTTPRequest(
                method: "GET",
                url: url,
                headers: list,
                timeout: context.timeout,
                headTimeout: context.timeout,
                idleTimeout: context.timeout
            )
            do {
                let response = try await http.stream(request)
                try await checkStatus(response, doing: "resuming \(context.method ?? "a request")")
                current = response.body
            } catch let error as MCPError {
                throw error
            } catch {
                throw Self.failure(error, doing: "resuming \(context.method ?? "a request")")
            }
        }
    }

    static func failure(_ error: any Error, doing what: String, limit: Int? = nil) -> MCPError {
        if let error = error as? MCPError { return error }
        if error is CancellationError { return MCPError(.cancelled, "\(what) was cancelled") }
        let text = String(describing: error)
        if text.contains("larger than") {
            return MCPError(
                .tooLarge,
                "the server's answer to \(what) is larger than \(limit.map { "\($0) bytes" } ?? "the limit")"
            )
        }
        if text.contains("timed out") || text.contains("deadline") || text.contains("timeout") {
            return MCPError(.timeout, "\(what): \(RemoteText.printable(text, limit: 200))")
        }
        return MCPError(.unreachable, "\(what): \(RemoteText.printable(text, limit: 200))")
    }

    // MARK: - The server's own stream

    public func listen() {
        guard !stateless else { return }
        let task = Task { [self] in await listenLoop() }
        let previous = state.withLock { state -> Task<Void, Never>? in
            defer { state.listener = task }
            return state.listener
        }
        previous?.cancel()
    }

    private func listenLoop() async {
        var backoff = Backoff(initial: .seconds(1), cap: .seconds(30))
        var random = SystemRandomNumberGenerator()
        var lastID = ""
        while !Task.isCancelled, !state.withLock({ $0.closed }) {
            var list = requestHeaders(accept: "text/event-stream", context: nil)
            if !lastID.isEmpty { list.append(("Last-Event-ID", lastID)) }
            let request = HTTPRequest(
                method: "GET",
                url: url,
                headers: list,
                timeout: .seconds(600),
                headTimeout: .seconds(10),
                idleTimeout: .seconds(600)
            )
            do {
                let response = try await http.stream(request)
                if response.status == 405 {
                    response.body.cancel()
                    logger.debug("the server offers no stream of its own (405)")
                    return
                }
                guard (200..<300).contains(response.status) else {
                    response.body.cancel()
                    throw MCPError(.unreachable, "HTTP \(response.status)")
                }
                var parser = ServerSentEventParser(maximumLineBytes: 1 << 20, maximumEventBytes: 1 << 20)
                for try await chunk in response.body {
                    for event in parser.feed(chunk) where !event.data.isEmpty {
                        deliver(.message(Data(event.data.utf8)))
                    }
                    lastID = parser.lastEventID
                    backoff.reset()
                }
            } catch {
                if Task.isCancelled { return }
                logger.debug("the server's stream broke: \(error)")
            }
            let wait = backoff.next(using: &random)
            try? await clock.sleep(for: wait)
        }
    }

    public func close() async {
        let (listener, session) = state.withLock { state in
            state.closed = true
            defer { state.listener = nil }
            return (state.listener, state.sessionID)
        }
        listener?.cancel()
        guard let session, !stateless else { return }
        var list = headers
        list.append(("Mcp-Session-Id", session))
        if let version = state.withLock({ $0.protocolVersion }) { list.append(("MCP-Protocol-Version", version)) }
        _ = try? await http.send(HTTPRequest(method: "DELETE", url: url, headers: list, timeout: .seconds(2)))
    }
}
