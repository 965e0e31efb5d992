import HarkCore
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A WebSocket transport a test scripts, connection by connection: what the server sends (once the client
/// sent its first message), then how it closes; or a refusal. It records every request and what the client
/// sent. A connection beyond the script is refused.
public final class ScriptedTransport: WebSocketTransport {
    /// One connection's script.
    public struct Connection: Sendable {
        /// The server's frames, in order, after the client's first message.
        public var frames: [WebSocketMessage]
        /// What the server says when it closes after the frames (nil: no close frame, 1006).
        public var close: WebSocketClose?
        /// When set, the connection is not opened: ``connect(_:handler:)`` throws this.
        public var refusal: WebSocketConnectError?

        public init(frames: [WebSocketMessage] = [], close: WebSocketClose? = nil) {
            self.frames = frames
            self.close = close
        }

        /// A connection that cannot be opened.
        public static func refused(_ error: WebSocketConnectError) -> Connection {
            var connection = Connection()
            connection.refusal = error
            return connection
        }
    }

    private struct State {
        var scripts: [Connection]
        var urls: [String] = []
        var sent: [String] = []
    }

    private let state: Mutex<State>

    public init(_ connections: [Connection]) {
        state = Mutex(State(scripts: connections))
    }

    /// The URL of every connection asked for, in order.
    public var urls: [String] { state.withLock { $0.urls } }

    /// Every text message the client sent, on any connection, in order.
    public var sent: [String] { state.withLock { $0.sent } }

    public func connect(
        _ request: WebSocketRequest,
        handler: @escaping @Sendable (WebSocketInbound, any WebSocketOutbound) async throws -> Void
    ) async throws -> WebSocketClose? {
        let script = state.withLock { state -> Connection in
            state.urls.append(request.url)
            guard !state.scripts.isEmpty else {
                return .refused(WebSocketConnectError(.refused, "no more scripted connections"))
            }
            return state.scripts.removeFirst()
        }
        if let refusal = script.refusal { throw refusal }
        let outbound = Outbound(transport: self)
        let frames = Mutex(script.frames[...])
        let inbound = WebSocketInbound {
            // The server answers only once the client has spoken, as a real one does.
            await outbound.firstSent()
            return frames.withLock { $0.popFirst() }
        }
        try await handler(inbound, outbound)
        return script.close
    }

    fileprivate func record(_ text: String) {
        state.withLock { $0.sent.append(text) }
    }

    /// The client's half: records what it sends; a close ends nothing early (the script decides).
    private final class Outbound: WebSocketOutbound {
        private struct State {
            var spoke = false
            var waiters: [CheckedContinuation<Void, Never>] = []
        }

        private let transport: ScriptedTransport
        private let state = Mutex(State())

        init(transport: ScriptedTransport) {
            self.transport = transport
        }

        func send(text: String) async throws {
            transport.record(text)
            let waiters = state.withLock { state in
                state.spoke = true
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume() }
        }

        func close(code: Int, reason: String) async throws {}

        /// Returns once the client sent its first message.
        func firstSent() async {
            await withCheckedContinuation { continuation in
                let spoke = state.withLock { state in
                    if !state.spoke { state.waiters.append(continuation) }
                    return state.spoke
                }
                if spoke { continuation.resume() }
            }
        }
    }
}

/// An HTTP client that gives every request the same answer and records the URLs asked for.
public final class ScriptedHTTPClient: HTTPClient {
    private let answer: HTTPResponse
    private let asked = Mutex<[String]>([])

    public init(_ answer: HTTPResponse) { self.answer = answer }

    /// The URL of every request, in order.
    public var urls: [String] { asked.withLock { $0 } }

    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        asked.withLock { $0.append(request.url) }
        return answer
    }
}

/// Runs `session` until it gives up (one failure is enough where a test sets it so), its events drained; returns
/// its failure, or nil when it ended without one.
public func failureOfRun(_ session: any VoiceSession, within timeout: Duration = .seconds(10)) async throws
    -> SessionFailure?
{
    let drain = Task { for await _ in session.events {} }
    defer { drain.cancel() }
    return try await withDeadline(timeout, "the session to give up") {
        do {
            try await session.run()
            return nil
        } catch let failure as SessionFailure {
            return failure
        }
    }
}
