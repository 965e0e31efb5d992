import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// One WebSocket message as received: the Live service sends its JSON in text or binary frames.
public enum WebSocketMessage: Sendable, Hashable {
    case text(String)
    case binary(Data)

    /// The message's bytes (UTF-8 for text).
    public var bytes: Data {
        switch self {
        case .text(let text): Data(text.utf8)
        case .binary(let data): data
        }
    }
}

/// What the server said when the connection closed. A nil `code` means no close frame (1006).
public struct WebSocketClose: Sendable, Hashable {
    public var code: Int?
    public var reason: String?

    public init(code: Int?, reason: String?) {
        self.code = code
        self.reason = reason
    }
}

/// Where and how to open a WebSocket.
public struct WebSocketRequest: Sendable {
    /// The full URL, which may carry a credential (then `loggableURL` hides it).
    public var url: String
    /// Extra HTTP headers for the upgrade request (credentials go here when the service allows it).
    public var headers: [(name: String, value: String)]
    /// The URL as it may appear in a log line: always redacted (``URLRedaction/redact(_:)``), whatever was given.
    public var loggableURL: String

    /// A request for `url`; `loggableURL` (default: `url`) is stored redacted.
    public init(url: String, headers: [(name: String, value: String)] = [], loggableURL: String? = nil) {
        self.url = url
        self.headers = headers
        self.loggableURL = URLRedaction.redact(loggableURL ?? url)
    }
}

/// The sending half of an open WebSocket; safe to use from several tasks.
public protocol WebSocketOutbound: Sendable {
    /// Sends one text message.
    func send(text: String) async throws
    /// Sends text messages in order, written together where the transport can (one flush for all).
    func send(texts: [String]) async throws
    /// Closes the connection with `code` and `reason`; what the server still sends is read until its close frame
    /// (a switch to a new connection still wants the old one's last resumption handle).
    func close(code: Int, reason: String) async throws
    /// Closes the connection with `code` and `reason`, and reads nothing more: messages still coming or buffered
    /// are dropped unread (as a browser's WebSocket does after `close()`), so a flood cannot hold the end of a
    /// finished session back.
    func leave(code: Int, reason: String) async throws
}

extension WebSocketOutbound {
    public func send(texts: [String]) async throws {
        for text in texts { try await send(text: text) }
    }

    public func leave(code: Int, reason: String) async throws {
        try await close(code: code, reason: reason)
    }
}

/// The receiving half of an open WebSocket. One reader at a time: a task may hand it to another
/// (which is why it is `Sendable`), but two tasks must never await ``next()`` at once.
public final class WebSocketInbound: @unchecked Sendable {
    private let nextMessage: () async throws -> WebSocketMessage?

    public init(_ next: @escaping () async throws -> WebSocketMessage?) {
        self.nextMessage = next
    }

    /// The next message, or nil once the connection closed.
    public func next() async throws -> WebSocketMessage? {
        try await nextMessage()
    }
}

/// Opens WebSocket connections. The adapter (SwiftNIO here) implements it; core code only uses this.
public protocol WebSocketTransport: Sendable {
    /// Connects, runs `handler` with the connection's two halves, and returns what the server said
    /// when it closed. Throws ``WebSocketConnectError`` when no connection could be made.
    func connect(
        _ request: WebSocketRequest,
        handler: @escaping @Sendable (WebSocketInbound, any WebSocketOutbound) async throws -> Void
    ) async throws -> WebSocketClose?
}

/// Why a WebSocket could not be opened.
public struct WebSocketConnectError: Error, Sendable, CustomStringConvertible {
    /// The class of failure.
    public enum Kind: String, Sendable {
        case dns, refused, timeout, tls, upgradeDeclined, messageTooLarge, other
        /// The server's certificate failed verification while the clock looked right: a wrong CA, a
        /// self-signed or an expired certificate, or a name mismatch. Retrying soon will not help.
        case untrusted
        /// The request cannot be made as written (e.g. `wss://` to an IP address): fix the configuration.
        case invalidRequest
    }

