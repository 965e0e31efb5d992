import HarkCore
import Logging
import NIOCore
import NIOHTTP1
import NIOTLS
import NIOWebSocket
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What the connection handler passes up to the reader.
enum WebSocketEvent: Sendable {
    /// A whole message (fragments joined).
    case message(HarkCore.WebSocketMessage)
    /// The server's close frame came: no message follows.
    case closed
}

/// What the writer passes down to the connection handler.
enum WebSocketCommand: Sendable {
    case text(String)
    case close(code: Int, reason: String)
}

/// What the connection handler and the tasks using the connection both need to know.
final class WebSocketLink: Sendable {
    private struct State {
        var closing = false
        var leaving = false
        var serverClose: WebSocketClose?
    }

    private let state = Mutex(State())

    /// A close frame was sent or received: nothing more may be sent.
    var isClosing: Bool { state.withLock { $0.closing } }

    /// The server's close frame, once it came.
    var serverClose: WebSocketClose? { state.withLock { $0.serverClose } }

    func markClosing() { state.withLock { $0.closing = true } }

    /// The client left (`WebSocketOutbound.leave`): what the server still sends is no longer read (as a
    /// browser's WebSocket drops messages once `close()` was called), however much of it comes.
    var isLeaving: Bool { state.withLock { $0.leaving } }

    func markLeaving() {
        state.withLock {
            $0.leaving = true
            $0.closing = true
        }
    }

    func received(_ close: WebSocketClose) {
        state.withLock {
            $0.closing = true
            $0.serverClose = close
        }
    }
}

/// The WebSocket protocol of an upgraded client connection (RFC 6455), on the event loop: joins fragments into
/// messages up to a size limit, answers pings, pings the server and drops a connection whose pong does not come,
/// masks what it sends, and runs the close handshake with a deadline, after which it closes the socket.
/// A protocol violation or an oversized message is recorded on the connection's guard (the error the caller
/// sees), answered with a close frame (1002, 1007, 1009) and the socket closed. I/O errors just end the connection.
final class WebSocketConnectionHandler: ChannelDuplexHandler {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = WebSocketEvent
    typealias OutboundIn = WebSocketCommand
    typealias OutboundOut = WebSocketFrame

    private let maxMessageSize: Int
    private let closeTimeout: Duration
    private let pingInterval: Duration?
    private let link: WebSocketLink
    private let connection: ConnectionGuard<WebSocketConnectError>
    private let logger: Logger

    private var closeSent = false
    private var closeReceived = false
    private var fragments: (opcode: WebSocketOpcode, data: ByteBuffer)?
    private var closeTimer: Scheduled<Void>?
    private var pingTimer: Scheduled<Void>?
    private var awaitingPong = false

