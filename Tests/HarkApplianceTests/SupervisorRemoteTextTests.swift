import Foundation
import HarkAppliance
import HarkCore
import HarkIndicators
import HarkTestKit
import Synchronization
import Testing

/// What the supervisor logs and stores of a session's words (the model's, the service's) is printable.
@Suite struct SupervisorRemoteTextTests {
    static func isPrintable(_ text: String) -> Bool {
        text.unicodeScalars.allSatisfy { !RemoteText.needsEscaping($0) }
    }

    @Test func transcriptsToolNamesNoticesLinkFailuresAndTheLastErrorAreEscaped() async throws {
        let logs = LogCapture()
        let statusFile = FileManager.default.temporaryDirectory.appending(path: "hark-status-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: statusFile) }
        let rig = SupervisorTests.Rig(logger: logs.logger(), statusFile: statusFile.path, logTranscripts: true)
        rig.supervisor.inputs.post(.event(.button(.talkStart)))
        let session = try await withDeadline(.seconds(10), "a session to open") {
            while true {
                if let session = rig.sessions.list.withLock({ $0.first }) { return session }
                await Task.yield()
            }
        }
        let tool = "lights\u{1B}]0;owned\u{07}"
        session.emit(.transcript(Transcript(role: .agent, segment: "a1", text: "hello\n\u{1B}[2J", isFinal: true)))
        session.emit(.tool(.started(id: "1", name: tool)))
        session.emit(.tool(.finished(id: "1", name: tool, succeeded: false)))
        session.emit(.link(.offline(reason: "down\n\u{1B}[2J", retryIn: .seconds(1))))
        // A failure's message is made printable when it is made; one changed after still reaches nothing raw.
        var refusal = SessionFailure(.authentication, "refused")
        refusal.message = "no\r\n\u{9B}31m"
        session.emit(.link(.rejected(refusal, retryIn: .seconds(300))))
        session.emit(.notice("fine\r\n2026-01-01 info hark: forged"))
        try await withDeadline(.seconds(10), "the notice to be logged") {
            while !logs.all.contains(where: { $0.contains("session notice") }) { await Task.yield() }
        }
        try await rig.stop()

        let lines = logs.all
        #expect(lines.allSatisfy(Self.isPrintable), "\(lines.filter { !Self.isPrintable($0) })")
        #expect(lines.contains { $0.contains("agent: hello\\n\\u{1B}[2J") })
        #expect(lines.contains { $0.contains("tool call: lights\\u{1B}]0;owned\\u{07}") })
        #expect(lines.contains { $0.contains("tool call failed: lights\\u{1B}]0;owned\\u{07}") })
        #expect(lines.contains { $0.contains("session notice: fine\\r\\n2026-01-01") })
        #expect(lines.contains { $0.contains("state: offline: retrying in 1 s (down\\n\\u{1B}[2J)") })
        #expect(lines.contains { $0.contains("the service refused the device: no\\r\\n\\u{9B}31m") })
        let status = try ApplianceStatus.read(from: statusFile.path)
        #expect(status.lastError == "no\\r\\n\\u{9B}31m")
    }
}
