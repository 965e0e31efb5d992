import HarkCore
import HarkDatagrid
import HarkLiveSimulator
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
struct DatagridContext: Sendable {
    var configuration: DatagridSimulatorConfiguration
    var store: DatagridStore
    var recorder: DatagridRecorder
    var logger: Logger
    /// `ws://HOST:PORT`, for the URLs the hand-off returns.
    var baseURL: @Sendable () -> String
}

/// A stand-in for the Datagrid Voice service, on SwiftNIO (plain HTTP and WebSocket, for loopback).
///
/// It serves `POST /v1/voice` (the REST hand-off: checks `Authorization: Bearer KEY` when a key is required,
/// answers a WebSocket URL with a short-lived single-use token and the `start` message to send) and the WebSocket
/// `/ws/voice?token=...` (a hand-off token, or the key itself for a direct connection). Each connection runs a
/// ``DatagridSimulatorSession``; ``recorder`` shows what clients sent. Credentials are never logged.
public final class DatagridSimulator: Sendable {
    private struct State {
        var channel: (any Channel)?
        var port = 0
        var children: [ObjectIdentifier: any Channel] = [:]
        var caPEM: String?
    }

    public let configuration: DatagridSimulatorConfiguration
    public let recorder = DatagridRecorder()
    public let store = DatagridStore()
    private let logger: Logger
    private let group: any EventLoopGroup
    private let state = Mutex(State())

    public init(
        configuration: DatagridSimulatorConfiguration,
        logger: Logger,
        eventLoopGroup: (any EventLoopGroup)? = nil
    ) {
        self.configuration = configuration
        self.logger = logger
        self.group = eventLoopGroup ?? MultiThreadedEventLoopGroup.singleton
    }

