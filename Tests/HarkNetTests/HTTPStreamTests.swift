import Foundation
import HarkCore
import HarkHTTP
import HarkSimulatorKit
import NIOCore
import Testing

extension NetworkTests {
    /// Streaming HTTP against a loopback server that streams slowly, stalls, closes early, or is left by a reader
    /// that cancels; and the default `stream` of an in-process client.
    @Suite struct HTTPStreamTests {
        private static let eventStreamHead =
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"

        /// One HTTP/1.1 chunk.
        private static func chunk(_ text: String) -> String {
            String(text.utf8.count, radix: 16) + "\r\n" + text + "\r\n"
        }

        @Test func eventsArriveAsTheServerSendsThem() async throws {
            // The server sends each event only once the reader has the one before: a client that waited for the
            // whole body would never see the first.
            let (gate, opener) = AsyncStream<Void>.makeStream()
            let server = try await HostileServer.start { peer in
                _ = try await peer.readHead()
                try await peer.write(Self.eventStreamHead)
                var turns = gate.makeAsyncIterator()
                for index in 0..<3 {
                    _ = await turns.next()
                    try await peer.write(Self.chunk("data: {\"n\":\(index)}\r\n\r\n"))
                }
                _ = await turns.next()
                try await peer.write("0\r\n\r\n")
                await peer.readUntilClosed()
            }
            defer { Task { await server.stop() } }
            let client = NIOHTTPClient()
            let request = HTTPRequest(
                method: "POST",
                url: "http://127.0.0.1:\(server.port)/v1beta/models/m:streamGenerateContent?alt=sse",
                headers: [("x-goog-api-key", "SECRET")],
                body: Data("{}".utf8)
            )
            try await within(.seconds(10), "the stream") {
                let response = try await client.stream(request)
                #expect(response.status == 200)
                #expect(response.header("content-type") == "text/event-stream")
                var text = ""
                for index in 0..<3 {
                    opener.yield()
                    while !text.contains("data: {\"n\":\(index)}\r\n\r\n") {
                        let chunk = try #require(try await response.body.next())
                        text += String(decoding: chunk, as: UTF8.self)
                    }
                }
                opener.yield()
                #expect(try await response.body.next() == nil)
                #expect(text == (0..<3).map { "data: {\"n\":\($0)}\r\n\r\n" }.joined())
            }
            try await within(.seconds(5), "the server to see the close") { await server.waitForClosed(1) }
        }

        @Test(arguments: [false, true])
        func aConnectionOpenedAheadCarriesTheRequestThatTakesItAndOnlyThatOne(_ secure: Bool) async throws {
            let certificates = try TestCertificates.make(dnsNames: [], ipAddresses: ["127.0.0.1"])
            defer { try? FileManager.default.removeItem(atPath: certificates.caFile) }
            let server = try await HostileServer.start(tls: secure ? certificates.server : nil) { peer in
                _ = try await peer.readHead()
                try await peer.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
                await peer.readUntilClosed()
            }
            defer { Task { await server.stop() } }
            let client = NIOHTTPClient(caFile: certificates.caFile)
            let url = "\(secure ? "https" : "http")://127.0.0.1:\(server.port)/v1beta/models/m:streamGenerateContent"
            let ahead = try #require(client.openAhead(to: url))
            // Open before any request was made; the request then goes on it, and no other connection is made.
            try await within(.seconds(5), "the connection opened ahead") { await server.waitForConnections(1) }
            try await within(.seconds(10), "the request on it") {
                let response = try await client.stream(HTTPRequest(url: url), on: ahead)
                #expect(response.status == 200)
                #expect(try await response.body.collect(upTo: 100) == Data("ok".utf8))
            }
            #expect(server.accepted == 1)
            // Taken: the next request on it opens a connection of its own.
            try await within(.seconds(10), "a second request") {
                let response = try await client.stream(HTTPRequest(url: url), on: ahead)
                #expect(response.status == 200)
            }
            #expect(server.accepted == 2)
            // One opened to another origin is not used (and is closed); the request still goes.
            let elsewhere = try #require(client.openAhead(to: "http://127.0.0.1:9/elsewhere"))
            try await within(.seconds(10), "a request beside another origin's") {
                let response = try await client.stream(HTTPRequest(url: url), on: elsewhere)
                #expect(response.status == 200)
            }
            #expect(server.accepted == 3)
            // One dropped unused is closed.
            var unused = client.openAhead(to: url)
            try await within(.seconds(5), "the unused connection") { await server.waitForConnections(4) }
            #expect(unused != nil)
            unused = nil
            try await within(.seconds(5), "the unused connection to close") { await server.waitForClosed(4) }
        }

