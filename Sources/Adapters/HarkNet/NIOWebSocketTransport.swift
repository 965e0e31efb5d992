import HTTPTypes
import HarkCore
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import NIOWebSocket
import WSClient

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// WebSockets over SwiftNIO (hummingbird-project/swift-websocket): `wss://` with the system's trust
/// roots plus an optional extra CA file, and plain `ws://` for loopback.
public struct NIOWebSocketTransport: WebSocketTransport {
    /// A PEM file of extra CA certificates to trust (a simulator's or a proxy's), or nil.
    public var caFile: String?
    /// Largest frame and message accepted (the Live service's clients allow 1 MiB; more is kept for margin).
    public var maxMessageSize: Int
    /// A ping every `pingInterval`, and the connection is closed when the pong has not come by the
    /// next one. Long on purpose: the Live service's pongs have taken 30 s.
    public var pingInterval: Duration?
    /// How long the close handshake may take before the socket is simply closed.
    public var closeTimeout: Duration
    private let logger: Logger

    public init(
        caFile: String? = nil,
        maxMessageSize: Int = 4 << 20,
        pingInterval: Duration? = .seconds(60),
        closeTimeout: Duration = .seconds(2),
        logger: Logger
    ) {
        self.caFile = caFile
        self.maxMessageSize = maxMessageSize
        self.pingInterval = pingInterval
        self.closeTimeout = closeTimeout
        self.logger = logger
    }

    public func connect(
        _ request: WebSocketRequest,
        handler: @escaping @Sendable (WebSocketInbound, any WebSocketOutbound) async throws -> Void
    ) async throws -> WebSocketClose? {
        var headers = HTTPFields()
        for header in request.headers {
            guard let name = HTTPField.Name(header.name) else {
                throw WebSocketConnectError(.other, "invalid header name \(header.name)")
            }
            headers.append(HTTPField(name: name, value: header.value))
        }
        if request.url.lowercased().hasPrefix("wss://") {
            // TLS checks the certificate against the host name, sent as SNI, which cannot be an address.
            let host = TLSFailure.host(of: request.url, withPort: false).trimmingPrefix("[")
            if (try? SocketAddress(ipAddress: String(host.prefix { $0 != "]" }), port: 0)) != nil {
                throw WebSocketConnectError(
                    .invalidRequest,
                    "wss:// needs a host name, not an IP address (\(host.prefix { $0 != "]" })): TLS checks the "
                        + "certificate against the name; use a name it carries, e.g. localhost"
                )
            }
        }
        var tls = TLSConfiguration.makeClientConfiguration()
        if let caFile {
            guard FileManager.default.fileExists(atPath: caFile) else {
                throw WebSocketConnectError(.tls, "the CA file \(caFile) does not exist")
            }
            tls.additionalTrustRoots = [.file(caFile)]
        }
        let configuration = WebSocketClientConfiguration(
            maxFrameSize: maxMessageSize,
            additionalHeaders: headers,
            closeTimeout: closeTimeout,
            autoPing: pingInterval.map { .enabled(timePeriod: $0) } ?? .disabled
        )
        let maxMessageSize = self.maxMessageSize
        let client = WebSocketClient(
            url: request.url,
            configuration: configuration,
            tlsConfiguration: tls,
            logger: logger
        ) { inbound, outbound, _ in
            let stream = inbound.messages(maxSize: maxMessageSize)
            let iterator = IteratorBox(stream.makeAsyncIterator())
            let harkInbound = WebSocketInbound {
                switch try await iterator.next() {
                case .text(let text)?: return .text(text)
                case .binary(let buffer)?: return .binary(Data(buffer.readableBytesView))
                case nil: return nil
                }
            }
            try await handler(harkInbound, Outbound(writer: outbound))
        }
        do {
            guard let frame = try await client.run() else { return nil }
            return WebSocketClose(code: Int(UInt16(webSocketErrorCode: frame.closeCode)), reason: frame.reason)
        } catch let error as WebSocketConnectError {
            throw error
        } catch let error as WebSocketClientError {
            if error == .serverSentMessageTooLarge {
                throw WebSocketConnectError(
                    .messageTooLarge,
                    "the server sent a message larger than \(maxMessageSize) bytes"
                )
            }
            if error == .webSocketUpgradeFailed {
                throw WebSocketConnectError(.upgradeDeclined, "the server declined the WebSocket upgrade")
            }
            throw WebSocketConnectError(.other, "WebSocket: \(error)")
        } catch let error as NIOConnectionError {
            if error.dnsAAAAError != nil || error.dnsAError != nil, error.connectionErrors.isEmpty {
                throw WebSocketConnectError(.dns, "cannot resolve \(error.host)")
            }
            throw WebSocketConnectError(.refused, "cannot connect to \(error.host):\(error.port)")
        } catch let error as ChannelError {
            if case .connectTimeout = error {
                throw WebSocketConnectError(.timeout, "connection timed out")
            }
            throw WebSocketConnectError(.other, "connection failed: \(error)")
        } catch let error as NIOSSLError {
            throw Self.classifyTLS(String(describing: error), url: request.url)
        } catch let error as BoringSSLError {
            throw Self.classifyTLS(String(describing: error), url: request.url)
        } catch let error as IOError {
            throw WebSocketConnectError(.refused, "connection failed: \(error.description)")
        }
    }
}

