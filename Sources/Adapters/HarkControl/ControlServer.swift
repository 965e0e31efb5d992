import HarkCore
import Logging
import NIOCore
import NIOPosix
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The daemon's control socket: a Unix stream socket (never a network port) on the process's one NIO event loop,
/// where every other socket of the daemon lives, so serving it adds no thread. One JSON request per line, one JSON
/// reply per line (``ControlRequest``, ``ControlReply``), each passed to a ``ControlService``.
///
/// Every client is bounded: a request line of at most ``ControlLimits/requestBytes`` (a longer one is refused before
/// it ends), nested at most ``ControlLimits/depth`` deep, whole within ``ControlLimits/readDeadline`` of the
/// connection or the last reply (a client that trickles is cut), a reply gone within
/// ``ControlLimits/writeDeadline`` (a client that never reads is cut), one request at a time per client, and at
/// most ``ControlLimits/clients`` clients at once. Who connects (`SO_PEERCRED`) is logged with each request.
public final class ControlServer: Sendable {
    /// Where the socket is.
    public let path: String
    /// Whether a stale socket file from a daemon that is gone was replaced at the start.
    public let replacedStale: Bool
    private let channel: any Channel
    private let identity: FileIdentity
    private let removed = Mutex(false)

    private init(path: String, replacedStale: Bool, channel: any Channel, identity: FileIdentity) {
        self.path = path
        self.replacedStale = replacedStale
        self.channel = channel
        self.identity = identity
    }

    /// Opens the socket at `path` (mode `mode`, 0660 by default: the service's user and group) and serves
    /// `service` on it until ``close()``. A stale socket file is replaced; a socket another daemon serves, or
    /// anything that is not a socket at `path`, is a ``ControlSocketError``.
    public static func open(
        path: String,
        service: any ControlService,
        limits: ControlLimits = ControlLimits(),
        mode: UInt32 = 0o660,
        logger: Logger,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> ControlServer {
        let made = try ControlSocketFile.listen(path: path, mode: mode_t(mode))
        let clients = ClientCount(limit: limits.clients)
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 16)
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let handler: ControlConnectionHandler
                    if clients.enter() {
                        channel.closeFuture.whenComplete { _ in clients.leave() }
                        handler = ControlConnectionHandler(service: service, limits: limits, logger: logger)
                    } else {
                        handler = ControlConnectionHandler(busyWith: clients.limit, limits: limits, logger: logger)
                    }
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
        let channel: any Channel
        do {
            channel = try await bootstrap.withBoundSocket(made.fd).get()
        } catch {
            _ = Glibc.close(made.fd)
            ControlSocketFile.remove(path: path, identity: made.identity)
            throw ControlSocketError(.failed, "cannot serve the control socket \(path): \(error)")
        }
        if made.replacedStale {
            logger.notice("replaced a stale control socket at \(ControlSocketFile.printable(path))")
        }
        return ControlServer(path: path, replacedStale: made.replacedStale, channel: channel, identity: made.identity)
    }

    /// Stops accepting, and removes the socket file (only while it is still this server's). Clients connected
    /// keep their connection until their request is answered or their deadline passes.
    public func close() async {
        try? await channel.close()
        let first = removed.withLock { done in
            defer { done = true }
            return !done
        }
        if first { ControlSocketFile.remove(path: path, identity: identity) }
    }
}

/// How many clients are connected, against a limit.
final class ClientCount: Sendable {
    let limit: Int
    private let value = Atomic(0)

    init(limit: Int) { self.limit = max(1, limit) }

    var count: Int { value.load(ordering: .relaxed) }

    /// Counts one more client, unless that would pass the limit.
    func enter() -> Bool {
        var current = value.load(ordering: .relaxed)
        while current < limit {
            let (exchanged, original) = value.compareExchange(
                expected: current,
                desired: current + 1,
                ordering: .relaxed
            )
            if exchanged { return true }
            current = original
        }
        return false
    }

    /// Counts a client gone.
    func leave() { value.subtract(1, ordering: .relaxed) }
}

