import HarkCore
import HarkNet
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// HTTP/1.1 requests (token minting, REST hand-offs, streamed answers) over SwiftNIO on the process's one event
/// loop (`MultiThreadedEventLoopGroup.singleton`), TLS through the same BoringSSL as the WebSockets: one
/// connection per request (`Connection: close`), no redirects followed, the system's trust roots plus an
/// optional extra CA file, the certificate checked against the host name or the URL's IP address. Plain
/// `http://` goes only to this machine unless ``allowInsecure`` is set. Nothing blocks a thread; cancelling the
/// calling task closes the connection at once.
public struct NIOHTTPClient: HTTPClient {
    /// A PEM file of extra CA certificates to trust (a simulator's or a proxy's), or nil.
    public var caFile: String?
    /// Largest response body accepted (streamed bodies too: past it the stream fails).
    public var maxResponseBytes: Int
    /// How long a TCP connection (name resolution included) may take.
    public var connectTimeout: Duration
    /// Allows plain `http://` to hosts other than this machine (credentials then travel in clear text); each
    /// such request logs a warning.
    public var allowInsecure: Bool
    private let logger: Logger

    /// A client; see the properties.
    public init(
        caFile: String? = nil,
        maxResponseBytes: Int = 4 << 20,
        connectTimeout: Duration = .seconds(10),
        allowInsecure: Bool = false,
        logger: Logger = Logger(label: "hark.http") { _ in SwiftLogNoOpLogHandler() }
    ) {
        self.caFile = caFile
        self.maxResponseBytes = maxResponseBytes
        self.connectTimeout = connectTimeout
        self.allowInsecure = allowInsecure
        self.logger = logger
    }