extension NIOWebSocketTransport {
    /// A TLS failure as one line for a person, without BoringSSL's internals: an untrusted certificate
    /// (unless the clock is not set, when no certificate can be checked yet) or a handshake that failed.
    public static func classifyTLS(_ description: String, url: String, now: Date = Date()) -> WebSocketConnectError {
        let host = TLSFailure.host(of: url)
        let reason = TLSFailure.reason(in: description)
        guard reason == "CERTIFICATE_VERIFY_FAILED" else {
            return WebSocketConnectError(.tls, "TLS handshake with \(host) failed (\(reason ?? "no reason given"))")
        }
        if SystemClock.isUnset(now) {
            return WebSocketConnectError(
                .tls,
                "cannot verify the certificate of \(host): the system clock is not set yet "
                    + "(it reads before 2026); retrying until it is"
            )
        }
        return WebSocketConnectError(
            .untrusted,
            "the certificate of \(host) is not trusted (unknown CA, expired or issued for another name); "
                + "for a private server set its CA with ca_file"
        )
    }
}

/// What a TLS failure's description says, reduced to what a person needs.
enum TLSFailure {
    /// `host:port` of a URL, never its path or query (which may carry a credential).
    static func host(of url: String, withPort: Bool = true) -> String {
        guard let components = URLComponents(string: url), let host = components.host else { return "the server" }
        guard withPort, let port = components.port else { return host }
        return "\(host):\(port)"
    }

    /// The last BoringSSL reason code in `description` (`CERTIFICATE_VERIFY_FAILED`,
    /// `WRONG_VERSION_NUMBER`), or nil.
    static func reason(in description: String) -> String? {
        var found: String?
        for word in description.split(whereSeparator: { ": ()[],".contains($0) }) {
            if word.count > 3, word.contains("_"), word.allSatisfy({ $0.isUppercase || $0 == "_" || $0.isNumber }) {
                found = String(word)
            }
        }
        if found == nil, description.contains("handshakeFailed") { return "handshake failed" }
        if found == nil, description.contains("uncleanShutdown") { return "the connection closed during the handshake" }
        return found
    }
}

/// Holds the inbound iterator so the reader closure can advance it; used by one task only.
private final class IteratorBox: @unchecked Sendable {
    private var iterator: WebSocketInboundMessageStream.AsyncIterator

    init(_ iterator: WebSocketInboundMessageStream.AsyncIterator) {
        self.iterator = iterator
    }

    func next() async throws -> WSCore.WebSocketMessage? {
        try await iterator.next()
    }
}

private struct Outbound: HarkCore.WebSocketOutbound {
    let writer: WebSocketOutboundWriter

    func send(text: String) async throws {
        try await writer.write(.text(text))
    }

    func close(code: Int, reason: String) async throws {
        try await writer.close(WebSocketErrorCode(codeNumber: code), reason: reason)
    }
}
