import Foundation
import HarkCore
import HarkDatagridSimulator
import HarkHTTP
import HarkTestKit
import NIOCore
import NIOPosix
import Testing

/// The NIO HTTP client against real loopback servers: the Datagrid simulator's REST side (plain and TLS),
/// a closed port and a server that accepts and never answers.
@Suite struct HTTPClientTests {
    private func handoff(_ base: String) -> HTTPRequest {
        HTTPRequest(
            method: "POST",
            url: base + "/v1/voice?secret=query-value",
            headers: [("Authorization", "Bearer k")],
            body: Data(#"{"agent_id":"agent_x"}"#.utf8)
        )
    }

    @Test func aCertificateWithoutItsCAIsRefusedAsUntrustedAndTrustedWithIt() async throws {
        let caPath = FileManager.default.temporaryDirectory.path + "/hark-http-ca-\(UUID().uuidString).pem"
        defer { try? FileManager.default.removeItem(atPath: caPath) }
        let simulator = try await startSimulator {
            $0.tls = true
            $0.caOut = caPath
        }
        defer { Task { try? await simulator.stop() } }
        let trusted = try await NIOHTTPClient(caFile: caPath).send(handoff(simulator.httpBaseURL))
        #expect(trusted.status == 200)
        let error = try await #require(throws: HTTPClientError.self) {
            try await NIOHTTPClient().send(handoff(simulator.httpBaseURL))
        }
        #expect(error.untrusted, "\(error)")
        #expect(error.message.contains("not trusted"), "\(error)")
        #expect(!error.message.contains("query-value") && !error.message.contains("/v1/voice"), "\(error)")
    }

    @Test func aClosedPortIsRefusedInOneLine() async throws {
        let simulator = try await startSimulator()
        let base = simulator.httpBaseURL
        try await simulator.stop()
        let error = try await #require(throws: HTTPClientError.self) { try await NIOHTTPClient().send(handoff(base)) }
        #expect(error.message.contains("cannot connect to 127.0.0.1:"), "\(error)")
        #expect(!error.untrusted)
        #expect(!error.message.contains("query-value"), "\(error)")
    }

    @Test func aServerThatNeverAnswersTimesOut() async throws {
        // Accepts connections and reads nothing.
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0).get()
        defer { server.close(promise: nil) }
        let port = try #require(server.localAddress?.port)
        var request = handoff("http://127.0.0.1:\(port)")
        request.timeout = .milliseconds(300)
        let started = ContinuousClock.now
        let error = try await #require(throws: HTTPClientError.self) { try await NIOHTTPClient().send(request) }
        #expect(error.message.contains("no answer within 300 ms"), "\(error)")
        #expect(ContinuousClock.now - started < .seconds(5))
    }

    @Test func aResponseOverTheLimitIsAnErrorNotATruncatedBody() async throws {
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        let error = try await #require(throws: HTTPClientError.self) {
            try await NIOHTTPClient(maxResponseBytes: 16).send(handoff(simulator.httpBaseURL))
        }
        #expect(error.message.contains("larger than 16 bytes"), "\(error)")
    }

    @Test func anythingButHTTPIsRefusedBeforeConnecting() async throws {
        let error = try await #require(throws: HTTPClientError.self) {
            try await NIOHTTPClient().send(HTTPRequest(url: "ftp://example.invalid/x?key=secret"))
        }
        #expect(error.message.contains("not an http:// or https:// URL"), "\(error)")
        #expect(!error.message.contains("secret"))
        #expect(NIOHTTPClient.redactedHost("https://h.example:8443/p/a?key=s") == "https://h.example:8443")
    }
}
