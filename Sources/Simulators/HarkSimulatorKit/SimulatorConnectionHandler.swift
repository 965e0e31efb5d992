import HarkCore
import Logging
import NIOCore
import NIOWebSocket

/// What a connection's session asks of the wire, in order.
package enum SimulatorOutput: Sendable, Hashable {
    /// A data frame: this text, in a text frame or a binary one.
    case frame(String, binary: Bool)
    /// A close frame with this code and reason; the socket closes when the client answers, or after 2 s.
    case close(code: Int, reason: String)
    /// Close the socket without a close frame.
    case drop
    /// Send nothing and answer no pings for this long (nil: for ever); what is produced meanwhile waits.
    case stall(Duration?)
    /// Delay every later frame by this much.
    case slowReplies(Duration)
}

/// Who ended a connection, as the recorders name it.
package enum SimulatorCloseInitiator: String, Sendable, Hashable {
    /// The simulator sent a close frame.
    case server
    /// The client sent a close frame.
    case client
    /// The simulator dropped the TCP connection.
    case drop
    /// The socket went away without a close frame from either side.
    case network
}

/// One WebSocket connection of a simulated service: its session, and what it records and logs. The
/// ``SimulatorConnectionHandler`` running it calls it on the event loop, and does what it returns.
package protocol SimulatorConnection {
    /// The connection's logger (its number in the metadata).
    var logger: Logger { get }

    /// The WebSocket is up: what goes out first.
    mutating func opened() -> [SimulatorOutput]
    /// A text or binary frame arrived while the connection is open.
    mutating func received(_ payload: ByteBuffer, binary: Bool) -> [SimulatorOutput]
    /// Time passed (every 10 ms while open).
    mutating func tick() -> [SimulatorOutput]
    /// The connection is ending or gone (`initiator` says how); `first` is false when an end was recorded
    /// before (a close handshake ends with the socket closing too).
    mutating func ended(by initiator: SimulatorCloseInitiator, code: Int?, reason: String?, first: Bool)
}

extension SimulatorConnection {
    package mutating func opened() -> [SimulatorOutput] { [] }
}

/// Runs one ``SimulatorConnection`` on a WebSocket channel: hands it data frames, ticks it, writes what it
/// asks (with stalls and slow replies), answers pings, and does the close handshake with a timeout.
final class SimulatorConnectionHandler<Connection: SimulatorConnection>: ChannelInboundHandler,
    RemovableChannelHandler
{
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

    private static var tickInterval: TimeAmount { .milliseconds(10) }
    private static var closeTimeout: TimeAmount { .seconds(2) }

    private var connection: Connection
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

    init(_ connection: Connection) {
        self.connection = connection
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        perform(connection.opened())
        if case .open = state { scheduleTick() }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        cancelTimers()
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish(.network, code: nil, reason: nil)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        connection.logger.debug("channel error", metadata: ["error": .remote("\(error)")])
        context.close(promise: nil)
    }

    // MARK: Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .text, .binary:
            guard case .open = state else { return }
            perform(connection.received(frame.unmaskedData, binary: frame.opcode == .binary))
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
            finish(.client, code: codeNumber, reason: reason)
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

    // MARK: Time

    private func scheduleTick() {
        guard let context else { return }
        tickTask = context.eventLoop.assumeIsolated().scheduleTask(in: Self.tickInterval) { [self] in
            self.tickTask = nil
            guard case .open = self.state else { return }
            self.perform(self.connection.tick())
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

    private func perform(_ outputs: [SimulatorOutput]) {
        guard !outputs.isEmpty else { return }
        for output in outputs {
            switch output {
            case .frame(let text, let binary):
                enqueue(.frame(makeFrame(text, binary: binary)))
            case .close(let code, let reason):
                enqueue(.close(code: code, reason: reason))
            case .drop:
                enqueue(.drop)
            case .stall(let duration):
                drain()  // what came before the stall (the answer's first chunk) still goes out
                stalledUntil = duration.map { .now() + .nanoseconds($0.nanoseconds) } ?? .distantFuture
                connection.logger.info(
                    "stalling",
                    metadata: ["for": "\(duration.map(SimulatorDurations.format) ?? "ever")"]
                )
            case .slowReplies(let delay):
                slowDelay = .nanoseconds(delay.nanoseconds)
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
            connection.logger.info("stall over")
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
                finish(.drop, code: nil, reason: nil)
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
        finish(.server, code: code, reason: reason)
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

    /// Tells the connection it ended (``SimulatorConnection/ended(by:code:reason:first:)``, which records
    /// the first end); the network's end also stops the timers.
    private func finish(_ initiator: SimulatorCloseInitiator, code: Int?, reason: String?) {
        if initiator == .network {
            state = .closed
            cancelTimers()
        }
        let first = !closeRecorded
        closeRecorded = true
        connection.ended(by: initiator, code: code, reason: reason, first: first)
    }
}
