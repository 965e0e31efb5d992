import Foundation
import HarkAppliance
import HarkCore
import HarkTestKit
import Testing

@testable import HarkApp

/// A status with every part filled, and words in it that must never reach a metric.
private func busyStatus() -> ApplianceStatus {
    var status = ApplianceStatus(
        state: "listening",
        line: "listening",
        mode: "speaker",
        backend: "gemini",
        board: "rpi5-respeaker-2mic",
        pid: 42,
        startedAt: 1_000,
        updatedAt: 1_100,
        reconnects: 4,
        sessions: 3,
        droppedFrames: 7,
        resentSamples: 320,
        xruns: 2,
        underruns: 5,
        watchdogPings: 99,
        lastInterruptMilliseconds: 12.5,
        captureToWire: LatencySummary(p50: 21, p99: 40, max: 55, count: 1200, sum: 26_000),
        receivedToSpeaker: LatencySummary(p50: 80, p99: 150, max: 190, count: 30, sum: 2_700),
        lastError: "the user said: my secret password"
    )
    status.wake = WakeStatus(
        words: ["okay nabu"],
        detections: 6,
        falseStarts: 1,
        cpuSeconds: 3,
        audioSeconds: 100,
        droppedSeconds: 0
    )
    status.timers = TimerStatus(
        timers: [.init(label: "pasta for grandma", at: 2_000)],
        alarms: [.init(label: "wake \"up\"\nnow", at: 3_000, time: "07:30")],
        ringing: ["pasta for grandma"]
    )
    status.reloads = ReloadStatus(count: 2, failure: nil)
    status.serviceSession = "session-abc"
    return status
}

private let record = UpdateRecord(
    installed: "0.3.1",
    lastUpdate: .init(at: 1_500, from: "0.3.0", to: "0.3.1", outcome: "healthy"),
    lastRollback: .init(at: 1_200, from: "0.3.0", to: "0.3.1~bad", outcome: "rolled_back", reason: "restarted"),
    held: ["0.3.1~bad"],
    rollbacks: 1
)

/// The Prometheus text writer, as a value.
@Suite struct PrometheusTextTests {
    @Test func labelValuesAreEscapedAndBounded() {
        var text = PrometheusText()
        let hostile = "a\"b\\c\nd} x 1\nforged_total 99"
        text.add(
            "hark_test",
            .gauge,
            help: "A help\nwith a line feed.",
            samples: [.init(labels: [.init("v", hostile)], value: 1)]
        )
        let rendered = text.rendered
        // Exactly three lines: nothing in the value starts a line of its own.
        #expect(rendered.split(separator: "\n").count == 3, "\(rendered)")
        #expect(!rendered.contains("\nforged_total"))
        #expect(rendered.contains("# HELP hark_test A help"))
        // The quote and the backslash escaped, the line feed written as text: Prometheus reads the value back whole.
        #expect(rendered.contains("\n" + #"hark_test{v="a\"b\\c\\nd} x 1\\nforged_total 99"} 1"# + "\n"), "\(rendered)")
        let long = String(repeating: "x", count: 1000)
        var bounded = PrometheusText()
        bounded.add("hark_long", .gauge, help: "h", samples: [.init(labels: [.init("v", long)], value: 1)])
        #expect(bounded.rendered.utf8.count < 400, "\(bounded.rendered.utf8.count) bytes")
    }

    @Test func namesPrometheusRefusesAreLeftOut() {
        var text = PrometheusText()
        text.add("hark ok", .gauge, help: "h", value: 1)
        text.add("9hark", .gauge, help: "h", value: 1)
        text.add("hark_label", .gauge, help: "h", samples: [.init(labels: [.init("__reserved", "x")], value: 1)])
        text.add("hark_label_dash", .gauge, help: "h", samples: [.init(labels: [.init("a-b", "x")], value: 1)])
        text.add("hark_summary", .summary, help: "h", samples: [.init(value: 1)])  // no quantile label
        text.add("hark_fine", .gauge, help: "h", value: 1)
        text.add("hark_fine", .gauge, help: "h", value: 2)  // twice
        #expect(text.families.map(\.name) == ["hark_fine"])
        #expect(text.refused.count == 6, "\(text.refused)")
        #expect(PrometheusText.isMetricName("hark:rule_total") && !PrometheusText.isMetricName(""))
    }

