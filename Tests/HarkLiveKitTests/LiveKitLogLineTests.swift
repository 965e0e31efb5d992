import HarkCore
import HarkLiveKitProto
import HarkTestKit
import Logging
import Testing

@testable import HarkLiveKit

extension LiveKitRealLibraryTests.Boundary {
    /// The library's log lines quote what a hostile server sent: they reach the log printable (bidi overrides and
    /// line separators escaped, as every remote text is) and bounded.
    @Test func theLibrarysLogLinesArePrintable() async throws {
        let library = try RealLibrary.open()
        let logs = LogCapture()
        var record = Livekit_Proto_LogRecord()
        record.level = .logError
        record.target = "livekit::rtc_engine\u{202E}"
        record.message =
            "signal failure: server said \u{202E}evil\u{2028}forged line\u{2029} \u{9B}31m "
            + String(repeating: "x", count: 10_000)
        var batch = Livekit_Proto_LogBatch()
        batch.records = [record]
        var event = Livekit_Proto_FfiEvent()
        event.logs = batch
        let bytes = try Self.encoded(event)
        try await withDeadline(.seconds(30), "the log line") {
            try await LiveKitClient.withClient(library: library, logger: logs.logger("livekit")) { _ in
                Self.deliver(bytes)
                while !logs.all.contains(where: { $0.contains("signal failure") }) { await Task.yield() }
            }
        }
        let lines = logs.all.filter { $0.contains("signal failure") }
        #expect(!lines.isEmpty)
        for line in lines {
            let raw = line.unicodeScalars.filter { [0x9B, 0x202E, 0x2028, 0x2029].contains($0.value) }
            #expect(raw.isEmpty, "\(line.prefix(200).debugDescription)")
            #expect(line.utf8.count < 2048)
        }
    }
}