/// One client's connection: lines in, one request at a time to the service, replies out, every phase with its
/// deadline.
final class ControlConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let service: (any ControlService)?
    private let limits: ControlLimits
    private let logger: Logger
    private let busyLimit: Int?
    private var reader: ControlRequestReader
    private var peer: PeerCredentials?
    private var deadline: Scheduled<Void>?
    private var handling = false
    private var closing = false

    init(service: any ControlService, limits: ControlLimits, logger: Logger) {
        self.service = service
        self.limits = limits
        self.logger = logger
        busyLimit = nil
        reader = ControlRequestReader(limits: limits)
    }

    /// A client past the limit: told the daemon is busy, then closed.
    init(busyWith limit: Int, limits: ControlLimits, logger: Logger) {
        service = nil
        self.limits = limits
        self.logger = logger
        busyLimit = limit
        reader = ControlRequestReader(limits: limits)
    }

    func channelActive(context: ChannelHandlerContext) {
        peer = Self.credentials(of: context.channel)
        if let busyLimit {
            logger.warning("control: \(busyLimit) clients connected already; refused \(who)")
            finish(
                context: context,
                with: .failure("the daemon is busy: \(busyLimit) clients are connected; try again")
            )
            return
        }
        logger.debug("control: connection from \(who)")
        armReadDeadline(context: context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closing else { return }
        let buffer = unwrapInboundIn(data)
        let outcome = buffer.withUnsafeReadableBytes { reader.take($0) }
        if !handling {
            act(on: outcome, context: context)
        } else if case .refused = outcome {
            act(on: outcome, context: context)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            // The client sent all it will: what it has not finished is not a request. Once a reply in progress
            // has gone, the connection closes.
            if !handling { close(context: context) } else { closing = true }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("control: \(who): \(error)")
        close(context: context)
    }

    private func act(on outcome: ControlRequestReader.Outcome, context: ChannelHandlerContext) {
        switch outcome {
        case .needMore:
            return
        case .refused(let why):
            logger.warning("control: refused a request from \(who): \(why)")
            finish(context: context, with: .failure(why))
        case .request(let request):
            perform(request, context: context)
        }
    }

    private func perform(_ request: ControlRequest, context: ChannelHandlerContext) {
        guard let service else { return }
        deadline?.cancel()
        deadline = nil
        handling = true
        // The op is checked to be a short name (a-z, 0-9, '.', '_', '-'): printable as it is.
        logger.info("control: \(request.op) from \(who)")
        let loop = context.eventLoop
        let bound = NIOLoopBound((self, context), eventLoop: loop)
        loop.makeFutureWithTask { await service.handle(request) }.whenComplete { result in
            let (handler, context) = bound.value
            let reply: ControlReply
            switch result {
            case .success(let value): reply = value
            case .failure(let error): reply = .failure("the daemon could not perform \(request.op): \(error)")
            }
            handler.send(reply, context: context)
        }
    }

    /// Sends `reply`; then waits for the next request, or closes after a refusal or the client's end.
    private func send(_ reply: ControlReply, context: ChannelHandlerContext) {
        guard context.channel.isActive else { return }
        let bytes = ControlReplyLine.encode(reply, limit: limits.replyBytes)
        armWriteDeadline(context: context)
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: bytes))).whenComplete {
            result in
            let (handler, context) = bound.value
            handler.deadline?.cancel()
            handler.deadline = nil
            handler.handling = false
            guard case .success = result, !handler.closing else {
                handler.close(context: context)
                return
            }
            handler.armReadDeadline(context: context)
            handler.act(on: handler.reader.next(), context: context)
        }
    }

    /// Sends `reply` and closes the connection.
    private func finish(context: ChannelHandlerContext, with reply: ControlReply) {
        closing = true
        handling = true
        deadline?.cancel()
        armWriteDeadline(context: context)
        let bytes = ControlReplyLine.encode(reply, limit: limits.replyBytes)
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: bytes))).whenComplete { _ in
            let (handler, context) = bound.value
            handler.close(context: context)
        }
    }

    private func close(context: ChannelHandlerContext) {
        closing = true
        deadline?.cancel()
        deadline = nil
        context.close(promise: nil)
    }

    private func armReadDeadline(context: ChannelHandlerContext) {
        deadline?.cancel()
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let limit = limits.readDeadline
        deadline = context.eventLoop.scheduleTask(in: .nanoseconds(limit.nanosecondsClamped)) {
            let (handler, context) = bound.value
            handler.deadline = nil
            let pending = handler.reader.pending
            handler.logger.warning(
                "control: \(handler.who) sent no whole request within \(limit) (\(pending) bytes); cut"
            )
            handler.finish(context: context, with: .failure("no whole request within \(limit): cut"))
        }
    }

    private func armWriteDeadline(context: ChannelHandlerContext) {
        deadline?.cancel()
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let limit = limits.writeDeadline
        deadline = context.eventLoop.scheduleTask(in: .nanoseconds(limit.nanosecondsClamped)) {
            let (handler, context) = bound.value
            handler.deadline = nil
            handler.logger.warning("control: \(handler.who) did not take its reply within \(limit); cut")
            handler.closing = true
            context.close(promise: nil)
        }
    }

    private var who: String { peer.map { "\($0)" } ?? "a client" }

    /// `SO_PEERCRED` of the connection (read at once: on the channel's own loop the future is complete).
    private static func credentials(of channel: any Channel) -> PeerCredentials? {
        guard let provider = channel as? any SocketOptionProvider else { return nil }
        let future: EventLoopFuture<KernelCredentials> = provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET),
            name: SocketOptionName(SO_PEERCRED)
        )
        let found = NIOLoopBoundBox<PeerCredentials?>(nil, eventLoop: channel.eventLoop)
        future.whenSuccess { value in
            found.value = PeerCredentials(pid: value.pid, uid: value.uid, gid: value.gid)
        }
        return found.value
    }
}

extension Duration {
    /// Whole nanoseconds, saturating.
    var nanosecondsClamped: Int64 {
        let (seconds, attoseconds) = components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        return whole.addingReportingOverflow(attoseconds / 1_000_000_000).overflow
            ? .max : whole + attoseconds / 1_000_000_000
    }
}