    /// The class of failure.
    public var kind: Kind
    /// One line for a person; never the URL's path, query or user-info.
    public var message: String
    /// With ``Kind/upgradeDeclined``: the HTTP status the server answered the upgrade with (401, 429, ...).
    public var httpStatus: Int?

    /// An error of `kind`, with its `message` and, for a declined upgrade, the server's `httpStatus`.
    public init(_ kind: Kind, _ message: String, httpStatus: Int? = nil) {
        self.kind = kind
        self.message = message
        self.httpStatus = httpStatus
    }

    public var description: String { message }
}

/// One HTTP request (token minting, REST hand-offs, streamed answers). Credentials go in headers.
public struct HTTPRequest: Sendable {
    /// The method (`GET`, `POST`, ...).
    public var method: String
    /// The full URL.
    public var url: String
    /// Extra request headers.
    public var headers: [(name: String, value: String)]
    /// The request body, sent with its `Content-Length`.
    public var body: Data?
    /// ``HTTPClient/send(_:)``: how long the whole exchange may take once connected.
    public var timeout: Duration
    /// ``HTTPClient/stream(_:)``: how long to wait, once connected, for the response head (the first byte).
    public var headTimeout: Duration
    /// ``HTTPClient/stream(_:)``: the longest wait for the next chunk of the body while the reader waits for it.
    public var idleTimeout: Duration

    /// A request; see the properties for the timeouts.
    public init(
        method: String = "GET",
        url: String,
        headers: [(name: String, value: String)] = [],
        body: Data? = nil,
        timeout: Duration = .seconds(15),
        headTimeout: Duration = .seconds(15),
        idleTimeout: Duration = .seconds(30)
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.headTimeout = headTimeout
        self.idleTimeout = idleTimeout
    }
}

/// An HTTP response: status, headers and body.
public struct HTTPResponse: Sendable {
    /// The status code.
    public var status: Int
    /// The body.
    public var body: Data
    /// The response headers, in order.
    public var headers: [(name: String, value: String)]

    /// A response with `status`, `body` and `headers`.
    public init(status: Int, body: Data, headers: [(name: String, value: String)] = []) {
        self.status = status
        self.body = body
        self.headers = headers
    }

    /// The first value of the header `name` (compared without case), or nil.
    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

/// A response whose body arrives as it is read: status and headers first, then the body in chunks.
public struct HTTPStreamingResponse: Sendable {
    /// The status code.
    public var status: Int
    /// The response headers, in order.
    public var headers: [(name: String, value: String)]
    /// The body, read from the network only as it is asked for.
    public var body: HTTPBodyStream

    /// A response with `status`, `headers` and `body`.
    public init(status: Int, headers: [(name: String, value: String)], body: HTTPBodyStream) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The first value of the header `name` (compared without case), or nil.
    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

/// The body of a streamed HTTP response: byte chunks as the server sends them, read from the network only when
/// asked for (backpressure). Single-pass, one reader at a time. Cancelling the reading task, dropping the
/// iterator (leaving a `for try await` loop early) or dropping the stream closes the connection at once.
/// A failure (a stall past the idle deadline, a body over the size limit, the connection lost before the end)
/// is thrown from ``next()``; the end of the body is nil.
public final class HTTPBodyStream: AsyncSequence, Sendable {
    /// One chunk of the body.
    public typealias Element = Data

    private let nextChunk: @Sendable () async throws -> Data?
    private let cancelStream: @Sendable () -> Void

    /// A stream over `next` (nil at the end) and `cancel` (closes the connection; may be called more than once,
    /// from any thread, also after the end).
    public init(next: @escaping @Sendable () async throws -> Data?, cancel: @escaping @Sendable () -> Void) {
        self.nextChunk = next
        self.cancelStream = cancel
    }

    deinit { cancelStream() }

    /// The next chunk, or nil at the end of the body.
    public func next() async throws -> Data? { try await nextChunk() }

    /// Stops reading: the connection is closed at once.
    public func cancel() { cancelStream() }

