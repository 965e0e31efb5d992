import HarkBackendKit
import HarkCore
import HarkDatagrid
import HarkSimulatorKit
import Logging
import NIOCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// One Datagrid Voice connection: checks its credential, runs its ``DatagridSimulatorSession``, turns the
/// session's actions into text frames, and records and logs (never a token).
struct DatagridConnection: SimulatorConnection {
    let logger: Logger
    private let service: DatagridService
    private let codec = DatagridCodec()
    /// Set when the credential was refused: the connection says so and closes.
    private let refusal: String?
    private let number: Int
    private var session: DatagridSimulatorSession
    /// True once `ready` went out: audio before it is counted apart.
    private var readySent = false

    init(service: DatagridService, token: String?) {
        self.service = service
        let store = service.store
        let configuration = service.configuration
        let number = store.nextConnectionNumber()
        self.number = number
        var logger = service.logger
        logger[metadataKey: "connection"] = "\(number)"
        self.logger = logger
        let wall = store.wallNow()
        var credential = "any"
        var keyInURL = false
        var handoffStart: DatagridStart?
        var refusal: String?
        if let token, let start = store.redeem(token: token, wall: wall) {
            credential = "handoff"
            handoffStart = start
        } else if let required = configuration.requiredKey {
            if token == required.reveal() {
                credential = "key"
                keyInURL = true
            } else {
                credential = "invalid"
                refusal = token == nil ? "no token" : "invalid or expired token"
            }
        } else if let token, token.hasPrefix("vt_") {
            credential = "invalid"
            refusal = "invalid or expired token"
        }
        self.refusal = refusal
        self.session = DatagridSimulatorSession(
            number: number,
            configuration: configuration,
            store: store,
            handoffStart: handoffStart,
            wallNow: wall
        )
        let record = DatagridConnectionRecord(number: number, credential: credential, keyInURL: keyInURL)
        service.recorder.update { $0.connections.append(record) }
        logger.info("connection opened", metadata: ["credential": "\(credential)"])
    }

    /// A refused credential is told so and closed with 1008.
    mutating func opened() -> [SimulatorOutput] {
        guard let refusal else { return [] }
        return perform([
            .send(.error(DatagridError(message: refusal, code: "unauthorized"))),
            .close(code: 1008, reason: "unauthorized"),
        ])
    }

    mutating func received(_ payload: ByteBuffer, binary: Bool) -> [SimulatorOutput] {
        guard refusal == nil else { return [] }
        let bytes = Data(payload.readableBytesView)
        let wall = service.store.wallNow()
        guard let decoded = try? codec.decodeClient(bytes) else {
            service.recorder.updateConnection(number) {
                $0.invalidFrames += 1
                $0.receivedKinds.appendKind("invalid")
            }
            return perform(session.receivedInvalid())
        }
        record(decoded.message)
        return perform(session.received(decoded.message, wallNow: wall))
    }

    mutating func tick() -> [SimulatorOutput] {
        perform(session.tick(wallNow: service.store.wallNow()))
    }

    /// Tells the session its socket is gone, and records how the connection ended (once).
    mutating func ended(by initiator: SimulatorCloseInitiator, code: Int?, reason: String?, first: Bool) {
        session.socketClosed()
        guard first else { return }
        let close = DatagridCloseRecord(code: code, reason: reason, initiator: initiator.rawValue)
        service.recorder.updateConnection(number) { $0.close = close }
        logger.info(
            "connection closed",
            metadata: ["by": "\(initiator.rawValue)", "code": "\(code.map(String.init) ?? "none")"]
        )
    }

    private func record(_ message: DatagridClientMessage) {
        let readySent = self.readySent
        service.recorder.updateConnection(number) { record in
            record.receivedKinds.appendKind(message.type)
            switch message {
            case .audio(let audio):
                if readySent {
                    record.audioSamples += Int64(audio.data.data.count / 2)
                } else {
                    record.audioBeforeReady += 1
                }
            case .start(let start): record.start = start
            case .text(let text): record.texts.append(text)
            case .interrupt: record.interrupts += 1
            case .stop: record.stops += 1
            case .unknown: break
            }
        }
    }

    /// The frames of the session's actions, up to the first close or drop (what follows it is not done);
    /// records what is sent and the events.
    private mutating func perform(_ actions: [DatagridSimulatorAction]) -> [SimulatorOutput] {
        var outputs: [SimulatorOutput] = []
        var sent: [String] = []
        var chunks = 0
        var errors: [String] = []
        defer {
            if !sent.isEmpty || chunks > 0 || !errors.isEmpty {
                service.recorder.updateConnection(number) { record in
                    for kind in sent { record.sentKinds.appendKind(kind) }
                    record.audioChunksSent += chunks
                    record.errorsSent += errors
                }
            }
        }
        for action in actions {
            switch action {
            case .send(let message):
                guard let text = try? codec.encodeServer(message) else { continue }
                outputs.append(.frame(text, binary: false))
                sent.append(message.type)
                switch message {
                case .audio: chunks += 1
                case .ready: readySent = true
                case .error(let error):
                    errors.append(error.code ?? "")
                    logger.info("error sent", metadata: ["code": "\(error.code ?? "")"])
                default: break
                }
            case .sendRaw(let text):
                outputs.append(.frame(text, binary: false))
                sent.append("raw")
            case .close(let code, let reason):
                outputs.append(.close(code: code, reason: reason))
                return outputs
            case .drop:
                logger.info("dropping the connection")
                outputs.append(.drop)
                return outputs
            case .joined(let id, let continued, let start):
                logger.info("started", metadata: ["conversation": "\(id)", "continued": "\(continued)"])
                service.recorder.updateConnection(number) {
                    $0.conversationId = id
                    $0.continued = continued
                    $0.start = start
                }
            case .turnStarted(let turn):
                logger.info("turn", metadata: ["turn": "\(turn.number)", "kind": "\(turn.kind)"])
                service.recorder.updateConnection(number) { $0.turns.append(turn) }
            case .turnEnded(let turn, let outcome, let count):
                logger.info("answer \(outcome)", metadata: ["turn": "\(turn)", "chunks": "\(count)"])
                service.recorder.updateConnection(number) { record in
                    if let index = record.turns.lastIndex(where: { $0.number == turn }) {
                        record.turns[index].outcome = outcome
                        record.turns[index].answerChunks = count
                    }
                }
            case .faultFired(let fault):
                logger.notice("fault fired", metadata: ["fault": "\(fault)"])
                service.recorder.updateConnection(number) { $0.faults.append(fault) }
            }
        }
        return outputs
    }
}
