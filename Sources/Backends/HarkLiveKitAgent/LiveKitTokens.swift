import Crypto
import HarkCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Who joins which room, and which agent is asked to come.
public struct LiveKitJoin: Sendable, Hashable {
    /// The room's name.
    public var room: String
    /// The device's identity in the room (the token's `sub`).
    public var identity: String
    /// Its display name.
    public var name: String
    /// The agent to dispatch to the room (`roomConfig.agents[].agentName`); nil: whatever the project dispatches.
    public var agentName: String?

    public init(room: String, identity: String, name: String, agentName: String?) {
        self.room = room
        self.identity = identity
        self.name = name
        self.agentName = agentName
    }
}

/// Where a device gets the server's URL and its token for a room.
public enum LiveKitTokenSource: Sendable {
    /// Your backend's token endpoint: `POST {room_name, participant_identity, participant_name, room_config}` →
    /// `{server_url, participant_token}`; `credential`, when given, goes in `Authorization: Bearer`.
    /// `serverURL` (the configured server) is used when the answer names none.
    case endpoint(url: String, credential: Secret?, serverURL: String? = nil)
    /// LiveKit Cloud's sandbox token server (development): `POST` with `X-Sandbox-ID` →
    /// `{serverUrl, participantToken}`.
    case sandbox(url: String, id: Secret)
    /// A token minted on the device from the project's API key and secret (development only: whoever reads the
    /// secret can join any room of the project).
    case mint(serverURL: String, apiKey: String, apiSecret: Secret, lifetime: Duration)

    /// LiveKit Cloud's sandbox token server.
    public static let sandboxURL = "https://cloud-api.livekit.io/api/sandbox/connection-details"

    /// The server's URL and a token for `join`. Throws a ``SessionFailure``: authentication when the token
    /// server refused the device's credential, configuration when its answer cannot be used.
    func fetch(
        _ join: LiveKitJoin,
        http: any HTTPClient,
        allowInsecure: Bool,
        now: Date = Date()
    ) async throws -> (url: String, token: Secret) {
        switch self {
        case .mint(let serverURL, let apiKey, let apiSecret, let lifetime):
            let token = try LiveKitToken.mint(
                join,
                apiKey: apiKey,
                apiSecret: apiSecret,
                lifetime: lifetime,
                now: now
            )
            return (serverURL, token)
        case .endpoint(let url, let credential, let serverURL):
            var body: [String: JSONValue] = [
                "room_name": .string(join.room),
                "participant_identity": .string(join.identity),
                "participant_name": .string(join.name),
            ]
            if let agent = join.agentName {
                body["room_config"] = .object(["agents": .array([.object(["agent_name": .string(agent)])])])
            }
            var headers = [("Content-Type", "application/json")]
            if let credential { headers.append(("Authorization", "Bearer \(credential.reveal())")) }
            return try await request(
                url: url,
                headers: headers,
                body: .object(body),
                what: "the token endpoint",
                hiding: credential.map { [$0] } ?? [],
                serverURL: serverURL,
                http: http,
                allowInsecure: allowInsecure
            )
        case .sandbox(let url, let id):
            var body: [String: JSONValue] = [
                "roomName": .string(join.room),
                "participantName": .string(join.name),
            ]
            if let agent = join.agentName { body["agentName"] = .string(agent) }
            return try await request(
                url: url,
                headers: [("Content-Type", "application/json"), ("X-Sandbox-ID", id.reveal())],
                body: .object(body),
                what: "the sandbox token server",
                hiding: [id],
                http: http,
                allowInsecure: allowInsecure
            )
        }
    }

    /// The largest answer read from a token server.
    static let answerLimit = 64 * 1024
    /// The longest token taken (a LiveKit token is some hundreds of bytes).
    static let tokenLimit = 16 * 1024

    private func request(
        url: String,
        headers: [(String, String)],
        body: JSONValue,
        what: String,
        hiding secrets: [Secret],
        serverURL: String? = nil,
        http: any HTTPClient,
        allowInsecure: Bool
    ) async throws -> (url: String, token: Secret) {
        let response: HTTPResponse
        do {
            response = try await http.send(
                HTTPRequest(
                    method: "POST",
                    url: url,
                    headers: headers.map { (name: $0.0, value: $0.1) },
                    body: try JSONEncoder().encode(body),
                    timeout: .seconds(10)
                )
            )
        } catch {
            throw SessionFailure.fromHTTPClient(error, what: what)
        }
        guard (200..<300).contains(response.status) else {
            throw SessionFailure.fromHTTP(status: response.status, what: what, body: response.body, hiding: secrets)
        }
        return try Self.connectionDetails(
            response.body,
            what: what,
            allowInsecure: allowInsecure,
            serverURL: serverURL
        )
    }

