import Foundation
import HarkCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

#if canImport(FoundationEssentials)
    import FoundationEssentials
#endif

/// The offline LiveKit stand-in (scripts/lib/livekit-standin.py, a Python server with a scripted agent) as a process
/// of the test, in the environment scripts/setup makes (.venv-livekit-standin). Tests that need it, and LiveKit's
/// library, are skipped without them, saying so.
public final class LiveKitStandIn: Sendable {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().path
    static let python = root + "/.venv-livekit-standin/bin/python"
    static let script = root + "/scripts/lib/livekit-standin.py"
    /// Whether the stand-in's environment and LiveKit's library (in HARK_LIB_DIR or the checkout's .hark-lib) are here.
    public static let available: Bool = {
        let folder = ProcessInfo.processInfo.environment["HARK_LIB_DIR"] ?? root + "/.hark-lib"
        return FileManager.default.isExecutableFile(atPath: python)
            && FileManager.default.fileExists(atPath: folder + "/liblivekit_ffi.so")
    }()
    public static let missing =
        "the LiveKit stand-in or library is not installed: scripts/setup makes .venv-livekit-standin and .hark-lib"

    public static let apiKey = "devkey"
    public static let apiSecret = "standin-secret-4f1c2e9a7b3d5e6f8a0b1c2d"

    /// `ws://127.0.0.1:PORT`.
    public let url: String
    /// `http://127.0.0.1:PORT` of its token server, when asked for.
    public let tokenURL: String?
    public let recordPath: String
    public let secretFile: String
    private let process: Process

    private init(process: Process, url: String, tokenURL: String?, recordPath: String, secretFile: String) {
        self.process = process
        self.url = url
        self.tokenURL = tokenURL
        self.recordPath = recordPath
        self.secretFile = secretFile
    }

    /// Starts it with `flags` (`--agent-delay 1`, `--reject-token`, `--token-port 0`, ...) and waits for it to listen.
    public static func start(_ flags: [String] = []) async throws -> LiveKitStandIn {
        let base = FileManager.default.temporaryDirectory.path + "/hark-lk-\(UInt64.random(in: 0...UInt64.max))"
        let recordPath = base + "-record.json"
        let outputPath = base + "-out.txt"
        let secretFile = base + "-secret"
        try Data(apiSecret.utf8).write(to: URL(fileURLWithPath: secretFile))
        for path in [outputPath, base + "-log.txt"] { _ = FileManager.default.createFile(atPath: path, contents: nil) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments =
            [script, "--port", "0", "--api-key", apiKey, "--api-secret", apiSecret, "--record", recordPath] + flags
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: base + "-log.txt"))
        try process.run()
        let line = try await withDeadline(.seconds(30), "the stand-in to listen") {
            while true {
                let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
                if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("READY ") }) {
                    return String(line)
                }
                if !process.isRunning {
                    let log = (try? String(contentsOfFile: base + "-log.txt", encoding: .utf8)) ?? ""
                    throw LiveKitStandInError("the stand-in ended before it listened: \(log.suffix(2000))")
                }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        let parts = line.split(separator: " ").map(String.init)
        return LiveKitStandIn(
            process: process,
            url: parts[1],
            tokenURL: parts.count > 2 ? parts[2] : nil,
            recordPath: recordPath,
            secretFile: secretFile
        )
    }

    /// Ends it: SIGTERM, then SIGKILL after 2 s (Foundation's waitUntilExit spins off the main thread: not used).
    public func stop() {
        let pid = process.processIdentifier
        if process.isRunning {
            kill(pid, SIGTERM)
            var waited = 0
            while process.isRunning && waited < 200 {
                usleep(10_000)
                waited += 1
            }
            if process.isRunning { kill(pid, SIGKILL) }
        }
        for path in [recordPath, secretFile] { try? FileManager.default.removeItem(atPath: path) }
    }

    deinit { stop() }

    /// What it recorded so far.
    public func record() -> JSONValue {
        guard let data = FileManager.default.contents(atPath: recordPath),
            let json = try? JSONDecoder().decode(JSONValue.self, from: data)
        else { return .object([:]) }
        return json
    }

    /// Waits until the record satisfies `condition`.
    public func waitForRecord(
        _ what: String,
        within timeout: Duration = .seconds(20),
        _ condition: @escaping @Sendable (JSONValue) -> Bool
    )
        async throws
    {
        try await withDeadline(timeout, what) {
            while !condition(self.record()) { try await Task.sleep(for: .milliseconds(50)) }
        }
    }

    /// Settings that mint tokens for it on the device.
    public func mintingSettings() -> [String: String] {
        ["livekit_url": url, "api_key": Self.apiKey, "api_secret_file": secretFile]
    }
}

public struct LiveKitStandInError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
