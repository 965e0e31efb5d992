import Foundation
import HarkAppliance
import Testing

/// The updater's record (`state_dir/update.json`), read as untrusted.
@Suite struct UpdateRecordTests {
    private func folder(_ text: String?) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("hark-update-\(UUID())").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        if let text { try text.write(toFile: path + "/update.json", atomically: true, encoding: .utf8) }
        return path
    }

    @Test func theUpdatersRecordIsReadAndShown() throws {
        let path = try folder(
            """
            {
              "installed": "1.1",
              "phase": "idle",
              "lastUpdate": {"at": 1764400000, "from": "1.1", "to": "1.2", "outcome": "rolled_back", "reason": "x"},
              "lastRollback": {"at": 1764400000, "from": "1.1", "to": "1.2", "outcome": "rolled_back", "reason": "the service restarted 1 time(s)"},
              "held": ["1.2"],
              "rollbacks": 1
            }
            """
        )
        defer { try? FileManager.default.removeItem(atPath: path) }
        let record = try #require(UpdateRecord.read(stateDirectory: path))
        #expect(record.held == ["1.2"] && record.rollbacks == 1)
        let lines = record.rendered()
        #expect(
            lines.contains("rollback:    2025-11-29 07:06:40 UTC from 1.2 to 1.1: the service restarted 1 time(s)"),
            "\(lines)"
        )
        #expect(lines.contains("held back:   1.2"), "\(lines)")
    }

    @Test func aHostileRecordIsBoundedOrIgnored() throws {
        let long = String(repeating: "v", count: 5000)
        let path = try folder(
            "{\"installed\": \"\(long)\\u001b[31m\", \"held\": [\(Array(repeating: "\"x\"", count: 50).joined(separator: ","))], \"rollbacks\": -4}"
        )
        defer { try? FileManager.default.removeItem(atPath: path) }
        let record = try #require(UpdateRecord.read(stateDirectory: path))
        #expect((record.installed ?? "").unicodeScalars.count <= 200)
        #expect(!(record.installed ?? "").contains("\u{1b}"))
        #expect(record.held?.count == 8 && record.rollbacks == 0)
        let broken = try folder("not json")
        defer { try? FileManager.default.removeItem(atPath: broken) }
        #expect(UpdateRecord.read(stateDirectory: broken) == nil)
        let huge = try folder("{\"installed\": \"\(String(repeating: "x", count: 20_000))\"}")
        defer { try? FileManager.default.removeItem(atPath: huge) }
        #expect(UpdateRecord.read(stateDirectory: huge) == nil)
        let none = try folder(nil)
        #expect(UpdateRecord.read(stateDirectory: none) == nil)
    }
}
