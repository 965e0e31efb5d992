import Foundation
import HarkAudio
import HarkCore
import HarkMedia
import HarkTestKit
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The files and servers the media tests play: an MP3 made by the `ffmpeg` command (a 440 Hz sine, stereo, 44.1 kHz,
/// 8 s) and scripts/lib/media-test-server.py serving it over ICY on loopback.
enum MediaFixtures {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
    static let ffmpeg = "/usr/bin/ffmpeg"
    static let server = root + "/scripts/lib/media-test-server.py"
    /// The tests need the ffmpeg command (Debian's `ffmpeg`, which scripts/setup installs).
    static let available = FileManager.default.isExecutableFile(atPath: ffmpeg)
    static let folder = FileManager.default.temporaryDirectory.path + "/hark-media-tests-\(getpid())"

    /// The sine's frequency.
    static let tone = 440.0
    /// The MP3's length in seconds.
    static let seconds = 8.0

    /// Makes (once per process) the MP3 and returns its path.
    static func mp3() async throws -> String {
        let path = folder + "/sine.mp3"
        if FileManager.default.fileExists(atPath: path) { return path }
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let partial = folder + "/sine-\(UInt32.random(in: 0...UInt32.max)).mp3"
        let made = try await ChildProcess.run(
            ffmpeg,
            [
                "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                "sine=frequency=\(Int(tone)):sample_rate=44100:duration=\(Int(seconds))", "-ac", "2", "-b:a", "128k",
                // No Xing or ID3 header: the server loops the file, and a header mid-stream is not audio.
                "-write_xing", "0", "-id3v2_version", "0",
                partial,
            ]
        )
        guard made.status == 0 else { throw MediaFixtureError(description: "ffmpeg failed: \(made.text)") }
        _ = rename(partial, path)
        return path
    }

    /// A file of `bytes` random bytes.
    static func garbage(_ bytes: Int) throws -> String {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let path = folder + "/garbage-\(UInt32.random(in: 0...UInt32.max)).mp3"
        var generator = SystemRandomNumberGenerator()
        let data = Data((0..<bytes).map { _ in UInt8.random(in: 0...255, using: &generator) })
        _ = FileManager.default.createFile(atPath: path, contents: data)
        return path
    }
}

/// A fixture could not be made.
struct MediaFixtureError: Error, CustomStringConvertible {
    var description: String
}

/// The ICY stream server on loopback, killed when released.
final class MediaTestServer: Sendable {
    let port: Int
    private let process: Process

    private init(process: Process, port: Int) {
        self.process = process
        self.port = port
    }

    /// Starts it serving `file` and waits until it listens.
    static func start(serving file: String) async throws -> MediaTestServer {
        let output = MediaFixtures.folder + "/server-\(UInt32.random(in: 0...UInt32.max)).txt"
        _ = FileManager.default.createFile(atPath: output, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", MediaFixtures.server, file]
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
        process.standardError = FileHandle.nullDevice
        try process.run()
        let port = try await withDeadline(.seconds(20), "the media test server to listen") {
            while true {
                let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
                if let line = text.split(separator: "\n").first, let port = Int(line) { return port }
                guard process.isRunning else { throw MediaFixtureError(description: "the media test server ended") }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        return MediaTestServer(process: process, port: port)
    }

    /// `http://127.0.0.1:PORT/path`.
    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    deinit {
        // SIGKILL: a child started from a thread of Dispatch inherits its blocked SIGTERM.
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

/// Every status a player reported, awaited with a deadline.
final class StatusRecorder: Sendable {
    private let statuses = Mutex<[MediaStatus]>([])

    /// What the player's `onChange` calls.
    var sink: @Sendable (MediaStatus) -> Void { { status in self.statuses.withLock { $0.append(status) } } }

    /// All reported so far.
    var all: [MediaStatus] { statuses.withLock { $0 } }

    /// The first status reported that meets `condition`, waited for up to `timeout`.
    func first(
        within timeout: Duration = .seconds(20),
        _ what: String,
        where condition: @escaping @Sendable (MediaStatus) -> Bool
    ) async throws -> MediaStatus {
        try await withDeadline(timeout, what) {
            while true {
                if let found = self.all.first(where: condition) { return found }
                try await Task.sleep(for: .milliseconds(10))
            }
        }
    }
}

/// Reads a ring as the playback thread does, keeping what it read (up to a bound) and counting all of it.
final class RingDrain: Sendable {
    private struct State {
        var kept: [Float] = []
        var total = 0
        var running = true
    }

    private let state = Mutex(State())
    private let keep: Int

    /// Starts reading `ring` on a task of its own, every 5 ms, keeping the first `keep` samples.
    init(_ ring: SampleRing, keep: Int = 48_000) {
        self.keep = keep
        Task.detached { [self] in
            var buffer = [Float](repeating: 0, count: 8192)
            while self.state.withLock({ $0.running }) {
                let read = buffer.withUnsafeMutableBufferPointer { ring.read(into: $0.baseAddress!, count: $0.count) }
                if read > 0 {
                    let slice = buffer.prefix(read)
                    self.state.withLock { state in
                        state.total += read
                        if state.kept.count < self.keep { state.kept += slice.prefix(self.keep - state.kept.count) }
                    }
                } else {
                    try? await Task.sleep(for: .milliseconds(5))
                }
            }
        }
    }

    /// Samples read so far.
    var total: Int { state.withLock { $0.total } }
    /// The first samples read.
    var kept: [Float] { state.withLock { $0.kept } }

    /// Waits until `count` samples were read.
    func await(_ count: Int, within timeout: Duration = .seconds(20)) async throws {
        try await withDeadline(timeout, "\(count) samples from the ring") {
            while self.total < count { try await Task.sleep(for: .milliseconds(10)) }
        }
    }

    func stop() { state.withLock { $0.running = false } }
    deinit { state.withLock { $0.running = false } }
}

/// The tone's frequency estimated from zero crossings, and the RMS level: measured here, independently of the
/// player.
func measure(_ samples: ArraySlice<Float>, rate: Int) -> (frequency: Double, rms: Double) {
    var crossings = 0
    var energy = 0.0
    var previous = samples.first ?? 0
    for sample in samples {
        if (previous < 0) != (sample < 0) { crossings += 1 }
        previous = sample
        energy += Double(sample) * Double(sample)
    }
    let seconds = Double(samples.count) / Double(rate)
    return (Double(crossings) / 2 / max(seconds, 1e-9), (energy / Double(max(samples.count, 1))).squareRoot())
}

/// This process's peak resident memory in KiB (`VmHWM` of /proc/self/status).
func peakResidentKiB() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
        let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") })
    else { return 0 }
    return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
}
