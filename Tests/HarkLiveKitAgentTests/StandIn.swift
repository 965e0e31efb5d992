import Foundation
import HarkCore
import HarkLiveKit
import HarkTestKit
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
final class StandIn: Sendable {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
    static let python = root + "/.venv-livekit-standin/bin/python"
    static let script = root + "/scripts/lib/livekit-standin.py"
    static let library: String? = try? LiveKitLibrary.locate(environment: ProcessInfo.processInfo.environment)
    static let available = FileManager.default.isExecutableFile(atPath: python) && library != nil
    static let missing =
        "the LiveKit stand-in or library is not installed: scripts/setup makes .venv-livekit-standin and .hark-lib"

    static let apiKey = "devkey"
    static let apiSecret = "standin-secret-4f1c2e9a7b3d5e6f8a0b1c2d"

    /// `ws://127.0.0.1:PORT`.
    let url: String
    /// `http://127.0.0.1:PORT` of its token server, when asked for.
    let tokenURL: String?
    let recordPath: String
    let secretFile: String
    private let process: Process

    private init(process: Process, url: String, tokenURL: String?, recordPath: String, secretFile: String) {
        self.process = process
        self.url = url
        self.tokenURL = tokenURL
        self.recordPath = recordPath
        self.secretFile = secretFile
    }

    /// Starts it with `flags` (`--agent-delay 1`, `--reject-token`, `--token-port 0`, ...) and waits for it to listen.
    static func start(_ flags: [String] = []) async throws -> StandIn {
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
                    throw StandInError("the stand-in ended before it listened: \(log.suffix(2000))")
                }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        let parts = line.split(separator: " ").map(String.init)
        return StandIn(
            process: process,
            url: parts[1],
            tokenURL: parts.count > 2 ? parts[2] : nil,
            recordPath: recordPath,
            secretFile: secretFile
        )
    }

    /// Ends it: SIGTERM, then SIGKILL after 2 s (Foundation's waitUntilExit spins off the main thread: not used).
    func stop() {
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
    func record() -> JSONValue {
        guard let data = FileManager.default.contents(atPath: recordPath),
            let json = try? JSONDecoder().decode(JSONValue.self, from: data)
        else { return .object([:]) }
        return json
    }

    /// Waits until the record satisfies `condition`.
    func waitForRecord(
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
    func mintingSettings() -> [String: String] {
        ["server_url": url, "api_key": Self.apiKey, "api_secret_file": secretFile]
    }
}

struct StandInError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A session's events as they come, with what the tests ask of them.
final class EventLog: Sendable {
    struct Snapshot: Sendable {
        var events: [SessionEvent] = []
        var audioSamples = 0
        var turns = 0
        var ended = false
        var states: [ConversationState] = []
        var transcripts: [Transcript] = []
        var links: [LinkState] = []
    }

    private let box = Box()
    private let task: Task<Void, Never>

    private final class Box: Sendable {
        let state = Mutex(Snapshot())
    }

    init(_ events: AsyncStream<SessionEvent>) {
        let box = self.box
        task = Task {
            for await event in events {
                box.state.withLock { snapshot in
                    snapshot.events.append(event)
                    switch event {
                    case .audio(let chunk): snapshot.audioSamples += chunk.samples.count
                    case .turnComplete: snapshot.turns += 1
                    case .conversation(let conversation): snapshot.states.append(conversation)
                    case .transcript(let transcript): snapshot.transcripts.append(transcript)
                    case .link(let link):
                        snapshot.links.append(link)
                        if case .ended = link { snapshot.ended = true }
                    default: break
                    }
                }
            }
        }
    }

    var snapshot: Snapshot { box.state.withLock { $0 } }

    func waitFor(
        _ what: String,
        within timeout: Duration = .seconds(30),
        _ condition: @escaping @Sendable (Snapshot) -> Bool
    )
        async throws
    {
        try await withDeadline(timeout, what) {
            while !condition(self.snapshot) { try await Task.sleep(for: .milliseconds(20)) }
        }
    }
}
