import Foundation  // Thread, for the writing end of a pipe
import Glibc
import HarkCore
import Testing

@testable import HarkAudio

/// The streamed WAV reader checks what a file states before using it; the writer never writes through a
/// link or replaces a device; playback never traps on a chunk's rate.
@Suite struct WAVStreamSafetyTests {
    func le32(_ value: Int) -> Data { withUnsafeBytes(of: UInt32(truncatingIfNeeded: value).littleEndian) { Data($0) } }
    func le16(_ value: Int) -> Data { withUnsafeBytes(of: UInt16(truncatingIfNeeded: value).littleEndian) { Data($0) } }

    func wav(channels: Int = 1, rate: Int = 16_000, fmtSize: Int = 16, before: Data = Data(), data: Data) -> Data {
        var out = Data("RIFF".utf8) + le32(0) + Data("WAVE".utf8) + before
        out += Data("fmt ".utf8) + le32(fmtSize) + le16(1) + le16(channels) + le32(rate)
        out += le32(rate * channels * 2) + le16(channels * 2) + le16(16)
        out += Data("data".utf8) + le32(data.count) + data
        return out
    }

    /// The error opening `bytes` as a file gives.
    func readerError(_ bytes: Data, in directory: String) throws -> WAVError {
        let path = directory + "/input-\(UInt64.random(in: 0...UInt64.max)).wav"
        try bytes.write(to: URL(filePath: path))
        return try #require(throws: WAVError.self) { try WAVStreamReader(path: path) }
    }

    func mode(_ path: String, follow: Bool = false) -> mode_t? {
        var status = stat()
        return (follow ? stat(path, &status) : lstat(path, &status)) == 0 ? status.st_mode : nil
    }