    /// Performs `request` within ``HTTPRequest/timeout`` (from the TCP connection to the end of the body).
    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let response = try await open(
            request,
            overall: request.timeout,
            headTimeout: request.timeout,
            idleTimeout: request.timeout
        )
        let body = try await response.body.collect(upTo: .max)
        return HTTPResponse(status: response.status, body: body, headers: response.headers)
    }

    /// Performs `request` and returns at the response head, within ``HTTPRequest/headTimeout``; the body is read
    /// from the socket as the reader asks for it, each chunk within ``HTTPRequest/idleTimeout``.
    public func stream(_ request: HTTPRequest) async throws -> HTTPStreamingResponse {
        try await open(request, overall: nil, headTimeout: request.headTimeout, idleTimeout: request.idleTimeout)
    }

    /// Scheme, host and port only: a URL's user-info, path or query may carry a credential.
    public static func redactedHost(_ url: String) -> String {
        EndpointURL(url)?.origin ?? URLRedaction.redact(url)
    }

    /// Starts connecting to `url`'s origin now (TCP, and the TLS handshake right after); the request that takes it
    /// (``stream(_:on:)``) finds it open. Nil for a URL no request could go to.
    public func openAhead(to url: String) -> (any HTTPOpenedAhead)? {
        guard let endpoint = EndpointURL(url), endpoint.scheme == "http" || endpoint.scheme == "https",
            EndpointPolicy.check(url: url, allowInsecure: allowInsecure) == nil
        else { return nil }
        var tls: NIOSSLContext?
        if endpoint.isSecure {
            guard let context = try? ClientTLS.context(caFile: caFile) else { return nil }
            tls = context
        }
        let connection = ConnectionGuard<HTTPClientError>()
        let opening = Task { [self] in try await connect(endpoint, tls: tls, connection: connection) }
        return OpenedAhead(origin: endpoint.origin, connection: connection, opening: opening)
    }

    /// ``stream(_:)`` on a connection opened ahead to the request's origin, if it is still open; on a new one
    /// otherwise (and when it failed to open).
    public func stream(_ request: HTTPRequest, on ahead: (any HTTPOpenedAhead)?) async throws -> HTTPStreamingResponse {
        let prepared = try prepare(request)
        guard let ahead = ahead as? OpenedAhead, ahead.origin == prepared.endpoint.origin, ahead.take() else {
            ahead?.close()
            return try await open(
                prepared,
                overall: nil,
                headTimeout: request.headTimeout,
                idleTimeout: request.idleTimeout
            )
        }
        let connection = ahead.connection
        let response: HTTPStreamingResponse? = try await withTaskCancellationHandler {
            guard let reader = try? await ahead.opening.value, reader.channel.isActive else { return nil }
            return try await exchange(
                prepared,
                reader: reader,
                connection: connection,
                overall: nil,
                headTimeout: request.headTimeout,
                idleTimeout: request.idleTimeout
            )
        } onCancel: {
            connection.cancel()
        }
        if let response { return response }
        connection.cancel()
        try Task.checkCancellation()
        return try await open(
            prepared,
            overall: nil,
            headTimeout: request.headTimeout,
            idleTimeout: request.idleTimeout
        )
    }

    /// A request checked and made ready to go: where, over what TLS, its head and body.
    private struct Prepared {
        var endpoint: EndpointURL
        var tls: NIOSSLContext?
        var head: HTTPRequestHead
        var body: Data?
        var url: String
    }

    private func prepare(_ request: HTTPRequest) throws -> Prepared {
        guard let endpoint = EndpointURL(request.url), endpoint.scheme == "http" || endpoint.scheme == "https" else {
            throw HTTPClientError("not an http:// or https:// URL: \(Self.redactedHost(request.url))")
        }
        if let problem = EndpointPolicy.check(url: request.url, allowInsecure: allowInsecure) {
            throw HTTPClientError(problem)
        }
        let origin = endpoint.origin
        if !endpoint.isSecure, !endpoint.isLoopback {
            logger.warning("requesting \(origin) without TLS (insecure connections are allowed): in clear text")
        }
        var tls: NIOSSLContext?
        if endpoint.isSecure {
            do {
                tls = try ClientTLS.context(caFile: caFile)
            } catch {
                throw HTTPClientError(error.message)
            }
        }
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: endpoint.authority)
        headers.add(name: "Connection", value: "close")
        for header in request.headers { headers.add(name: header.name, value: header.value) }
        if let body = request.body {
            if !headers.contains(name: "Content-Type") { headers.add(name: "Content-Type", value: "application/json") }
            headers.replaceOrAdd(name: "Content-Length", value: String(body.count))
        }
        let head = HTTPRequestHead(
            version: .http1_1,
            method: HTTPMethod(rawValue: request.method.uppercased()),
            uri: endpoint.requestTarget,
            headers: headers
        )
        return Prepared(endpoint: endpoint, tls: tls, head: head, body: request.body, url: request.url)
    }

    private func open(
        _ request: HTTPRequest,
        overall: Duration?,
        headTimeout: Duration,
        idleTimeout: Duration
    ) async throws -> HTTPStreamingResponse {
        try await open(try prepare(request), overall: overall, headTimeout: headTimeout, idleTimeout: idleTimeout)
    }

    private func open(
        _ prepared: Prepared,
        overall: Duration?,
        headTimeout: Duration,
        idleTimeout: Duration
    ) async throws -> HTTPStreamingResponse {
        let connection = ConnectionGuard<HTTPClientError>()
        return try await withTaskCancellationHandler {
            let reader = try await connect(prepared.endpoint, tls: prepared.tls, connection: connection)
            return try await exchange(
                prepared,
                reader: reader,
                connection: connection,
                overall: overall,
                headTimeout: headTimeout,
                idleTimeout: idleTimeout
            )
        } onCancel: {
            connection.cancel()
        }
    }

    /// Sends the request on an open connection and returns at the response head.
    private func exchange(
        _ prepared: Prepared,
        reader: ResponseReader,
        connection: ConnectionGuard<HTTPClientError>,
        overall: Duration?,
        headTimeout: Duration,
        idleTimeout: Duration
    ) async throws -> HTTPStreamingResponse {
        let origin = prepared.endpoint.origin
        if let overall {
            connection.arm("overall", in: overall) {
                HTTPClientError("\(origin): no answer within \(overall.humanDescription)")
            }
        }
        connection.arm("head", in: headTimeout) {
            HTTPClientError("\(origin): no answer within \(headTimeout.humanDescription)")
        }
        reader.channel.write(HTTPClientRequestPart.head(prepared.head), promise: nil)
        if let body = prepared.body {
            reader.channel.write(HTTPClientRequestPart.body(.byteBuffer(ByteBuffer(bytes: body))), promise: nil)
        }
        reader.channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
        let body = BodyReader(
            reader: reader,
            connection: connection,
            origin: origin,
            limit: maxResponseBytes,
            idleTimeout: idleTimeout,
            endpoint: prepared.endpoint,
            url: prepared.url
        )
        let responseHead = try await body.head()
        connection.disarm("head")
        return HTTPStreamingResponse(
            status: Int(responseHead.status.code),
            headers: responseHead.headers.map { (name: $0.name, value: $0.value) },
            body: HTTPBodyStream(next: { try await body.next() }, cancel: { connection.cancel() })
        )
    }

    private func connect(
        _ endpoint: EndpointURL,
        tls: NIOSSLContext?,
        connection: ConnectionGuard<HTTPClientError>
    ) async throws -> ResponseReader {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let promise = loop.makePromise(of: ResponseReader.self)
        connection.bind(promise)
        ClientBootstrap(group: loop)
            .connectTimeout(TimeAmount(max(connectTimeout, .milliseconds(1))))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    guard connection.adopt(channel) else { throw CancellationError() }
                    let pipeline = channel.pipeline.syncOperations
                    if let tls { try pipeline.addHandler(ClientTLS.handler(context: tls, for: endpoint)) }
                    try pipeline.addHTTPClientHandlers()
                    try pipeline.addHandler(ResponseStreamHandler(eventLoop: channel.eventLoop))
                }
            }
            .connect(host: endpoint.host, port: endpoint.effectivePort)
            .flatMapThrowing { channel in
                let handler = try channel.pipeline.syncOperations.handler(type: ResponseStreamHandler.self)
                return ResponseReader(channel: channel, handler: NIOLoopBound(handler, eventLoop: channel.eventLoop))
            }
            .cascade(to: promise)
        do {
            return try await promise.futureResult.get()
        } catch {
            throw connection.overridingError ?? Self.classify(error, endpoint: endpoint, url: endpoint.origin)
        }
    }

    /// A failure as one line for a person, never with the URL's user-info, path or query.
    static func classify(_ error: any Error, endpoint: EndpointURL, url: String) -> HTTPClientError {
        let origin = endpoint.origin
        switch error {
        case let error as HTTPClientError:
            return error
        case let error as NIOConnectionError:
            if error.dnsAAAAError != nil || error.dnsAError != nil, error.connectionErrors.isEmpty {
                return HTTPClientError("\(origin): cannot resolve \(endpoint.host)")
            }
            return HTTPClientError("\(origin): cannot connect to \(endpoint.hostAndPort)")
        case ChannelError.connectTimeout:
            return HTTPClientError("\(origin): connecting to \(endpoint.hostAndPort) timed out")
        case is NIOSSLError, is BoringSSLError, is NIOSSLExtraError:
            let failure = NIOWebSocketTransport.classifyTLS(String(describing: error), url: url)
            return HTTPClientError("\(origin): \(failure.message)", untrusted: failure.kind == .untrusted)
        case let error as IOError:
            return HTTPClientError("\(origin): cannot connect to \(endpoint.hostAndPort) (\(error.description))")
        default:
            return HTTPClientError("\(origin): \(error)")
        }
    }
}

