import HarkCore
import HarkGemini
import Logging
import NIOCore
import NIOWebSocket

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Runs one ``LiveSimulatorSession`` on a WebSocket channel: decodes frames, ticks the session, performs its
/// actions (with stalls, slow replies and output styles), records and logs.
final class LiveConnectionHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private enum Outbound {
        case frame(WebSocketFrame)
        case close(code: Int, reason: String)
        case drop
    }

    private enum State {
        case open
        /// A close frame went out (or came in); waiting for the other side's, or the timeout.
        case closing
        case closed
    }

    private static let tickInterval = TimeAmount.milliseconds(10)
    private static let closeTimeout = TimeAmount.seconds(2)

    private let shared: SimulatorContext
    private let number: Int
    private var session: LiveSimulatorSession
    private var logger: Logger
    private var encoder = ServerMessageEncoder()
    private var style: OutputStyle
    private var state = State.open
    private var context: ChannelHandlerContext?
    private var tickTask: Scheduled<Void>?
    private var drainTask: Scheduled<Void>?
    private var drainAt: NIODeadline?
    private var closeTask: Scheduled<Void>?
    private var pending = CircularBuffer<(due: NIODeadline, item: Outbound)>()
    private var slowDelay = TimeAmount.zero
    private var stalledUntil: NIODeadline?
    private var closeRecorded = false
    private var sentKinds: [String] = []

    init(context: SimulatorContext, endpoint: LiveEndpoint, credentials: LiveCredentials, path: String) {
        self.shared = context
        let number = context.store.nextConnectionNumber()
        self.number = number
        self.session = LiveSimulatorSession(
            configuration: context.configuration,
            connection: LiveConnectionInfo(number: number, endpoint: endpoint, credentials: credentials),
            store: context.store,
            wallNow: context.store.wallNow()
        )
        self.style = session.style
        var logger = context.logger
        logger[metadataKey: "connection"] = "\(number)"
        self.logger = logger
        let record = ConnectionRecord(
            number: number,
            path: path,
            apiVersion: endpoint.version,
            constrained: endpoint.constrained,
            credential: credentials.summary
        )
        context.recorder.update { $0.connections.append(record) }
        logger.info("connection opened", metadata: ["path": "\(path)", "credential": "\(credentials.summary)"])
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
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

    // MARK: Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .text, .binary:
            guard case .open = state else { return }
            let payload = frame.unmaskedData
            let decoded = LiveSimulatorSession.decode(Data(payload.readableBytesView))
            record(decoded, binary: frame.opcode == .binary)
            perform(session.received(decoded, wallNow: shared.store.wallNow()))
        case .ping:
            guard case .open = state, !isStalled else { return }
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

    private func receivedClose(_ frame: WebSocketFrame, context: ChannelHandlerContext) {
        switch state {
        case .closing:
            // The answer to our close frame: the handshake is done.
            state = .closed
            context.close(promise: nil)
        case .open:
            var data = frame.unmaskedData
            let code = data.readWebSocketErrorCode()
            let reason = data.readString(length: data.readableBytes)
            let codeNumber = code.map { Int(UInt16(webSocketErrorCode: $0)) }
            finish(initiator: "client", code: codeNumber, reason: reason)
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

    private func record(_ decoded: DecodedClientFrame, binary: Bool) {
        shared.recorder.updateConnection(number) { record in
            record.frames += 1
            if binary { record.binaryFrames += 1 } else { record.textFrames += 1 }
            switch decoded {
            case .message(let message, _):
                KindRun.append(message.simulatorKind, to: &record.receivedKinds)
                switch message {
                case .realtimeInput(let input):
                    let samples = message.audioSampleCount
                    if samples > 0 {
                        let rate = input.audio?.pcmRate ?? input.mediaChunks?.first?.pcmRate ?? 16_000
                        record.audioSamples += Int64(samples)
                        record.audioSeconds += Double(samples) / Double(max(rate, 1))
                    }
                case .setup(let setup):
                    record.setup = setup
                    record.resumptionHandle = setup.sessionResumption?.handle
                case .toolResponse(let response):
                    record.toolResponseIDs += response.functionResponses.map(\.id)
                case .clientContent:
                    break
                }
            case .invalid:
                record.invalidFrames += 1
                KindRun.append("invalid", to: &record.receivedKinds)
            }
        }
    }

    // MARK: Time

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
        drainTask?.cancel()
        drainTask = nil
        drainAt = nil
        closeTask?.cancel()
        closeTask = nil
    }

    // MARK: Outbound

    private func perform(_ actions: [SimulatorAction]) {
        guard !actions.isEmpty else { return }
        for action in actions {
            switch action {
            case .send(let message):
                do {
                    let text = try encoder.encode(message, style: style)
                    enqueue(.frame(makeFrame(text, binary: ServerMessageEncoder.isBinary(message, style: style))))
                    sentKinds.append(message.simulatorKind)
                } catch {
                    logger.error("cannot encode a server message", metadata: ["error": "\(error)"])
                }
            case .sendRaw(let text):
                enqueue(.frame(makeFrame(text, binary: style.binaryFrames)))
                sentKinds.append("raw")
            case .sendRepeated(let text, let count):
                for _ in 0..<count {
                    enqueue(.frame(makeFrame(text, binary: style.binaryFrames)))
                }
                sentKinds.append(contentsOf: repeatElement("raw", count: count))
            case .close(let code, let reason):
                enqueue(.close(code: code, reason: reason))
            case .drop:
                enqueue(.drop)
            case .stall(let duration):
                drain()  // what came before the stall (the answer's first chunk) still goes out
                stalledUntil = duration.map { .now() + .nanoseconds($0.nanoseconds) } ?? .distantFuture
                logger.info(
                    "stalling",
                    metadata: ["for": "\(duration.map(SimulatorDurations.format) ?? "ever")"]
                )
            case .slowReplies(let delay):
                slowDelay = .nanoseconds(delay.nanoseconds)
            case .outputStyle(let newStyle):
                style = newStyle
            case .event(let event):
                handle(event)
            }
        }
        if !sentKinds.isEmpty {
            let kinds = sentKinds
            sentKinds.removeAll(keepingCapacity: true)
            shared.recorder.updateConnection(number) { record in
                for kind in kinds { KindRun.append(kind, to: &record.sentKinds) }
            }
        }
        drain()
    }

    private var isStalled: Bool {
        guard let stalledUntil else { return false }
        return stalledUntil > .now()
    }

    private func makeFrame(_ text: String, binary: Bool) -> WebSocketFrame {
        let allocator = context?.channel.allocator ?? ByteBufferAllocator()
        return WebSocketFrame(fin: true, opcode: binary ? .binary : .text, data: allocator.buffer(string: text))
    }

    private func enqueue(_ item: Outbound) {
        pending.append((due: slowDelay == .zero ? .uptimeNanoseconds(0) : .now() + slowDelay, item: item))
    }

    /// Writes what is due, unless stalled; schedules itself for what is not due yet.
    private func drain() {
        guard let context, !pending.isEmpty else { return }
        let now = NIODeadline.now()
        if let until = stalledUntil {
            if until > now {
                scheduleDrain(at: until)
                return
            }
            stalledUntil = nil
            logger.info("stall over")
        }
        var wrote = false
        while let next = pending.first {
            if next.due > now {
                scheduleDrain(at: next.due)
                break
            }
            pending.removeFirst()
            guard case .open = state else { continue }
            switch next.item {
            case .frame(let frame):
                context.write(wrapOutboundOut(frame), promise: nil)
                wrote = true
            case .close(let code, let reason):
                pending.removeAll()
                sendClose(code: code, reason: reason, context: context)
                return
            case .drop:
                pending.removeAll()
                if wrote { context.flush() }
                finish(initiator: "drop", code: nil, reason: nil)
                state = .closed
                context.close(promise: nil)
                return
            }
        }
        if wrote { context.flush() }
    }

    private func scheduleDrain(at deadline: NIODeadline) {
        guard deadline != .distantFuture, let context else { return }
        if let drainAt, drainAt <= deadline, drainTask != nil { return }
        drainTask?.cancel()
        drainAt = deadline
        drainTask = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in
            self.drainTask = nil
            self.drainAt = nil
            self.drain()
        }
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

    /// Records how the connection ended (once) and tells the session its socket is gone.
    private func finish(initiator: String, code: Int?, reason: String?) {
        session.socketClosed(wallNow: shared.store.wallNow())
        if initiator == "network" {
            state = .closed
            cancelTimers()
        }
        guard !closeRecorded else {
            if initiator == "network" { logger.info("connection closed") }
            return
        }
        closeRecorded = true
        let close = CloseRecord(code: code, reason: reason, initiator: initiator)
        shared.recorder.updateConnection(number) { $0.close = close }
        // The simulator's own closes were logged with their reason when the session decided them.
        guard initiator == "client" || initiator == "network" else { return }
        var metadata: Logger.Metadata = ["by": "\(initiator)"]
        if let code { metadata["code"] = "\(code)" }
        if let reason, !reason.isEmpty { metadata["reason"] = "\(reason)" }
        logger.info(initiator == "client" ? "client closed the connection" : "connection closed", metadata: metadata)
    }

    // MARK: Events

    private func handle(_ event: SimulatorEvent) {
        switch event {
        case .setupAccepted(let sessionID, let resumedFrom, let model, let manualActivity):
            var metadata: Logger.Metadata = [
                "session": "\(sessionID)",
                "model": "\(model)",
                "activity": "\(manualActivity ? "manual" : "automatic")",
            ]
            if resumedFrom != nil { metadata["resumed"] = "true" }
            logger.info("setup accepted", metadata: metadata)
            shared.recorder.updateConnection(number) {
                $0.sessionID = sessionID
                $0.resumed = resumedFrom != nil
            }
        case .closing(let code, let reason, let why):
            var metadata: Logger.Metadata = ["why": "\(why)"]
            if let code { metadata["code"] = "\(code)" }
            if !reason.isEmpty { metadata["reason"] = "\(reason)" }
            logger.info(code == nil ? "dropping the connection" : "closing the connection", metadata: metadata)
        case .speechStarted(let seconds):
            logger.debug("speech started", metadata: ["at": "\(seconds)"])
        case .userTurnEnded(let turn):
            logger.info(
                "user turn ended",
                metadata: [
                    "turn": "\(turn.number)", "kind": "\(turn.kind)",
                    "speech": "\(LiveSimulatorSession.oneDecimal(turn.speechSeconds))s",
                ]
            )
            shared.recorder.updateConnection(number) { $0.turns.append(turn) }
        case .interrupted(let turn, let seconds):
            logger.info("answer interrupted", metadata: ["turn": "\(turn)", "audio": "\(seconds)s"])
            updateTurn(turn) {
                $0.outcome = "interrupted"
                $0.answerAudioSeconds = seconds
            }
        case .toolCallSent(let turn, let ids, let names):
            logger.info(
                "tool call sent",
                metadata: ["turn": "\(turn)", "names": "\(names.joined(separator: ","))", "ids": "\(ids)"]
            )
        case .toolResponse(let ids, let matched):
            logger.info(matched ? "tool response" : "tool response ignored", metadata: ["ids": "\(ids)"])
        case .answerFinished(let turn, let seconds):
            logger.info("answer finished", metadata: ["turn": "\(turn)", "audio": "\(seconds)s"])
            updateTurn(turn) {
                $0.outcome = "completed"
                $0.answerAudioSeconds = seconds
            }
        case .handleIssued(let handle):
            logger.debug("resumption handle issued")
            shared.recorder.updateConnection(number) {
                $0.lastHandleIssued = handle
                $0.audioSamplesAtLastHandle = $0.audioSamples
            }
        case .goAwaySent(let timeLeft):
            logger.info("goAway sent", metadata: ["timeLeft": "\(ProtoDuration.format(timeLeft))"])
        case .faultFired(let fault):
            logger.notice("fault fired", metadata: ["fault": "\(fault)"])
            shared.recorder.updateConnection(number) { $0.faults.append(fault) }
        case .unknownFields(let fields):
            logger.warning("client sent unknown fields", metadata: ["fields": "\(fields.joined(separator: ","))"])
        }
    }

    private func updateTurn(_ number: Int, _ change: @escaping (inout TurnRecord) -> Void) {
        shared.recorder.updateConnection(self.number) { record in
            if let index = record.turns.lastIndex(where: { $0.number == number }) {
                change(&record.turns[index])
            }
        }
    }
}
