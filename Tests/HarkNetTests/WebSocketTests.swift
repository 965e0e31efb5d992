import Foundation
import HarkCore
import HarkNet
import HarkTestKit
import Logging
import NIOCore
import Testing

let quietLogger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }

/// Connects and expects a ``WebSocketConnectError``.
func connectError(
    _ transport: NIOWebSocketTransport,
    _ request: WebSocketRequest,
    handler: @escaping @Sendable (WebSocketInbound, any WebSocketOutbound) async throws -> Void = { inbound, _ in
        while try await inbound.next() != nil {}
    }
) async throws -> WebSocketConnectError {
    do {
        let close = try await transport.connect(request, handler: handler)
        Issue.record("connected (close \(String(describing: close))) instead of failing")
        throw CancellationError()
    } catch let error as WebSocketConnectError {
        return error
    }
}

extension NetworkTests {
    /// The WebSocket transport against the hostile server, one misbehaviour per test: each outcome is checked, and
    /// that the client returned within its deadline and let go of the socket.
    @Suite struct WebSocketTests {
        @Test func aServerThatNeverAnswersTheUpgradeTimesOutAndTheSocketCloses() async throws {
            let server = try await HostileServer.start { await $0.readUntilClosed() }
            defer { Task { await server.stop() } }
            let transport = NIOWebSocketTransport(upgradeTimeout: .milliseconds(300), logger: quietLogger)
            let started = ContinuousClock.now
            let error = try await within(.seconds(5), "the upgrade deadline") {
                try await connectError(transport, WebSocketRequest(url: "ws://127.0.0.1:\(server.port)/ws?key=SECRET"))
            }
            #expect(error.kind == .timeout, "\(error)")
            #expect(error.message.contains("did not answer the WebSocket upgrade within 300 ms"), "\(error)")
            #expect(!error.message.contains("SECRET"))
            #expect(ContinuousClock.now - started >= .milliseconds(300))
            try await within(.seconds(5), "the server to see the close") { await server.waitForClosed(1) }
        }

        @Test func aServerThatNeverAnswersTheTLSHandshakeTimesOut() async throws {
            let server = try await HostileServer.start { await $0.readUntilClosed() }
            defer { Task { await server.stop() } }
            let transport = NIOWebSocketTransport(tlsHandshakeTimeout: .milliseconds(300), logger: quietLogger)
            let error = try await within(.seconds(5), "the TLS deadline") {
                try await connectError(transport, WebSocketRequest(url: "wss://127.0.0.1:\(server.port)/ws"))
            }
            #expect(error.kind == .timeout, "\(error)")
            #expect(error.message.contains("TLS handshake with 127.0.0.1:\(server.port) did not finish within 300 ms"))
            try await within(.seconds(5), "the server to see the close") { await server.waitForClosed(1) }
        }

        @Test(arguments: [
            (401, SessionFailure.Kind.authentication), (403, .authentication), (400, .configuration),
            (404, .configuration), (429, .transient), (503, .transient),
        ])
        func aDeclinedUpgradeKeepsItsStatus(status: Int, kind: SessionFailure.Kind) async throws {
            let server = try await HostileServer.start { peer in
                try await peer.answer(status: status)
                await peer.readUntilClosed()
            }
            defer { Task { await server.stop() } }
            let transport = NIOWebSocketTransport(logger: quietLogger)
            let error = try await within(.seconds(5), "the declined upgrade") {
                try await connectError(transport, WebSocketRequest(url: "ws://127.0.0.1:\(server.port)/ws?key=SECRET"))
            }
            #expect(error.kind == .upgradeDeclined, "\(error)")
            #expect(error.httpStatus == status)
            #expect(error.message.contains("HTTP \(status)") && !error.message.contains("SECRET"), "\(error)")
            #expect(SessionFailure.fromConnect(error).kind == kind)
            try await within(.seconds(5), "the server to see the close") { await server.waitForClosed(1) }
        }