    @Test func theReaderChecksEverySizeRateAndChannelCount() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let samples = PCM16.bytes([1, 2, 3, 4])
        // A fmt chunk of 0xFFFFFFF0 bytes: refused against the file's size, before 4 GB are allocated.
        let huge = try readerError(wav(fmtSize: 0xFFFF_FFF0, data: samples), in: directory)
        #expect(huge.kind == .malformed && huge.description.contains("'fmt ' of 4294967280 bytes runs past the end"))
        let skipped = try readerError(wav(before: Data("LIST".utf8) + le32(0x7FFF_0000), data: samples), in: directory)
        #expect(skipped.kind == .malformed && skipped.description.contains("'LIST'"))
        // A 1 Hz file, 65535 channels.
        let slow = try readerError(wav(rate: 1, data: samples), in: directory)
        #expect(slow.kind == .unsupported && slow.description.contains("sample rate 1 Hz"))
        let wide = try readerError(wav(channels: 65_535, data: samples), in: directory)
        #expect(wide.kind == .unsupported && wide.description.contains("65535 channels"))
        // No samples: the 44-byte file, and a data chunk shorter than one frame.
        #expect(try readerError(WAVFile.encode(samples: [], sampleRate: 16_000), in: directory).kind == .noSamples)
        #expect(try readerError(wav(channels: 2, data: Data([1, 2, 3])), in: directory).kind == .noSamples)
        let folder = try #require(throws: WAVError.self) { try WAVStreamReader(path: directory) }
        #expect(folder.kind == .unreadable)
        // In bounds it reads, and one read never returns more than its maximum whatever it is asked.
        let path = directory + "/good.wav"
        try wav(data: samples).write(to: URL(filePath: path))
        let reader = try #require(try WAVStreamReader(path: path))
        #expect(try reader.readMono(Int.max) == [1, 2, 3, 4])
        #expect(try reader.readMono(-1).isEmpty)
    }

    @Test func theReaderTakesAPipeAsItComes() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let fifo = directory + "/pipe.wav"
        #expect(mkfifo(fifo, 0o600) == 0)
        let samples = (0..<40_000).map { Int16(truncatingIfNeeded: $0 * 3) }
        // A chunk larger than the reader's skip buffer before fmt, and an unset data size.
        var bytes = Data("RIFF".utf8) + le32(0) + Data("WAVE".utf8) + Data("junk".utf8) + le32(100_001)
        bytes += Data(count: 100_002)
        bytes += Data("fmt ".utf8) + le32(16) + le16(1) + le16(1) + le32(16_000) + le32(32_000) + le16(2) + le16(16)
        bytes += Data("data".utf8) + le32(0xFFFF_FFFF) + PCM16.bytes(samples)
        let stream = bytes
        let writer = Thread {
            let descriptor = open(fifo, O_WRONLY)
            guard descriptor >= 0 else { return }
            stream.withUnsafeBytes { raw in
                var offset = 0
                while offset < raw.count {
                    let written = write(descriptor, raw.baseAddress! + offset, raw.count - offset)
                    if written <= 0 { break }
                    offset += written
                }
            }
            close(descriptor)
        }
        writer.start()
        let reader = try #require(try WAVStreamReader(path: fifo))
        var read: [Int16] = []
        while case let block = try reader.readMono(4_096), !block.isEmpty { read += block }
        #expect(read == samples)
    }

    @Test func theWriterNeverWritesThroughALinkAtTheTemporaryName() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let victim = directory + "/victim"
        try Data("precious".utf8).write(to: URL(filePath: victim))
        let output = directory + "/answer.wav"
        // The temporary name the writer used to take, planted as a link to the victim.
        #expect(symlink(victim, output + ".partial") == 0)
        let writer = try WAVStreamWriter(path: output, sampleRate: 24_000)
        try writer.write([1, 2, 3])
        #expect(try writer.finish() == 3)
        #expect(try Data(contentsOf: URL(filePath: victim)) == Data("precious".utf8))
        #expect(try WAVFile.read(path: output).samples == [1, 2, 3])
        // Nothing else is left beside them.
        let left = try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
        #expect(left == ["answer.wav", "answer.wav.partial", "victim"])
        // The file is the writer's own, readable by others, writable by its owner only.
        let permissions = try #require(mode(output)) & 0o777
        #expect(permissions & 0o600 == 0o600 && permissions & 0o133 == 0)
    }

    @Test func theWriterRefusesWhatIsNeitherAFileNorADevice() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let empty = try #require(throws: WAVError.self) { try WAVStreamWriter(path: "", sampleRate: 24_000) }
        #expect(empty.description.contains("empty path"))
        let fifo = directory + "/pipe"
        #expect(mkfifo(fifo, 0o600) == 0)
        for path in [fifo, directory] {
            let error = try #require(throws: WAVError.self) { try WAVStreamWriter(path: path, sampleRate: 24_000) }
            #expect(error.description.contains("not a regular file or a character device"), "\(path)")
        }
        #expect(mode(fifo).map { $0 & S_IFMT } == S_IFIFO)
        #expect(throws: WAVError.self) { try WAVStreamWriter(path: directory + "/x.wav", sampleRate: 1) }
        #expect(throws: WAVError.self) { try WAVStreamWriter(path: directory + "/no/x.wav", sampleRate: 24_000) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["pipe"])
    }

    /// A copy of a device node (made with `mknod`, so it needs root): written directly, never replaced.
    @Test(.enabled(if: geteuid() == 0, "mknod needs root")) func aCharacterDeviceIsWrittenDirectlyNotReplaced() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func node(copying device: String) throws -> String {
            var status = stat()
            #expect(stat(device, &status) == 0)
            let path = directory + "/" + URL(filePath: device).lastPathComponent
            #expect(mknod(path, S_IFCHR | 0o666, status.st_rdev) == 0)
            return path
        }
        let null = try node(copying: "/dev/null")
        let writer = try WAVStreamWriter(path: null, sampleRate: 24_000)
        #expect(writer.writesDirectly)
        try writer.write([Int16](repeating: 7, count: 100_000))
        #expect(try writer.finish() == 100_000)
        #expect(mode(null).map { $0 & S_IFMT } == S_IFCHR)
        // A full device: the header cannot be written, and the node stays a node.
        let full = try node(copying: "/dev/full")
        let error = try #require(throws: WAVError.self) { try WAVStreamWriter(path: full, sampleRate: 24_000) }
        #expect(error.description.contains(full))
        #expect(mode(full).map { $0 & S_IFMT } == S_IFCHR)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).sorted() == ["full", "null"])
    }

    @Test func whatWasWrittenSoFarCanBeFinishedAndAnUnfinishedWriterLeavesNothing() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let output = directory + "/answer.wav"
        try Data("old answer".utf8).write(to: URL(filePath: output))
        let writer = try WAVStreamWriter(path: output, sampleRate: 24_000)
        try writer.write([Int16](repeating: 5, count: 70_000))  // past the write buffer: some reached the file
        try writer.write([1, 2])
        // Interrupted here: finish keeps all of it, and a second call changes nothing.
        #expect(try writer.finish() == 70_002)
        #expect(try writer.finish() == 70_002)
        #expect(throws: WAVError.self) { try writer.write([3]) }
        let audio = try WAVFile.read(path: output)
        #expect(audio.samples.count == 70_002 && audio.samples.suffix(2) == [1, 2])
        do {
            let abandoned = try WAVStreamWriter(path: directory + "/abandoned.wav", sampleRate: 24_000)
            try abandoned.write([1, 2, 3])
        }
        let discarded = try WAVStreamWriter(path: directory + "/discarded.wav", sampleRate: 24_000)
        discarded.discard()
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["answer.wav"])
    }

    @Test func playbackDropsAChunkAtAnImpossibleRateInsteadOfTrapping() throws {
        let playback = AudioPlayback(configuration: AudioPlayback.Configuration(inputRate: 24_000))
        for rate in [4_294_967_296, 0, -5, 1, 1_000_000_000, Int.max] {
            playback.enqueue(AudioChunk(samples: [1, 2, 3, 4], sampleRate: rate))
        }
        #expect(playback.buffered == .zero)
        playback.enqueue(AudioChunk(samples: [Int16](repeating: 1, count: 480), sampleRate: 48_000))
        #expect(playback.buffered > .zero)
        for rate in [4_294_967_296, 0, -5, Int.max] {
            #expect(throws: AudioError.self, "\(rate)") { try StreamResampler(inputRate: rate, outputRate: 48_000) }
            #expect(throws: AudioError.self, "\(rate)") { try StreamResampler(inputRate: 16_000, outputRate: rate) }
        }
        #expect(try StreamResampler(inputRate: 24_000, outputRate: 48_000).maximumOutput(forInput: 100) == 208)
    }
}