    @Test func numbersAreWrittenAsPrometheusReadsThem() {
        var text = PrometheusText()
        text.add(
            "hark_numbers",
            .gauge,
            help: "h",
            samples: [
                .init(labels: [.init("v", "int")], value: 3), .init(labels: [.init("v", "frac")], value: 0.25),
                .init(labels: [.init("v", "nan")], value: .nan), .init(labels: [.init("v", "inf")], value: .infinity),
                .init(labels: [.init("v", "neg")], value: -.infinity),
            ]
        )
        let lines = text.rendered.split(separator: "\n").map(String.init)
        #expect(lines.contains("hark_numbers{v=\"int\"} 3"))
        #expect(lines.contains("hark_numbers{v=\"frac\"} 0.25"))
        #expect(lines.contains("hark_numbers{v=\"nan\"} NaN"))
        #expect(lines.contains("hark_numbers{v=\"inf\"} +Inf"))
        #expect(lines.contains("hark_numbers{v=\"neg\"} -Inf"))
    }
}

/// The appliance's metrics: what they hold, what they never hold, and what promtool and node_exporter make of them.
@Suite(.serialized) struct ApplianceMetricsTests {
    private func rendered() -> String {
        ApplianceMetrics.families(busyStatus(), version: "0.3.1", update: record, now: 1_160).rendered
    }

    @Test func theCountersAndGaugesAreThere() {
        let lines = Set(rendered().split(separator: "\n").map(String.init))
        for expected in [
            "hark_sessions_opened_total 3", "hark_reconnects_total 4", "hark_audio_dropped_frames_total 7",
            "hark_audio_xruns_total 2", "hark_audio_underruns_total 5", "hark_watchdog_pings_total 99",
            "hark_wake_detections_total 6", "hark_wake_false_starts_total 1", "hark_uptime_seconds 160",
            "hark_state{state=\"listening\"} 1", "hark_state{state=\"idle\"} 0",
            "hark_capture_to_wire_seconds{quantile=\"0.5\"} 0.021", "hark_capture_to_wire_seconds_count 1200",
            "hark_capture_to_wire_seconds_sum 26", "hark_received_to_speaker_seconds{quantile=\"0.99\"} 0.15",
            "hark_interrupt_to_silence_seconds 0.0125", "hark_timers{kind=\"ringing\"} 1",
            "hark_update_rollbacks_total 1", "hark_update_held_versions 1",
            "hark_update_last_timestamp_seconds{outcome=\"healthy\"} 1500",
            "hark_build_info{version=\"0.3.1\",mode=\"speaker\",backend=\"gemini\",board=\"rpi5-respeaker-2mic\"} 1",
        ] {
            #expect(lines.contains(expected), "no line \(expected) in:\n\(lines.sorted().joined(separator: "\n"))")
        }
    }

    @Test func noWordsNoLabelsOfTimersNoErrors() {
        let text = rendered()
        for secret in ["password", "pasta", "grandma", "wake \\\"up", "okay nabu", "session-abc", "the user said"] {
            #expect(!text.contains(secret), "\(secret) leaked into the metrics")
        }
    }

