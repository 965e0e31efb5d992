import HarkCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What one message sent to a server is, for the transport (headers, deadlines, bounds).
public struct MCPSendContext: Sendable {
    /// The JSON-RPC method (`tools/call`, ...), or nil for a response of ours.
    public var method: String?
    /// The request's id when the message is a request (a response is awaited), nil for a notification or response.
    public var requestID: MCPRequestID?
    /// The tool a `tools/call` names (the `Mcp-Name` header of the stateless revision).
    public var toolName: String?
    /// How long the exchange may take.
    public var timeout: Duration
    /// How long the answer's head may take, when shorter than ``timeout`` (a long-lived stream's first bytes).
    public var headTimeout: Duration?
    /// The largest message accepted in answer.
    public var maximumBytes: Int
    /// True once the awaited response has been delivered (the transport then stops reading that answer).
    public var answered: @Sendable () -> Bool

    /// A context; see the properties.
    public init(
        method: String?,
        requestID: MCPRequestID?,
        toolName: String? = nil,
        timeout: Duration,
        headTimeout: Duration? = nil,
        maximumBytes: Int,
        answered: @escaping @Sendable () -> Bool = { false }
    ) {
        self.method = method
        self.requestID = requestID
        self.toolName = toolName
        self.timeout = timeout
        self.headTimeout = headTimeout
        self.maximumBytes = maximumBytes
        self.answered = answered
    }
}

/// What the transport hands the client.
public enum MCPTransportEvent: Sendable {
    /// One JSON-RPC message (bytes, not yet read).
    case message(Data)
    /// A message passed the size bound and was dropped unread.
    case oversized(bytes: Int)
    /// The link ended (the child exited, the socket broke): why.
    case closed(String)
}

/// Carries JSON-RPC messages to and from one MCP server: streamable HTTP (``MCPHTTPTransport``) or a child process
/// over stdio (``MCPStdioTransport``).
public protocol MCPTransport: Sendable {
    /// Opens the link; what arrives goes to `deliver` (from any thread, in order).
    func open(deliver: @escaping @Sendable (MCPTransportEvent) -> Void) async throws(MCPError)
    /// Sends one message. Over HTTP it returns once the server's answer to it (JSON or an event stream) was read
    /// and delivered; over stdio once it was written.
    func send(_ message: Data, context: MCPSendContext) async throws(MCPError)
    /// The protocol revision agreed in `initialize` (headers on every later request), and the client's
    /// `_meta` identification for a stateless revision.
    func negotiated(protocolVersion: String)
    /// Starts listening for what the server sends unasked (the HTTP GET stream), where the transport has that.
    func listen()
    /// Ends the link: the HTTP session is deleted, the child process told to end and reaped.
    func close() async
}
