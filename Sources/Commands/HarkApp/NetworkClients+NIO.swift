import HarkCore
import HarkHTTP
import HarkNet
import Logging

extension NetworkClients {
    /// The SwiftNIO clients: WebSockets and HTTPS on the process's one event loop, BoringSSL.
    public static func nio(logger: Logger) -> NetworkClients {
        NetworkClients(
            webSocket: { caFile, allowInsecure in
                NIOWebSocketTransport(caFile: caFile, allowInsecure: allowInsecure, logger: logger)
            },
            http: { caFile, allowInsecure in
                NIOHTTPClient(caFile: caFile, allowInsecure: allowInsecure, logger: logger)
            }
        )
    }
}
