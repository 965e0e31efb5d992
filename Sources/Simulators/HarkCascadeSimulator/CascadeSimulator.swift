import HarkCore
import HarkLiveSimulator
import Logging
import NIOCore
import NIOHTTP1
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// How the simulated cascade services behave.
public struct CascadeSimulatorConfiguration: Sendable {
    public var host = "127.0.0.1"
    public var port = 0
    /// TLS with a CA of its own (written to `caOut`), or plain for loopback.
    public var tls = false
    public var caOut: String?
    /// The Sarvam key both sockets require in `api-subscription-key` (nil: any).
    public var sarvamKey: Secret?
    /// The Gemini key the text service requires in `x-goog-api-key` (nil: any).
    public var geminiKey: Secret?
    /// A wrong Sarvam key: refused at the upgrade with 401 (true), or taken and closed with 4003 at the first
    /// audio (false: what a third party saw the service do).
    public var refuseBadKeyAtUpgrade = true
    /// The transcripts the speech-to-text service gives, utterance by utterance.
    public var transcripts: [String] = []
    /// The text service's behaviour (delays, a failing status, a scripted function call).
    public var text = TextService()
    /// The idle cuts (60 s on the real services).
    public var speechToTextIdleCut: Duration = .seconds(60)
    public var textToSpeechIdleCut: Duration = .seconds(60)
    public var maxFrameSize = 4 << 20

    public init() {}
}

/// What the simulated services saw, for tests.
public struct CascadeRecord: Sendable, Hashable {
    /// Speech-to-text sockets opened, and the samples and flushes each received.
    public var speechToTextSockets = 0
    public var samplesReceived = 0
    public var flushes = 0
    /// Text-to-speech sockets opened, the texts they received, in order, and their flushes.
    public var textToSpeechSockets = 0
    public var texts: [String] = []
    public var speechFlushes = 0
    /// Text requests: their bodies (JSON), in order.
    public var textRequests: [String] = []
    /// Upgrades and requests refused for their key.
    public var refusedKeys = 0
}

/// Sarvam's two sockets and Gemini's streamed text on one loopback server: `/speech-to-text/ws`,
/// `/text-to-speech/ws` and `POST /{v1beta|v1}/models/MODEL:streamGenerateContent?alt=sse`. Keys are never logged.
public final class CascadeSimulator: Sendable {
    public let configuration: CascadeSimulatorConfiguration
    private let record = Mutex(CascadeRecord())
    private let logger: Logger
    private let server: SimulatorServer

    public init(
        configuration: CascadeSimulatorConfiguration,
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

    public func start() async throws {
        try await server.start(CascadeService(simulator: self))
        logger.info("listening", metadata: ["url": "\(httpBaseURL)"])
    }

    public func stop() async throws { try await server.stop() }

    /// `http://HOST:PORT` (`https://localhost:PORT` with TLS): the base of both services.
    public var httpBaseURL: String { server.httpBaseURL }
    /// The generated CA certificate (PEM), with TLS.
    public var caCertificatePEM: String? { server.caCertificatePEM }

    /// What the services saw so far.
    public var snapshot: CascadeRecord { record.withLock { $0 } }

    func update(_ change: (inout CascadeRecord) -> Void) { record.withLock { change(&$0) } }

    var serviceLogger: Logger { logger }
}

struct CascadeService: SimulatorService {
    let simulator: CascadeSimulator
    var logger: Logger { simulator.serviceLogger }
    var jsonContentType: String { "application/json" }

    static let speechToTextPath = "/speech-to-text/ws"
    static let textToSpeechPath = "/text-to-speech/ws"

    func acceptsWebSocket(_ head: HTTPRequestHead) -> Bool {
        let path = RequestTarget.split(head.uri).path
        guard path == Self.speechToTextPath || path == Self.textToSpeechPath else { return false }
        if simulator.configuration.refuseBadKeyAtUpgrade, !sarvamKeyMatches(head) {
            simulator.update { $0.refusedKeys += 1 }
            return false  // answered 401 by respond(to:)
        }
        return true
    }

    func sarvamKeyMatches(_ head: HTTPRequestHead) -> Bool {
        guard let required = simulator.configuration.sarvamKey else { return true }
        return head.headers.first(name: "api-subscription-key") == required.reveal()
    }

