import HarkCore
import HarkSimulatorKit
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
    /// The text service's behaviour (delays, a fault for every request, a scripted function call).
    public var text = TextService()
    /// What goes wrong with the first text requests, in order (nil: answered); later ones are answered as ``text``
    /// says.
    public var textFaults: [TextService.Fault?] = []
    /// The statuses the first speech-to-text upgrades are refused with, in order (429, 503); later ones are taken.
    public var speechToTextRefusals: [Int] = []
    /// The services' own time: from the endpoint to the final transcript, and from the text (or flush) that starts
    /// a synthesis to its audio. (The text service's are ``TextService/firstChunkDelay`` and ``TextService/chunkDelay``.)
    public var speechToTextFinalDelay: Duration = .zero
    public var textToSpeechFirstAudioDelay: Duration = .zero
    /// Faults of the speech sockets: the speech-to-text socket's turn that never ends (each audio message then
    /// brings a final transcript of this many characters), and what goes wrong on text-to-speech sockets (the first
    /// ``textToSpeechFaultSockets`` opened; nil: every one).
    public var speechToTextEndlessTurn: Int?
    public var textToSpeechFault: TextToSpeechService.Fault?
    public var textToSpeechFaultSockets: Int?
    /// The idle cuts (60 s on the real services).
    public var speechToTextIdleCut: Duration = .seconds(60)
    public var textToSpeechIdleCut: Duration = .seconds(60)
    public var maxFrameSize = 4 << 20

    public init() {}
}

/// One text with the instant it was sent or received.
public struct TimedText: Sendable, Hashable {
    public var at: ContinuousClock.Instant
    public var text: String
}

/// When the services did their part of one turn, on the simulator's clock (``ContinuousClock``): what a benchmark
/// splits a turn's latency by, into the services' share and the client's.
public struct CascadeTurnTiming: Sendable, Hashable {
    /// The turn's number (1, 2, ...).
    public var number: Int
    /// Where the utterance ended in its speech-to-text socket's stream (nil for a turn without speech: a greeting,
    /// a tool's result), and the number of that socket (1 for the first opened).
    public var endpoint: SpeechToTextService.Endpoint?
    public var speechToTextSocket: Int?
    /// The message that completed the endpointing's silence arrived.
    public var endpointed: ContinuousClock.Instant?
    /// The final transcript went out.
    public var transcriptSent: ContinuousClock.Instant?
    /// The text request arrived.
    public var requestReceived: ContinuousClock.Instant?
    /// The answer's pieces went out: when, each with the answer's text so far.
    public var answerSent: [TimedText] = []
    /// The first text that reached the speech socket, and when.
    public var firstSpeechText: TimedText?
    /// The message that started the first synthesis arrived (a flush, or the text that filled the buffer): the
    /// speech service's own time runs from here.
    public var firstSynthesisAsked: ContinuousClock.Instant?
    /// The first audio went out.
    public var firstAudioSent: ContinuousClock.Instant?

    /// When the piece of the answer that completed the speech socket's first text went out.
    public var firstSentenceSent: ContinuousClock.Instant? {
        guard let first = firstSpeechText?.text else { return nil }
        return answerSent.first { $0.text.contains(first) }?.at
    }
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
    /// The text of each synthesis, in order (``TextToSpeechService/syntheses``).
    public var syntheses: [String] = []
    /// Text requests: their bodies (JSON), and when each arrived, in order.
    public var textRequests: [String] = []
    public var textRequestTimes: [ContinuousClock.Instant] = []
    /// Upgrades and requests refused for their key.
    public var refusedKeys = 0
    /// `models.get` requests (`GET /{v1beta|v1}/models/MODEL`).
    public var modelRequests = 0
    /// The statuses speech-to-text upgrades were refused with as configured (``CascadeSimulatorConfiguration/speechToTextRefusals``).
    public var refusedSpeechToText: [Int] = []
    /// The last turns' timings (at most ``CascadeRecord/timingLimit``), oldest first.
    public var turns: [CascadeTurnTiming] = []
    /// Turns so far.
    public var turnCount = 0

    public static let timingLimit = 256
}

/// Sarvam's two sockets and Gemini's streamed text on one loopback server: `/speech-to-text/ws`,
/// `/text-to-speech/ws` and `POST /{v1beta|v1}/models/MODEL:streamGenerateContent?alt=sse`. Keys are never logged.
public final class CascadeSimulator: Sendable {
    public let configuration: CascadeSimulatorConfiguration
    private let record = Mutex(CascadeRecord())
    /// Statuses of refused speech-to-text upgrades, in order, for the answers to them.
    private let refusalsToAnswer = Mutex<[Int]>([])
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

