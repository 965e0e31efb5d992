import HTTPTypes
import HarkCore
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOWebSocket

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// WebSockets over SwiftNIO: `wss://` with the system's trust roots plus an optional extra CA file (the
/// certificate checked against the host name, or the IP address when the URL names one), plain `ws://` only to
/// this machine unless ``allowInsecure`` is set. Every phase has a deadline — TCP connect, TLS handshake, the
/// upgrade answer, the close handshake — and cancelling the task that called ``connect(_:handler:)`` closes the
/// socket at once, in any phase. The pipeline is NIO's (HTTP/1 upgrade, WebSocket frame codec) with a small
/// protocol handler of Hark's on top (``WebSocketConnectionHandler``).
public struct NIOWebSocketTransport: WebSocketTransport {
    /// A PEM file of extra CA certificates to trust (a simulator's or a proxy's), or nil.
    public var caFile: String?
    /// Largest frame and message accepted (the Live service's clients allow 1 MiB; more is kept for margin).
    public var maxMessageSize: Int
    /// A ping every `pingInterval`, and the connection is closed when the pong has not come by the
    /// next one. Long on purpose: the Live service's pongs have taken 30 s.
    public var pingInterval: Duration?
    /// How long the close handshake may take before the socket is simply closed.
    public var closeTimeout: Duration
    /// How long the TCP connection (name resolution included) may take.
    public var connectTimeout: Duration
    /// How long the TLS handshake may take, from the TCP connection.
    public var tlsHandshakeTimeout: Duration
    /// How long the server may take to answer the upgrade request, from the end of the TLS handshake.
    public var upgradeTimeout: Duration
    /// Allows plain `ws://` to hosts other than this machine (the key then travels in clear text); each such
    /// connection logs a warning.
    public var allowInsecure: Bool
    private let logger: Logger

    /// A transport; see the properties.
    public init(
        caFile: String? = nil,
        maxMessageSize: Int = 4 << 20,
        pingInterval: Duration? = .seconds(60),
        closeTimeout: Duration = .seconds(2),
        connectTimeout: Duration = .seconds(10),
        tlsHandshakeTimeout: Duration = .seconds(10),
        upgradeTimeout: Duration = .seconds(10),
        allowInsecure: Bool = false,
        logger: Logger
    ) {
        self.caFile = caFile
        self.maxMessageSize = maxMessageSize
        self.pingInterval = pingInterval
        self.closeTimeout = closeTimeout
        self.connectTimeout = connectTimeout
        self.tlsHandshakeTimeout = tlsHandshakeTimeout
        self.upgradeTimeout = upgradeTimeout
        self.allowInsecure = allowInsecure
        self.logger = logger
    }