        @Test func aServerThatStallsBeforeTheHeadTimesOut() async throws {
            let server = try await HostileServer.start { peer in
                _ = try await peer.readHead()
                await peer.readUntilClosed()
            }
            defer { Task { await server.stop() } }
            let request = HTTPRequest(
                url: "http://127.0.0.1:\(server.port)/p?key=SECRET",
                headTimeout: .milliseconds(300)
            )
            let started = ContinuousClock.now
            let error = try await within(.seconds(5), "the head deadline") {
                try await #require(throws: HTTPClientError.self) { try await NIOHTTPClient().stream(request) }
            }
            #expect(error.message == "http://127.0.0.1:\(server.port): no answer within 300 ms", "\(error)")
            #expect(ContinuousClock.now - started >= .milliseconds(300))
            try await within(.seconds(5), "the server to see the close") { await server.waitForClosed(1) }
        }

        @Test func aServerThatStallsMidBodyTimesOut() async throws {
            let server = try await HostileServer.start { peer in
                _ = try await peer.readHead()
                try await peer.write(Self.eventStreamHead + Self.chunk("data: 1\r\n\r\n"))
                await peer.readUntilClosed()
            }
            defer { Task { await server.stop() } }
            let request = HTTPRequest(url: "http://127.0.0.1:\(server.port)/p", idleTimeout: .milliseconds(300))
            let error = try await within(.seconds(5), "the idle deadline") {
                let response = try await NIOHTTPClient().stream(request)
                #expect(try await response.body.next() == Data("data: 1\r\n\r\n".utf8))
                return try await #require(throws: HTTPClientError.self) { try await response.body.next() }
            }
            #expect(error.message.contains("the response stalled (no data for 300 ms)"), "\(error)")
            try await within(.seconds(5), "the server to see the close") { await server.waitForClosed(1) }
        }

        @Test func aServerThatClosesEarlyIsAnErrorNotAnEnd() async throws {
            let server = try await HostileServer.start { peer in
                _ = try await peer.readHead()
                try await peer.write("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
            }
            defer { Task { await server.stop() } }
            let error = try await within(.seconds(5), "the early close") {
                let response = try await NIOHTTPClient().stream(HTTPRequest(url: "http://127.0.0.1:\(server.port)/p"))
                #expect(try await response.body.next() == Data("0123456789".utf8))
                return try await #require(throws: HTTPClientError.self) { try await response.body.next() }
            }
            #expect(error.message.contains("closed before the response ended"), "\(error)")
        }

        @Test func aBodyOverTheLimitFails() async throws {
            let server = try await HostileServer.start { peer in
                _ = try await peer.readHead()
                try await peer.write(
                    "HTTP/1.1 200 OK\r\nContent-Length: 4000\r\n\r\n" + String(repeating: "x", count: 4000)
                )
                await peer.readUntilClosed()
            }
            defer { Task { await server.stop() } }
            let error = try await within(.seconds(5), "the limit") {
                let response = try await NIOHTTPClient(maxResponseBytes: 1000).stream(
                    HTTPRequest(url: "http://127.0.0.1:\(server.port)/p")
                )
                return try await #require(throws: HTTPClientError.self) { try await response.body.collect(upTo: .max) }
            }
            #expect(error.message.contains("larger than 1000 bytes"), "\(error)")
            try await within(.seconds(5), "the server to see the close") { await server.waitForClosed(1) }
        }

        @Test(arguments: ["cancel the task", "leave the loop", "drop the response"])
        func aReaderThatStopsClosesTheConnectionAtOnce(how: String) async throws {
            let server = try await HostileServer.start { peer in
                _ = try await peer.readHead()
                try await peer.write(Self.eventStreamHead + Self.chunk("data: 1\r\n\r\n"))
                await peer.readUntilClosed()
            }
            defer { Task { await server.stop() } }
            let (started, starter) = AsyncStream<Void>.makeStream()
            let (hold, release) = AsyncStream<Void>.makeStream()
            defer { release.finish() }
            let url = "http://127.0.0.1:\(server.port)/p"
            let reader = Task {
                let response = try await NIOHTTPClient().stream(HTTPRequest(url: url))
                switch how {
                case "cancel the task":
                    _ = try await response.body.next()
                    starter.yield()
                    _ = try await response.body.next()  // waits: nothing more comes
                case "leave the loop":
                    for try await _ in response.body { break }
                    starter.yield()
                    for await _ in hold {}  // keeps the response; leaving the loop closed the connection
                    _ = response
                default:
                    starter.yield()
                }
            }
            try await within(.seconds(5), "the first chunk") {
                var events = started.makeAsyncIterator()
                _ = await events.next()
            }
            if how != "leave the loop" { reader.cancel() }
            // The idle deadline is 30 s away: only stopping closes the connection within seconds.
            try await within(.seconds(3), "the server to see the close") { await server.waitForClosed(1) }
            release.finish()
            reader.cancel()
            if how == "cancel the task" {
                await #expect(throws: CancellationError.self) {
                    try await within(.seconds(5), "the reader to end") { try await reader.value }
                }
            }
        }

