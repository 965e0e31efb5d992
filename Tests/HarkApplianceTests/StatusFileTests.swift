import HarkAppliance
import HarkCore
import Testing

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The status file as `hark status` reads it: what is wrong when it cannot be shown, and what it shows
/// of text the file holds.
@Suite struct StatusFileTests {
    /// A new folder for one test (the test removes it).
    private func makeFolder() throws -> String {
        let path = FileManager.default.temporaryDirectory.path + "/hark-status-\(UInt64.random(in: 0...UInt64.max))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    private func readError(_ path: String) -> StatusFileError? {
        do {
            _ = try ApplianceStatus.read(from: path)
            return nil
        } catch {
            return error
        }
    }

    @Test func missingUnreadableAndNotAStatusFileAreToldApart() throws {
        let folder = try makeFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let missing = try #require(readError(folder + "/status.json"))
        #expect(missing.kind == .missing)
        #expect(missing.description.hasPrefix("no status file at \(folder)/status.json: is the appliance running?"))

        // Root reads any file it may: /proc/self/mem is one that a read refuses all the same.
        let unreadable = try #require(readError("/proc/self/mem"))
        #expect(unreadable.kind == .unreadable, "\(unreadable)")
        #expect(unreadable.description.hasPrefix("cannot read the status file /proc/self/mem ("))

        let cases: [(String, String)] = [
            ("{\"state\": \"idle\", ", "not JSON"),
            ("", "empty"),
            ("{\"hello\": 1}", "no "),
            ("[1, 2]", ""),
            (String(repeating: " ", count: ApplianceStatus.fileLimit + 1), "bytes, far more than a status file"),
        ]
        for (index, (text, reason)) in cases.enumerated() {
            let path = folder + "/bad-\(index).json"
            try Data(text.utf8).write(to: URL(fileURLWithPath: path))
            let error = try #require(readError(path))
            #expect(error.kind == .notStatus, "\(text.prefix(20)): \(error)")
            #expect(error.description.hasPrefix("\(path) is not a status file ("), "\(error)")
            #expect(error.reason?.contains(reason) == true, "\(error)")
        }
        let folderError = try #require(readError(folder))
        #expect(folderError.kind == .notStatus)
        #expect(folderError.reason == "a folder")
    }

    @Test func aFailedWriteSaysWhyInOneLine() throws {
        let status = ApplianceStatus()
        let error = #expect(throws: StatusFileError.self) { try status.write(to: "/nonexistent-hark/status.json") }
        #expect(error?.kind == .unwritable)
        #expect(
            error?.description
                == "cannot write the status file /nonexistent-hark/status.json (the folder does not exist)"
        )
        let notAFolder = #expect(throws: StatusFileError.self) { try status.write(to: "/dev/null/status.json") }
        #expect(notAFolder?.description.hasPrefix("cannot write the status file /dev/null/status.json (") == true)
        #expect(notAFolder?.description.contains("Error") == false, "\(String(describing: notAFolder))")
    }

    @Test func textFromTheFileIsShownPrintable() throws {
        let folder = try makeFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var status = ApplianceStatus(
            state: "error",
            line: "error: x\n\u{1B}[2Jforged",
            mode: "speaker",
            startedAt: 1000
        )
        status.updatedAt = 1000
        status.board = "host\u{1B}]0;title\u{07}"
        status.lastError = "the service said: \u{9B}31mno\nfake line" + String(repeating: "!", count: 10_000)
        let text = status.rendered(now: 1000)
        #expect(!text.unicodeScalars.contains { $0 != "\n" && RemoteText.needsEscaping($0) })
        let lines = text.split(separator: "\n")
        #expect(lines.first == "state:       error: x\\n\\u{1B}[2Jforged")
        #expect(lines.contains("mode:        speaker (, board host\\u{1B}]0;title\\u{07})"))
        let last = try #require(lines.first { $0.hasPrefix("last error:  ") })
        #expect(last.hasPrefix("last error:  the service said: \\u{9B}31mno\\nfake line!!!"))
        #expect(last.hasSuffix("…[cut, \(status.lastError!.utf8.count) bytes in all]"))

        // --json: the same JSON, with nothing in it a terminal would act on.
        let path = folder + "/status.json"
        try status.write(to: path)
        let read = try ApplianceStatus.readWithText(from: path)
        #expect(read.status == status)
        #expect(!read.text.unicodeScalars.contains { $0.value > 0x20 && RemoteText.needsEscaping($0) })
        #expect(read.text.contains("\\u009b31mno"))
        #expect(try JSONDecoder().decode(ApplianceStatus.self, from: Data(read.text.utf8)) == status)
    }

    @Test func noInterruptionIsShownAsNone() {
        var status = ApplianceStatus(state: "idle", line: "idle", startedAt: 1000, updatedAt: 1000)
        #expect(status.rendered(now: 1000).contains("latency:     interrupt to silence: none yet"))
        // Silencing a speaker that played nothing: counted by the playback, not an interruption.
        status.lastInterruptMilliseconds = 0.012
        #expect(status.rendered(now: 1000).contains("latency:     interrupt to silence: none yet"))
        #expect(!status.rendered(now: 1000).contains("0.0 ms"))
        status.lastInterruptMilliseconds = 8.46
        #expect(status.rendered(now: 1000).contains("latency:     interrupt to silence 8.5 ms"))
    }
}