    public func connect(
        _ request: WebSocketRequest,
        handler: @escaping @Sendable (WebSocketInbound, any WebSocketOutbound) async throws -> Void
    ) async throws -> WebSocketClose? {
        if let problem = EndpointPolicy.check(url: request.url, allowInsecure: allowInsecure) {
            throw WebSocketConnectError(.invalidRequest, problem)
        }
        guard let endpoint = EndpointURL(request.url), endpoint.scheme == "ws" || endpoint.scheme == "wss" else {
            throw WebSocketConnectError(
                .invalidRequest,
                "\(URLRedaction.redact(request.url)) is not a ws:// or wss:// URL"
            )
        }
        if !endpoint.isSecure, !endpoint.isLoopback {
            logger.warning(
                "connecting to \(endpoint.origin) without TLS (insecure connections are allowed): the key and the conversation travel in clear text"
            )
        }
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: endpoint.authority)
        for header in request.headers {
            guard HTTPField.Name(header.name) != nil, HTTPField.isValidValue(header.value) else {
                let name = URLRedaction.redact(String(header.name.prefix(64)))
                throw WebSocketConnectError(.invalidRequest, "the header \(name) has an invalid name or value")
            }
            headers.add(name: header.name, value: header.value)
        }
        var tls: NIOSSLContext?
        if endpoint.isSecure {
            do {
                tls = try ClientTLS.context(caFile: caFile)
            } catch {
                throw WebSocketConnectError(.tls, error.message)
            }
        }
        let connection = ConnectionGuard<WebSocketConnectError>()
        let link = WebSocketLink()
        return try await withTaskCancellationHandler {
            let outcome = try await open(
                endpoint,
                url: request.url,
                headers: headers,
                tls: tls,
                connection: connection,
                link: link
            )
            switch outcome {
            case .declined(let response):
                let head: HTTPResponseHead
                do {
                    head = try await response.get()
                } catch {
                    connection.close()
                    throw connection.overridingError
                        ?? WebSocketConnectError(.upgradeDeclined, "the server declined the WebSocket upgrade")
                }
                connection.close()
                let status = Int(head.status.code)
                let phrase = HTTPResponseStatus(statusCode: status).reasonPhrase
                throw WebSocketConnectError(
                    .upgradeDeclined,
                    "\(endpoint.hostAndPort) declined the WebSocket upgrade: HTTP \(status) \(phrase)",
                    httpStatus: status
                )
            case .upgraded(let channel):
                if let error = connection.overridingError {
                    connection.close()
                    throw error
                }
                return try await serve(channel, connection: connection, link: link, handler: handler)
            }
        } onCancel: {
            connection.cancel()
        }
    }

    /// What the upgrade came to.
    enum UpgradeOutcome: Sendable {
        case upgraded(NIOAsyncChannel<WebSocketEvent, WebSocketCommand>)
        /// The server answered with another status; the head follows.
        case declined(EventLoopFuture<HTTPResponseHead>)
    }

    /// Connects, shakes hands (TLS) and asks for the upgrade, each within its deadline.
    private func open(
        _ endpoint: EndpointURL,
        url: String,
        headers: HTTPHeaders,
        tls: NIOSSLContext?,
        connection: ConnectionGuard<WebSocketConnectError>,
        link: WebSocketLink
    ) async throws -> UpgradeOutcome {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let promise = loop.makePromise(of: UpgradeOutcome.self)
        connection.bind(promise)
        let requestHead = HTTPRequestHead(
            version: .http1_1,
            method: .GET,
            uri: endpoint.requestTarget,
            headers: headers
        )
        let (maxMessageSize, closeTimeout, pingInterval, logger) = (
            min(max(maxMessageSize, 125), Int(UInt32.max)), closeTimeout, pingInterval, logger
        )
        let phase = (tls: tlsHandshakeTimeout, upgrade: upgradeTimeout)
        let bootstrap = ClientBootstrap(group: loop)
            .connectTimeout(TimeAmount(max(connectTimeout, .milliseconds(1))))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    guard connection.adopt(channel) else { throw CancellationError() }
                    let pipeline = channel.pipeline.syncOperations
                    if let tls { try pipeline.addHandler(ClientTLS.handler(context: tls, for: endpoint)) }
                    try pipeline.addHandler(
                        ConnectPhaseHandler(
                            connection: connection,
                            secure: tls != nil,
                            tlsTimeout: phase.tls,
                            upgradeTimeout: phase.upgrade,
                            url: url,
                            hostAndPort: endpoint.hostAndPort
                        ),
                        name: ConnectPhaseHandler.name
                    )
                    let upgrader = NIOTypedWebSocketClientUpgrader<UpgradeOutcome>(
                        maxFrameSize: maxMessageSize,
                        enableAutomaticErrorHandling: false
                    ) { channel, _ in
                        channel.eventLoop.makeCompletedFuture {
                            ConnectPhaseHandler.finish(on: channel, connection: connection)
                            try channel.pipeline.syncOperations.addHandler(
                                WebSocketConnectionHandler(
                                    maxMessageSize: maxMessageSize,
                                    closeTimeout: closeTimeout,
                                    pingInterval: pingInterval,
                                    link: link,
                                    connection: connection,
                                    logger: logger
                                )
                            )
                            // Few messages wait for the reader: the socket is read as it reads.
                            let configuration = NIOAsyncChannel<WebSocketEvent, WebSocketCommand>.Configuration(
                                backPressureStrategy: .init(lowWatermark: 2, highWatermark: 4)
                            )
                            return .upgraded(
                                try NIOAsyncChannel(wrappingChannelSynchronously: channel, configuration: configuration)
                            )
                        }
                    }
                    let upgrade = NIOTypedHTTPClientUpgradeConfiguration<UpgradeOutcome>(
                        upgradeRequestHead: requestHead,
                        upgraders: [upgrader]
                    ) { channel in
                        channel.eventLoop.makeCompletedFuture {
                            ConnectPhaseHandler.finish(on: channel, connection: connection)
                            let head = channel.eventLoop.makePromise(of: HTTPResponseHead.self)
                            try channel.pipeline.syncOperations.addHandler(DeclinedUpgradeHandler(promise: head))
                            return .declined(head.futureResult)
                        }
                    }
                    var configuration = NIOUpgradableHTTPClientPipelineConfiguration(upgradeConfiguration: upgrade)
                    configuration.leftOverBytesStrategy = .forwardBytes
                    try pipeline.configureUpgradableHTTPClientPipeline(configuration: configuration)
                        .cascade(to: promise)
                }
            }
        bootstrap.connect(host: endpoint.host, port: endpoint.effectivePort).whenFailure { promise.fail($0) }
        do {
            return try await promise.futureResult.get()
        } catch {
            throw connection.overridingError ?? Self.classify(error, endpoint: endpoint, url: url)
        }
    }

    /// Runs `handler` on the open connection, then ends the close handshake (within the close deadline).
    private func serve(
        _ channel: NIOAsyncChannel<WebSocketEvent, WebSocketCommand>,
        connection: ConnectionGuard<WebSocketConnectError>,
        link: WebSocketLink,
        handler: @escaping @Sendable (WebSocketInbound, any WebSocketOutbound) async throws -> Void
    ) async throws -> WebSocketClose? {
        let handlerError: (any Error)? = try await channel.executeThenClose { inbound, outbound in
            let reader = InboundReader(inbound.makeAsyncIterator(), link: link)
            var handlerError: (any Error)?
            do {
                try await handler(WebSocketInbound { try await reader.next() }, Outbound(writer: outbound, link: link))
            } catch {
                handlerError = error
            }
            // Close (unless a close frame already went either way), then read until the server closes the socket
            // or the close deadline closes it; what the server still sends is dropped.
            try? await outbound.write(.close(code: handlerError == nil ? 1000 : 1011, reason: ""))
            await reader.drain()
            return handlerError
        }
        if let error = connection.overridingError { throw error }
        if let handlerError, !(handlerError is ConnectionEnded) { throw handlerError }
        return link.serverClose
    }

    /// One line for a person, never with the URL's path, query or user-info.
    static func classify(_ error: any Error, endpoint: EndpointURL, url: String) -> WebSocketConnectError {
        switch error {
        case let error as WebSocketConnectError:
            return error
        case let error as NIOConnectionError:
            if error.dnsAAAAError != nil || error.dnsAError != nil, error.connectionErrors.isEmpty {
                return WebSocketConnectError(.dns, "cannot resolve \(endpoint.host)")
            }
            return WebSocketConnectError(.refused, "cannot connect to \(endpoint.hostAndPort)")
        case ChannelError.connectTimeout:
            return WebSocketConnectError(.timeout, "connecting to \(endpoint.hostAndPort) timed out")
        case ChannelError.inappropriateOperationForState, ChannelError.ioOnClosedChannel, ChannelError.alreadyClosed,
            ChannelError.eof:
            // The connection was refused or closed while its handlers were still being set up (a race the
            // machine's load decides): the same outage as a refusal.
            return WebSocketConnectError(
                .refused,
                "cannot connect to \(endpoint.hostAndPort) (the connection closed while it was set up)"
            )
        case is NIOSSLError, is BoringSSLError, is NIOSSLExtraError:
            return classifyTLS(String(describing: error), url: url)
        case let error as NIOHTTPClientUpgradeError
        where error == .upgraderDeniedUpgrade || error == .responseProtocolNotFound:
            return WebSocketConnectError(
                .upgradeDeclined,
                "\(endpoint.hostAndPort) answered the upgrade with 101 but not as a WebSocket server"
            )
        case let error as IOError:
            return WebSocketConnectError(.refused, "cannot connect to \(endpoint.hostAndPort) (\(error.description))")
        case is CancellationError:
            return WebSocketConnectError(.other, "the connection was cancelled")
        default:
            return WebSocketConnectError(.other, "connecting to \(endpoint.hostAndPort) failed: \(error)")
        }
    }
}

