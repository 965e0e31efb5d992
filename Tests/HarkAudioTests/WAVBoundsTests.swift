import Glibc
import HarkAudio
import HarkCore
import Testing

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// WAV headers are untrusted: every size, rate and channel count is checked before it sizes anything.
@Suite struct WAVBoundsTests {
    /// A WAV file with the `fmt ` fields given and `data` after it.
    static func wav(
        tag: Int = 1,
        channels: Int = 1,
        rate: Int = 16_000,
        bits: Int = 16,
        fmtSize: Int = 16,
        before: Data = Data(),
        dataSize: Int? = nil,
        data: Data = Data(count: 64)
    ) -> Data {
        var out = Data("RIFF".utf8) + le32(0) + Data("WAVE".utf8) + before
        out += Data("fmt ".utf8) + le32(fmtSize) + le16(tag) + le16(channels) + le32(rate)
        out += le32(rate * channels * bits / 8) + le16(channels * bits / 8) + le16(bits)
        out += Data("data".utf8) + le32(dataSize ?? data.count) + data
        return out
    }

    static func le32(_ value: Int) -> Data {
        withUnsafeBytes(of: UInt32(truncatingIfNeeded: value).littleEndian) { Data($0) }
    }
    static func le16(_ value: Int) -> Data {
        withUnsafeBytes(of: UInt16(truncatingIfNeeded: value).littleEndian) { Data($0) }
    }

    func decodeError(_ data: Data) throws -> WAVError {
        try #require(throws: WAVError.self) { try WAVFile.decode(data) }
    }

    @Test func aChunkSizeLargerThanTheFileIsAnError() throws {
        // The fmt chunk states 0xFFFFFFF0 bytes: refused against the file's size, nothing allocated.
        let huge = try decodeError(Self.wav(fmtSize: 0xFFFF_FFF0))
        #expect(huge.kind == .malformed)
        #expect(huge.description.contains("'fmt ' of 4294967280 bytes runs past the end"))
        // Any other chunk too, named printably.
        let list = try decodeError(Self.wav(before: Data("LIST".utf8) + Self.le32(1 << 30)))
        #expect(list.kind == .malformed && list.description.contains("'LIST'"))
        let binary = try decodeError(Self.wav(before: Data([0x1B, 0x5B, 0x00, 0xFF]) + Self.le32(1 << 30)))
        #expect(binary.description.contains("0x1b5b00ff"))
        // A fmt chunk within the file but larger than any real one.
        var padded = Data("RIFF".utf8) + Self.le32(0) + Data("WAVEfmt ".utf8) + Self.le32(2048)
        padded += Self.le16(1) + Self.le16(1) + Self.le32(16_000) + Self.le32(32_000) + Self.le16(2) + Self.le16(16)
        padded += Data(count: 2048 - 16) + Data("data".utf8) + Self.le32(4) + Data(count: 4)
        let large = try decodeError(padded)
        #expect(large.kind == .malformed && large.description.contains("at most 1024"))
    }

    @Test func ratesAndChannelsOutsideTheLimitsAreUnsupported() throws {
        for rate in [0, 1, 7_999, 192_001, 0xFFFF_FFFF] {
            let error = try decodeError(Self.wav(rate: rate))
            #expect(error.kind == .unsupported && error.description.contains("sample rate"), "\(rate) Hz")
        }
        #expect(try WAVFile.decode(Self.wav(rate: 192_000)).sampleRate == 192_000)
        #expect(try WAVFile.decode(Self.wav(rate: 8_000)).sampleRate == 8_000)
        for channels in [33, 65_535] {
            let error = try decodeError(Self.wav(channels: channels))
            #expect(error.kind == .unsupported && error.description.contains("\(channels) channels"))
        }
        #expect(try decodeError(Self.wav(channels: 0)).kind == .malformed)
        #expect(try WAVFile.decode(Self.wav(channels: 32)).channels == 32)
        #expect(try decodeError(Self.wav(tag: 2, bits: 4)).kind == .unsupported)
        #expect(try decodeError(Self.wav(bits: 12)).kind == .unsupported)
    }

