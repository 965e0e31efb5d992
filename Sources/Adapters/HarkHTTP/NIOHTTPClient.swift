import HarkCore
import HarkNet
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// HTTP/1.1 requests (token minting, REST hand-offs) over SwiftNIO on the process's one event loop
/// (`MultiThreadedEventLoopGroup.singleton`), TLS through the same BoringSSL as the WebSockets: one
/// connection per request (`Connection: close`), no redirects followed, the system's trust roots plus
/// an optional extra CA file. Nothing blocks a thread.
public struct NIOHTTPClient: HTTPClient {
    /// A PEM file of extra CA certificates to trust (a simulator's or a proxy's), or nil.
    public var caFile: String?
    /// Largest response body accepted.
    public var maxResponseBytes: Int
    /// How long a connection (with its TLS handshake) may take.
    public var connectTimeout: Duration

    public init(caFile: String? = nil, maxResponseBytes: Int = 4 << 20, connectTimeout: Duration = .seconds(10)) {
        self.caFile = caFile
        self.maxResponseBytes = maxResponseBytes
        self.connectTimeout = connectTimeout
    }

    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let target = try Target(request.url)
        let where_ = Self.redactedHost(request.url)
        var context: NIOSSLContext?
        if target.secure {
            var configuration = TLSConfiguration.makeClientConfiguration()
            if let caFile {
                guard FileManager.default.fileExists(atPath: caFile) else {
                    throw HTTPClientError("the CA file \(caFile) does not exist")
                }
                configuration.additionalTrustRoots = [.file(caFile)]
            }
            do {
                context = try NIOSSLContext(configuration: configuration)
            } catch {
                throw HTTPClientError("cannot set up TLS: \(error)")
            }
        }
        let tls = context
        let group = MultiThreadedEventLoopGroup.singleton
        let promise = group.next().makePromise(of: HTTPResponse.self)
        let limit = maxResponseBytes
        let serverName = target.isAddress ? nil : target.host
        let bootstrap = ClientBootstrap(group: group)
            .connectTimeout(.nanoseconds(connectTimeout.nanoseconds))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    if let tls {
                        try sync.addHandler(NIOSSLClientHandler(context: tls, serverHostname: serverName))
                    }
                    try sync.addHTTPClientHandlers()
                    try sync.addHandler(ResponseCollector(promise: promise, limit: limit, host: where_))
                }
            }
        let channel: any Channel
        do {
            channel = try await bootstrap.connect(host: target.host, port: target.port).get()
        } catch {
            promise.fail(error)
            throw Self.classify(error, url: request.url, host: target.host, port: target.port)
        }
        let timeout = channel.eventLoop.scheduleTask(in: .nanoseconds(request.timeout.nanoseconds)) {
            promise.fail(HTTPClientError("\(where_): no answer within \(request.timeout.humanDescription)"))
            channel.close(promise: nil)
        }
        defer { timeout.cancel() }

        var headers = HTTPHeaders()
        headers.add(name: "Host", value: target.hostHeader)
        headers.add(name: "Connection", value: "close")
        for header in request.headers { headers.add(name: header.name, value: header.value) }
        if let body = request.body {
            if !headers.contains(name: "Content-Type") { headers.add(name: "Content-Type", value: "application/json") }
            headers.replaceOrAdd(name: "Content-Length", value: String(body.count))
        }
        let head = HTTPRequestHead(
            version: .http1_1,
            method: HTTPMethod(rawValue: request.method.uppercased()),
            uri: target.pathAndQuery,
            headers: headers
        )
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
        if let body = request.body {
            channel.write(HTTPClientRequestPart.body(.byteBuffer(ByteBuffer(bytes: body))), promise: nil)
        }
        channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
        do {
            return try await promise.futureResult.get()
        } catch let error as HTTPClientError {
            throw error
        } catch {
            throw Self.classify(error, url: request.url, host: target.host, port: target.port)
        }
    }

    /// Scheme, host and port only: a URL's path or query may carry a credential.
    public static func redactedHost(_ url: String) -> String {
        guard let schemeEnd = url.firstRange(of: "://") else { return "request" }
        let rest = url[schemeEnd.upperBound...]
        let host = rest.prefix { $0 != "/" && $0 != "?" }
        return String(url[..<schemeEnd.upperBound]) + host
    }

    /// A failure as one line for a person, never with the URL's path or query.
    static func classify(_ error: any Error, url: String, host: String, port: Int) -> HTTPClientError {
        let where_ = redactedHost(url)
        switch error {
        case let error as HTTPClientError:
            return error
        case let error as NIOConnectionError:
            if error.dnsAAAAError != nil || error.dnsAError != nil, error.connectionErrors.isEmpty {
                return HTTPClientError("\(where_): cannot resolve \(host)")
            }
            return HTTPClientError("\(where_): cannot connect to \(host):\(port)")
        case ChannelError.connectTimeout:
            return HTTPClientError("\(where_): connecting to \(host):\(port) timed out")
        case is NIOSSLError, is BoringSSLError:
            let failure = NIOWebSocketTransport.classifyTLS(String(describing: error), url: url)
            return HTTPClientError("\(where_): \(failure.message)", untrusted: failure.kind == .untrusted)
        case let error as IOError:
            return HTTPClientError("\(where_): cannot connect to \(host):\(port) (\(error.description))")
        default:
            return HTTPClientError("\(where_): \(error)")
        }
    }

    /// Where a URL points.
    struct Target {
        var secure: Bool
        var host: String
        var port: Int
        var pathAndQuery: String
        /// The host is an IP address (no TLS server name then).
        var isAddress: Bool
        /// `Host:` as the URL gave it (the port only when it is not the scheme's).
        var hostHeader: String

        init(_ url: String) throws {
            guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
                scheme == "http" || scheme == "https", var host = components.host, !host.isEmpty
            else {
                throw HTTPClientError("not an http:// or https:// URL: \(NIOHTTPClient.redactedHost(url))")
            }
            if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            secure = scheme == "https"
            self.host = host
            port = components.port ?? (secure ? 443 : 80)
            let path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
            pathAndQuery = components.percentEncodedQuery.map { path + "?" + $0 } ?? path
            isAddress = (try? SocketAddress(ipAddress: host, port: 0)) != nil
            let shown = host.contains(":") ? "[\(host)]" : host
            hostHeader = components.port.map { "\(shown):\($0)" } ?? shown
        }
    }
}

/// Gathers one response; fails past `limit` bytes of body, or when the connection ends first.
private final class ResponseCollector: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart

    private let promise: EventLoopPromise<HTTPResponse>
    private let limit: Int
    private let host: String
    private var status = 0
    private var body = Data()
    private var done = false

    init(promise: EventLoopPromise<HTTPResponse>, limit: Int, host: String) {
        self.promise = promise
        self.limit = limit
        self.host = host
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !done else { return }
        switch unwrapInboundIn(data) {
        case .head(let head):
            status = Int(head.status.code)
        case .body(let buffer):
            guard body.count + buffer.readableBytes <= limit else {
                finish(context, .failure(HTTPClientError("\(host): the response is larger than \(limit) bytes")))
                return
            }
            body.append(contentsOf: buffer.readableBytesView)
        case .end:
            finish(context, .success(HTTPResponse(status: status, body: body)))
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        finish(context, .failure(error))
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish(context, .failure(HTTPClientError("\(host): the connection closed before the response ended")))
        context.fireChannelInactive()
    }

    private func finish(_ context: ChannelHandlerContext, _ result: Result<HTTPResponse, any Error>) {
        guard !done else { return }
        done = true
        promise.completeWith(result)
        context.close(promise: nil)
    }
}
