import HarkCore
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOWebSocket
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What every connection of one simulator shares.
struct SimulatorContext: Sendable {
    var configuration: LiveSimulatorConfiguration
    var store: SimulatorStore
    var recorder: SimulatorRecorder
    var logger: Logger
}

/// A stand-in for the Gemini Live API (`BidiGenerateContent` over WebSocket), on SwiftNIO.
///
/// It serves `[PREFIX]/ws/google.ai.generativelanguage.{v1,v1beta,v1alpha}.GenerativeService.BidiGenerateContent`
/// (and `...Constrained` on `v1alpha`, for ephemeral tokens), mints tokens at `POST /v1alpha/auth_tokens`, and
/// answers 404 to anything else. Each connection runs a ``LiveSimulatorSession``; ``recorder`` shows what the
/// clients sent.
public final class LiveSimulator: Sendable {
    private struct State {
        var channel: (any Channel)?
        var port = 0
        var caPEM: String?
        var caPath: String?
        var children: [ObjectIdentifier: any Channel] = [:]
    }

    /// The configuration it was made with.
    public let configuration: LiveSimulatorConfiguration
    /// What clients sent, per connection.
    public let recorder: SimulatorRecorder
    /// Sessions, handles and tokens.
    public let store: SimulatorStore
    private let logger: Logger
    private let group: any EventLoopGroup
    private let state = Mutex(State())

    /// A simulator; nothing is bound until ``start()``.
    public init(
        configuration: LiveSimulatorConfiguration,
        logger: Logger,
        eventLoopGroup: (any EventLoopGroup)? = nil
    ) {
        self.configuration = configuration
        self.logger = logger
        self.group = eventLoopGroup ?? MultiThreadedEventLoopGroup.singleton
        self.recorder = SimulatorRecorder()
        self.store = SimulatorStore(handleLifetime: configuration.handleLifetime)
    }

    /// Binds and starts serving. With ``SimulatorTLS/selfSigned(caOut:)`` it first generates the certificates
    /// and writes the CA's PEM.
    public func start() async throws {
        let tlsContext = try makeTLSContext()
        let context = SimulatorContext(
            configuration: configuration,
            store: store,
            recorder: recorder,
            logger: logger
        )
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { [self] channel in
                self.track(channel)
                return channel.eventLoop.makeCompletedFuture {
                    try Self.configurePipeline(channel, context: context, tls: tlsContext)
                }
            }
        let channel = try await bootstrap.bind(host: configuration.host, port: configuration.port).get()
        let port = channel.localAddress?.port ?? configuration.port
        state.withLock {
            $0.channel = channel
            $0.port = port
        }
        logger.info("listening", metadata: ["url": "\(baseURL)"])
    }

    /// Stops listening and closes every open connection.
    public func stop() async throws {
        let (server, children) = state.withLock { state in
            defer {
                state.channel = nil
                state.children = [:]
            }
            return (state.channel, Array(state.children.values))
        }
        for child in children {
            try? await child.close()
        }
        try await server?.close()
        logger.info("stopped")
    }

    /// The bound port (0 before ``start()``).
    public var port: Int { state.withLock { $0.port } }

    /// `ws://HOST:PORT`, or `wss://localhost:PORT` with TLS.
    public var baseURL: String {
        isTLS ? "wss://localhost:\(port)" : "ws://\(urlHost):\(port)"
    }

    /// `http://HOST:PORT`, or `https://localhost:PORT` with TLS (token minting).
    public var httpBaseURL: String {
        isTLS ? "https://localhost:\(port)" : "http://\(urlHost):\(port)"
    }

    /// The full URL of a Live endpoint (no credentials in it).
    public func liveURL(version: String = "v1beta", constrained: Bool = false, prefix: String = "") -> String {
        baseURL + LiveEndpoint(version: version, constrained: constrained, prefix: prefix).path
    }

    /// Where the generated CA certificate was written, if anywhere.
    public var caCertificatePath: String? { state.withLock { $0.caPath } }

    /// The generated CA certificate (PEM), with ``SimulatorTLS/selfSigned(caOut:)``.
    public var caCertificatePEM: String? { state.withLock { $0.caPEM } }

    private var isTLS: Bool {
        if case .none = configuration.tls { return false }
        return true
    }

    private var urlHost: String {
        switch configuration.host {
        case "", "0.0.0.0": return "127.0.0.1"
        case "::": return "[::1]"
        case let host where host.contains(":"): return "[\(host)]"
        case let host: return host
        }
    }

