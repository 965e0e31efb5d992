import HarkBackendKit
import HarkCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The Live API version in the endpoint path.
public enum LiveAPIVersion: String, Sendable, CaseIterable {
    case v1beta, v1, v1alpha
}

/// How the device proves who it is.
public enum LiveAuthentication: Sendable {
    /// An API key, sent in the `x-goog-api-key` header (never in the URL).
    case apiKey(Secret)
    /// An ephemeral token fetched fresh for each new session from the owner's token server, so the
    /// real key never lives on the device. The answer is JSON holding the token (`token`, `name`,
    /// `accessToken` or `access_token`); `bearer`, if given, is sent as `Authorization: Bearer ...`.
    case tokenServer(url: String, bearer: Secret?)
    /// For development: mint an ephemeral token from a key (`POST v1alpha/auth_tokens`) per session.
    case mintedToken(apiKey: Secret)
}

/// Everything a Gemini Live session needs to know.
public struct GeminiLiveConfiguration: Sendable {
    /// The service's base URL (`wss://host[:port][/prefix]`); the standard path is appended.
    public var endpoint: String
    public var apiVersion: LiveAPIVersion
    public var authentication: LiveAuthentication
    /// The setup message (its resumption handle is filled in per connection).
    public var setup: Setup
    /// How long to wait for `setupComplete`.
    public var setupTimeout: Duration
    /// While the service owes a reply (the model is answering, or it heard the user or was handed a closed
    /// question, and no tool runs), this long without any frame means the connection stalled: it is dropped and resumed.
    /// Noticed between one and two periods of silence. Nil: rely on the transport's pings only.
    public var stallTimeout: Duration?
    /// The newest audio a resumable update without `lastConsumedClientMessageIndex` is taken not to
    /// cover (it may still have been in flight): sent again after a resume, so the service may hear it
    /// twice. Real-time input only: input sent ahead of real time would repeat audio of the future.
    /// See ``UnconfirmedInput``.
    public var confirmationMargin: Duration
    /// Audio sent within this long before a resumable update arrived is taken not to be covered by it
    /// either (a round trip): what matters while a backlog goes out faster than real time. Zero for
    /// input sent ahead of real time (as for ``confirmationMargin``).
    public var confirmationLag: Duration
    /// A backlog (audio held over a switch, audio sent again after a resume) goes out at most this many
    /// times faster than real time, so that a handle issued while the service reads it covers what the
    /// session takes it to (see ``CatchUpPacer``). Nil: at once (input that is not real time).
    public var catchUpRate: Double?
    /// Microphone audio held while switching connections (sent after the new setup completes).
    public var inputBound: Duration
    /// Largest audio message, as a duration of 16 kHz audio (a backlog is sent in chunks this big).
    public var maxAudioChunk: Duration
    /// Smallest audio message: microphone frames are gathered until this much is queued (anything else
    /// sent flushes them). Fewer, larger messages wake the device less; zero sends each frame alone.
    /// 60 ms (three 20 ms capture periods, about what Google's own examples send) costs the service's
    /// end-of-speech detection at most 40 ms over sending every period, and a third of the messages
    /// (each one is a TLS record and a write) of 20 ms ones.
    public var minAudioChunk: Duration
    /// How the session reconnects.
    public var link: LinkSettings
    /// A handle to resume on the first connection (e.g. from a ``ResumptionStore``).
    public var initialHandle: String?
    /// Where handles are persisted, if anywhere.
    public var resumptionStore: ResumptionStore?
    /// Asked when the server says goAway: false ends the session instead of resuming.
    public var resumeAfterGoAway: @Sendable () -> Bool
    /// What was said, kept to seed a fresh session when a resumption is refused (models with
    /// ``LiveModelProfile/historyConfig``); nil: a refused resumption starts with nothing (the kiosk).
    public var history: ConversationHistory?

    public init(
        endpoint: String = "wss://generativelanguage.googleapis.com",
        apiVersion: LiveAPIVersion = .v1beta,
        authentication: LiveAuthentication,
        setup: Setup,
        setupTimeout: Duration = .seconds(15),
        stallTimeout: Duration? = .seconds(15),
        confirmationMargin: Duration = .milliseconds(300),
        confirmationLag: Duration = .milliseconds(300),
        catchUpRate: Double? = 4,
        inputBound: Duration = .seconds(30),
        maxAudioChunk: Duration = .milliseconds(100),
        minAudioChunk: Duration = .milliseconds(60),
        link: LinkSettings = LinkSettings(),
        initialHandle: String? = nil,
        resumptionStore: ResumptionStore? = nil,
        resumeAfterGoAway: @escaping @Sendable () -> Bool = { true },
        history: ConversationHistory? = nil
    ) {
        self.endpoint = endpoint
        self.apiVersion = apiVersion
        self.authentication = authentication
        self.setup = setup
        self.setupTimeout = setupTimeout
        self.stallTimeout = stallTimeout
        self.confirmationMargin = confirmationMargin
        self.confirmationLag = confirmationLag
        self.catchUpRate = catchUpRate
        self.inputBound = inputBound
        self.maxAudioChunk = maxAudioChunk
        self.minAudioChunk = minAudioChunk
        self.link = link
        self.initialHandle = initialHandle
        self.resumptionStore = resumptionStore
        self.resumeAfterGoAway = resumeAfterGoAway
        self.history = history
    }