/// The connection ended (closed, or a close frame went either way): nothing more can be sent. A handler that
/// stops because of it ends the connection normally.
struct ConnectionEnded: Error, CustomStringConvertible {
    var description: String { "the WebSocket connection is closed" }
}

/// Reads the connection's events for one task at a time.
private final class InboundReader: @unchecked Sendable {
    private var iterator: NIOAsyncChannelInboundStream<WebSocketEvent>.AsyncIterator
    /// The reader saw the end (a close frame, or the socket closed).
    private var ended = false
    /// The socket closed.
    private var finished = false

    private let link: WebSocketLink

    init(_ iterator: NIOAsyncChannelInboundStream<WebSocketEvent>.AsyncIterator, link: WebSocketLink) {
        self.iterator = iterator
        self.link = link
    }

    /// The next message; once the client began closing, messages still buffered are dropped unread.
    func next() async throws -> HarkCore.WebSocketMessage? {
        while !ended {
            switch try await iterator.next() {
            case .message(let message)?:
                if link.isLeaving { continue }
                return message
            case .closed?:
                ended = true
            case nil:
                ended = true
                finished = true
            }
        }
        return nil
    }

    /// Reads until the socket closes, dropping what comes.
    func drain() async {
        ended = true
        while !finished {
            do {
                if try await iterator.next() == nil { finished = true }
            } catch {
                finished = true
            }
        }
    }
}

private struct Outbound: HarkCore.WebSocketOutbound {
    let writer: NIOAsyncChannelOutboundWriter<WebSocketCommand>
    let link: WebSocketLink

    func send(text: String) async throws {
        guard !link.isClosing else { throw ConnectionEnded() }
        do {
            try await writer.write(.text(text))
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw ConnectionEnded()
        }
    }

    func send(texts: [String]) async throws {
        guard !link.isClosing else { throw ConnectionEnded() }
        do {
            try await writer.write(contentsOf: texts.map { .text($0) })
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw ConnectionEnded()
        }
    }

    func close(code: Int, reason: String) async throws {
        try? await writer.write(.close(code: code, reason: reason))
    }

    func leave(code: Int, reason: String) async throws {
        // From now on the reader drops what comes, before the close frame is even on its way.
        link.markLeaving()
        try? await writer.write(.close(code: code, reason: reason))
    }
}