/// A connection opened ahead: the task opening it, and its guard (which closes it). One request takes it.
private final class OpenedAhead: HTTPOpenedAhead {
    let origin: String
    let connection: ConnectionGuard<HTTPClientError>
    let opening: Task<ResponseReader, any Error>
    private let taken = Atomic(false)

    init(origin: String, connection: ConnectionGuard<HTTPClientError>, opening: Task<ResponseReader, any Error>) {
        self.origin = origin
        self.connection = connection
        self.opening = opening
    }

    /// True for the one caller that takes it.
    func take() -> Bool { !taken.exchange(true, ordering: .acquiringAndReleasing) }

    func close() {
        guard take() else { return }
        connection.cancel()
        opening.cancel()
    }

    deinit { close() }
}

/// Reads one response for one task at a time: the head, then the body chunk by chunk, each within its deadline,
/// counting the body against the limit.
private final class BodyReader: @unchecked Sendable {
    private let reader: ResponseReader
    private let connection: ConnectionGuard<HTTPClientError>
    private let origin: String
    private let limit: Int
    private let idleTimeout: Duration
    private let endpoint: EndpointURL
    private let url: String
    private var received = 0
    private var done = false

    init(
        reader: ResponseReader,
        connection: ConnectionGuard<HTTPClientError>,
        origin: String,
        limit: Int,
        idleTimeout: Duration,
        endpoint: EndpointURL,
        url: String
    ) {
        self.reader = reader
        self.connection = connection
        self.origin = origin
        self.limit = limit
        self.idleTimeout = idleTimeout
        self.endpoint = endpoint
        self.url = url
    }