    init(
        maxMessageSize: Int,
        closeTimeout: Duration,
        pingInterval: Duration?,
        link: WebSocketLink,
        connection: ConnectionGuard<WebSocketConnectError>,
        logger: Logger
    ) {
        self.maxMessageSize = maxMessageSize
        self.closeTimeout = closeTimeout
        self.pingInterval = pingInterval
        self.link = link
        self.connection = connection
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { schedulePing(context: context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stopTimers()
    }

    func channelInactive(context: ChannelHandlerContext) {
        stopTimers()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        guard !closeReceived else { return }
        guard frame.reservedBits.isEmpty else {
            return fail(context, .protocolError, "the server set reserved bits of a frame")
        }
        switch frame.opcode {
        case .connectionClose:
            receivedClose(context: context, frame: frame)
        case .ping:
            // Only the latest ping needs an answer: a server that pings while not reading gets none.
            guard !closeSent, context.channel.isWritable else { return }
            let pong = WebSocketFrame(fin: true, opcode: .pong, maskKey: .random(), data: frame.unmaskedData)
            context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
        case .pong:
            awaitingPong = false
        case .text, .binary, .continuation:
            // The client is leaving: a flood must not hold the close handshake or the reader back.
            guard !link.isLeaving else {
                fragments = nil
                return
            }
            readData(context: context, frame: frame)
        default:
            fail(context, .protocolError, "the server sent a frame of an unknown type")
        }
    }

    /// A text, binary or continuation frame: a whole message is delivered.
    private func readData(context: ChannelHandlerContext, frame: WebSocketFrame) {
        switch frame.opcode {
        case .text, .binary:
            guard fragments == nil else {
                return fail(context, .protocolError, "a new message began inside a fragmented one")
            }
            if frame.fin {
                deliver(context: context, opcode: frame.opcode, data: frame.unmaskedData)
            } else {
                fragments = (frame.opcode, frame.unmaskedData)
            }
        case .continuation:
            guard var pending = fragments else {
                return fail(context, .protocolError, "a continuation frame came outside a message")
            }
            fragments = nil
            var data = frame.unmaskedData
            guard pending.data.readableBytes + data.readableBytes <= maxMessageSize else {
                return messageTooLarge(context)
            }
            pending.data.writeBuffer(&data)
            if frame.fin {
                deliver(context: context, opcode: pending.opcode, data: pending.data)
            } else {
                fragments = pending
            }
        default:
            break
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        switch error {
        case NIOWebSocketError.invalidFrameLength:
            messageTooLarge(context)
        case let error as NIOWebSocketError:
            fail(context, .protocolError, "the server broke the WebSocket protocol (\(error))")
        default:
            // Reset, unclean TLS shutdown: the connection is lost (no close frame, 1006).
            logger.debug("WebSocket connection error: \(error)")
            context.close(promise: nil)
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .text(let text):
            // After a close frame, a server reads nothing more.
            guard !closeSent, !closeReceived else {
                promise?.succeed()
                return
            }
            let frame = WebSocketFrame(fin: true, opcode: .text, maskKey: .random(), data: ByteBuffer(string: text))
            context.write(wrapOutboundOut(frame), promise: promise)
        case .close(let code, let reason):
            if !closeSent { sendClose(context: context, code: code, reason: reason) }
            promise?.succeed()
        }
    }

    // MARK: - Messages

    private func deliver(context: ChannelHandlerContext, opcode: WebSocketOpcode, data: ByteBuffer) {
        // What the server sent before its own close frame reaches the reader (an error message, then close),
        // also after the client's close frame (a switch still wants the old connection's last handle), unless the
        // client left for good (see `WebSocketLink.isLeaving`).
        if opcode == .text {
            guard let text = String(validating: data.readableBytesView, as: UTF8.self) else {
                return fail(context, .dataInconsistentWithMessage, "the server sent text that is not UTF-8")
            }
            context.fireChannelRead(wrapInboundOut(.message(.text(text))))
        } else {
            context.fireChannelRead(wrapInboundOut(.message(.binary(Data(data.readableBytesView)))))
        }
    }

    private func messageTooLarge(_ context: ChannelHandlerContext) {
        fail(
            context,
            .messageTooLarge,
            "the server sent a message larger than \(maxMessageSize) bytes",
            kind: .messageTooLarge
        )
    }

    // MARK: - Closing

    private func receivedClose(context: ChannelHandlerContext, frame: WebSocketFrame) {
        closeReceived = true
        var data = frame.unmaskedData
        let code: Int?
        if let raw = data.readInteger(as: UInt16.self) {
            code = Int(raw)
        } else {
            code = data.readableBytes == 0 ? 1005 : nil
        }
        guard let code, data.readableBytes <= 123,
            let reason = String(validating: data.readableBytesView, as: UTF8.self)
        else {
            closeReceived = false
            return fail(context, .protocolError, "the server sent a malformed close frame")
        }
        let shown = String(reason.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F })
        link.received(WebSocketClose(code: code, reason: shown))
        if !closeSent {
            // Echo the server's code (RFC 6455 5.5.1); one a client may not send becomes 1000.
            let echo = Self.isSendable(code) ? code : 1000
            sendClose(context: context, code: echo, reason: "")
        }
        context.fireChannelRead(wrapInboundOut(.closed))
        // Both close frames went: the handshake is over, and a client may close the socket (RFC 6455 7.1.1).
        context.close(promise: nil)
    }

    private func sendClose(context: ChannelHandlerContext, code: Int, reason: String) {
        closeSent = true
        link.markClosing()
        var buffer = context.channel.allocator.buffer(capacity: 2 + min(reason.utf8.count, 123))
        buffer.write(webSocketErrorCode: WebSocketErrorCode(codeNumber: Self.isSendable(code) ? code : 1000))
        var kept = ""
        for character in reason where kept.utf8.count + character.utf8.count <= 123 { kept.append(character) }
        buffer.writeString(kept)
        let frame = WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: .random(), data: buffer)
        context.writeAndFlush(wrapOutboundOut(frame), promise: nil)
        armCloseTimer(context: context)
    }

    /// Closes the socket when the close handshake has not ended within the close deadline.
    private func armCloseTimer(context: ChannelHandlerContext) {
        guard closeTimer == nil else { return }
        let connection = self.connection
        let logger = self.logger
        let link = self.link
        let timeout = closeTimeout
        closeTimer = context.eventLoop.scheduleTask(in: TimeAmount(max(closeTimeout, .zero))) {
            logger.debug("the close handshake did not end within \(timeout.humanDescription): closing the socket")
            // A server that let the deadline pass has nothing more worth reading: what it left in the buffers (a
            // flood) is dropped, so the end of the connection is not held back by it.
            link.markLeaving()
            connection.close()
        }
    }

    /// Answers a violation with a close frame and closes the socket; the caller sees `message`.
    private func fail(
        _ context: ChannelHandlerContext,
        _ code: WebSocketErrorCode,
        _ message: String,
        kind: WebSocketConnectError.Kind = .other
    ) {
        if !closeSent {
            closeSent = true
            link.markClosing()
            var buffer = context.channel.allocator.buffer(capacity: 2)
            buffer.write(webSocketErrorCode: code)
            let frame = WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: .random(), data: buffer)
            context.writeAndFlush(wrapOutboundOut(frame), promise: nil)
        }
        connection.fail(WebSocketConnectError(kind, message))
    }

