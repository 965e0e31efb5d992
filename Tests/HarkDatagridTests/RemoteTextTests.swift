import Foundation
import HarkBackendKit
import HarkCore
import HarkDatagrid
import HarkTestKit
import Testing

/// What the Datagrid session logs and reports of the service is printable and bounded; a relative hand-off URL
/// keeps the base's query after the path.
@Suite struct DatagridRemoteTextTests {
    static func isPrintable(_ text: String) -> Bool {
        text.unicodeScalars.allSatisfy { !RemoteText.needsEscaping($0) }
    }

    static func configuration(baseURL: String = "https://dg.test", mode: DatagridConnectionMode = .direct)
        -> DatagridConfiguration
    {
        DatagridConfiguration(
            apiKey: Secret("dg-key-0123456789"),
            baseURL: baseURL,
            mode: mode,
            directFallback: false,
            start: DatagridStart(agentId: "agent_test"),
            link: LinkSettings(maxConsecutiveFailures: 1, randomSeed: 1)
        )
    }

    /// Runs a session until it gives up (one failure is enough); returns its failure.
    static func runUntilGivingUp(
        _ configuration: DatagridConfiguration,
        transport: ScriptedTransport,
        http: (any HTTPClient)? = nil,
        logs: LogCapture
    ) async throws -> SessionFailure? {
        try await failureOfRun(
            DatagridSession(configuration: configuration, transport: transport, http: http, logger: logs.logger())
        )
    }

    @Test func theServicesErrorAndNamesReachTheLogEscapedAndBounded() async throws {
        let message = "quota\n2026-01-01 info hark: fine\u{1B}[2J" + String(repeating: "m", count: 1 << 20)
        let logs = LogCapture()
        let transport = ScriptedTransport([
            .init(
                frames: [
                    .text(#"{"type": "started", "payload": {"session_id": "s\u001b[2J", "conversation_id": "c1"}}"#),
                    .text(#"{"type": "ready"}"#),
                    .text(#"{"type": "evil\u001b[31m"}"#),
                    .text(#"{"type": "transcript", "payload": {"role": "narrator\n", "text": "hi"}}"#),
                    .text(try Self.errorFrame(code: "rate\n\u{1B}]0;x\u{07}", message: message)),
                ],
                close: WebSocketClose(code: 1011, reason: "x\ny")
            )
        ])
        let failure = try #require(await Self.runUntilGivingUp(Self.configuration(), transport: transport, logs: logs))
        #expect(failure.kind == .transient)
        #expect(
            failure.message.hasPrefix("Datagrid error rate\\n\\u{1B}]0;x\\u{07}: quota\\n2026-01-01 info hark: fine")
        )
        #expect(failure.message.unicodeScalars.count <= 600)
        let lines = logs.all
        #expect(lines.allSatisfy(Self.isPrintable), "\(lines.filter { !Self.isPrintable($0) }.map { $0.prefix(200) })")
        #expect(lines.allSatisfy { $0.unicodeScalars.count < 2_000 })
        #expect(lines.contains { $0.contains("the service reported an error: Datagrid error rate\\n") })
        #expect(lines.contains { $0.contains("started: session s\\u{1B}[2J") })
        #expect(lines.contains { $0.contains("message type evil\\u{1B}[31m") })
        #expect(lines.contains { $0.contains("unknown role narrator\\n skipped") })
    }

    /// An `error` message as the service frames it (JSON escapes the control characters on the wire).
    static func errorFrame(code: String, message: String) throws -> String {
        struct Frame: Encodable {
            var type = "error"
            var payload: [String: String]
        }
        return String(
            decoding: try JSONEncoder().encode(Frame(payload: ["code": code, "message": message])),
            as: UTF8.self
        )
    }

    @Test func aCloseReasonReachesTheLogEscaped() async throws {
        let logs = LogCapture()
        let transport = ScriptedTransport([
            .init(frames: [.text(#"{"type": "ready"}"#)], close: WebSocketClose(code: 1011, reason: "bye\n\u{1B}[2J"))
        ])
        let failure = try await Self.runUntilGivingUp(Self.configuration(), transport: transport, logs: logs)
        #expect(failure?.message == "connection closed (close 1011: bye\\n\\u{1B}[2J)")
        #expect(logs.all.allSatisfy(Self.isPrintable))
        #expect(logs.all.contains { $0.contains("connection closed by the service: 1011 bye\\n\\u{1B}[2J") })
    }

    @Test func aRelativeHandoffURLKeepsTheBasesQueryAfterItsPath() async throws {
        let http = ScriptedHTTPClient(HTTPResponse(status: 200, body: Data(#"{"url": "/ws/voice?token=vt_1"}"#.utf8)))
        let transport = ScriptedTransport([])
        _ = try await Self.runUntilGivingUp(
            Self.configuration(baseURL: "https://dg.test/base?team=t1", mode: .handoff),
            transport: transport,
            http: http,
            logs: LogCapture()
        )
        #expect(http.urls == ["https://dg.test/base/v1/voice?team=t1"])
        #expect(transport.urls == ["wss://dg.test/base/ws/voice?team=t1&token=vt_1"])
    }

    @Test func aHandoffErrorBodyIsQuotedEscapedAndBounded() async throws {
        let body = Data(#"{"error": "invalid key\n\u001b[2J"}"#.utf8)
        let failure = try await Self.runUntilGivingUp(
            Self.configuration(mode: .handoff),
            transport: ScriptedTransport([]),
            http: ScriptedHTTPClient(HTTPResponse(status: 401, body: body)),
            logs: LogCapture()
        )
        #expect(failure?.kind == .authentication)
        #expect(failure?.message == "voice session hand-off: credential rejected (HTTP 401): invalid key\\n\\u{1B}[2J")
        let echoed = try await Self.runUntilGivingUp(
            Self.configuration(mode: .handoff),
            transport: ScriptedTransport([]),
            http: ScriptedHTTPClient(HTTPResponse(status: 403, body: Data("no access for dg-key-0123456789".utf8))),
            logs: LogCapture()
        )
        #expect(echoed?.message == "voice session hand-off: credential rejected (HTTP 403): no access for <redacted>")
        let huge = Data(repeating: UInt8(ascii: "q"), count: 1 << 20)
        let cut = try await Self.runUntilGivingUp(
            Self.configuration(mode: .handoff),
            transport: ScriptedTransport([]),
            http: ScriptedHTTPClient(HTTPResponse(status: 500, body: huge)),
            logs: LogCapture()
        )
        #expect(cut.map { $0.message.unicodeScalars.count < 300 } == true)
    }

    @Test func aHugeServiceErrorIsBoundedWhenClassified() {
        let failure = DatagridSessionMachine.classify(
            DatagridError(message: String(repeating: "\u{1B}", count: 1 << 20), code: "invalid_token")
        )
        #expect(failure.kind == .authentication)
        #expect(Self.isPrintable(failure.message))
        #expect(failure.message.unicodeScalars.count <= RemoteText.defaultLimit + 40)
    }
}