    /// The rest of the body; past `limit` bytes the connection is closed and ``HTTPClientError`` thrown.
    public func collect(upTo limit: Int) async throws -> Data {
        var data = Data()
        while let chunk = try await next() {
            guard data.count + chunk.count <= limit else {
                cancel()
                throw HTTPClientError("the response is larger than \(limit) bytes")
            }
            data.append(chunk)
        }
        return data
    }

    /// An iterator over the chunks; dropping it closes the connection.
    public func makeAsyncIterator() -> Iterator { Iterator(stream: self) }

    /// Reads the stream's chunks; dropping it closes the connection.
    public struct Iterator: AsyncIteratorProtocol {
        private let stream: HTTPBodyStream
        private let dropped: CancelOnDrop

        init(stream: HTTPBodyStream) {
            self.stream = stream
            self.dropped = CancelOnDrop(stream.cancelStream)
        }

        /// The next chunk, or nil at the end of the body.
        public mutating func next() async throws -> Data? { try await stream.next() }
    }

    /// Calls `cancel` when the last iterator holding it goes away.
    private final class CancelOnDrop: Sendable {
        private let cancel: @Sendable () -> Void
        init(_ cancel: @escaping @Sendable () -> Void) { self.cancel = cancel }
        deinit { cancel() }
    }
}

/// Makes HTTP requests. `NIOHTTPClient` (HarkHTTP) implements it; tests may implement it in-process.
public protocol HTTPClient: Sendable {
    /// Performs `request`. Throws only when no HTTP answer came (DNS, TLS, refused, timeout).
    func send(_ request: HTTPRequest) async throws -> HTTPResponse

    /// Performs `request` and returns once the response head came; the body is read as it is asked for (see
    /// ``HTTPBodyStream``). Throws when no head came (DNS, TLS, refused, ``HTTPRequest/headTimeout``).
    /// The default reads the whole response with ``send(_:)`` and hands the body over as one chunk.
    func stream(_ request: HTTPRequest) async throws -> HTTPStreamingResponse

    /// Starts opening a connection to `url`'s origin (name, TCP, TLS) for a request to come, so that request does
    /// not wait for it; nil when the client cannot (the default). Dropping or closing it unused closes it.
    func openAhead(to url: String) -> (any HTTPOpenedAhead)?

    /// ``stream(_:)`` on `ahead` when it is open to the request's origin and still usable (else on a new
    /// connection, as ``stream(_:)``). The default ignores `ahead`.
    func stream(_ request: HTTPRequest, on ahead: (any HTTPOpenedAhead)?) async throws -> HTTPStreamingResponse
}

/// A connection an ``HTTPClient`` opened ahead for one request (``HTTPClient/openAhead(to:)``). One request uses it
/// (``HTTPClient/stream(_:on:)``); closed when closed, or when dropped unused.
public protocol HTTPOpenedAhead: AnyObject, Sendable {
    /// Closes it (when it was not used; a request that used it owns it).
    func close()
}

extension HTTPClient {
    public func openAhead(to url: String) -> (any HTTPOpenedAhead)? { nil }

    public func stream(_ request: HTTPRequest, on ahead: (any HTTPOpenedAhead)?) async throws -> HTTPStreamingResponse {
        try await stream(request)
    }

    /// The whole response from ``send(_:)``, its body as one chunk.
    public func stream(_ request: HTTPRequest) async throws -> HTTPStreamingResponse {
        let response = try await send(request)
        let remaining = Mutex<Data?>(response.body.isEmpty ? nil : response.body)
        let body = HTTPBodyStream(
            next: {
                remaining.withLock { body in
                    defer { body = nil }
                    return body
                }
            },
            cancel: { remaining.withLock { $0 = nil } }
        )
        return HTTPStreamingResponse(status: response.status, headers: response.headers, body: body)
    }
}

/// Why an HTTP request got no answer.
public struct HTTPClientError: Error, Sendable, CustomStringConvertible {
    public var message: String
    /// The server's certificate failed verification (see ``WebSocketConnectError/Kind/untrusted``).
    public var untrusted: Bool
    public init(_ message: String, untrusted: Bool = false) {
        self.message = message
        self.untrusted = untrusted
    }
    public var description: String { message }
}