    /// The response head (informational 1xx heads skipped).
    func head() async throws -> HTTPResponseHead {
        while true {
            switch try await part() {
            case .head(let head) where head.status.code >= 200 || head.status.code == 101:
                return head
            case .head, .body, .end:
                continue
            case nil:
                throw HTTPClientError("\(origin): the connection closed before the response came")
            }
        }
    }

    /// The next chunk of the body, or nil at its end.
    func next() async throws -> Data? {
        guard !done else { return nil }
        let connection = self.connection
        return try await withTaskCancellationHandler {
            let (origin, timeout) = (self.origin, idleTimeout)
            connection.arm("idle", in: timeout) {
                HTTPClientError("\(origin): the response stalled (no data for \(timeout.humanDescription))")
            }
            defer { connection.disarm("idle") }
            while true {
                switch try await part() {
                case .body(let buffer):
                    guard buffer.readableBytes > 0 else { continue }
                    received += buffer.readableBytes
                    guard received <= limit else {
                        let error = HTTPClientError("\(origin): the response is larger than \(limit) bytes")
                        connection.fail(error)
                        throw error
                    }
                    return Data(buffer.readableBytesView)
                case .end:
                    done = true
                    connection.close()
                    return nil
                case .head:
                    continue
                case nil:
                    throw HTTPClientError("\(origin): the connection closed before the response ended")
                }
            }
        } onCancel: {
            connection.cancel()
        }
    }

    /// The next part; a recorded failure (a deadline, the limit, a cancellation) wins over what the channel says.
    private func part() async throws -> HTTPClientResponsePart? {
        let part: HTTPClientResponsePart?
        do {
            part = try await reader.next()
        } catch HTTPParserError.invalidEOFState {
            throw connection.overridingError
                ?? HTTPClientError("\(origin): the connection closed before the response ended")
        } catch {
            throw connection.overridingError ?? NIOHTTPClient.classify(error, endpoint: endpoint, url: url)
        }
        if part == nil, let error = connection.overridingError { throw error }
        return part
    }
}

/// The channel of one response and the handler that holds its parts until they are read.
private final class ResponseReader: Sendable {
    let channel: any Channel
    private let handler: NIOLoopBound<ResponseStreamHandler>

    init(channel: any Channel, handler: NIOLoopBound<ResponseStreamHandler>) {
        self.channel = channel
        self.handler = handler
    }

    /// The next response part, or nil once the connection closed.
    func next() async throws -> HTTPClientResponsePart? {
        try await channel.eventLoop.flatSubmit { self.handler.value.next() }.get()
    }
}

/// Holds response parts until they are asked for, and reads the socket only while fewer than two wait (it holds
/// back the channel's `read` otherwise): backpressure from the reader to the server.
private final class ResponseStreamHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = HTTPClientRequestPart
    typealias OutboundOut = HTTPClientRequestPart

    private static let readAhead = 2

    private let eventLoop: any EventLoop
    private var context: ChannelHandlerContext?
    private var buffer = CircularBuffer<HTTPClientResponsePart>()
    private var waiter: EventLoopPromise<HTTPClientResponsePart?>?
    private var readHeldBack = false
    private var ended = false
    private var failure: (any Error)?

    init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        end()
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        if let waiter {
            self.waiter = nil
            waiter.succeed(part)
        } else {
            buffer.append(part)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        end()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if failure == nil { failure = error }
        end()
        context.close(promise: nil)
    }

    func read(context: ChannelHandlerContext) {
        if waiter != nil || buffer.count < Self.readAhead {
            context.read()
        } else {
            readHeldBack = true
        }
    }

    /// The next part: a held one, or the next to come (reading on), or nil once the connection ended.
    func next() -> EventLoopFuture<HTTPClientResponsePart?> {
        if let part = buffer.popFirst() {
            readOn()
            return eventLoop.makeSucceededFuture(part)
        }
        if ended || context == nil {
            if let failure { return eventLoop.makeFailedFuture(failure) }
            return eventLoop.makeSucceededFuture(nil)
        }
        let promise = eventLoop.makePromise(of: HTTPClientResponsePart?.self)
        waiter = promise
        readOn()
        return promise.futureResult
    }

    private func readOn() {
        guard readHeldBack, buffer.count < Self.readAhead, let context else { return }
        readHeldBack = false
        context.read()
    }

    private func end() {
        ended = true
        guard let waiter else { return }
        self.waiter = nil
        if let failure { waiter.fail(failure) } else { waiter.succeed(nil) }
    }
}
