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

/// What a simulated service brings to ``SimulatorServer``: which requests upgrade to a WebSocket and the
/// connection each of them runs, and the answers to plain HTTP requests (its REST routes, 404 for the rest).
package protocol SimulatorService: Sendable {
    /// What one WebSocket connection runs.
    associatedtype Connection: SimulatorConnection

    /// The service's logger.
    var logger: Logger { get }
    /// The `Content-Type` of the JSON answers to plain HTTP requests.
    var jsonContentType: String { get }

    /// True when `head` asks for one of the service's WebSocket endpoints (else the upgrade is refused and
    /// the request is answered by ``respond(to:)``).
    func acceptsWebSocket(_ head: HTTPRequestHead) -> Bool
    /// The connection of an accepted upgrade: numbered, recorded and logged as opened.
    func connect(_ head: HTTPRequestHead) throws -> Connection
    /// The answer to a plain HTTP request, logged and recorded.
    func respond(to request: SimulatorHTTPRequest) -> SimulatorHTTPResponse
    /// A streamed answer (server-sent events) instead, or nil to answer with ``respond(to:)``.
    func respondStreaming(to request: SimulatorHTTPRequest) -> SimulatorHTTPStream?
}

extension SimulatorService {
    package func respondStreaming(to request: SimulatorHTTPRequest) -> SimulatorHTTPStream? { nil }
}

/// Where and how a simulator listens.
package struct SimulatorListener: Sendable {
    /// The address to bind.
    package var host: String
    /// The port to bind; 0 picks a free one.
    package var port: Int
    /// Plain or TLS.
    package var tls: SimulatorTLS
    /// Largest inbound WebSocket message accepted.
    package var maxFrameSize: Int

    /// `host` and `port`, plain or with `tls`, taking WebSocket messages up to `maxFrameSize`.
    package init(host: String, port: Int, tls: SimulatorTLS, maxFrameSize: Int) {
        self.host = host
        self.port = port
        self.tls = tls
        self.maxFrameSize = maxFrameSize
    }
}

/// The one NIO server both simulators run: TCP (and TLS) on loopback, HTTP/1.1 with the WebSocket upgrade,
/// a ``SimulatorConnectionHandler`` per WebSocket and ``SimulatorHTTPHandler`` for the rest. It tracks its
/// connections so that ``stop()`` closes them all.
package final class SimulatorServer: Sendable {
    private struct State {
        var channel: (any Channel)?
        var port = 0
        var caPEM: String?
        var children: [ObjectIdentifier: any Channel] = [:]
    }

    private static let httpHandlerName = "hark-simulator-http"

    private let listener: SimulatorListener
    private let logger: Logger
    private let group: any EventLoopGroup
    private let state = Mutex(State())

    /// A server for `listener`, on `eventLoopGroup` (default: NIO's singleton); nothing is bound until
    /// ``start(_:)``.
    package init(_ listener: SimulatorListener, logger: Logger, eventLoopGroup: (any EventLoopGroup)?) {
        self.listener = listener
        self.logger = logger
        self.group = eventLoopGroup ?? MultiThreadedEventLoopGroup.singleton
    }

    /// A server on `host:port`, plain or with a self-signed CA (its PEM written to `caOut`).
    package convenience init(
        host: String,
        port: Int,
        selfSignedTLS: Bool,
        caOut: String?,
        maxFrameSize: Int,
        logger: Logger,
        eventLoopGroup: (any EventLoopGroup)?
    ) {
        let tls: SimulatorTLS = selfSignedTLS ? .selfSigned(caOut: caOut) : .none
        self.init(
            SimulatorListener(host: host, port: port, tls: tls, maxFrameSize: maxFrameSize),
            logger: logger,
            eventLoopGroup: eventLoopGroup
        )
    }

    /// Binds and starts serving `service`. With ``SimulatorTLS/selfSigned(caOut:)`` it first generates the
    /// certificates and writes the CA's PEM.
    package func start<Service: SimulatorService>(_ service: Service) async throws {
        let tlsContext = try makeTLSContext()
        let maxFrameSize = listener.maxFrameSize
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { [self] channel in
                self.track(channel)
                return channel.eventLoop.makeCompletedFuture {
                    try Self.configurePipeline(channel, service: service, tls: tlsContext, maxFrameSize: maxFrameSize)
                }
            }
        let channel = try await bootstrap.bind(host: listener.host, port: listener.port).get()
        let port = channel.localAddress?.port ?? listener.port
        state.withLock {
            $0.channel = channel
            $0.port = port
        }
    }

    /// Stops listening and closes every open connection.
    package func stop() async throws {
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
    }

    /// The bound port (0 before ``start(_:)``).
    package var port: Int { state.withLock { $0.port } }

    /// `ws://HOST:PORT`, or `wss://localhost:PORT` with TLS.
    package var webSocketBaseURL: String { baseURL(plain: "ws", secure: "wss") }

    /// `http://HOST:PORT`, or `https://localhost:PORT` with TLS.
    package var httpBaseURL: String { baseURL(plain: "http", secure: "https") }

    /// The generated CA certificate (PEM), with ``SimulatorTLS/selfSigned(caOut:)``.
    package var caCertificatePEM: String? { state.withLock { $0.caPEM } }

    private func baseURL(plain: String, secure: String) -> String {
        if case .none = listener.tls { return "\(plain)://\(urlHost):\(port)" }
        return "\(secure)://localhost:\(port)"
    }

    private var urlHost: String {
        switch listener.host {
        case "", "0.0.0.0": return "127.0.0.1"
        case "::": return "[::1]"
        case let host where host.contains(":"): return "[\(host)]"
        case let host: return host
        }
    }

    private func makeTLSContext() throws -> NIOSSLContext? {
        switch listener.tls {
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
            state.withLock { $0.caPEM = certificates.caPEM }
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

    private static func configurePipeline<Service: SimulatorService>(
        _ channel: any Channel,
        service: Service,
        tls: NIOSSLContext?,
        maxFrameSize: Int
    ) throws {
        let pipeline = channel.pipeline.syncOperations
        if let tls {
            try pipeline.addHandler(NIOSSLServerHandler(context: tls))
        }
        let upgrader = NIOWebSocketServerUpgrader(
            maxFrameSize: maxFrameSize,
            automaticErrorHandling: true,
            shouldUpgrade: { channel, head in
                channel.eventLoop.makeSucceededFuture(service.acceptsWebSocket(head) ? HTTPHeaders() : nil)
            },
            upgradePipelineHandler: { channel, head in
                channel.eventLoop.makeCompletedFuture {
                    let handler = SimulatorConnectionHandler(try service.connect(head))
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
        try pipeline.addHandler(SimulatorHTTPHandler(service: service), name: httpHandlerName)
    }
}