    /// What the configured model accepts and how it behaves.
    public var profile: LiveModelProfile { LiveModelProfile.forModel(setup.model) }

    /// The WebSocket URL for this configuration (`constrained` for ephemeral tokens).
    /// A query in the endpoint stays after the appended path.
    public func webSocketURL(constrained: Bool) -> String {
        let version = constrained ? LiveAPIVersion.v1alpha : apiVersion
        let method = constrained ? "BidiGenerateContentConstrained" : "BidiGenerateContent"
        return EndpointURL.join(
            endpoint,
            path: "/ws/google.ai.generativelanguage.\(version.rawValue).GenerativeService.\(method)"
        )
    }

    /// The HTTPS base matching the endpoint (`wss` → `https`, `ws` → `http`), for token minting.
    public var httpBase: String {
        var base = endpoint
        while base.hasSuffix("/") { base.removeLast() }
        if base.hasPrefix("wss://") { return "https://" + base.dropFirst(6) }
        if base.hasPrefix("ws://") { return "http://" + base.dropFirst(5) }
        return base
    }

    /// Where ephemeral tokens are minted: `v1alpha/auth_tokens` on ``httpBase`` (a query in the endpoint stays
    /// after the path).
    public var tokenMintingURL: String { EndpointURL.join(httpBase, path: "/v1alpha/auth_tokens") }
}

/// Gets ephemeral tokens: from the owner's token server, or minted from a key for development.
public struct EphemeralTokenSource: Sendable {
    let http: any HTTPClient
    let clock: any Clock<Duration>

    public init(http: any HTTPClient, clock: any Clock<Duration> = ContinuousClock()) {
        self.http = http
        self.clock = clock
    }

    /// A fresh token for one new session.
    public func token(for configuration: GeminiLiveConfiguration) async throws -> Secret {
        switch configuration.authentication {
        case .apiKey(let key):
            return key
        case .tokenServer(let url, let bearer):
            var headers: [(name: String, value: String)] = [("Accept", "application/json")]
            if let bearer { headers.append(("Authorization", "Bearer \(bearer.reveal())")) }
            let body = try JSONEncoder().encode(["model": configuration.setup.model])
            let response = try await send(
                HTTPRequest(method: "POST", url: url, headers: headers, body: body),
                what: "token server",
                hiding: bearer.map { [$0] } ?? []
            )
            return try Self.extractToken(response.body, what: "the token server's answer")
        case .mintedToken(let apiKey):
            let now = Date()
            let request = MintRequest(
                uses: 1,
                expireTime: Self.rfc3339(now.addingTimeInterval(30 * 60)),
                newSessionExpireTime: Self.rfc3339(now.addingTimeInterval(60))
            )
            let response = try await send(
                HTTPRequest(
                    method: "POST",
                    url: configuration.tokenMintingURL,
                    headers: [("x-goog-api-key", apiKey.reveal())],
                    body: try JSONEncoder().encode(request)
                ),
                what: "token minting",
                hiding: [apiKey]
            )
            return try Self.extractToken(response.body, what: "the auth_tokens answer")
        }
    }

    /// Sends `request`; an answer other than 2xx throws its failure, with `secrets` hidden in what it quotes.
    private func send(_ request: HTTPRequest, what: String, hiding secrets: [Secret]) async throws -> HTTPResponse {
        let response: HTTPResponse
        do {
            response = try await http.send(request)
        } catch {
            throw SessionFailure.fromHTTPClient(error, what: what)
        }
        guard (200..<300).contains(response.status) else {
            throw SessionFailure.fromHTTP(status: response.status, what: what, body: response.body, hiding: secrets)
        }
        return response
    }

    struct MintRequest: Encodable {
        var uses: Int
        var expireTime: String
        var newSessionExpireTime: String
    }

    /// The token in a JSON answer: `token`, `name`, `accessToken` or `access_token`.
    static func extractToken(_ body: Data, what: String) throws -> Secret {
        guard let json = try? JSONDecoder().decode(JSONValue.self, from: body) else {
            throw SessionFailure(.transient, "\(what) is not JSON")
        }
        for key in ["token", "name", "accessToken", "access_token"] {
            if let token = json[key]?.stringValue, !token.isEmpty { return Secret(token) }
        }
        throw SessionFailure(.configuration, "\(what) holds no token (expected a \"token\" or \"name\" field)")
    }

    static func rfc3339(_ date: Date) -> String {
        date.formatted(.iso8601)
    }
}