    func withRecord<T>(_ body: (inout CascadeRecord) -> T) -> T { record.withLock { body(&$0) } }

    func update(_ change: (inout CascadeRecord) -> Void) { record.withLock { change(&$0) } }

    /// Changes the timing of the last turn that `matches`, if any.
    func updateTurn(
        where matches: (CascadeTurnTiming) -> Bool,
        _ change: (inout CascadeTurnTiming) -> Void
    ) {
        record.withLock { record in
            guard let index = record.turns.lastIndex(where: matches) else { return }
            change(&record.turns[index])
        }
    }

    /// Starts the timing of a new turn; returns its number.
    @discardableResult
    func startTurn(_ fill: (inout CascadeTurnTiming) -> Void) -> Int {
        record.withLock { record in
            record.turnCount += 1
            var timing = CascadeTurnTiming(number: record.turnCount)
            fill(&timing)
            record.turns.append(timing)
            if record.turns.count > CascadeRecord.timingLimit { record.turns.removeFirst() }
            return timing.number
        }
    }

    /// A text request arrived: the turn whose transcript went out takes it, else it starts one of its own.
    func textRequestArrived(at instant: ContinuousClock.Instant) -> Int {
        let number = record.withLock { record -> Int? in
            guard let index = record.turns.indices.last, record.turns[index].transcriptSent != nil,
                record.turns[index].requestReceived == nil
            else { return nil }
            record.turns[index].requestReceived = instant
            return record.turns[index].number
        }
        return number ?? startTurn { $0.requestReceived = instant }
    }

    /// True when this speech-to-text upgrade is to be refused (a refusal is still to come); its status is then
    /// ``takeRefusal()``'s to answer with.
    func refuseSpeechToText() -> Bool {
        guard
            let status = record.withLock({ record -> Int? in
                let refusals = configuration.speechToTextRefusals
                guard record.refusedSpeechToText.count < refusals.count else { return nil }
                let status = refusals[record.refusedSpeechToText.count]
                record.refusedSpeechToText.append(status)
                return status
            })
        else { return false }
        refusalsToAnswer.withLock { $0.append(status) }
        return true
    }

