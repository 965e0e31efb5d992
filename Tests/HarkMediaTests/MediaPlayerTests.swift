import Foundation
import HarkAudio
import HarkCore
import HarkMedia
import HarkTestKit
import Testing

/// The player against a real ICY server on loopback and hostile files; each test plays the MP3 the `ffmpeg` command
/// made (a 440 Hz sine) and measures what reached the ring.
@Suite(.enabled(if: MediaFixtures.available, "needs the ffmpeg command (scripts/setup installs it)"), .serialized)
struct MediaPlayerTests {
    static let rate = 24_000

    func player(
        _ recorder: StatusRecorder,
        allow: MediaAllowList = .standard,
        stall: Duration = .seconds(3),
        open: Duration = .seconds(5)
    ) -> MediaPlayer {
        MediaPlayer(
            configuration: .init(
                outputRate: Self.rate,
                buffer: .seconds(1),
                openTimeout: open,
                stallTimeout: stall,
                allow: allow
            ),
            onChange: recorder.sink
        )
    }

    @Test func playsAnIcecastStreamWithItsTitlesAtTheOutputRate() async throws {
        let server = try await MediaTestServer.start(serving: try await MediaFixtures.mp3())
        let recorder = StatusRecorder()
        let player = player(recorder)
        defer { player.shutdown() }
        let ring = try player.play(server.url("/icy?every=4"), name: "Test Radio")
        let drain = RingDrain(ring)
        let playing = try await recorder.first("playing") { $0.state == .playing }
        #expect(playing.source == "Test Radio")
        #expect(playing.format?.hasPrefix("mp3") == true)
        try await drain.await(48_000)
        // Skip the decoder's first frames; a second of the sine at 24 kHz.
        let (frequency, rms) = measure(drain.kept[4800..<28_800], rate: Self.rate)
        #expect(abs(frequency - MediaFixtures.tone) < 5, "measured \(frequency) Hz")
        // lavfi's sine is 1/8 of full scale: 4096 peak, 2896 RMS in PCM16 scale.
        #expect(abs(rms - 2896) < 300, "RMS \(rms)")
        _ = try await recorder.first("the first title") { $0.title == "Hark Test - First Song" }
        _ = try await recorder.first(within: .seconds(30), "the second title") {
            $0.title == "Hark Test - Second Song"
        }
        #expect(player.stop())
        #expect(player.status.state == .stopped)
        drain.stop()
    }

    @Test func pausesAndResumes() async throws {
        let server = try await MediaTestServer.start(serving: try await MediaFixtures.mp3())
        let recorder = StatusRecorder()
        let player = player(recorder)
        defer { player.shutdown() }
        let ring = try player.play(server.url("/icy"))
        _ = try await recorder.first("playing") { $0.state == .playing }
        #expect(player.pause())
        #expect(player.status.state == .paused)
        // A write under way when the pause came finishes (one converted chunk at most): empty the ring, let it
        // finish, empty it again; then nothing more may arrive while paused.
        ring.drain()
        try await Task.sleep(for: .milliseconds(100))
        #expect(ring.drain() <= 4096)
        try await Task.sleep(for: .milliseconds(600))
        #expect(ring.count == 0, "decoded while paused: \(ring.count)")
        #expect(player.status.state == .paused)
        #expect(player.resume())
        let drain = RingDrain(ring)
        try await drain.await(24_000)
        #expect(player.status.state == .playing)
        drain.stop()
    }

    @Test func aLocalFilePlaysToItsEnd() async throws {
        let recorder = StatusRecorder()
        let player = player(recorder, allow: MediaAllowList(schemes: ["file"], hosts: []))
        defer { player.shutdown() }
        let ring = try player.play(try await MediaFixtures.mp3())
        let drain = RingDrain(ring)
        let ended = try await recorder.first("the end") { $0.state == .stopped }
        #expect(ended.ended)
        #expect(ended.failure == nil)
        // 8 s at 24 kHz, give or take the MP3 encoder's padding.
        let expected = Int(MediaFixtures.seconds) * Self.rate
        try await drain.await(expected - Self.rate / 10)
        #expect(abs(drain.total - expected) < Self.rate / 10, "read \(drain.total)")
        drain.stop()
    }

    @Test func aHostileTitleIsPrintableAndBounded() async throws {
        let server = try await MediaTestServer.start(serving: try await MediaFixtures.mp3())
        let recorder = StatusRecorder()
        let player = player(recorder)
        defer { player.shutdown() }
        let drain = RingDrain(try player.play(server.url("/hostile-title")))
        let titled = try await recorder.first("a title") { $0.title != nil }
        let title = try #require(titled.title)
        #expect(!title.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F })
        #expect(title.hasPrefix("\\u{1B}[31mred"))
        #expect(title.unicodeScalars.count <= 200)
        drain.stop()
    }

    @Test func aDeadURLFailsClearly() async throws {
        let recorder = StatusRecorder()
        let player = player(recorder)
        defer { player.shutdown() }
        // Port 1 on loopback: nothing listens, the connection is refused.
        try player.play("http://127.0.0.1:1/radio")
        let failed = try await recorder.first("failed") { $0.state == .failed }
        #expect(failed.failure?.kind == .unreachable)
        #expect(failed.failure?.message.contains("127.0.0.1:1") == true)
    }