    private func makeTLSContext() throws -> NIOSSLContext? {
        switch configuration.tls {
        case .none:
            return nil
        case .selfSigned(let caOut):
            let certificates = try SimulatorCertificates.generate()
            if let caOut {
                do {
                    try Data(certificates.caPEM.utf8).write(to: URL(filePath: caOut), options: .atomic)
                } catch {
                    throw SimulatorConfigurationError("cannot write the CA certificate to \(caOut): \(error)")
                }
            }
            state.withLock {
                $0.caPEM = certificates.caPEM
                $0.caPath = caOut
            }
            logger.info("generated a self-signed CA", metadata: ["ca": "\(caOut ?? "(not written)")"])
            return try NIOSSLContext(configuration: certificates.serverConfiguration())
        case .files(let certificatePath, let keyPath):
            let chain = try NIOSSLCertificate.fromPEMFile(certificatePath)
            let key = try NIOSSLPrivateKey(file: keyPath, format: .pem)
            let tls = TLSConfiguration.makeServerConfiguration(
                certificateChain: chain.map { .certificate($0) },
                privateKey: .privateKey(key)
            )
            return try NIOSSLContext(configuration: tls)
        }
    }

    private func track(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        state.withLock { $0.children[id] = channel }
        channel.closeFuture.whenComplete { [self] _ in
            _ = self.state.withLock { $0.children.removeValue(forKey: id) }
        }
    }

    private static let httpHandlerName = "hark-live-http"

    private static func configurePipeline(
        _ channel: any Channel,
        context: SimulatorContext,
        tls: NIOSSLContext?
    ) throws {
        let pipeline = channel.pipeline.syncOperations
        if let tls {
            try pipeline.addHandler(NIOSSLServerHandler(context: tls))
        }
        let maxFrameSize = context.configuration.maxFrameSize
        let upgrader = NIOWebSocketServerUpgrader(
            maxFrameSize: maxFrameSize,
            automaticErrorHandling: true,
            shouldUpgrade: { channel, head in
                guard case .live = LiveRouting.route(head.uri) else {
                    return channel.eventLoop.makeSucceededFuture(nil)
                }
                return channel.eventLoop.makeSucceededFuture(HTTPHeaders())
            },
            upgradePipelineHandler: { channel, head in
                channel.eventLoop.makeCompletedFuture {
                    guard case .live(let endpoint) = LiveRouting.route(head.uri) else {
                        throw NIOWebSocketUpgradeError.unsupportedWebSocketTarget
                    }
                    let (path, query) = LiveRouting.split(head.uri)
                    let credentials = LiveCredentials(
                        headers: head.headers.map { ($0.name, $0.value) },
                        query: query
                    )
                    let handler = LiveConnectionHandler(
                        context: context,
                        endpoint: endpoint,
                        credentials: credentials,
                        path: path
                    )
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(
                        NIOWebSocketFrameAggregator(
                            minNonFinalFragmentSize: 0,
                            maxAccumulatedFrameCount: 1 << 16,
                            maxAccumulatedFrameSize: maxFrameSize
                        )
                    )
                    try sync.addHandler(handler)
                }
            }
        )
        try pipeline.configureHTTPServerPipeline(
            withServerUpgrade: (
                upgraders: [upgrader],
                completionHandler: { context in
                    context.pipeline.syncOperations.removeHandler(name: Self.httpHandlerName, promise: nil)
                }
            )
        )
        try pipeline.addHandler(HTTPRequestHandler(context: context), name: httpHandlerName)
    }
}

