import HarkCore
import HarkSimulatorKit

/// A Live API WebSocket endpoint.
public struct LiveEndpoint: Sendable, Hashable {
    /// `v1`, `v1beta` or `v1alpha`.
    public var version: String
    /// True for `BidiGenerateContentConstrained` (ephemeral tokens, `v1alpha` only).
    public var constrained: Bool
    /// Whatever precedes `/ws/` in the path (empty, or e.g. `/prefix`).
    public var prefix: String

    public init(version: String, constrained: Bool = false, prefix: String = "") {
        self.version = version
        self.constrained = constrained
        self.prefix = prefix
    }

    /// The endpoint's path.
    public var path: String {
        prefix + "/ws/google.ai.generativelanguage.\(version).GenerativeService.BidiGenerateContent"
            + (constrained ? "Constrained" : "")
    }
}

/// The credentials a request presented. Values are ``Secret``s: they never reach a log.
public struct LiveCredentials: Sendable, Hashable {
    /// From `x-goog-api-key` or `key=`.
    public var apiKey: Secret?
    /// True when the key came in the query.
    public var apiKeyInQuery: Bool = false
    /// From `Authorization: Token ...` or `access_token=`.
    public var token: Secret?
    /// True when the token came in the query.
    public var tokenInQuery: Bool = false

    public init(apiKey: Secret? = nil, token: Secret? = nil) {
        self.apiKey = apiKey
        self.token = token
    }

    /// How the client authenticated, without values: `api key (header)`, `token (query)`, `none`, ...
    public var summary: String {
        var parts: [String] = []
        if apiKey != nil { parts.append("api key (\(apiKeyInQuery ? "query" : "header"))") }
        if token != nil { parts.append("token (\(tokenInQuery ? "query" : "header"))") }
        return parts.isEmpty ? "none" : parts.joined(separator: ", ")
    }

    /// Reads the credentials of a request: headers first, then the query.
    public init(headers: [(name: String, value: String)], query: String?) {
        self.init()
        for (name, value) in headers {
            switch name.lowercased() {
            case "x-goog-api-key" where apiKey == nil:
                apiKey = Secret(value.trimmedWhitespace)
            case "authorization" where token == nil:
                let trimmed = value.trimmedWhitespace
                for scheme in ["Token ", "Bearer "] where trimmed.hasPrefix(scheme) {
                    token = Secret(String(trimmed.dropFirst(scheme.count)).trimmedWhitespace)
                }
            default:
                break
            }
        }
        for (name, value) in LiveRouting.queryItems(query) {
            if name == "key", apiKey == nil {
                apiKey = Secret(value)
                apiKeyInQuery = true
            } else if name == "access_token", token == nil {
                token = Secret(value)
                tokenInQuery = true
            }
        }
    }
}

/// Where a request goes.
public enum LiveRoute: Sendable, Hashable {
    /// A Live API WebSocket endpoint.
    case live(LiveEndpoint)
    /// `POST /v1alpha/auth_tokens`: mint an ephemeral token.
    case authTokens
    /// Anything else: 404.
    case notFound
}

/// Request routing: which paths the simulator serves.
public enum LiveRouting {
    static let versions: Set<String> = ["v1", "v1beta", "v1alpha"]

    /// The route of `target` (a request target: path and optional query).
    ///
    /// `[PREFIX]/ws/google.ai.generativelanguage.{v1,v1beta,v1alpha}.GenerativeService.BidiGenerateContent`,
    /// `...BidiGenerateContentConstrained` on `v1alpha` only, and `[PREFIX]/v1alpha/auth_tokens`.
    public static func route(_ target: String) -> LiveRoute {
        let path = split(target).path
        if path.hasSuffix("/v1alpha/auth_tokens") { return .authTokens }
        guard let range = path.ranges(of: "/ws/").last else { return .notFound }
        let prefix = String(path[..<range.lowerBound])
        var rest = path[range.upperBound...]
        let namespace = "google.ai.generativelanguage."
        guard rest.hasPrefix(namespace) else { return .notFound }
        rest = rest.dropFirst(namespace.count)
        guard let dot = rest.firstIndex(of: ".") else { return .notFound }
        let version = String(rest[..<dot])
        let method = rest[rest.index(after: dot)...]
        guard versions.contains(version) else { return .notFound }
        switch method {
        case "GenerativeService.BidiGenerateContent":
            return .live(LiveEndpoint(version: version, constrained: false, prefix: prefix))
        case "GenerativeService.BidiGenerateContentConstrained" where version == "v1alpha":
            return .live(LiveEndpoint(version: version, constrained: true, prefix: prefix))
        default:
            return .notFound
        }
    }

    /// Splits a request target into its path and query.
    public static func split(_ target: String) -> (path: String, query: String?) {
        RequestTarget.split(target)
    }

    /// The query's name/value pairs, percent-decoded (`+` as space).
    public static func queryItems(_ query: String?) -> [(name: String, value: String)] {
        RequestTarget.queryItems(query)
    }
}
