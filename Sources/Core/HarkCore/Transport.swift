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
    /// Closes the connection with `code` and `reason`.
    func close(code: Int, reason: String) async throws
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

/// One HTTP request (token minting, REST hand-offs). Credentials go in headers.
public struct HTTPRequest: Sendable {
    public var method: String
    public var url: String
    public var headers: [(name: String, value: String)]
    public var body: Data?
    public var timeout: Duration

    public init(
        method: String = "GET",
        url: String,
        headers: [(name: String, value: String)] = [],
        body: Data? = nil,
        timeout: Duration = .seconds(15)
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }
}

/// An HTTP response: status and body.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var body: Data

    public init(status: Int, body: Data) {
        self.status = status
        self.body = body
    }
}

/// Makes HTTP requests. `NIOHTTPClient` (HarkHTTP) implements it; tests may implement it in-process.
public protocol HTTPClient: Sendable {
    /// Performs `request`. Throws only when no HTTP answer came (DNS, TLS, refused, timeout).
    func send(_ request: HTTPRequest) async throws -> HTTPResponse
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

/// Whether the system clock has been set. A board without a battery-backed clock boots in the past, and
/// then every certificate looks not yet valid: a verification failure says nothing about trust yet.
public enum SystemClock {
    /// Earlier than this (2026-01-01) the clock has not been set.
    public static let earliestPlausibleTime = Date(timeIntervalSince1970: 1_767_225_600)

    public static func isUnset(_ now: Date = Date()) -> Bool { now < earliestPlausibleTime }
}