    /// Codes an endpoint may put in a close frame (RFC 6455 7.4).
    private static func isSendable(_ code: Int) -> Bool {
        switch code {
        case 1000...1003, 1007...1014, 3000...4999: true
        default: false
        }
    }

    // MARK: - Pings

    private func schedulePing(context: ChannelHandlerContext) {
        guard let pingInterval, pingInterval > .zero else { return }
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        pingTimer = context.eventLoop.scheduleTask(in: TimeAmount(pingInterval)) {
            let (handler, context) = loopBound.value
            handler.pingDue(context: context, interval: pingInterval)
        }
    }

    private func pingDue(context: ChannelHandlerContext, interval: Duration) {
        guard !closeSent, !closeReceived else { return }
        if awaitingPong {
            connection.fail(
                WebSocketConnectError(.timeout, "the server did not answer a ping within \(interval.humanDescription)")
            )
            return
        }
        awaitingPong = true
        let ping = WebSocketFrame(fin: true, opcode: .ping, maskKey: .random(), data: ByteBuffer(bytes: [0x68, 0x6B]))
        context.writeAndFlush(wrapOutboundOut(ping), promise: nil)
        schedulePing(context: context)
    }

    private func stopTimers() {
        closeTimer?.cancel()
        closeTimer = nil
        pingTimer?.cancel()
        pingTimer = nil
    }
}

/// Watches the phases before the WebSocket is open and gives each a deadline: the TLS handshake (from the TCP
/// connection), then the upgrade response (from the end of the handshake, or from the TCP connection for
/// `ws://`). A TLS failure or a connection that closes in these phases is recorded as what the caller sees.
final class ConnectPhaseHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    private let connection: ConnectionGuard<WebSocketConnectError>
    private let secure: Bool
    private let tlsTimeout: Duration
    private let upgradeTimeout: Duration
    private let url: String
    private let hostAndPort: String
    private var handshakeDone = false
    private var connected = false

    init(
        connection: ConnectionGuard<WebSocketConnectError>,
        secure: Bool,
        tlsTimeout: Duration,
        upgradeTimeout: Duration,
        url: String,
        hostAndPort: String
    ) {
        self.connection = connection
        self.secure = secure
        self.tlsTimeout = tlsTimeout
        self.upgradeTimeout = upgradeTimeout
        self.url = url
        self.hostAndPort = hostAndPort
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { armFirstPhase() }
    }

    func channelActive(context: ChannelHandlerContext) {
        armFirstPhase()
        context.fireChannelActive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let tlsEvent = event as? TLSUserEvent, case .handshakeCompleted = tlsEvent {
            handshakeDone = true
            connection.disarm("tls")
            armUpgrade()
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if secure, !handshakeDone {
            connection.fail(NIOWebSocketTransport.classifyTLS(String(describing: error), url: url))
        }
        context.fireErrorCaught(error)
    }

    /// The handler's name in the pipeline.
    static let name = "hark.connect-phase"

    /// The upgrade was answered (on `channel`'s event loop): the deadlines end, and this handler leaves.
    static func finish(on channel: any Channel, connection: ConnectionGuard<WebSocketConnectError>) {
        connection.disarm("tls")
        connection.disarm("upgrade")
        let pipeline = channel.pipeline.syncOperations
        if let context = try? pipeline.context(name: name) { pipeline.removeHandler(context: context, promise: nil) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        // A connection that never came up is the bootstrap's to report (refused, unreachable).
        if connected {
            let phase = secure && !handshakeDone ? "the TLS handshake" : "the WebSocket upgrade"
            connection.fail(WebSocketConnectError(.refused, "\(hostAndPort) closed the connection during \(phase)"))
        }
        context.fireChannelInactive()
    }

    private func armFirstPhase() {
        connected = true
        guard secure else { return armUpgrade() }
        let (hostAndPort, timeout) = (self.hostAndPort, tlsTimeout)
        connection.arm("tls", in: timeout) {
            WebSocketConnectError(
                .timeout,
                "the TLS handshake with \(hostAndPort) did not finish within \(timeout.humanDescription)"
            )
        }
    }

    private func armUpgrade() {
        let (hostAndPort, timeout) = (self.hostAndPort, upgradeTimeout)
        connection.arm("upgrade", in: timeout) {
            WebSocketConnectError(
                .timeout,
                "\(hostAndPort) did not answer the WebSocket upgrade within \(timeout.humanDescription)"
            )
        }
    }
}

/// Receives the head of a response that declined the upgrade (the upgrade handler passes it on).
final class DeclinedUpgradeHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart

    private let promise: EventLoopPromise<HTTPResponseHead>

    init(promise: EventLoopPromise<HTTPResponseHead>) {
        self.promise = promise
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let head) = unwrapInboundIn(data) { promise.succeed(head) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        promise.fail(ChannelError.inputClosed)
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(ChannelError.inputClosed)
        context.fireChannelInactive()
    }
}
