import HarkCore
import NIOCore
import NIOSSL
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// TLS as the WebSockets and the HTTP client use it: the system's trust roots plus an optional CA file, the
/// certificate checked against the host name, or against the IP address when the URL names one.
package enum ClientTLS {
    /// A client context trusting the system's roots and the PEM certificates in `caFile`. Throws a one-line
    /// message when the CA file is missing or TLS cannot be set up.
    ///
    /// Made once and shared (a context serves any number of connections): making one reads and parses the
    /// system's whole CA bundle, milliseconds on a Pi, which every connection opened in a turn's path (the
    /// cascade's text request) would otherwise wait for. A CA file is read again when its size or modification
    /// time changed.
    package static func context(caFile: String?) throws(ClientTLSError) -> NIOSSLContext {
        var key = ContextKey(caFile: caFile)
        if let caFile {
            guard let attributes = try? ReadableFile.attributes(atPath: caFile) else {
                throw ClientTLSError(message: "the CA file \(caFile) does not exist")
            }
            key.size = attributes[.size].map { "\($0)" }
            key.modified = (attributes[.modificationDate] as? Date)?.timeIntervalSince1970
        }
        if let context = contexts.withLock({ $0[key] }) { return context }
        var configuration = TLSConfiguration.makeClientConfiguration()
        if let caFile { configuration.additionalTrustRoots = [.file(caFile)] }
        let context: NIOSSLContext
        do {
            context = try NIOSSLContext(configuration: configuration)
        } catch {
            throw ClientTLSError(message: "cannot set up TLS: \(error)")
        }
        contexts.withLock { contexts in
            if contexts.count >= 8 { contexts.removeAll() }  // a few CA files at most; never grows
            contexts[key] = context
        }
        return context
    }

    /// What a context was made from.
    private struct ContextKey: Hashable {
        var caFile: String?
        var size: String?
        var modified: Double?
    }

    private static let contexts = Mutex<[ContextKey: NIOSSLContext]>([:])

    /// The TLS handler for `endpoint`. A host name is sent as SNI and the certificate must carry it; for an IP
    /// address no SNI is sent (RFC 6066 forbids it) and NIOSSL checks the certificate against the peer's address.
    package static func handler(context: NIOSSLContext, for endpoint: EndpointURL) throws -> NIOSSLClientHandler {
        try NIOSSLClientHandler(context: context, serverHostname: endpoint.hostIsAddress ? nil : endpoint.host)
    }
}

/// TLS could not be set up (a missing CA file, an unreadable one).
package struct ClientTLSError: Error {
    package var message: String
}

extension NIOWebSocketTransport {
    /// A TLS failure as one line for a person, without BoringSSL's internals: an untrusted certificate
    /// (unless the clock is not set, when no certificate can be checked yet) or a handshake that failed.
    /// `url` only lends its host and port to the message.
    public static func classifyTLS(_ description: String, url: String, now: Date = Date()) -> WebSocketConnectError {
        let host = TLSFailure.host(of: url)
        if description.contains("failedToValidateHostname") {
            let name = EndpointURL(url)?.host ?? "its address"
            return WebSocketConnectError(
                .untrusted,
                "the certificate of \(host) is not trusted: it is not issued for \(name); "
                    + "connect by a name or address the certificate carries"
            )
        }
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
    /// `host:port` of a URL (`host` alone without `withPort`), never its user-info, path or query.
    static func host(of url: String, withPort: Bool = true) -> String {
        guard let endpoint = EndpointURL(url) else { return "the server" }
        return withPort ? endpoint.hostAndPort : endpoint.host
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

/// Whether the system clock has been set. A board without a battery-backed clock boots in the past, and
/// then every certificate looks not yet valid: a verification failure says nothing about trust yet.
public enum SystemClock {
    /// Earlier than this (2026-01-01) the clock has not been set.
    public static let earliestPlausibleTime = Date(timeIntervalSince1970: 1_767_225_600)

    public static func isUnset(_ now: Date = Date()) -> Bool { now < earliestPlausibleTime }
}
