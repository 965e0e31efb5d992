import Foundation
import HarkTestKit
import Testing

/// The built `hark converse` in a child process against a server that sends what no Live model sends: audio
/// at a rate of 1 Hz and at 2^32 Hz, a flood of transcription text with terminal escapes, then the end of the turn.
/// The process must not die by a signal, must end within its `--timeout`, must stay small, and must print
/// nothing raw.
@Suite struct HostileServiceTests {
    static let hark = BuiltProducts.executable("hark")

    /// One Live server message as a text frame.
    static func message(_ json: String) -> [UInt8] { Peer.frame(opcode: 0x1, Array(json.utf8)) }

    @Test(
        .enabled(
            if: HostileServiceTests.hark != nil,
            "needs the hark binary next to the test bundle: build it with the tests (swift build --build-tests)"
        )
    )
    func absurdAudioRatesAndATranscriptFloodLeaveConverseSmallAndInTime() async throws {
        let hark = try #require(Self.hark)
        // 48 KB of audio per message: a client that sized its resampling by the stated rate would ask for
        // gigabytes at 1 Hz, and trap converting 2^32.
        let audio = Data(repeating: 0x11, count: 48_000).base64EncodedString()
        // 64 KB of text per message, 40 of them (a bigger flood would slow the real-time tests running alongside;
        // scripts/fault-matrix floods without end): what is kept of a turn's transcript is bounded (see
        // TranscriptSegments' tests), what is printed is escaped.
        let text = String(repeating: "\u{1B}[2J\u{1B}]52;c;AAAA\u{07}\nforged line ", count: 2_200)
        let textJSON = String(decoding: try JSONEncoder().encode(text), as: UTF8.self)
        let server = try await HostileServer.start { peer in
            try await peer.acceptUpgrade()
            _ = try await peer.readFrame()  // the setup
            try await peer.write(Self.message(#"{"setupComplete":{}}"#))
            for rate in ["1", "4294967296", "0", "-5", "abc", ""] {
                let part = #"{"inlineData":{"mimeType":"audio/pcm;rate=\#(rate)","data":"\#(audio)"}}"#
                for _ in 0..<5 {
                    try await peer.write(Self.message(#"{"serverContent":{"modelTurn":{"parts":[\#(part)]}}}"#))
                }
            }
            let transcription = Self.message(#"{"serverContent":{"outputTranscription":{"text":\#(textJSON)}}}"#)
            for _ in 0..<40 { try await peer.write(transcription) }
            try await peer.write(Self.message(#"{"serverContent":{"turnComplete":true}}"#))
            await peer.readUntilClosed()
        }
        defer { Task { await server.stop() } }

        let input = try TestSignals.writeTemporaryWAV([Int16](repeating: 0, count: 16_000))
        let output = FileManager.default.temporaryDirectory.path + "/hark-hostile-\(UUID().uuidString).wav"
        defer {
            try? FileManager.default.removeItem(atPath: input)
            try? FileManager.default.removeItem(atPath: output)
        }
        let started = ContinuousClock.now
        let child = try await ChildProcess.run(
            hark,
            [
                "converse", "--input", input, "--output", output, "--endpoint", "ws://127.0.0.1:\(server.port)",
                "--fast", "--timeout", "20", "--max-retries", "1",
            ],
            environment: ["GEMINI_API_KEY": "hostile-test-key-0123", "PATH": "/usr/bin:/bin"]
        )
        let elapsed = ContinuousClock.now - started
        let printed = child.output
        let shown = String(decoding: printed.prefix(4000), as: UTF8.self)

        #expect(child.signal == nil, "ended by signal \(child.signal ?? 0): \(shown)")
        #expect(child.exitStatus == 0, "\(shown)")
        #expect(elapsed < .seconds(20), "\(elapsed)")
        // Resampling 48 KB stated at 1 Hz would take gigabytes; the run itself needs a fraction of the bound. The
        // figure is at least this test process's own peak: posix_spawn's child shares its memory until exec, whose
        // high-water mark the kernel keeps for the child (the tests run before it in this process, the media
        // decoder's among them, raise it).
        #expect(child.peakKiB < 256 << 10, "peak RSS \(child.peakKiB >> 10) MiB")
        #expect(!printed.contains(0x1B) && !printed.contains(0x07), "raw control characters printed: \(shown)")
        let lines = String(decoding: printed, as: UTF8.self).split(separator: "\n")
        #expect(!lines.contains { $0.hasPrefix("forged") }, "a newline from the service started a line")
        #expect(!lines.contains { $0.contains("hostile-test-key-0123") })
    }
}
