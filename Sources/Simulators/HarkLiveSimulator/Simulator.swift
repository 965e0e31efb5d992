import HarkBackendKit
import HarkCore
import HarkSimulatorKit
import Logging
import NIOCore
import NIOHTTP1
import NIOWebSocket

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A stand-in for the Gemini Live API (`BidiGenerateContent` over WebSocket), on ``SimulatorServer``.
///
/// It serves `[PREFIX]/ws/google.ai.generativelanguage.{v1,v1beta,v1alpha}.GenerativeService.BidiGenerateContent`
/// (and `...Constrained` on `v1alpha`, for ephemeral tokens), mints tokens at `POST /v1alpha/auth_tokens`, and
/// answers 404 to anything else. Each connection runs a ``LiveSimulatorSession``; ``recorder`` shows what the
/// clients sent.
public final class LiveSimulator: Sendable {
    /// The configuration it was made with.
    public let configuration: LiveSimulatorConfiguration
    /// What clients sent, per connection.
    public let recorder = SimulatorRecorder()
    /// Sessions, handles and tokens.
    public let store: SimulatorStore
    private let logger: Logger
    private let server: SimulatorServer

    /// A simulator; nothing is bound until ``start()``.
    public init(configuration: LiveSimulatorConfiguration, logger: Logger, eventLoopGroup: (any EventLoopGroup)? = nil)
    {
        self.configuration = configuration
        self.logger = logger
        self.store = SimulatorStore(handleLifetime: configuration.handleLifetime)
        let listener = SimulatorListener(
            host: configuration.host,
            port: configuration.port,
            tls: configuration.tls,
            maxFrameSize: configuration.maxFrameSize
        )
        self.server = SimulatorServer(listener, logger: logger, eventLoopGroup: eventLoopGroup)
    }

    /// Binds and starts serving. With ``SimulatorTLS/selfSigned(caOut:)`` it first generates the certificates
    /// and writes the CA's PEM.
    public func start() async throws {
        try await server.start(
            LiveService(configuration: configuration, store: store, recorder: recorder, logger: logger)
        )
        logger.info("listening", metadata: ["url": "\(baseURL)"])
    }

    /// Stops listening and closes every open connection.
    public func stop() async throws {
        try await server.stop()
        logger.info("stopped")
    }

    /// The bound port (0 before ``start()``).
    public var port: Int { server.port }

    /// `ws://HOST:PORT`, or `wss://localhost:PORT` with TLS.
    public var baseURL: String { server.webSocketBaseURL }

    /// `http://HOST:PORT`, or `https://localhost:PORT` with TLS (token minting).
    public var httpBaseURL: String { server.httpBaseURL }

    /// The full URL of a Live endpoint (no credentials in it).
    public func liveURL(version: String = "v1beta", constrained: Bool = false, prefix: String = "") -> String {
        baseURL + LiveEndpoint(version: version, constrained: constrained, prefix: prefix).path
    }

    /// The generated CA certificate (PEM), with ``SimulatorTLS/selfSigned(caOut:)``.
    public var caCertificatePEM: String? { server.caCertificatePEM }
}

/// The Live API on the simulator's server: its WebSocket endpoints, and token minting over plain HTTP.
struct LiveService: SimulatorService {
    var configuration: LiveSimulatorConfiguration
    var store: SimulatorStore
    var recorder: SimulatorRecorder
    var logger: Logger

    var jsonContentType: String { "application/json; charset=UTF-8" }

    func acceptsWebSocket(_ head: HTTPRequestHead) -> Bool {
        guard case .live = LiveRouting.route(head.uri) else { return false }
        return true
    }

    func connect(_ head: HTTPRequestHead) throws -> LiveConnection {
        guard case .live(let endpoint) = LiveRouting.route(head.uri) else {
            throw NIOWebSocketUpgradeError.unsupportedWebSocketTarget
        }
        let (path, query) = RequestTarget.split(head.uri)
        let credentials = LiveCredentials(headers: head.headers.map { ($0.name, $0.value) }, query: query)
        return LiveConnection(service: self, endpoint: endpoint, credentials: credentials, path: path)
    }

    func respond(to request: SimulatorHTTPRequest) -> SimulatorHTTPResponse {
        let (status, json) = answer(request)
        let method = request.head.method.rawValue
        logger.info(
            "HTTP request",
            metadata: ["method": .remote(method), "path": .remote(request.path), "status": "\(status.code)"]
        )
        recorder.update {
            $0.httpRequests.append(HTTPRequestRecord(method: method, path: request.path, status: Int(status.code)))
        }
        return SimulatorHTTPResponse(status, json)
    }

    private func answer(_ request: SimulatorHTTPRequest) -> (HTTPResponseStatus, String) {
        let head = request.head
        switch LiveRouting.route(head.uri) {
        case .notFound:
            return (.notFound, errorJSON(404, "Requested entity was not found.", "NOT_FOUND"))
        case .live:
            return (.badRequest, errorJSON(400, "This endpoint only accepts WebSocket upgrades.", "INVALID_ARGUMENT"))
        case .authTokens:
            guard head.method == .POST else {
                return (.methodNotAllowed, errorJSON(405, "Use POST.", "INVALID_ARGUMENT"))
            }
            let credentials = LiveCredentials(headers: head.headers.map { ($0.name, $0.value) }, query: request.query)
            if let required = configuration.requiredKey {
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
            if request.bodyTooLarge {
                return (.payloadTooLarge, errorJSON(413, "Request too large.", "INVALID_ARGUMENT"))
            }
            return mintToken(body: request.body)
        }
    }

    private func mintToken(body: [UInt8]) -> (HTTPResponseStatus, String) {
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
        let token = store.mintToken(
            expireTime: expire,
            newSessionExpireTime: newSessionExpire,
            uses: uses,
            wall: store.wallNow()
        )
        recorder.update { $0.tokensMinted += 1 }
        logger.info("minted an ephemeral token", metadata: ["uses": "\(token.uses)"])
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