        @Test func theBodyIsReadOnlyAsTheReaderAsks() async throws {
            let total = 32 << 20
            let written = Counter()
            let stalled = AsyncStream<Void>.makeStream()
            let server = try await HostileServer.start { peer in
                _ = try await peer.readHead()
                try await peer.write("HTTP/1.1 200 OK\r\nContent-Length: \(total)\r\n\r\n")
                let chunk = [UInt8](repeating: 0x78, count: 64 << 10)
                // Notes a write that waits long for the socket to drain: the reader has stopped reading.
                let watcher = Task {
                    var last = -1
                    while !Task.isCancelled {
                        try await Task.sleep(for: .milliseconds(300))
                        let now = written.current
                        if now == last, now < total { stalled.continuation.yield() }
                        last = now
                    }
                }
                defer { watcher.cancel() }
                while written.current < total {
                    try await peer.write(chunk)
                    written.add(chunk.count)
                }
                await peer.readUntilClosed()
            }
            defer { Task { await server.stop() } }
            let client = NIOHTTPClient(maxResponseBytes: 64 << 20)
            let response = try await client.stream(HTTPRequest(url: "http://127.0.0.1:\(server.port)/big"))
            let first = try await within(.seconds(5), "the first chunk") { try await response.body.next() }
            #expect((first?.count ?? 0) > 0)
            try await within(.seconds(20), "the server to stall on a reader that stopped") {
                var events = stalled.stream.makeAsyncIterator()
                _ = await events.next()
            }
            // Socket buffers hold some megabytes; the client itself holds a chunk or two.
            #expect(written.current < total)
            let rest = try await within(.seconds(30), "the rest") { try await response.body.collect(upTo: .max) }
            #expect((first?.count ?? 0) + rest.count == total)
        }

        @Test func theDefaultStreamHandsOverTheWholeBody() async throws {
            struct InProcess: HTTPClient {
                func send(_ request: HTTPRequest) async throws -> HTTPResponse {
                    HTTPResponse(status: 200, body: Data("abc".utf8), headers: [("Content-Type", "text/plain")])
                }
            }
            let response = try await InProcess().stream(HTTPRequest(url: "http://in-process/x"))
            #expect(response.status == 200 && response.header("content-type") == "text/plain")
            var chunks: [Data] = []
            for try await chunk in response.body { chunks.append(chunk) }
            #expect(chunks == [Data("abc".utf8)])
            #expect(try await response.body.next() == nil)
        }
    }
}