/// Answers the plain HTTP requests: token minting, and 404 for unknown paths.
final class HTTPRequestHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private static let maxBody = 1 << 20

    private let shared: SimulatorContext
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var bodyTooLarge = false

    init(context: SimulatorContext) {
        self.shared = context
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body = []
            bodyTooLarge = false
        case .body(let chunk):
            if body.count + chunk.readableBytes <= Self.maxBody {
                body.append(contentsOf: chunk.readableBytesView)
            } else {
                bodyTooLarge = true
            }
        case .end:
            guard let head else { return }
            self.head = nil
            respond(to: head, context: context)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A refused upgrade (unknown path) reports an error and then hands us the request: answer that.
        if error is NIOWebSocketUpgradeError { return }
        shared.logger.debug("HTTP error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }

    private func respond(to head: HTTPRequestHead, context: ChannelHandlerContext) {
        let (path, query) = LiveRouting.split(head.uri)
        let (status, json) = answer(head: head, query: query)
        shared.logger.info(
            "HTTP request",
            metadata: ["method": "\(head.method.rawValue)", "path": "\(path)", "status": "\(status.code)"]
        )
        shared.recorder.update {
            $0.httpRequests.append(
                HTTPRequestRecord(method: head.method.rawValue, path: path, status: Int(status.code))
            )
        }
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json; charset=UTF-8")
        headers.add(name: "Content-Length", value: "\(json.utf8.count)")
        let keepAlive = head.isKeepAlive && !bodyTooLarge
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))),
            promise: nil
        )
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: json)))), promise: nil)
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive {
            done.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        }
    }

    private func answer(head: HTTPRequestHead, query: String?) -> (HTTPResponseStatus, String) {
        switch LiveRouting.route(head.uri) {
        case .notFound:
            return (.notFound, errorJSON(404, "Requested entity was not found.", "NOT_FOUND"))
        case .live:
            return (.badRequest, errorJSON(400, "This endpoint only accepts WebSocket upgrades.", "INVALID_ARGUMENT"))
        case .authTokens:
            guard head.method == .POST else {
                return (.methodNotAllowed, errorJSON(405, "Use POST.", "INVALID_ARGUMENT"))
            }
            let credentials = LiveCredentials(headers: head.headers.map { ($0.name, $0.value) }, query: query)
            if let required = shared.configuration.requiredKey {
                guard let key = credentials.apiKey else {
                    return (
                        .forbidden,
                        errorJSON(
                            403,
                            "Method doesn't allow unregistered callers. Please use API Key or other form of API "
                                + "consumer identity to call this API.",
                            "PERMISSION_DENIED"
                        )
                    )
                }
                guard key.reveal() == required.reveal() else {
                    return (
                        .unauthorized,
                        errorJSON(401, "API key not valid. Please pass a valid API key.", "UNAUTHENTICATED")
                    )
                }
            }
            if bodyTooLarge {
                return (.payloadTooLarge, errorJSON(413, "Request too large.", "INVALID_ARGUMENT"))
            }
            return mintToken()
        }
    }

    private func mintToken() -> (HTTPResponseStatus, String) {
        var request = JSONValue.object([:])
        if !body.isEmpty {
            guard let decoded = try? JSONDecoder().decode(JSONValue.self, from: Data(body)),
                case .object = decoded
            else {
                return (.badRequest, errorJSON(400, "Invalid JSON payload received.", "INVALID_ARGUMENT"))
            }
            request = decoded["authToken"] ?? decoded["auth_token"] ?? decoded
        }
        func field(_ camel: String) -> JSONValue? {
            request[camel] ?? request[FlexKeyNames.snakeCase(camel)]
        }
        var expire: Date?
        var newSessionExpire: Date?
        for (name, target) in [("expireTime", 0), ("newSessionExpireTime", 1)] {
            guard let value = field(name) else { continue }
            guard let text = value.stringValue, let date = RFC3339.parse(text) else {
                return (.badRequest, errorJSON(400, "Invalid value at '\(name)'.", "INVALID_ARGUMENT"))
            }
            if target == 0 { expire = date } else { newSessionExpire = date }
        }
        var uses: Int?
        if let value = field("uses") {
            if let number = value.numberValue {
                uses = Int(number)
            } else if let text = value.stringValue, let number = Int(text) {
                uses = number
            } else {
                return (.badRequest, errorJSON(400, "Invalid value at 'uses'.", "INVALID_ARGUMENT"))
            }
        }
        let store = shared.store
        let token = store.mintToken(
            expireTime: expire,
            newSessionExpireTime: newSessionExpire,
            uses: uses,
            wall: store.wallNow()
        )
        shared.recorder.update { $0.tokensMinted += 1 }
        shared.logger.info("minted an ephemeral token", metadata: ["uses": "\(token.uses)"])
        let response: JSONValue = [
            "name": .string(token.name),
            "expireTime": .string(RFC3339.format(token.expireTime)),
            "newSessionExpireTime": .string(RFC3339.format(token.newSessionExpireTime)),
            "uses": .number(Double(token.uses)),
        ]
        return (.ok, Self.json(response))
    }

    private func errorJSON(_ code: Int, _ message: String, _ status: String) -> String {
        Self.json(["error": ["code": .number(Double(code)), "message": .string(message), "status": .string(status)]])
    }

    private static func json(_ value: JSONValue) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}

/// `lowerCamelCase` → `snake_case`, as ``FlexKey`` spells it.
enum FlexKeyNames {
    static func snakeCase(_ camel: String) -> String { FlexKey.snakeCase(camel) }
}

/// RFC 3339 timestamps (`2025-01-01T00:30:00Z`, with or without fractional seconds).
enum RFC3339 {
    static func parse(_ text: String) -> Date? {
        if let date = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text) { return date }
        return try? Date.ISO8601FormatStyle().parse(text)
    }

    static func format(_ date: Date) -> String {
        Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(date)
    }
}