    @Test func aMissingStreamFailsWithTheServersAnswer() async throws {
        let server = try await MediaTestServer.start(serving: try await MediaFixtures.mp3())
        let recorder = StatusRecorder()
        let player = player(recorder)
        defer { player.shutdown() }
        try player.play(server.url("/missing"))
        let failed = try await recorder.first("failed") { $0.state == .failed }
        #expect(failed.failure?.kind == .unreachable)
        #expect(failed.failure?.message.contains("404") == true)
    }

    @Test func aStreamThatStallsFails() async throws {
        let server = try await MediaTestServer.start(serving: try await MediaFixtures.mp3())
        let recorder = StatusRecorder()
        let player = player(recorder, stall: .seconds(1))
        defer { player.shutdown() }
        let drain = RingDrain(try player.play(server.url("/stall")))
        _ = try await recorder.first("playing") { $0.state == .playing }
        let start = ContinuousClock.now
        let failed = try await recorder.first(within: .seconds(10), "stalled") { $0.state == .failed }
        #expect(failed.failure?.kind == .stalled)
        // 32 KiB of 128 kb/s is 2 s of audio, then a second of silence from the server is a stall.
        #expect(ContinuousClock.now - start < .seconds(6))
        drain.stop()
    }

    @Test func aServerSendingAByteASecondFails() async throws {
        let server = try await MediaTestServer.start(serving: try await MediaFixtures.mp3())
        let recorder = StatusRecorder()
        let player = player(recorder, stall: .seconds(2), open: .seconds(2))
        defer { player.shutdown() }
        let start = ContinuousClock.now
        try player.play(server.url("/trickle"))
        let failed = try await recorder.first(within: .seconds(15), "failed") { $0.state == .failed }
        #expect([.timedOut, .stalled].contains(failed.failure?.kind))
        #expect(ContinuousClock.now - start < .seconds(8))
        #expect(!recorder.all.contains { $0.state == .playing })
    }

    @Test func garbageIsAClearError() async throws {
        let server = try await MediaTestServer.start(serving: try await MediaFixtures.mp3())
        let recorder = StatusRecorder()
        let player = player(recorder, allow: MediaAllowList(schemes: ["file"], hosts: []))
        defer { player.shutdown() }
        try player.play(server.url("/garbage"))
        let overHTTP = try await recorder.first("failed over http") { $0.state == .failed }
        #expect([.malformed, .unsupported].contains(overHTTP.failure?.kind), "\(overHTTP.summary)")
        let file = try MediaFixtures.garbage(300_000)
        try player.play(file)
        let fromFile = try await recorder.first("failed from a file") {
            $0.state == .failed && $0.source?.contains("garbage") == true
        }
        #expect([.malformed, .unsupported].contains(fromFile.failure?.kind), "\(fromFile.summary)")
    }

    @Test func aTenGigabyteFilePlaysInBoundedMemory() async throws {
        // The MP3, then 10 GB of a sparse hole (zeros) after it.
        let path = MediaFixtures.folder + "/huge-\(UInt32.random(in: 0...UInt32.max)).mp3"
        try FileManager.default.copyItem(atPath: try await MediaFixtures.mp3(), toPath: path)
        defer { unlink(path) }
        #expect(truncate(path, 10 * 1024 * 1024 * 1024) == 0)
        let before = peakResidentKiB()
        let recorder = StatusRecorder()
        let player = player(recorder, allow: MediaAllowList(schemes: ["file"], hosts: []), stall: .seconds(2))
        defer { player.shutdown() }
        let drain = RingDrain(try player.play(path))
        _ = try await recorder.first("playing") { $0.state == .playing }
        try await drain.await(Int(MediaFixtures.seconds) * Self.rate - Self.rate / 10)
        // After the audio only zeros: the MP3 parser looks for a frame in all it reads, so 4 MiB without audio
        // ends it (a clear error), long before the stall timeout.
        let done = try await recorder.first(within: .seconds(60), "the end of the audio") {
            $0.state == .failed || $0.state == .stopped
        }
        #expect(done.failure?.kind == .malformed, "\(done.summary)")
        #expect(done.failure?.message.contains("without audio") == true, "\(done.summary)")
        // The process's high-water mark of resident memory (the parser's buffer grew 240 MB a second without it).
        let grown = peakResidentKiB() - before
        #expect(grown < 64 * 1024, "peak resident memory grew by \(grown) KiB")
        drain.stop()
    }

    @Test func refusedSourcesNeverOpen() async throws {
        let recorder = StatusRecorder()
        let player = player(recorder, allow: MediaAllowList(schemes: ["https"], hosts: ["radio.example"]))
        for source in [
            "http://radio.example/stream", "https://other.example/stream", "/etc/passwd", "file:///etc/passwd",
            "concat:/a|/b", "ftp://radio.example/x", "https://user:pw@radio.example/x",
        ] {
            #expect(throws: MediaFailure.self, "\(source)") { try player.play(source) }
        }
        #expect(recorder.all.isEmpty)
        #expect(player.status.state == .idle)
    }
}
