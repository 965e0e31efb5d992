import Foundation
import HarkBackendKit
import HarkCore
import HarkGemini
import HarkTestKit
import Testing

/// What the Live session logs and reports of the service is printable and bounded; token minting keeps an
/// endpoint's query after its path.
@Suite struct GeminiRemoteTextTests {
    static let hostile = "bye\n2026-01-01 info hark: all good\u{1B}[2J"

    static func isPrintable(_ text: String) -> Bool {
        text.unicodeScalars.allSatisfy { !RemoteText.needsEscaping($0) }
    }

    static func configuration(endpoint: String = "wss://live.test", store: ResumptionStore? = nil)
        -> GeminiLiveConfiguration
    {
        GeminiLiveConfiguration(
            endpoint: endpoint,
            authentication: .apiKey(Secret("test-key")),
            setup: Setup(model: "models/test"),
            stallTimeout: nil,
            link: LinkSettings(maxConsecutiveFailures: 1, randomSeed: 1),
            resumptionStore: store
        )
    }

    /// Runs a session over `transport` until it gives up (one failure is enough); returns its failure.
    static func runUntilGivingUp(
        _ configuration: GeminiLiveConfiguration,
        _ transport: ScriptedTransport,
        _ logs: LogCapture
    )
        async throws -> SessionFailure?
    {
        try await failureOfRun(
            GeminiLiveSession(configuration: configuration, transport: transport, logger: logs.logger())
        )
    }

    @Test func aCloseReasonReachesTheLogEscaped() async throws {
        let logs = LogCapture()
        let transport = ScriptedTransport([
            .init(frames: [.text(#"{"setupComplete": {}}"#)], close: WebSocketClose(code: 1011, reason: Self.hostile))
        ])
        let failure = try await Self.runUntilGivingUp(Self.configuration(), transport, logs)
        #expect(failure?.closeCode == 1011)
        #expect(failure.map { Self.isPrintable($0.message) } == true)
        let lines = logs.all
        #expect(lines.contains { $0.contains("connection closed by the service: 1011 bye\\n2026-01-01") })
        #expect(lines.allSatisfy(Self.isPrintable), "\(lines.filter { !Self.isPrintable($0) })")
    }

    @Test func aHandleThatCannotBeSavedIsLoggedNamingItsFileOnce() async throws {
        let logs = LogCapture()
        let folder = FileManager.default.temporaryDirectory.appending(path: "hark-missing-\(UUID().uuidString)")
        let path = folder.appending(path: "handle.json").path
        let transport = ScriptedTransport([
            .init(
                frames: [
                    .text(#"{"setupComplete": {}}"#),
                    .text(#"{"sessionResumptionUpdate": {"newHandle": "h1", "resumable": true}}"#),
                ],
                close: WebSocketClose(code: 1011, reason: "")
            )
        ])
        _ = try await Self.runUntilGivingUp(
            Self.configuration(store: ResumptionStore(path: path)),
            transport,
            logs
        )
        let warning = try #require(logs.all.first { $0.contains("resumption handle") })
        #expect(warning.components(separatedBy: path).count == 2, "\(warning)")
    }

    @Test func unknownNamesFromTheServiceAreEscapedInDebugLines() throws {
        let codec = LiveCodec()
        var machine = LiveSessionMachine(manualActivity: false)
        let activity = try codec.decodeServer(Data(#"{"voiceActivity": {"type": "X\n\u001b[2J"}}"#.utf8)).message
        let unknown = try codec.decodeServer(Data(#"{"brandNew\u001b]0;pwned\u0007": {}}"#.utf8)).message
        let lines = (machine.receive(activity) + machine.receive(unknown)).compactMap { action -> String? in
            if case .debug(let text) = action { text } else { nil }
        }
        #expect(lines.count == 2)
        #expect(lines.allSatisfy(Self.isPrintable), "\(lines)")
        #expect(lines.contains("unknown voiceActivity type X\\n\\u{1B}[2J"))
        #expect(lines.contains("skipped unknown message brandNew\\u{1B}]0;pwned\\u{07}"))
    }

    @Test func tokenMintingKeepsTheEndpointsQueryAfterThePath() async throws {
        let configuration = Self.configuration(endpoint: "wss://proxy.test/gemini?route=eu")
        #expect(configuration.tokenMintingURL == "https://proxy.test/gemini/v1alpha/auth_tokens?route=eu")
        var minting = configuration
        minting.authentication = .mintedToken(apiKey: Secret("real-key"))
        let http = ScriptedHTTPClient(HTTPResponse(status: 200, body: Data(#"{"name": "auth_tokens/t1"}"#.utf8)))
        let token = try await EphemeralTokenSource(http: http).token(for: minting)
        #expect(token.reveal() == "auth_tokens/t1")
        #expect(http.urls == ["https://proxy.test/gemini/v1alpha/auth_tokens?route=eu"])
    }

    @Test func aTokenServerErrorIsQuotedEscapedAndBounded() async throws {
        var configuration = Self.configuration()
        configuration.authentication = .tokenServer(url: "https://tokens.test/mint", bearer: nil)
        let huge = Data("denied\n\u{1B}[2J".utf8) + Data(repeating: UInt8(ascii: "z"), count: 1 << 20)
        let http = ScriptedHTTPClient(HTTPResponse(status: 403, body: huge))
        do {
            _ = try await EphemeralTokenSource(http: http).token(for: configuration)
            Issue.record("a 403 gave a token")
        } catch let failure as SessionFailure {
            #expect(failure.kind == .authentication)
            #expect(failure.message.hasPrefix("token server: credential rejected (HTTP 403): denied\\n\\u{1B}[2Jzzz"))
            #expect(Self.isPrintable(failure.message))
            #expect(failure.message.unicodeScalars.count < 300)
        }
    }
}