    @Test func aWAVWithoutSamplesIsNoSamples() throws {
        // A 44-byte file: header only.
        let empty = WAVFile.encode(samples: [], sampleRate: 16_000)
        #expect(empty.count == 44)
        #expect(try decodeError(empty).kind == .noSamples)
        // Less than one frame of a stereo 24-bit file.
        #expect(try decodeError(Self.wav(channels: 2, bits: 24, data: Data(count: 5))).kind == .noSamples)
        // A stated size past the end (a recording cut short) still reads what is there, in whole frames.
        let cut = try WAVFile.decode(Self.wav(channels: 2, dataSize: 1_000, data: Data(count: 10)))
        #expect(cut.samples.count == 4)
    }

    @Test func twoFormatChunksAndMissingChunksAreMalformed() throws {
        var format = Data("fmt ".utf8) + Self.le32(16) + Self.le16(1) + Self.le16(1) + Self.le32(16_000)
        format += Self.le32(32_000) + Self.le16(2) + Self.le16(16)
        let twice = try decodeError(Self.wav(before: format))
        #expect(twice.kind == .malformed && twice.description == "a second fmt chunk")
        #expect(try decodeError(Data("RIFF\0\0\0\0WAVE".utf8)).description == "no data chunk")
    }

    @Test func floatNaNIsSilenceAndInfinityClips() throws {
        let values: [Float] = [.nan, .infinity, -.infinity, 0.5]
        var payload = Data()
        for value in values { withUnsafeBytes(of: value.bitPattern.littleEndian) { payload.append(contentsOf: $0) } }
        let audio = try WAVFile.decode(Self.wav(tag: 3, bits: 32, data: payload))
        #expect(audio.samples == [0, 32767, -32768, 16384])
    }

    @Test func readRefusesWhatIsNotARegularFileAndNamesThePath() throws {
        let directory = FileManager.default.temporaryDirectory.path + "/hark-wav-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let notFile = try #require(throws: WAVError.self) { try WAVFile.read(path: directory) }
        #expect(notFile.kind == .unreadable && notFile.description.contains("not a regular file"))
        let missing = try #require(throws: WAVError.self) { try WAVFile.read(path: directory + "/missing.wav") }
        #expect(missing.kind == .unreadable && missing.description.hasSuffix("missing.wav: no such file"))
        // A file past the whole-file bound is refused before it is read (a sparse one: nothing is written).
        let large = directory + "/large.wav"
        try WAVFile.encode(samples: [1], sampleRate: 16_000).write(to: URL(filePath: large))
        #expect(truncate(large, off_t(WAVFile.maximumFileBytes + 1)) == 0)
        let tooLarge = try #require(throws: WAVError.self) { try WAVFile.read(path: large) }
        #expect(tooLarge.kind == .tooLarge && tooLarge.description.contains("256 MiB"))
        let path = directory + "/empty.wav"
        try WAVFile.encode(samples: [], sampleRate: 24_000).write(to: URL(filePath: path))
        let empty = try #require(throws: WAVError.self) { try WAVFile.read(path: path) }
        #expect(empty.kind == .noSamples && empty.description.hasPrefix(path + ": "))
    }

    @Test func theHeaderWriterNeverTraps() throws {
        let streamed = WAVFile.header(sampleRate: 24_000, dataBytes: nil)
        #expect(streamed.count == 44)
        #expect(streamed[40..<44].elementsEqual([0xFF, 0xFF, 0xFF, 0xFF]))
        // Absurd values clamp to their fields.
        let absurd = WAVFile.header(sampleRate: Int.max, channels: -3, dataBytes: Int.max)
        #expect(absurd.count == 44)
        #expect(try decodeError(absurd + Data(count: 4)).kind == .malformed)
    }
}