    func connect(_ head: HTTPRequestHead) throws -> CascadeConnection {
        let (path, query) = RequestTarget.split(head.uri)
        var values: [String: String] = [:]
        for item in RequestTarget.queryItems(query) { values[item.name] = item.value }
        let now = ContinuousClock.now
        let configuration = simulator.configuration
        if path == Self.speechToTextPath {
            simulator.update { $0.speechToTextSockets += 1 }
            let service = SpeechToTextService(
                options: .init(query: values),
                transcripts: configuration.transcripts,
                badKey: !sarvamKeyMatches(head),
                idleCut: configuration.speechToTextIdleCut,
                now: .zero
            )
            return CascadeConnection(simulator: simulator, started: now, kind: .speechToText(service))
        }
        simulator.update { $0.textToSpeechSockets += 1 }
        let service = TextToSpeechService(
            completionEvents: values["send_completion_event"] == "true",
            idleCut: configuration.textToSpeechIdleCut,
            now: .zero
        )
        return CascadeConnection(simulator: simulator, started: now, kind: .textToSpeech(service))
    }

    func respond(to request: SimulatorHTTPRequest) -> SimulatorHTTPResponse {
        if request.path == Self.speechToTextPath || request.path == Self.textToSpeechPath {
            return SimulatorHTTPResponse(
                .unauthorized,
                #"{"error":{"message":"Invalid API key","code":"invalid_api_key"}}"#
            )
        }
        return SimulatorHTTPResponse(.notFound, TextService.errorBody(404, "Not found."))
    }

    func respondStreaming(to request: SimulatorHTTPRequest) -> SimulatorHTTPStream? {
        let path = request.path
        guard request.head.method == .POST,
            path.hasPrefix("/v1beta/models/") || path.hasPrefix("/v1/models/"),
            path.hasSuffix(":streamGenerateContent")
        else { return nil }
        if let required = simulator.configuration.geminiKey,
            request.head.headers.first(name: "x-goog-api-key") != required.reveal()
        {
            simulator.update { $0.refusedKeys += 1 }
            return SimulatorHTTPStream(
                status: .badRequest,
                contentType: "application/json",
                pieces: [(.zero, TextService.errorBody(400, "API key not valid. Please pass a valid API key."))]
            )
        }
        simulator.update { $0.textRequests.append(String(decoding: request.body, as: UTF8.self)) }
        switch simulator.configuration.text.answer(Data(request.body)) {
        case .status(let code, let body):
            return SimulatorHTTPStream(
                status: HTTPResponseStatus(statusCode: code),
                contentType: "application/json",
                pieces: [(.zero, body)]
            )
        case .stream(let pieces):
            return SimulatorHTTPStream(
                status: .ok,
                contentType: "text/event-stream",
                pieces: pieces.map { ($0.delay, $0.bytes) }
            )
        }
    }
}

/// One socket of either Sarvam service.
struct CascadeConnection: SimulatorConnection {
    enum Kind {
        case speechToText(SpeechToTextService)
        case textToSpeech(TextToSpeechService)
    }

    let simulator: CascadeSimulator
    let started: ContinuousClock.Instant
    var kind: Kind
    var logger: Logger { simulator.serviceLogger }

    private var now: Duration { started.duration(to: .now) }

    mutating func received(_ payload: ByteBuffer, binary: Bool) -> [SimulatorOutput] {
        let text = String(buffer: payload)
        let now = self.now
        switch kind {
        case .speechToText(var service):
            let before = (service.samplesReceived, service.flushes)
            let outputs = service.received(text, now: now)
            let after = (service.samplesReceived, service.flushes)
            simulator.update {
                $0.samplesReceived += after.0 - before.0
                $0.flushes += after.1 - before.1
            }
            kind = .speechToText(service)
            return outputs.map(Self.output)
        case .textToSpeech(var service):
            let before = (service.texts.count, service.flushes)
            let outputs = service.received(text, now: now)
            let texts = service.texts.dropFirst(before.0)
            let flushes = service.flushes - before.1
            simulator.update {
                $0.texts += texts
                $0.speechFlushes += flushes
            }
            kind = .textToSpeech(service)
            return outputs.map(Self.output)
        }
    }

    mutating func tick() -> [SimulatorOutput] {
        let now = self.now
        switch kind {
        case .speechToText(var service):
            let outputs = service.tick(now: now)
            kind = .speechToText(service)
            return outputs.map(Self.output)
        case .textToSpeech(var service):
            let outputs = service.tick(now: now)
            kind = .textToSpeech(service)
            return outputs.map(Self.output)
        }
    }

    mutating func ended(by initiator: SimulatorCloseInitiator, code: Int?, reason: String?, first: Bool) {}

    static func output(_ output: ServiceOutput) -> SimulatorOutput {
        switch output {
        case .send(let text): .frame(text, binary: false)
        case .close(let code, let reason): .close(code: code, reason: reason)
        case .drop: .drop
        }
    }
}
