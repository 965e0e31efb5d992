import HarkCore
import NIOCore
import NIOPosix

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// What the commands use to ask the running daemon: one request, one reply, on the process's event loop (nothing
/// blocks a thread). No socket, a stale one, a permission refused and a daemon that does not answer in time are
/// each a ``ControlSocketError`` of their own kind.
public struct ControlClient: Sendable {
    /// The socket's path.
    public var path: String
    /// How long the whole exchange may take, from the connection to the reply's end.
    public var timeout: Duration
    /// The bounds (the reply's size).
    public var limits: ControlLimits

    /// A client of the socket at `path`.
    public init(path: String, timeout: Duration = .seconds(10), limits: ControlLimits = ControlLimits()) {
        self.path = path
        self.timeout = timeout
        self.limits = limits
    }

    /// Who serves the socket (`SO_PEERCRED` of a connection), or why it cannot be reached.
    public func server() -> Result<PeerCredentials?, ControlSocketError> {
        ControlSocketFile.connect(path, blocking: false).map { fd in
            defer { close(fd) }
            return PeerCredentials.of(fd)
        }
    }

    /// Sends `request` and returns the daemon's reply. `serverPID`, when given, must be the process serving the
    /// socket (`SO_PEERCRED`), else nothing is sent.
    public func send(
        _ request: ControlRequest,
        serverPID: Int32? = nil,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws(ControlSocketError) -> ControlReply {
        let fd: Int32
        switch ControlSocketFile.connect(path, blocking: false) {
        case .success(let connected): fd = connected
        case .failure(let error): throw error
        }
        if let serverPID {
            let peer = PeerCredentials.of(fd)
            guard peer?.pid == serverPID else {
                close(fd)
                throw ControlSocketError(
                    .unusable,
                    "the control socket \(ControlSocketFile.printable(path)) is served by "
                        + "\(peer.map { "process \($0.pid)" } ?? "an unknown process"), not by process \(serverPID)"
                )
            }
        }
        let line = ControlReplyLineWriter.encode(request)
        let loop = group.next()
        let promise = loop.makePromise(of: [UInt8].self)
        let limit = limits.replyBytes
        let channel: any Channel
        do {
            channel = try await ClientBootstrap(group: loop)
                .channelOption(.allowRemoteHalfClosure, value: true)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(ReplyLineHandler(promise: promise, limit: limit))
                    }
                }
                .withConnectedSocket(fd)
                .get()
        } catch {
            close(fd)
            throw ControlSocketError(.failed, "cannot use the control socket: \(error)")
        }
        let shown = ControlSocketFile.printable(path)
        let deadline = loop.scheduleTask(in: .nanoseconds(timeout.nanosecondsClamped)) {
            promise.fail(ControlSocketError(.noReply, "the daemon did not answer within \(timeout) (\(shown))"))
        }
        channel.writeAndFlush(channel.allocator.buffer(bytes: line)).whenFailure { error in
            promise.fail(ControlSocketError(.noReply, "the daemon closed the control socket: \(error)"))
        }
        let outcome: Result<[UInt8], any Error>
        do {
            outcome = .success(try await promise.futureResult.get())
        } catch {
            outcome = .failure(error)
        }
        deadline.cancel()
        try? await channel.close()
        switch outcome {
        case .success(let bytes):
            guard let reply = ControlReplyLine.decode(bytes) else {
                throw ControlSocketError(.failed, "the daemon's reply is not a reply (\(bytes.count) bytes)")
            }
            return reply
        case .failure(let error as ControlSocketError):
            throw error
        case .failure(let error):
            throw ControlSocketError(.noReply, "no reply from the daemon: \(error)")
        }
    }
}

/// A request as one line.
enum ControlReplyLineWriter {
    static func encode(_ request: ControlRequest) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array((try? encoder.encode(request)) ?? Data()) + [UInt8(ascii: "\n")]
    }
}

/// Collects one reply line (bounded) and fulfils `promise` with it.
final class ReplyLineHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let promise: EventLoopPromise<[UInt8]>
    private let limit: Int
    private var bytes: [UInt8] = []

    init(promise: EventLoopPromise<[UInt8]>, limit: Int) {
        self.promise = promise
        self.limit = limit
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        buffer.withUnsafeReadableBytes { bytes.append(contentsOf: $0) }
        if let newline = bytes.firstIndex(of: UInt8(ascii: "\n")) {
            promise.succeed(Array(bytes[..<newline]))
            context.close(promise: nil)
        } else if bytes.count > limit {
            promise.fail(ControlSocketError(.failed, "the daemon's reply is longer than \(limit) bytes"))
            context.close(promise: nil)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            promise.fail(ControlSocketError(.noReply, "the daemon closed the connection without a reply"))
            context.close(promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(ControlSocketError(.noReply, "the daemon closed the connection without a reply"))
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise.fail(ControlSocketError(.noReply, "the connection to the daemon failed: \(error)"))
        context.close(promise: nil)
    }
}
