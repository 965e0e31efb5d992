import Foundation
import HarkCore
import HarkLiveSimulator
import HarkNet
import HarkSimulatorKit
import HarkTestKit
import Testing

/// What a simulator logs of what a client sent is printable: a client cannot forge the simulator's log lines.
@Suite struct SimulatorLogTests {
    static func isPrintable(_ text: String) -> Bool {
        text.unicodeScalars.allSatisfy { !RemoteText.needsEscaping($0) }
    }

    @Test func theLiveSimulatorLogsAClientsNamesAndCloseReasonEscaped() async throws {
        let logs = LogCapture()
        let simulator = LiveSimulator(configuration: LiveSimulatorConfiguration(), logger: logs.logger("simulator"))
        try await simulator.start()
        defer { Task { try? await simulator.stop() } }
        let url = simulator.baseURL + "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
        let setup = #"{"setup": {"model": "models/x\u001b[2J", "generationConfig": {"evil\u001b]0;x\u0007": 1}}}"#
        let transport = NIOWebSocketTransport(logger: LogCapture().logger())
        _ = try await transport.connect(WebSocketRequest(url: url)) { inbound, outbound in
            try await outbound.send(text: setup)
            _ = try await inbound.next()  // setupComplete
            try await outbound.close(code: 1000, reason: "bye\n2026-01-01 info forged\u{1B}[2J")
        }
        try await withDeadline(.seconds(10), "the simulator to log the close") {
            while !logs.all.contains(where: { $0.contains("client closed the connection") }) { await Task.yield() }
        }
        let lines = logs.all
        #expect(lines.allSatisfy(Self.isPrintable), "\(lines.filter { !Self.isPrintable($0) })")
        #expect(lines.contains { $0.contains("bye\\n2026-01-01 info forged\\u{1B}[2J") })
        #expect(lines.contains { $0.contains("models/x\\u{1B}[2J") })
        #expect(lines.contains { $0.contains("evil\\u{1B}]0;x\\u{07}") })
    }
}
