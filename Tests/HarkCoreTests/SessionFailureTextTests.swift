import Foundation
import HarkBackendKit
import HarkCore
import HarkTestKit
import Testing

/// What a failure or a log line quotes of the service: printable (no raw control character) and bounded.
@Suite struct SessionFailureTextTests {
    /// A close reason that would forge a log line and clear the terminal.
    static let hostile = "bye\n2026-01-01 info hark: all good\u{1B}[2J\u{9B}31m"

    /// True when `text` holds no character ``RemoteText`` escapes.
    static func isPrintable(_ text: String) -> Bool {
        text.unicodeScalars.allSatisfy { !RemoteText.needsEscaping($0) }
    }

    @Test func aCloseReasonIsQuotedEscaped() {
        for code in [1007, 1008, 1011] {
            let failure = SessionFailure.fromClose(code: code, reason: Self.hostile)
            #expect(Self.isPrintable(failure.message))
            #expect(failure.message.contains("bye\\n2026-01-01 info hark: all good\\u{1B}[2J\\u{9B}31m"))
            #expect(failure.closeCode == code)
        }
    }

    @Test func aHugeCloseReasonIsCut() {
        let failure = SessionFailure.fromClose(code: 1011, reason: String(repeating: "x", count: 1 << 20))
        #expect(failure.message.unicodeScalars.count < 300)
        #expect(failure.message.hasPrefix("connection closed (close 1011: xxx"))
        #expect(failure.message.contains("[cut, 1048576 bytes in all]"))
    }

    @Test func everyFailureMessageIsPrintableAndBounded() {
        let failure = SessionFailure(.transient, "connection failed: " + String(repeating: "\u{1B}", count: 1 << 20))
        #expect(Self.isPrintable(failure.message))
        #expect(failure.message.unicodeScalars.count <= SessionFailure.messageLimit)
        #expect(failure.message.hasPrefix("connection failed: \\u{1B}"))
        #expect(SessionFailure(.transient, "plain words").message == "plain words")
    }

    @Test func anHTTPErrorQuotesWhatTheServiceSaidEscaped() throws {
        let google = Data(
            #"{"error": {"code": 400, "message": "API key not valid.\n\u001b[2J", "status": "INVALID_ARGUMENT"}}"#.utf8
        )
        let failure = SessionFailure.fromHTTP(status: 400, what: "token minting", body: google)
        #expect(failure.kind == .configuration)
        #expect(failure.message == "token minting: request rejected (HTTP 400): API key not valid.\\n\\u{1B}[2J")
        let flat = SessionFailure.fromHTTP(status: 401, what: "hand-off", body: Data(#"{"message":"bad key"}"#.utf8))
        #expect(flat.kind == .authentication && flat.message == "hand-off: credential rejected (HTTP 401): bad key")
        let text = SessionFailure.fromHTTP(status: 503, what: "token server", body: Data("upstream\r\ndown".utf8))
        #expect(text.kind == .transient && text.message == "token server: HTTP 503: upstream\\r\\ndown")
        #expect(SessionFailure.fromHTTP(status: 429, what: "x").message == "x: HTTP 429")
        #expect(SessionFailure.fromHTTP(status: 500, what: "x", body: Data("  \n".utf8)).message == "x: HTTP 500")
    }

    @Test func aCredentialTheServerEchoesIsHidden() {
        let key = Secret("sk-live-0123456789")
        let json = Data(#"{"error": {"message": "invalid key sk-live-0123456789"}}"#.utf8)
        let failure = SessionFailure.fromHTTP(status: 401, what: "token minting", body: json, hiding: [key])
        #expect(failure.message == "token minting: credential rejected (HTTP 401): invalid key <redacted>")
        let text = Data("bad Bearer sk-live-0123456789\n".utf8)
        let plain = SessionFailure.fromHTTP(status: 403, what: "hand-off", body: text, hiding: [key, Secret("")])
        #expect(plain.message == "hand-off: credential rejected (HTTP 403): bad Bearer <redacted>")
    }

    @Test func aMegabyteErrorBodyIsCut() {
        var body = Data("\u{1B}]52;c;".utf8)
        body.append(Data(repeating: UInt8(ascii: "A"), count: 1 << 20))
        let failure = SessionFailure.fromHTTP(status: 502, what: "token server", body: body)
        #expect(Self.isPrintable(failure.message))
        #expect(failure.message.unicodeScalars.count < 250)
        #expect(failure.message.hasPrefix("token server: HTTP 502: \\u{1B}]52;c;AAA"))
        #expect(failure.message.hasSuffix("[cut, \(body.count) bytes in all]"))
        let json =
            Data(#"{"error":{"message":""#.utf8) + Data(repeating: UInt8(ascii: "B"), count: 1 << 20)
            + Data(#""}}"#.utf8)
        #expect(SessionFailure.fromHTTP(status: 400, what: "x", body: json).message.unicodeScalars.count < 250)
    }

    @Test func aDeclinedUpgradeAndAnHTTPAnswerShareOneStatusTable() {
        let expected: [Int: SessionFailure.Kind] = [
            400: .configuration, 401: .authentication, 403: .authentication, 404: .configuration,
            422: .configuration, 429: .transient, 500: .transient, 503: .transient, 302: .transient,
        ]
        for (status, kind) in expected {
            let declined = WebSocketConnectError(.upgradeDeclined, "h declined: HTTP \(status)", httpStatus: status)
            #expect(SessionFailure.fromConnect(declined).kind == kind, "\(status)")
            #expect(SessionFailure.fromHTTP(status: status, what: "x").kind == kind, "\(status)")
        }
    }

    @Test func unknownNamesFromTheWireAreLoggedEscapedAndOnlySoMany() {
        let logs = LogCapture()
        let runtime = SessionRuntime(inputBound: .seconds(1), clock: ManualClock(), logger: logs.logger())
        runtime.skippedUnknown(["message type evil\n\u{1B}[2J", "field " + String(repeating: "y", count: 1 << 16)])
        let first = logs.all
        #expect(first.count == 1)
        #expect(first.allSatisfy(Self.isPrintable))
        #expect(first[0].contains("message type evil\\n\\u{1B}[2J"))
        #expect(first[0].unicodeScalars.count < 400)
        // A new name in every frame: remembered (and logged) up to a bound, then only skipped.
        for index in 0..<1_000 { runtime.skippedUnknown(["field f\(index)"]) }
        #expect(logs.all.count <= SessionRuntime.loggedKindsLimit)
        runtime.skippedUnknown(["message type evil\n\u{1B}[2J"])
        #expect(logs.all.count <= SessionRuntime.loggedKindsLimit)
    }
}