    /// Debian's promtool (the prometheus package) parses and lints the file: no complaint at all.
    @Test func promtoolAcceptsTheFile() async throws {
        guard let promtool = tool("promtool", package: "prometheus") else { return }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("hark-metrics-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("hark.prom").path
        try MetricsFile.replace(file, with: rendered())
        let checked = try await ChildProcess.run(
            "/bin/sh",
            ["-c", "\(promtool) check metrics < \(file)"],
            separateErrors: true
        )
        #expect(checked.status == 0, "promtool: \(checked.text)\(checked.errorText)")
        #expect((checked.text + checked.errorText).isEmpty, "promtool said: \(checked.text)\(checked.errorText)")
        // It does look: a counter without _total and a broken line are refused.
        try MetricsFile.replace(file, with: "# HELP hark_x h\n# TYPE hark_x counter\nhark_x 1\nhark_y{ 2\n")
        let broken = try await ChildProcess.run("/bin/sh", ["-c", "\(promtool) check metrics < \(file)"])
        #expect(broken.status != 0, "promtool accepted a broken file: \(broken.text)")
    }

    /// A real node_exporter (Debian's prometheus-node-exporter) on loopback, with only its textfile collector,
    /// reading the folder the file is written to, scraped over HTTP.
    @Test func nodeExporterServesTheFile() async throws {
        guard let exporter = tool("prometheus-node-exporter", package: "prometheus-node-exporter"),
            let curl = tool("curl", package: "curl")
        else { return }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("hark-textfile-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = MetricsFile(path: folder.path + "/hark.prom", stateDirectory: folder.path, version: "0.3.1")
        file.write(busyStatus())
        let port = try freeLoopbackPort()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: exporter)
        process.arguments = [
            "--web.listen-address=127.0.0.1:\(port)", "--collector.disable-defaults", "--collector.textfile",
            "--collector.textfile.directory=\(folder.path)",
        ]
        process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        let deadline = ContinuousClock.now + .seconds(20)
        var scraped = ""
        while ContinuousClock.now < deadline {
            let result = try await ChildProcess.run(
                curl,
                ["-s", "--max-time", "2", "http://127.0.0.1:\(port)/metrics"]
            )
            if result.status == 0, result.text.contains("hark_") {
                scraped = result.text
                break
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        let lines = Set(scraped.split(separator: "\n").map(String.init))
        #expect(
            lines.contains("hark_sessions_opened_total 3"),
            "no Hark series in the scrape:\n\(scraped.prefix(3000))"
        )
        #expect(lines.contains("hark_state{state=\"listening\"} 1"))
        // The collector read the file without an error.
        #expect(lines.contains("node_textfile_scrape_error 0"), "\(scraped.prefix(3000))")
        #expect(!FileManager.default.fileExists(atPath: folder.path + "/hark.prom.tmp"))
    }

    /// The file is replaced whole through a temporary file that is never a link someone planted.
    @Test func theFileIsReplacedAtomicallyNeverThroughALink() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("hark-replace-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let victim = folder.path + "/victim"
        try "keep me".write(toFile: victim, atomically: false, encoding: .utf8)
        let path = folder.path + "/hark.prom"
        try FileManager.default.createSymbolicLink(atPath: path + ".tmp", withDestinationPath: victim)
        try MetricsFile.replace(path, with: "one\n")
        try MetricsFile.replace(path, with: "two\n")
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "two\n")
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "keep me")
        #expect(!FileManager.default.fileExists(atPath: path + ".tmp"))
        #expect(throws: MetricsFileError.self) {
            try MetricsFile.replace(folder.path + "/no/such/hark.prom", with: "x")
        }
    }

    /// `hark status --json` carries the updater's record beside the status, as JSON a parser reads.
    @Test func statusJSONCarriesTheUpdateRecord() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let text = String(decoding: try encoder.encode(busyStatus()), as: UTF8.self)
        let joined = Status.json(text, update: record)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(joined.utf8)) as? [String: Any])
        let update = try #require(object["update"] as? [String: Any])
        #expect(update["installed"] as? String == "0.3.1")
        #expect((update["lastRollback"] as? [String: Any])?["reason"] as? String == "restarted")
        #expect(object["sessions"] as? Int == 3)
        #expect(Status.json(text, update: nil) == text)
    }
}

/// The path of a host tool, or nil (recorded as a failure naming the Debian package scripts/setup installs).
private func tool(_ name: String, package: String) -> String? {
    for folder in ["/usr/bin", "/usr/sbin", "/bin", "/sbin"]
    where FileManager.default.isExecutableFile(atPath: "\(folder)/\(name)") {
        return "\(folder)/\(name)"
    }
    Issue.record("\(name) not found: install the Debian package \(package) (scripts/setup does)")
    return nil
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
private func freeLoopbackPort() throws -> Int {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { throw POSIXError(.EMFILE) }
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) }
    }
    guard bound == 0 else { throw POSIXError(.EADDRINUSE) }
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
    }
    return Int(UInt16(bigEndian: address.sin_port))
}
