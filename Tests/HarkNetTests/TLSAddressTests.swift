import Foundation
import HarkCore
import HarkHTTP
import HarkSimulatorKit
import NIOCore
import NIOSSL
import Testing

@testable import HarkNet

extension NetworkTests {
    /// `wss://` and `https://` to an IP address: the certificate is checked against the address (no SNI is sent).
    @Suite struct TLSAddressTests {
        /// A WebSocket server that accepts the upgrade, closes with 1000 at once, and closes the socket once the
        /// client answered the close.
        private func closingServer(_ tls: TLSConfiguration) async throws -> HostileServer {
            try await HostileServer.start(tls: tls) { peer in
                try await peer.acceptUpgrade()
                try await peer.write(Peer.frame(opcode: 0x8, [0x03, 0xE8]))
                _ = try await peer.readFrame()
            }
        }

        @Test func aTLSContextIsMadeOnceForACAFileAndAgainWhenTheFileChanges() throws {
            let first = try TestCertificates.make(dnsNames: [], ipAddresses: ["127.0.0.1"])
            defer { try? FileManager.default.removeItem(atPath: first.caFile) }
            let context = try ClientTLS.context(caFile: first.caFile)
            #expect(try ClientTLS.context(caFile: first.caFile) === context)
            #expect(try ClientTLS.context(caFile: nil) === ClientTLS.context(caFile: nil))
            #expect(try ClientTLS.context(caFile: nil) !== context)
            // Another CA written over the file: read again.
            let second = try TestCertificates.make(dnsNames: ["localhost"], ipAddresses: [])
            defer { try? FileManager.default.removeItem(atPath: second.caFile) }
            let pem = try String(contentsOfFile: second.caFile, encoding: .utf8)
            try ("# the second CA\n" + pem).write(toFile: first.caFile, atomically: true, encoding: .utf8)
            #expect(try ClientTLS.context(caFile: first.caFile) !== context)
            #expect(throws: ClientTLSError.self) { try ClientTLS.context(caFile: first.caFile + ".missing") }
        }

        @Test func wssToAnAddressTheCertificateCarriesConnects() async throws {
            let certificates = try TestCertificates.make(dnsNames: [], ipAddresses: ["127.0.0.1"])
            defer { try? FileManager.default.removeItem(atPath: certificates.caFile) }
            let server = try await closingServer(certificates.server)
            defer { Task { await server.stop() } }
            let transport = NIOWebSocketTransport(caFile: certificates.caFile, logger: quietLogger)
            let close = try await within(.seconds(5), "the TLS connection") {
                try await transport.connect(WebSocketRequest(url: "wss://127.0.0.1:\(server.port)/ws")) { inbound, _ in
                    while try await inbound.next() != nil {}
                }
            }
            #expect(close?.code == 1000)
        }

        @Test func wssToAnAddressTheCertificateDoesNotCarryIsUntrusted() async throws {
            let certificates = try TestCertificates.make(dnsNames: ["localhost"], ipAddresses: [])
            defer { try? FileManager.default.removeItem(atPath: certificates.caFile) }
            let server = try await closingServer(certificates.server)
            defer { Task { await server.stop() } }
            let transport = NIOWebSocketTransport(caFile: certificates.caFile, logger: quietLogger)
            let error = try await within(.seconds(5), "the TLS refusal") {
                try await connectError(transport, WebSocketRequest(url: "wss://127.0.0.1:\(server.port)/ws?key=SECRET"))
            }
            #expect(error.kind == .untrusted, "\(error)")
            #expect(error.message.contains("not issued for 127.0.0.1") && !error.message.contains("SECRET"), "\(error)")
            #expect(SessionFailure.fromConnect(error).kind == .untrusted)
        }

        @Test func wssToAnAddressWithAnUnknownCAIsUntrusted() async throws {
            let certificates = try TestCertificates.make(dnsNames: [], ipAddresses: ["127.0.0.1"])
            defer { try? FileManager.default.removeItem(atPath: certificates.caFile) }
            let server = try await closingServer(certificates.server)
            defer { Task { await server.stop() } }
            let transport = NIOWebSocketTransport(logger: quietLogger)
            let error = try await within(.seconds(5), "the TLS refusal") {
                try await connectError(transport, WebSocketRequest(url: "wss://127.0.0.1:\(server.port)/ws"))
            }
            #expect(error.kind == .untrusted, "\(error)")
            #expect(error.message.contains("is not trusted"), "\(error)")
        }

        @Test func httpsToAnAddressChecksTheCertificateAgainstIt() async throws {
            let forAddress = try TestCertificates.make(dnsNames: [], ipAddresses: ["127.0.0.1"])
            let forName = try TestCertificates.make(dnsNames: ["localhost"], ipAddresses: [])
            defer {
                try? FileManager.default.removeItem(atPath: forAddress.caFile)
                try? FileManager.default.removeItem(atPath: forName.caFile)
            }
            let answer: @Sendable (Peer) async throws -> Void = { peer in
                _ = try await peer.readHead()
                try await peer.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            }
            let good = try await HostileServer.start(tls: forAddress.server, answer)
            let bad = try await HostileServer.start(tls: forName.server, answer)
            defer {
                Task {
                    await good.stop()
                    await bad.stop()
                }
            }
            let response = try await within(.seconds(5), "the HTTPS request") {
                try await NIOHTTPClient(caFile: forAddress.caFile).send(
                    HTTPRequest(url: "https://127.0.0.1:\(good.port)/t")
                )
            }
            #expect(response.status == 200 && response.body == Data("ok".utf8))
            let error = try await within(.seconds(5), "the HTTPS refusal") {
                try await #require(throws: HTTPClientError.self) {
                    try await NIOHTTPClient(caFile: forName.caFile).send(
                        HTTPRequest(url: "https://127.0.0.1:\(bad.port)/t?key=SECRET")
                    )
                }
            }
            #expect(error.untrusted && error.message.contains("not issued for 127.0.0.1"), "\(error)")
            #expect(!error.message.contains("SECRET"))
        }
    }
}

/// How a failed connect is told to a person and to the reconnect policy.
@Suite struct ConnectErrorTests {
    @Test func aConnectionClosedWhileItIsSetUpIsARefusal() throws {
        let endpoint = try #require(EndpointURL("wss://127.0.0.1:9/ws?key=secret-4711"))
        for error in [
            ChannelError.inappropriateOperationForState, ChannelError.ioOnClosedChannel, ChannelError.alreadyClosed,
            ChannelError.eof,
        ] {
            let told = NIOWebSocketTransport.classify(
                error,
                endpoint: endpoint,
                url: "wss://127.0.0.1:9/ws?key=secret-4711"
            )
            #expect(told.kind == .refused, "\(error)")
            #expect(told.message == "cannot connect to 127.0.0.1:9 (the connection closed while it was set up)")
        }
    }
}
