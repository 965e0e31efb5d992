import HarkCore

/// Why a LiveKit call failed. Its description never holds a token: messages from the library are redacted
/// (``LogRedaction``) before they are kept.
public struct LiveKitError: Error, CustomStringConvertible, Sendable, Equatable {
    private enum Code: Sendable, Equatable {
        case libraryMissing, library, busy, notRunning, request, response, timeout, connect, authentication
        case failed, invalidArgument, panic
    }

    private let code: Code
    public let description: String

    private init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }

    /// True when `liblivekit_ffi.so` is not on this machine (install it; see ``LiveKitLibrary/locate(environment:executable:)``).
    public var isLibraryMissing: Bool { code == .libraryMissing }
    /// True when a call did not finish before its deadline.
    public var isTimeout: Bool { code == .timeout }
    /// True when joining the room failed (the network, the server, a refused token: see ``isAuthentication``).
    public var isConnectFailure: Bool { code == .connect || code == .authentication }
    /// True when the server refused the token (HTTP 401 or 403): a configuration error, not a transient one.
    public var isAuthentication: Bool { code == .authentication }
    /// True when the library reported a panic: it is in an unknown state, and the process should restart.
    public var isPanic: Bool { code == .panic }
    /// Another client runs in this process.
    public var isBusy: Bool { code == .busy }

    static func libraryMissing(_ what: String) -> LiveKitError { LiveKitError(.libraryMissing, what) }
    static func library(_ what: String) -> LiveKitError { LiveKitError(.library, what) }
    static func busy(_ what: String) -> LiveKitError { LiveKitError(.busy, what) }
    static func notRunning(_ what: String) -> LiveKitError { LiveKitError(.notRunning, what) }
    static func request(_ what: String) -> LiveKitError { LiveKitError(.request, what) }
    static func response(_ what: String) -> LiveKitError { LiveKitError(.response, what) }
    static func timeout(_ what: String, after: Duration) -> LiveKitError {
        LiveKitError(.timeout, "\(what): no answer from the LiveKit library within \(after)")
    }
    static func failed(_ what: String, _ message: String) -> LiveKitError {
        LiveKitError(.failed, "\(what) failed: \(LogRedaction.redact(message))")
    }
    static func invalidArgument(_ what: String) -> LiveKitError { LiveKitError(.invalidArgument, what) }
    static func panic(_ message: String) -> LiveKitError {
        LiveKitError(.panic, "the LiveKit library panicked: \(LogRedaction.redact(message))")
    }

    /// A failed connection, from the library's message (`client error: 401 Unauthorized - ...` when the token is
    /// refused, which becomes an authentication error).
    static func connect(_ url: String, _ message: String) -> LiveKitError {
        let redacted = LogRedaction.redact(message)
        let text = "cannot join the LiveKit room at \(URLRedaction.redact(url)): \(redacted)"
        return LiveKitError(isAuthenticationMessage(message) ? .authentication : .connect, text)
    }

    /// Whether a connect error from the library says the token was refused (HTTP 401 or 403 on the signalling
    /// WebSocket or on its `/rtc/validate` check).
    static func isAuthenticationMessage(_ message: String) -> Bool {
        let lower = message.lowercased()
        return lower.contains("401 unauthorized") || lower.contains("403 forbidden") || lower.contains("status: 401")
            || lower.contains("status: 403") || lower.contains("invalid token")
    }
}
