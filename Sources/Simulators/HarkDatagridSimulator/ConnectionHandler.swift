import HarkCore
import HarkDatagrid
import Logging
import NIOCore
import NIOWebSocket

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Runs one ``DatagridSimulatorSession`` on a WebSocket channel: decodes frames, ticks the session, performs
/// its actions, records and logs (never a token).
final class DatagridConnectionHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private enum State {
        case open
        case closing
        case closed
    }

    private static let tickInterval = TimeAmount.milliseconds(10)
    private static let closeTimeout = TimeAmount.seconds(2)

    private let shared: DatagridContext
    private let number: Int
    private var session: DatagridSimulatorSession
    private var logger: Logger
    private let codec = DatagridCodec()
    private var state = State.open
    private var context: ChannelHandlerContext?
    private var tickTask: Scheduled<Void>?
    private var closeTask: Scheduled<Void>?
    private var closeRecorded = false
    private var readySent = false
    /// Set when the credential was refused: the connection says so and closes.
    private var refusal: String?

    init(context: DatagridContext, token: String?) {
        self.shared = context
        let number = context.store.nextConnectionNumber()
        self.number = number
        var logger = context.logger
        logger[metadataKey: "connection"] = "\(number)"
        self.logger = logger
        let wall = context.store.wallNow()
        var credential = "any"
        var keyInURL = false
        var handoffStart: DatagridStart?
        if let token, let start = context.store.redeem(token: token, wall: wall) {
            credential = "handoff"
            handoffStart = start
        } else if let required = context.configuration.requiredKey {
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
        self.session = DatagridSimulatorSession(
            number: number,
            configuration: context.configuration,
            store: context.store,
            handoffStart: handoffStart,
            wallNow: wall
        )
        let record = DatagridConnectionRecord(number: number, credential: credential, keyInURL: keyInURL)
        context.recorder.update { $0.connections.append(record) }
        logger.info("connection opened", metadata: ["credential": "\(credential)"])
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if let refusal {
            perform([
                .send(.error(DatagridError(message: refusal, code: "unauthorized"))),
                .close(code: 1008, reason: "unauthorized"),
            ])
            return
        }
        scheduleTick()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        cancelTimers()
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish(initiator: "network", code: nil, reason: nil)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("channel error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .text, .binary:
            guard case .open = state, refusal == nil else { return }
            let bytes = Data(frame.unmaskedData.readableBytesView)
            let wall = shared.store.wallNow()
            guard let decoded = try? codec.decodeClient(bytes) else {
                shared.recorder.updateConnection(number) {
                    $0.invalidFrames += 1
                    $0.receivedKinds.appendKind("invalid")
                }
                perform(session.receivedInvalid())
                return
            }
            record(decoded.message)
            perform(session.received(decoded.message, wallNow: wall))
        case .ping:
            guard case .open = state else { return }
            context.writeAndFlush(
                wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)),
                promise: nil
            )
        case .connectionClose:
            receivedClose(frame, context: context)
        default:
            break
        }
    }

    private func record(_ message: DatagridClientMessage) {
        let readySent = self.readySent
        shared.recorder.updateConnection(number) { record in
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

    private func receivedClose(_ frame: WebSocketFrame, context: ChannelHandlerContext) {
        switch state {
        case .closing:
            state = .closed
            context.close(promise: nil)
        case .open:
            var data = frame.unmaskedData
            let code = data.readWebSocketErrorCode()
            let reason = data.readString(length: data.readableBytes)
            finish(initiator: "client", code: code.map { Int(UInt16(webSocketErrorCode: $0)) }, reason: reason)
            state = .closing
            var reply = context.channel.allocator.buffer(capacity: 2)
            if let code { reply.write(webSocketErrorCode: code) }
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: reply)))
                .assumeIsolated()
                .whenComplete { _ in context.close(promise: nil) }
        case .closed:
            break
        }
    }

    private func scheduleTick() {
        guard let context else { return }
        tickTask = context.eventLoop.assumeIsolated().scheduleTask(in: Self.tickInterval) { [self] in
            self.tickTask = nil
            guard case .open = self.state else { return }
            self.perform(self.session.tick(wallNow: self.shared.store.wallNow()))
            self.scheduleTick()
        }
    }

    private func cancelTimers() {
        tickTask?.cancel()
        tickTask = nil
        closeTask?.cancel()
        closeTask = nil
    }

    private func perform(_ actions: [DatagridSimulatorAction]) {
        guard let context, !actions.isEmpty else { return }
        var sent: [String] = []
        var chunks = 0
        var errors: [String] = []
        var wrote = false
        defer {
            if wrote { context.flush() }
            if !sent.isEmpty || chunks > 0 || !errors.isEmpty {
                shared.recorder.updateConnection(number) { record in
                    for kind in sent { record.sentKinds.appendKind(kind) }
                    record.audioChunksSent += chunks
                    record.errorsSent += errors
                }
            }
        }
        for action in actions {
            guard case .open = state else { return }
            switch action {
            case .send(let message):
                guard let text = try? codec.encodeServer(message) else { continue }
                context.write(wrapOutboundOut(frame(text)), promise: nil)
                wrote = true
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
                context.write(wrapOutboundOut(frame(text)), promise: nil)
                wrote = true
                sent.append("raw")
            case .close(let code, let reason):
                if wrote { context.flush() }
                wrote = false
                sendClose(code: code, reason: reason, context: context)
                return
            case .drop:
                if wrote { context.flush() }
                wrote = false
                logger.info("dropping the connection")
                finish(initiator: "drop", code: nil, reason: nil)
                state = .closed
                context.close(promise: nil)
                return
            case .joined(let id, let continued, let start):
                logger.info("started", metadata: ["conversation": "\(id)", "continued": "\(continued)"])
                shared.recorder.updateConnection(number) {
                    $0.conversationId = id
                    $0.continued = continued
                    $0.start = start
                }
            case .turnStarted(let turn):
                logger.info("turn", metadata: ["turn": "\(turn.number)", "kind": "\(turn.kind)"])
                shared.recorder.updateConnection(number) { $0.turns.append(turn) }
            case .turnEnded(let turn, let outcome, let count):
                logger.info("answer \(outcome)", metadata: ["turn": "\(turn)", "chunks": "\(count)"])
                shared.recorder.updateConnection(number) { record in
                    if let index = record.turns.lastIndex(where: { $0.number == turn }) {
                        record.turns[index].outcome = outcome
                        record.turns[index].answerChunks = count
                    }
                }
            case .faultFired(let fault):
                logger.notice("fault fired", metadata: ["fault": "\(fault)"])
                shared.recorder.updateConnection(number) { $0.faults.append(fault) }
            }
        }
    }

    private func frame(_ text: String) -> WebSocketFrame {
        let allocator = context?.channel.allocator ?? ByteBufferAllocator()
        return WebSocketFrame(fin: true, opcode: .text, data: allocator.buffer(string: text))
    }

    private func sendClose(code: Int, reason: String, context: ChannelHandlerContext) {
        finish(initiator: "server", code: code, reason: reason)
        state = .closing
        var data = context.channel.allocator.buffer(capacity: 2 + reason.utf8.count)
        data.write(webSocketErrorCode: WebSocketErrorCode(codeNumber: code))
        data.writeString(reason)
        context.writeAndFlush(
            wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: data)),
            promise: nil
        )
        closeTask = context.eventLoop.assumeIsolated().scheduleTask(in: Self.closeTimeout) { [self] in
            self.closeTask = nil
            self.state = .closed
            self.context?.close(promise: nil)
        }
    }

    private func finish(initiator: String, code: Int?, reason: String?) {
        session.socketClosed()
        if initiator == "network" {
            state = .closed
            cancelTimers()
        }
        guard !closeRecorded else { return }
        closeRecorded = true
        let close = DatagridCloseRecord(code: code, reason: reason, initiator: initiator)
        shared.recorder.updateConnection(number) { $0.close = close }
        logger.info(
            "connection closed",
            metadata: ["by": "\(initiator)", "code": "\(code.map(String.init) ?? "none")"]
        )
    }
}
