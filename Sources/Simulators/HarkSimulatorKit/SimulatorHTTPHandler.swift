import Logging
import NIOCore
import NIOHTTP1
import NIOWebSocket

/// A plain HTTP request, read in full (the body up to ``SimulatorHTTPHandler``'s limit).
package struct SimulatorHTTPRequest: Sendable {
    /// The request line and headers.
    package var head: HTTPRequestHead
    /// The target's path.
    package var path: String
    /// The target's query, if any (it may hold a credential: never log it).
    package var query: String?
    /// The body (only its start when it was too large).
    package var body: [UInt8]
    /// True when the body was larger than the limit (the connection closes after the answer).
    package var bodyTooLarge: Bool
}

/// The answer to a plain HTTP request: a status and a JSON body.
package struct SimulatorHTTPResponse: Sendable {
    /// The status.
    package var status: HTTPResponseStatus
    /// The JSON text of the body.
    package var json: String

    /// An answer of `status` with `json`.
    package init(_ status: HTTPResponseStatus, _ json: String) {
        self.status = status
        self.json = json
    }
}

/// A streamed answer: a status, content type and further headers, then pieces of the body, each written after its
/// delay (chunked transfer encoding), then the end — or, when it `drops`, the connection closes after the last
/// piece without the end (the client sees the body cut off).
package struct SimulatorHTTPStream: Sendable {
    package var status: HTTPResponseStatus
    package var contentType: String
    package var headers: [(name: String, value: String)]
    package var pieces: [(delay: Duration, bytes: String)]
    package var drops: Bool
    /// Called on the event loop right after each piece was handed to the connection, with its index.
    package var written: (@Sendable (Int) -> Void)?

    package init(
        status: HTTPResponseStatus,
        contentType: String,
        headers: [(name: String, value: String)] = [],
        pieces: [(delay: Duration, bytes: String)],
        drops: Bool = false,
        written: (@Sendable (Int) -> Void)? = nil
    ) {
        self.status = status
        self.contentType = contentType
        self.headers = headers
        self.pieces = pieces
        self.drops = drops
        self.written = written
    }
}

/// Answers the requests that do not upgrade to a WebSocket: reads each in full, asks the service for the
/// answer, writes it (and closes after it when the request said so or its body was too large).
final class SimulatorHTTPHandler<Service: SimulatorService>: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private static var maxBody: Int { 1 << 20 }

    private let service: Service
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var bodyTooLarge = false

    init(service: Service) {
        self.service = service
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body = []
            bodyTooLarge = false
        case .body(let chunk):
            if body.count + chunk.readableBytes <= Self.maxBody {
                body.append(contentsOf: chunk.readableBytesView)
            } else {
                bodyTooLarge = true
            }
        case .end:
            guard let head else { return }
            self.head = nil
            respond(to: head, context: context)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A refused upgrade (unknown path) reports an error and then hands us the request: answer that.
        if error is NIOWebSocketUpgradeError { return }
        service.logger.debug("HTTP error", metadata: ["error": .remote("\(error)")])
        context.close(promise: nil)
    }

    private func respond(to head: HTTPRequestHead, context: ChannelHandlerContext) {
        let (path, query) = RequestTarget.split(head.uri)
        let request = SimulatorHTTPRequest(
            head: head,
            path: path,
            query: query,
            body: body,
            bodyTooLarge: bodyTooLarge
        )
        if let stream = service.respondStreaming(to: request) {
            write(stream, version: head.version, context: context)
            return
        }
        let response = service.respond(to: request)
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: service.jsonContentType)
        headers.add(name: "Content-Length", value: "\(response.json.utf8.count)")
        let keepAlive = head.isKeepAlive && !bodyTooLarge
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        let responseHead = HTTPResponseHead(version: head.version, status: response.status, headers: headers)
        context.write(wrapOutboundOut(.head(responseHead)), promise: nil)
        let json = context.channel.allocator.buffer(string: response.json)
        context.write(wrapOutboundOut(.body(.byteBuffer(json))), promise: nil)
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive {
            done.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        }
    }

    /// Writes a streamed answer piece by piece on the event loop; the connection closes after it (a client that
    /// abandons the answer closes it first, and the rest is not written).
    private func write(_ stream: SimulatorHTTPStream, version: HTTPVersion, context: ChannelHandlerContext) {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: stream.contentType)
        for header in stream.headers { headers.add(name: header.name, value: header.value) }
        headers.add(name: "Transfer-Encoding", value: "chunked")
        headers.add(name: "Connection", value: "close")
        context.writeAndFlush(
            wrapOutboundOut(.head(HTTPResponseHead(version: version, status: stream.status, headers: headers))),
            promise: nil
        )
        let loop = context.eventLoop.assumeIsolated()
        var pieces = Array(stream.pieces.enumerated())[...]
        func next() {
            guard context.channel.isActive else { return }
            guard let (index, piece) = pieces.popFirst() else {
                if stream.drops {
                    context.close(promise: nil)
                    return
                }
                context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
                    context.close(promise: nil)
                }
                return
            }
            loop.scheduleTask(
                in: .nanoseconds(
                    Int64(piece.delay.components.seconds) * 1_000_000_000
                        + piece.delay.components.attoseconds / 1_000_000_000
                )
            ) {
                guard context.channel.isActive else { return }
                let buffer = context.channel.allocator.buffer(string: piece.bytes)
                context.writeAndFlush(self.wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
                stream.written?(index)
                next()
            }
        }
        next()
    }
}