        @Test func aServerThatNeverAnswersTheCloseFrameIsClosedAfterTheCloseDeadline() async throws {
            let server = try await HostileServer.start { peer in
                try await peer.acceptUpgrade()
                await peer.readUntilClosed()
            }
            defer { Task { await server.stop() } }
            let transport = NIOWebSocketTransport(closeTimeout: .milliseconds(300), logger: quietLogger)
            let url = "ws://127.0.0.1:\(server.port)/ws"
            // As the sessions do: close, then read until the connection ends.
            let started = ContinuousClock.now
            let close = try await within(.seconds(5), "the close deadline") {
                try await transport.connect(WebSocketRequest(url: url)) { inbound, outbound in
                    try await outbound.close(code: 1000, reason: "bye")
                    while try await inbound.next() != nil {}
                }
            }
            #expect(close == nil)  // no close frame came
            #expect(ContinuousClock.now - started >= .milliseconds(300))
            try await within(.seconds(5), "the server to see the close") { await server.waitForClosed(1) }
            // A handler that just returns: the transport closes, and the same deadline holds.
            let again = try await within(.seconds(5), "the close deadline") {
                try await transport.connect(WebSocketRequest(url: url)) { _, _ in }
            }
            #expect(again == nil)
            try await within(.seconds(5), "the server to see the close") { await server.waitForClosed(2) }
        }

        @Test func aSixtyFourMegabyteFrameIsReportedAsTooLarge() async throws {
            let server = try await HostileServer.start { peer in
                try await peer.acceptUpgrade()
                // A binary frame announcing 64 MiB, then the start of it.
                try await peer.write([0x82, 127, 0, 0, 0, 0, 0x04, 0, 0, 0])
                for _ in 0..<16 { try? await peer.write([UInt8](repeating: 0, count: 65536)) }
                await peer.readUntilClosed()
            }
            defer { Task { await server.stop() } }
            let transport = NIOWebSocketTransport(logger: quietLogger)
            let error = try await within(.seconds(5), "the oversized frame") {
                try await connectError(transport, WebSocketRequest(url: "ws://127.0.0.1:\(server.port)/ws"))
            }
            #expect(error.kind == .messageTooLarge, "\(error)")
            #expect(error.message == "the server sent a message larger than \(4 << 20) bytes")
            #expect(SessionFailure.fromConnect(error).kind == .transient)
            try await within(.seconds(5), "the server to see the close") { await server.waitForClosed(1) }
        }

        @Test func aFloodOfOneByteMessagesDoesNotHoldTheCloseBack() async throws {
            let server = try await HostileServer.start { peer in
                try await peer.acceptUpgrade()
                let batch = [UInt8]((0..<4096).flatMap { _ in Peer.frame(opcode: 0x1, [0x61]) })
                // Never answers the close frame; floods until the socket is gone.
                while (try? await peer.write(batch)) != nil {}
            }
            defer { Task { await server.stop() } }
            let transport = NIOWebSocketTransport(closeTimeout: .milliseconds(300), logger: quietLogger)
            let received = Counter()
            let close = try await within(.seconds(5), "the close during a flood") {
                try await transport.connect(WebSocketRequest(url: "ws://127.0.0.1:\(server.port)/ws")) {
                    inbound,
                    outbound in
                    while let message = try await inbound.next() {
                        #expect(message == .text("a"))
                        if received.add() == 1000 {
                            try await outbound.leave(code: 1000, reason: "enough")
                        }
                    }
                }
            }
            #expect(close == nil)
            // Once the client left, nothing more is read: what the flood left in the buffers is dropped unread
            // (as a browser's WebSocket does after close()), so the reader ends with the close deadline.
            #expect(received.current == 1000)
            try await within(.seconds(5), "the server to see the close") { await server.waitForClosed(1) }
        }

        @Test func aFloodOfOneByteFragmentsEndsAtTheMessageLimit() async throws {
            let server = try await HostileServer.start { peer in
                try await peer.acceptUpgrade()
                try await peer.write(Peer.frame(opcode: 0x1, [0x61], fin: false))
                let batch = [UInt8]((0..<4096).flatMap { _ in Peer.frame(opcode: 0x0, [0x61], fin: false) })
                while (try? await peer.write(batch)) != nil {}
            }
            defer { Task { await server.stop() } }
            let transport = NIOWebSocketTransport(maxMessageSize: 64 << 10, logger: quietLogger)
            let error = try await within(.seconds(5), "the fragment flood") {
                try await connectError(transport, WebSocketRequest(url: "ws://127.0.0.1:\(server.port)/ws"))
            }
            #expect(error.kind == .messageTooLarge, "\(error)")
            try await within(.seconds(5), "the server to see the close") { await server.waitForClosed(1) }
        }