    /// The status of the oldest refused upgrade not answered yet.
    func takeRefusal() -> Int? { refusalsToAnswer.withLock { $0.isEmpty ? nil : $0.removeFirst() } }

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
        if path == Self.speechToTextPath, simulator.refuseSpeechToText() {
            return false  // answered with the refusal's status by respond(to:)
        }
        return true
    }

    func sarvamKeyMatches(_ head: HTTPRequestHead) -> Bool {
        guard let required = simulator.configuration.sarvamKey else { return true }
        return head.headers.first(name: "api-subscription-key") == required.reveal()
    }

    func geminiKeyMatches(_ head: HTTPRequestHead) -> Bool {
        guard let required = simulator.configuration.geminiKey else { return true }
        return head.headers.first(name: "x-goog-api-key") == required.reveal()
    }

    /// The model a `/{v1beta|v1}/models/MODEL` path names (nil for any other path).
    static func modelName(_ path: String) -> String? {
        for prefix in ["/v1beta/models/", "/v1/models/"] where path.hasPrefix(prefix) {
            let model = path.dropFirst(prefix.count)
            return model.isEmpty || model.contains(":") || model.contains("/") ? nil : String(model)
        }
        return nil
    }

    func connect(_ head: HTTPRequestHead) throws -> CascadeConnection {
        let (path, query) = RequestTarget.split(head.uri)
        var values: [String: String] = [:]
        for item in RequestTarget.queryItems(query) { values[item.name] = item.value }
        let now = ContinuousClock.now
        let configuration = simulator.configuration
        if path == Self.speechToTextPath {
            let socket = simulator.withRecord { record in
                record.speechToTextSockets += 1
                return record.speechToTextSockets
            }
            let service = SpeechToTextService(
                options: .init(query: values),
                transcripts: configuration.transcripts,
                badKey: !sarvamKeyMatches(head),
                idleCut: configuration.speechToTextIdleCut,
                finalDelay: configuration.speechToTextFinalDelay,
                endlessTurnCharacters: configuration.speechToTextEndlessTurn,
                now: .zero
            )
            return CascadeConnection(simulator: simulator, started: now, kind: .speechToText(service), socket: socket)
        }
        let number = simulator.withRecord { record in
            record.textToSpeechSockets += 1
            return record.textToSpeechSockets
        }
        let faulty = configuration.textToSpeechFaultSockets.map { number <= $0 } ?? true
        let service = TextToSpeechService(
            completionEvents: values["send_completion_event"] == "true",
            idleCut: configuration.textToSpeechIdleCut,
            firstAudioDelay: configuration.textToSpeechFirstAudioDelay,
            fault: faulty ? configuration.textToSpeechFault : nil,
            now: .zero
        )
        return CascadeConnection(simulator: simulator, started: now, kind: .textToSpeech(service), socket: 0)
    }

    func respond(to request: SimulatorHTTPRequest) -> SimulatorHTTPResponse {
        if request.path == Self.speechToTextPath, let status = simulator.takeRefusal() {
            let message = status == 429 ? "Rate limit exceeded" : "Service temporarily unavailable"
            return SimulatorHTTPResponse(
                HTTPResponseStatus(statusCode: status),
                #"{"error":{"message":"\#(message)","code":"\#(status == 429 ? "rate_limit_exceeded" : "unavailable")"}}"#
            )
        }
        if request.path == Self.speechToTextPath || request.path == Self.textToSpeechPath {
            return SimulatorHTTPResponse(
                .unauthorized,
                #"{"error":{"message":"Invalid API key","code":"invalid_api_key"}}"#
            )
        }
        if let model = Self.modelName(request.path), request.head.method == .GET {
            // models.get: the key is checked as for a text request; a refusal every text request gets, it gets too.
            simulator.update { $0.modelRequests += 1 }
            if !geminiKeyMatches(request.head) {
                simulator.update { $0.refusedKeys += 1 }
                return SimulatorHTTPResponse(.badRequest, TextService.keyInvalidBody)
            }
            switch simulator.configuration.text.fault {
            case .keyInvalid?: return SimulatorHTTPResponse(.badRequest, TextService.keyInvalidBody)
            case .status(let status, _)? where status == 401 || status == 403:
                return SimulatorHTTPResponse(HTTPResponseStatus(statusCode: status), TextService.errorBody(status))
            default: return SimulatorHTTPResponse(.ok, TextService.modelBody(model))
            }
        }
        return SimulatorHTTPResponse(.notFound, TextService.errorBody(404, "Not found."))
    }

    func respondStreaming(to request: SimulatorHTTPRequest) -> SimulatorHTTPStream? {
        // The request's arrival, before the service's own work on it (reading it, making the answer).
        let arrived = ContinuousClock.now
        let path = request.path
        guard request.head.method == .POST,
            path.hasPrefix("/v1beta/models/") || path.hasPrefix("/v1/models/"),
            path.hasSuffix(":streamGenerateContent")
        else { return nil }
        if !geminiKeyMatches(request.head) {
            simulator.update { $0.refusedKeys += 1 }
            return SimulatorHTTPStream(
                status: .badRequest,
                contentType: "application/json",
                pieces: [(.zero, TextService.keyInvalidBody)]
            )
        }
        let index = simulator.withRecord { record in
            defer {
                record.textRequests.append(String(decoding: request.body, as: UTF8.self))
                record.textRequestTimes.append(arrived)
            }
            return record.textRequests.count
        }
        let configuration = simulator.configuration
        let fault = index < configuration.textFaults.count ? configuration.textFaults[index] : nil
        switch configuration.text.answer(Data(request.body), fault: fault) {
        case .status(let code, let body, let retryAfter):
            return SimulatorHTTPStream(
                status: HTTPResponseStatus(statusCode: code),
                contentType: "application/json",
                headers: retryAfter.map { [("Retry-After", "\($0)")] } ?? [],
                pieces: [(.zero, body)]
            )
        case .stream(let pieces, let drops):
            let turn = simulator.textRequestArrived(at: arrived)
            // The answer's text so far after each piece, for the turn's timings.
            var answer = ""
            let texts = pieces.map { piece in
                answer += piece.text
                return answer
            }
            return SimulatorHTTPStream(
                status: .ok,
                contentType: "text/event-stream",
                pieces: pieces.map { ($0.delay, $0.bytes) },
                drops: drops
            ) { [simulator] index in
                let sent = TimedText(at: .now, text: texts[index])
                simulator.updateTurn(where: { $0.number == turn }) { timing in
                    if timing.answerSent.count < 1000 { timing.answerSent.append(sent) }
                }
            }
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
    /// The number of a speech-to-text socket (1 for the first opened).
    let socket: Int
    var logger: Logger { simulator.serviceLogger }

    private var now: Duration { started.duration(to: .now) }

    mutating func received(_ payload: ByteBuffer, binary: Bool) -> [SimulatorOutput] {
        // The turns' timings take the message's arrival, before the service's own work on it (decoding, its voice
        // detector, a synthesis): that work is the service's time, not the client's.
        let arrived = ContinuousClock.now
        let text = String(buffer: payload)
        let now = started.duration(to: arrived)
        switch kind {
        case .speechToText(var service):
            let before = (service.samplesReceived, service.flushes)
            let outputs = speechToText(&service, arrived: arrived) { $0.received(text, now: now) }
            let after = (service.samplesReceived, service.flushes)
            simulator.update {
                $0.samplesReceived += after.0 - before.0
                $0.flushes += after.1 - before.1
            }
            kind = .speechToText(service)
            return outputs.map(Self.output)
        case .textToSpeech(var service):
            let before = (service.texts.count, service.flushes, service.syntheses.count)
            let outputs = textToSpeech(&service) { $0.received(text, now: now) }
            let texts = service.texts.dropFirst(before.0)
            let flushes = service.flushes - before.1
            let syntheses = service.syntheses.dropFirst(before.2)
            simulator.update {
                $0.texts += texts
                $0.speechFlushes += flushes
                $0.syntheses += syntheses
            }
            if let first = texts.first {
                let timed = TimedText(at: arrived, text: first)
                simulator.updateTurn(where: { $0.requestReceived != nil }) { timing in
                    if timing.firstSpeechText == nil { timing.firstSpeechText = timed }
                }
            }
            if !syntheses.isEmpty {
                simulator.updateTurn(where: { $0.firstSpeechText != nil }) { timing in
                    if timing.firstSynthesisAsked == nil { timing.firstSynthesisAsked = arrived }
                }
            }
            kind = .textToSpeech(service)
            return outputs.map(Self.output)
        }
    }

    mutating func tick() -> [SimulatorOutput] {
        let now = self.now
        switch kind {
        case .speechToText(var service):
            let outputs = speechToText(&service) { $0.tick(now: now) }
            kind = .speechToText(service)
            return outputs.map(Self.output)
        case .textToSpeech(var service):
            let outputs = textToSpeech(&service) { $0.tick(now: now) }
            kind = .textToSpeech(service)
            return outputs.map(Self.output)
        }
    }

    /// Runs `step` on the speech-to-text service and notes in the turns' timings an endpoint and a transcript sent.
    /// `arrived`: when the message being handled arrived (nil for a tick).
    private func speechToText(
        _ service: inout SpeechToTextService,
        arrived: ContinuousClock.Instant? = nil,
        _ step: (inout SpeechToTextService) -> [ServiceOutput]
    ) -> [ServiceOutput] {
        let before = (service.endpoints, service.transcriptsSent)
        let outputs = step(&service)
        if service.endpoints > before.0, let endpoint = service.lastEndpoint {
            let socket = self.socket
            simulator.startTurn { timing in
                timing.endpoint = endpoint
                timing.speechToTextSocket = socket
                timing.endpointed = arrived ?? .now
            }
        }
        if service.transcriptsSent > before.1 {
            let sent = ContinuousClock.now
            simulator.updateTurn(where: { $0.endpoint != nil }) { timing in
                if timing.transcriptSent == nil { timing.transcriptSent = sent }
            }
        }
        return outputs
    }

    /// Runs `step` on the text-to-speech service and notes the first audio of a turn in its timing.
    private func textToSpeech(
        _ service: inout TextToSpeechService,
        _ step: (inout TextToSpeechService) -> [ServiceOutput]
    ) -> [ServiceOutput] {
        let before = service.audioSent
        let outputs = step(&service)
        if service.audioSent > before {
            let sent = ContinuousClock.now
            simulator.updateTurn(where: { $0.firstSpeechText != nil }) { timing in
                if timing.firstAudioSent == nil { timing.firstAudioSent = sent }
            }
        }
        return outputs
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
