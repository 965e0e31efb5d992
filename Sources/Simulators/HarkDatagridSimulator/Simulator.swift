import HarkCore
import HarkDatagrid
import HarkSimulatorKit
import Logging
import NIOCore
import NIOHTTP1

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A stand-in for the Datagrid Voice service, on the simulators' shared server (plain HTTP and WebSocket for
/// loopback, or HTTPS and `wss://` with a CA of its own).
///
/// It serves `POST /v1/voice` (the REST hand-off: checks `Authorization: Bearer KEY` when a key is required,
/// answers a WebSocket URL with a short-lived single-use token and the `start` message to send) and the WebSocket
/// `/ws/voice?token=...` (a hand-off token, or the key itself for a direct connection). Each connection runs a
/// ``DatagridSimulatorSession``; ``recorder`` shows what clients sent. Credentials are never logged.
public final class DatagridSimulator: Sendable {
    /// The configuration it was made with.
    public let configuration: DatagridSimulatorConfiguration
    /// What clients sent, per connection.
    public let recorder = DatagridRecorder()
    /// Connection numbers, hand-off tokens and conversations.
    public let store = DatagridStore()
    private let logger: Logger
    private let server: SimulatorServer

    /// A simulator; nothing is bound until ``start()``.
    public init(
        configuration: DatagridSimulatorConfiguration,
        logger: Logger,
        eventLoopGroup: (any EventLoopGroup)? = nil
    ) {
        self.configuration = configuration
        self.logger = logger
        self.server = SimulatorServer(
            host: configuration.host,
            port: configuration.port,
            selfSignedTLS: configuration.tls,
            caOut: configuration.caOut,
            maxFrameSize: configuration.maxFrameSize,
            logger: logger,
            eventLoopGroup: eventLoopGroup
        )
    }

    /// Binds and starts serving; with TLS it first generates the certificates and writes the CA's PEM.
    public func start() async throws {
        let service = DatagridService(
            baseURL: { [weak server = self.server] in server?.webSocketBaseURL ?? "" },
            configuration: configuration,
            store: store,
            recorder: recorder,
            logger: logger
        )
        try await server.start(service)
        logger.info("listening", metadata: ["url": "\(httpBaseURL)"])
    }

    /// Stops listening and closes every open connection.
    public func stop() async throws {
        try await server.stop()
    }

    /// The bound port (0 before ``start()``).
    public var port: Int { server.port }

    /// `http://HOST:PORT` (`https://localhost:PORT` with TLS): the REST base (`/v1/voice` is appended by the client).
    public var httpBaseURL: String { server.httpBaseURL }

    /// `ws://HOST:PORT` (`wss://localhost:PORT` with TLS): the WebSocket base (`/ws/voice` is appended).
    public var baseURL: String { server.webSocketBaseURL }

    /// The generated CA certificate (PEM), with TLS.
    public var caCertificatePEM: String? { server.caCertificatePEM }
}

/// Datagrid Voice on the simulator's server: the WebSocket `/ws/voice`, and `POST /v1/voice` (404 for the rest).
struct DatagridService: SimulatorService {
    /// `ws://HOST:PORT`, for the URLs the hand-off returns.
    var baseURL: @Sendable () -> String
    var configuration: DatagridSimulatorConfiguration
    var store: DatagridStore
    var recorder: DatagridRecorder
    var logger: Logger

    func acceptsWebSocket(_ head: HTTPRequestHead) -> Bool {
        RequestTarget.split(head.uri).path == "/ws/voice"
    }

    func connect(_ head: HTTPRequestHead) -> DatagridConnection {
        DatagridConnection(
            service: self,
            token: RequestTarget.queryValue("token", in: RequestTarget.split(head.uri).query)
        )
    }

    var jsonContentType: String { "application/json" }

    func respond(to request: SimulatorHTTPRequest) -> SimulatorHTTPResponse {
        let head = request.head
        var record = DatagridHTTPRecord(
            method: head.method.rawValue,
            path: request.path,
            status: 0,
            authorization: "missing",
            teamspace: head.headers.first(name: "Datagrid-Teamspace"),
            hadQuery: request.query != nil
        )
        let (status, json) = answer(request, record: &record)
        record.status = Int(status.code)
        logger.info(
            "HTTP request",
            metadata: [
                "method": .remote(head.method.rawValue), "path": .remote(request.path), "status": "\(status.code)",
                "authorization": "\(record.authorization)",
            ]
        )
        recorder.update { $0.httpRequests.append(record) }
        return SimulatorHTTPResponse(status, json)
    }

    private func answer(_ request: SimulatorHTTPRequest, record: inout DatagridHTTPRecord)
        -> (HTTPResponseStatus, String)
    {
        let head = request.head
        guard request.path == "/v1/voice", configuration.handoffAvailable else {
            return (.notFound, #"{"detail":"Not Found"}"#)
        }
        guard head.method == .POST else { return (.methodNotAllowed, #"{"detail":"Method Not Allowed"}"#) }
        let authorization = head.headers.first(name: "Authorization")
        var presented: String?
        if let authorization, authorization.lowercased().hasPrefix("bearer ") {
            presented = String(authorization.dropFirst("bearer ".count)).trimmedWhitespace
        }
        if let required = configuration.requiredKey {
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
        if request.bodyTooLarge { return (.payloadTooLarge, #"{"detail":"Request too large"}"#) }
        let body = request.body
        let start: DatagridStart
        do {
            start = body.isEmpty ? DatagridStart() : try JSONDecoder().decode(DatagridStart.self, from: Data(body))
        } catch {
            return (.unprocessableEntity, #"{"detail":"Invalid start payload"}"#)
        }
        record.start = start
        let token = store.mintToken(start: start, expires: store.wallNow() + configuration.tokenLifetime)
        let url = baseURL() + "/ws/voice?token=" + token
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