    /// Binds and starts serving.
    public func start() async throws {
        let tlsContext = try makeTLSContext()
        let context = DatagridContext(
            configuration: configuration,
            store: store,
            recorder: recorder,
            logger: logger,
            baseURL: { [weak self] in self?.baseURL ?? "" }
        )
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { [self] channel in
                self.track(channel)
                return channel.eventLoop.makeCompletedFuture {
                    if let tlsContext {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tlsContext))
                    }
                    try Self.configurePipeline(channel, context: context)
                }
            }
        let channel = try await bootstrap.bind(host: configuration.host, port: configuration.port).get()
        let port = channel.localAddress?.port ?? configuration.port
        state.withLock {
            $0.channel = channel
            $0.port = port
        }
        logger.info("listening", metadata: ["url": "\(httpBaseURL)"])
    }

    private func makeTLSContext() throws -> NIOSSLContext? {
        guard configuration.tls else { return nil }
        let certificates = try SimulatorCertificates.generate()
        if let caOut = configuration.caOut {
            do {
                try Data(certificates.caPEM.utf8).write(to: URL(filePath: caOut), options: .atomic)
            } catch {
                throw DatagridSimulatorError("cannot write the CA certificate to \(caOut): \(error)")
            }
        }
        state.withLock { $0.caPEM = certificates.caPEM }
        return try NIOSSLContext(configuration: certificates.serverConfiguration())
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
        for child in children { try? await child.close() }
        try await server?.close()
    }

    /// The bound port (0 before ``start()``).
    public var port: Int { state.withLock { $0.port } }

    /// `http://HOST:PORT` (`https://localhost:PORT` with TLS): the REST base (`/v1/voice` is appended by the client).
    public var httpBaseURL: String { configuration.tls ? "https://localhost:\(port)" : "http://\(urlHost):\(port)" }

    /// `ws://HOST:PORT` (`wss://localhost:PORT` with TLS): the WebSocket base (`/ws/voice` is appended).
    public var baseURL: String { configuration.tls ? "wss://localhost:\(port)" : "ws://\(urlHost):\(port)" }

    /// The generated CA certificate (PEM), with TLS.
    public var caCertificatePEM: String? { state.withLock { $0.caPEM } }

    private var urlHost: String {
        switch configuration.host {
        case "", "0.0.0.0": return "127.0.0.1"
        case "::": return "[::1]"
        case let host where host.contains(":"): return "[\(host)]"
        case let host: return host
        }
    }

    private func track(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        state.withLock { $0.children[id] = channel }
        channel.closeFuture.whenComplete { [self] _ in
            _ = self.state.withLock { $0.children.removeValue(forKey: id) }
        }
    }

    private static let httpHandlerName = "hark-datagrid-http"

    static func split(_ target: String) -> (path: String, query: String?) {
        guard let question = target.firstIndex(of: "?") else { return (target, nil) }
        return (String(target[..<question]), String(target[target.index(after: question)...]))
    }

    static func queryValue(_ name: String, in query: String?) -> String? {
        guard let query else { return nil }
        for part in query.split(separator: "&") {
            let pieces = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            if pieces.first == Substring(name) { return pieces.count > 1 ? percentDecoded(String(pieces[1])) : "" }
        }
        return nil
    }

    static func percentDecoded(_ text: String) -> String {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%"), let high = iterator.next(), let low = iterator.next(),
                let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16)
            {
                bytes.append(value)
            } else {
                bytes.append(byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func configurePipeline(_ channel: any Channel, context: DatagridContext) throws {
        let pipeline = channel.pipeline.syncOperations
        let maxFrameSize = context.configuration.maxFrameSize
        let upgrader = NIOWebSocketServerUpgrader(
            maxFrameSize: maxFrameSize,
            automaticErrorHandling: true,
            shouldUpgrade: { channel, head in
                guard split(head.uri).path == "/ws/voice" else { return channel.eventLoop.makeSucceededFuture(nil) }
                return channel.eventLoop.makeSucceededFuture(HTTPHeaders())
            },
            upgradePipelineHandler: { channel, head in
                channel.eventLoop.makeCompletedFuture {
                    let token = queryValue("token", in: split(head.uri).query)
                    let handler = DatagridConnectionHandler(context: context, token: token)
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
        try pipeline.addHandler(DatagridHTTPHandler(context: context), name: httpHandlerName)
    }
}

/// Answers `POST /v1/voice`, and 404 for anything else.
final class DatagridHTTPHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private static let maxBody = 1 << 20
    private let shared: DatagridContext
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var bodyTooLarge = false

    init(context: DatagridContext) {
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
        if error is NIOWebSocketUpgradeError { return }
        context.close(promise: nil)
    }

    private func respond(to head: HTTPRequestHead, context: ChannelHandlerContext) {
        let (path, query) = DatagridSimulator.split(head.uri)
        var record = DatagridHTTPRecord(
            method: head.method.rawValue,
            path: path,
            status: 0,
            authorization: "missing",
            teamspace: head.headers.first(name: "Datagrid-Teamspace"),
            hadQuery: query != nil
        )
        let (status, json) = answer(head: head, path: path, record: &record)
        record.status = Int(status.code)
        shared.logger.info(
            "HTTP request",
            metadata: [
                "method": "\(head.method.rawValue)", "path": "\(path)", "status": "\(status.code)",
                "authorization": "\(record.authorization)",
            ]
        )
        shared.recorder.update { $0.httpRequests.append(record) }
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
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

    private func answer(head: HTTPRequestHead, path: String, record: inout DatagridHTTPRecord)
        -> (HTTPResponseStatus, String)
    {
        guard path == "/v1/voice", shared.configuration.handoffAvailable else {
            return (.notFound, #"{"detail":"Not Found"}"#)
        }
        guard head.method == .POST else { return (.methodNotAllowed, #"{"detail":"Method Not Allowed"}"#) }
        let authorization = head.headers.first(name: "Authorization")
        var presented: String?
        if let authorization, authorization.lowercased().hasPrefix("bearer ") {
            presented = String(authorization.dropFirst("bearer ".count)).trimmedWhitespace
        }
        if let required = shared.configuration.requiredKey {
            guard let presented else {
                record.authorization = "missing"
                return (.unauthorized, #"{"detail":"Not authenticated"}"#)
            }
            guard presented == required.reveal() else {
                record.authorization = "wrong"
                return (.unauthorized, #"{"detail":"Invalid API key"}"#)
            }
        }
        record.authorization = presented == nil ? "missing" : "bearer"
        if bodyTooLarge { return (.payloadTooLarge, #"{"detail":"Request too large"}"#) }
        let start: DatagridStart
        do {
            start = body.isEmpty ? DatagridStart() : try JSONDecoder().decode(DatagridStart.self, from: Data(body))
        } catch {
            return (.unprocessableEntity, #"{"detail":"Invalid start payload"}"#)
        }
        record.start = start
        let token = shared.store.mintToken(
            start: start,
            expires: shared.store.wallNow() + shared.configuration.tokenLifetime
        )
        let url = shared.baseURL() + "/ws/voice?token=" + token
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let startMessage = (try? encoder.encode(start)).flatMap { try? JSONDecoder().decode(JSONValue.self, from: $0) }
        let answer = DatagridHandoff(
            url: url,
            agentId: start.agentId,
            startMessage: ["type": "start", "payload": startMessage ?? .object([:])]
        )
        let json = (try? encoder.encode(answer)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        return (.ok, json)
    }
}
