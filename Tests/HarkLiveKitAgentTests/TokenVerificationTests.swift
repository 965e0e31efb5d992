import Foundation
import HarkCore
import HarkLiveKitHelper
import HarkLiveKitWire
import HarkTestKit
import Testing

/// A token minted here, verified by an implementation that shares no code with Hark's: PyJWT, in the LiveKit
/// stand-in's Python environment (the library LiveKit's own Python tooling uses), which checks the HS256 signature
/// with the secret and decodes the claims.
@Suite(.enabled(if: LiveKitStandIn.available, "\(LiveKitStandIn.missing)"))
struct TokenVerificationTests {
    static let python =
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path + "/.venv-livekit-standin/bin/python"

    /// The claims PyJWT finds in `token` when it checks the signature with `secret`; throws when it refuses it.
    private func verify(_ token: String, secret: String) async throws -> (
        status: Int32, claims: JSONValue?, text: String
    ) {
        let script = """
            import json, sys, jwt
            claims = jwt.decode(sys.argv[1], sys.argv[2], algorithms=["HS256"], options={"verify_exp": False, "verify_nbf": False})
            print(json.dumps(claims))
            """
        let child = try await ChildProcess.run(Self.python, ["-c", script, token, secret], separateErrors: true)
        let claims = child.status == 0 ? try? JSONDecoder().decode(JSONValue.self, from: child.output) : nil
        return (child.status, claims, child.text + child.errorText)
    }

    @Test func pyJWTAcceptsTheSignatureAndReadsTheGrants() async throws {
        let secret = "a-secret-of-some-length-0123456789"
        let token = try LiveKitToken.mint(
            LiveKitJoin(room: "kiosk-1", identity: "hark-kiosk", name: "Hark", agentName: "tutor"),
            apiKey: "APIkey",
            apiSecret: Secret(secret),
            lifetime: .seconds(3600),
            now: Date(timeIntervalSince1970: 1_800_000_000)
        ).reveal()
        let verified = try await verify(token, secret: secret)
        #expect(verified.status == 0, "\(verified.text)")
        let claims = try #require(verified.claims, "\(verified.text)")
        #expect(claims["iss"]?.stringValue == "APIkey")
        #expect(claims["sub"]?.stringValue == "hark-kiosk")
        #expect(claims["exp"]?.numberValue == 1_800_003_600)
        #expect(claims["video"]?["room"]?.stringValue == "kiosk-1")
        #expect(claims["video"]?["roomJoin"] == .bool(true))
        #expect(claims["roomConfig"]?["agents"]?.arrayValue?.first?["agentName"]?.stringValue == "tutor")
        // Another secret: PyJWT refuses the signature.
        let forged = try await verify(token, secret: secret + "x")
        #expect(forged.status != 0 && forged.text.contains("Signature verification failed"), "\(forged.text)")
    }
}
