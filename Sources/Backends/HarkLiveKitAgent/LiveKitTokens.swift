import HarkCore
import HarkLiveKitWire

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

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

    /// The server's URL and the credential for `join`: a token from a token server, or what the helper mints one
    /// from (the signing code lives there: it would bring full Foundation into `hark`). Throws a ``SessionFailure``:
    /// authentication when the token server refused the device's credential, configuration when its answer cannot
    /// be used.
    func fetch(
        _ join: LiveKitJoin,
        http: any HTTPClient,
        allowInsecure: Bool
    ) async throws -> (url: String, credential: LiveKitCredential) {
        switch self {
        case .mint(let serverURL, let apiKey, let apiSecret, let lifetime):
            let seconds = UInt32(clamping: max(60, lifetime.components.seconds))
            return (serverURL, .mint(apiKey: apiKey, apiSecret: apiSecret, lifetimeSeconds: seconds))
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
            let (address, token) = try await request(
                url: url,
                headers: headers,
                body: .object(body),
                what: "the token endpoint",
                hiding: credential.map { [$0] } ?? [],
                serverURL: serverURL,
                http: http,
                allowInsecure: allowInsecure
            )
            return (address, .token(token))
        case .sandbox(let url, let id):
            var body: [String: JSONValue] = [
                "roomName": .string(join.room),
                "participantName": .string(join.name),
            ]
            if let agent = join.agentName { body["agentName"] = .string(agent) }
            let (address, token) = try await request(
                url: url,
                headers: [("Content-Type", "application/json"), ("X-Sandbox-ID", id.reveal())],
                body: .object(body),
                what: "the sandbox token server",
                hiding: [id],
                http: http,
                allowInsecure: allowInsecure
            )
            return (address, .token(token))
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