        @Test(arguments: ["upgrade", "tls", "open"])
        func cancellingTheTaskClosesTheSocketAtOnce(phase: String) async throws {
            let server = try await HostileServer.start { peer in
                if phase == "open" { try await peer.acceptUpgrade() }
                await peer.readUntilClosed()
            }
            defer { Task { await server.stop() } }
            let opened = AsyncStream<Void>.makeStream()
            // Every deadline is far away: only the cancellation closes the socket within seconds.
            let transport = NIOWebSocketTransport(
                pingInterval: nil,
                closeTimeout: .seconds(60),
                tlsHandshakeTimeout: .seconds(60),
                upgradeTimeout: .seconds(60),
                logger: quietLogger
            )
            let url = "\(phase == "tls" ? "wss" : "ws")://127.0.0.1:\(server.port)/ws"
            let task = Task {
                try await transport.connect(WebSocketRequest(url: url)) { inbound, _ in
                    opened.continuation.yield()
                    while try await inbound.next() != nil {}
                }
            }
            try await within(.seconds(5), "the connection") {
                if phase == "open" {
                    var events = opened.stream.makeAsyncIterator()
                    _ = await events.next()
                } else {
                    await server.waitForConnections(1)
                }
            }
            task.cancel()
            try await within(.seconds(3), "the server to see the close") { await server.waitForClosed(1) }
            await #expect(throws: CancellationError.self) {
                try await within(.seconds(5), "the task to end") { try await task.value }
            }
        }

        @Test func plainWebSocketsGoOnlyToThisMachine() async throws {
            let transport = NIOWebSocketTransport(connectTimeout: .milliseconds(300), logger: quietLogger)
            let started = ContinuousClock.now
            let refused = try await connectError(transport, WebSocketRequest(url: "ws://192.0.2.1:9/ws?key=SECRET"))
            #expect(refused.kind == .invalidRequest && refused.message.contains("clear text"), "\(refused)")
            #expect(!refused.message.contains("SECRET"))
            #expect(SessionFailure.fromConnect(refused).kind == .configuration)
            #expect(ContinuousClock.now - started < .milliseconds(200))  // refused before any connection

            let logs = LogCapture()
            let insecure = NIOWebSocketTransport(
                connectTimeout: .milliseconds(300),
                allowInsecure: true,
                logger: logs.logger("transport")
            )
            let attempted = try await within(.seconds(5), "the insecure attempt") {
                try await connectError(insecure, WebSocketRequest(url: "ws://192.0.2.1:9/ws?key=SECRET"))
            }
            #expect(attempted.kind != .invalidRequest, "\(attempted)")
            #expect(
                logs.all.contains { $0.hasPrefix("warning") && $0.contains("clear text") && $0.contains("192.0.2.1") }
            )
            #expect(!logs.all.contains { $0.contains("SECRET") })
        }

        @Test func credentialsBeforeTheHostAndBrokenHeadersAreRefusedBeforeConnecting() async throws {
            let server = try await HostileServer.start { await $0.readUntilClosed() }
            defer { Task { await server.stop() } }
            let transport = NIOWebSocketTransport(logger: quietLogger)
            let userInfo = try await connectError(
                transport,
                WebSocketRequest(url: "ws://u:PW@127.0.0.1:\(server.port)/p?key=Q")
            )
            #expect(userInfo.kind == .invalidRequest, "\(userInfo)")
            for secret in ["PW", "=Q", "u:"] { #expect(!userInfo.message.contains(secret), "\(userInfo)") }
            let injected = try await connectError(
                transport,
                WebSocketRequest(url: "ws://127.0.0.1:\(server.port)/p", headers: [("x-key", "K1\r\nEvil: yes")])
            )
            #expect(injected.kind == .invalidRequest && !injected.message.contains("K1"), "\(injected)")
            #expect(server.accepted == 0)
        }

        @Test func theLoggableURLIsAlwaysRedacted() {
            let request = WebSocketRequest(url: "wss://u:pw@h/p?key=K", loggableURL: "wss://u:pw@h/p?key=K")
            #expect(request.loggableURL == "wss://REDACTED@h/p?key=REDACTED")
            #expect(WebSocketRequest(url: "wss://h/p?token=T").loggableURL == "wss://h/p?token=REDACTED")
        }
    }
}