    /// The server URL and token in a token server's answer (`server_url` / `serverUrl`, `participant_token` /
    /// `participantToken`), checked: a bounded token, a `wss://` URL (or `ws://` to this machine, or anywhere with
    /// `allowInsecure`; `https://` and `http://` are taken as the same); `serverURL` when the answer names no server.
    static func connectionDetails(_ body: Data, what: String, allowInsecure: Bool, serverURL: String? = nil) throws
        -> (url: String, token: Secret)
    {
        guard body.count <= answerLimit, let json = try? JSONDecoder().decode(JSONValue.self, from: body) else {
            throw SessionFailure(.configuration, "\(what): the answer is not a JSON object")
        }
        let url = json["server_url"]?.stringValue ?? json["serverUrl"]?.stringValue ?? serverURL
        let token = json["participant_token"]?.stringValue ?? json["participantToken"]?.stringValue
        guard let url, !url.isEmpty, url.utf8.count <= 2048 else {
            throw SessionFailure(.configuration, "\(what): the answer holds no server_url (and livekit_url is not set)")
        }
        guard let token, !token.isEmpty, token.utf8.count <= tokenLimit,
            token.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F })
        else {
            throw SessionFailure(.configuration, "\(what): the answer holds no usable participant_token")
        }
        let serverURL = webSocketURL(url)
        if let problem = EndpointPolicy.check(url: serverURL, allowInsecure: allowInsecure) {
            throw SessionFailure(.configuration, "\(what): server_url: \(problem)")
        }
        return (serverURL, Secret(token))
    }

    /// `wss://` for `https://`, `ws://` for `http://`; anything else unchanged.
    static func webSocketURL(_ url: String) -> String {
        if url.hasPrefix("https://") { return "wss://" + url.dropFirst("https://".count) }
        if url.hasPrefix("http://") { return "ws://" + url.dropFirst("http://".count) }
        return url
    }
}

/// LiveKit access tokens: HS256 JSON Web Tokens signed with the project's API secret.
public enum LiveKitToken {
    /// A token for `join`: `iss` the API key, `sub` the identity, `name`, `nbf` and `exp`, the `video` grant to
    /// join `room` and publish, subscribe and send data, and `roomConfig.agents` naming the agent to dispatch.
    public static func mint(
        _ join: LiveKitJoin,
        apiKey: String,
        apiSecret: Secret,
        lifetime: Duration,
        now: Date
    ) throws(SessionFailure) -> Secret {
        let issued = Int64(now.timeIntervalSince1970)
        var claims: [String: JSONValue] = [
            "iss": .string(apiKey),
            "sub": .string(join.identity),
            "name": .string(join.name),
            "jti": .string(join.identity),
            "nbf": .number(Double(issued - 10)),
            "exp": .number(Double(issued + max(60, lifetime.components.seconds))),
            "video": .object([
                "roomJoin": .bool(true),
                "room": .string(join.room),
                "canPublish": .bool(true),
                "canSubscribe": .bool(true),
                "canPublishData": .bool(true),
            ]),
        ]
        if let agent = join.agentName {
            claims["roomConfig"] = .object(["agents": .array([.object(["agentName": .string(agent)])])])
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let header: JSONValue = .object(["alg": .string("HS256"), "typ": .string("JWT")])
        guard let headerBytes = try? encoder.encode(header),
            let claimBytes = try? encoder.encode(JSONValue.object(claims))
        else { throw SessionFailure(.configuration, "a LiveKit token's claims cannot be written") }
        let signingInput = base64URL(headerBytes) + "." + base64URL(claimBytes)
        let key = SymmetricKey(data: Data(apiSecret.reveal().utf8))
        let signature = HMAC<SHA256>.authenticationCode(for: Data(signingInput.utf8), using: key)
        return Secret(signingInput + "." + base64URL(Data(signature)))
    }

    /// `data` in base64url without padding (RFC 7515).
    static func base64URL(_ data: Data) -> String {
        var text = data.base64EncodedString()
        text = text.replacing("+", with: "-").replacing("/", with: "_")
        while text.hasSuffix("=") { text.removeLast() }
        return text
    }
}
