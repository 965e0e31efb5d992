import Foundation
import HarkCore
import HarkLiveKitWire
import HarkPlatform

/// LiveKit access tokens: HS256 JSON Web Tokens signed with the project's API secret (development only: `hark`
/// hands the helper the key and secret it loaded, and the helper signs, so the signing code and the full Foundation
/// it needs stay out of `hark`).
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
        let signature = SHA256.hmac(key: apiSecret.reveal().utf8, message: signingInput.utf8)
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
