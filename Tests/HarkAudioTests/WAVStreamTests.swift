import HarkAudio
import HarkCore
import Testing

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Streamed WAV files: read a block at a time, written to a temporary file renamed into place when finished.
@Suite struct WAVStreamTests {
    @Test func aStreamedWAVReadsAsTheWholeFileDoesBlockByBlock() throws {
        let path = FileManager.default.temporaryDirectory.path + "/hark-stream-\(UUID().uuidString).wav"
        defer { try? FileManager.default.removeItem(atPath: path) }
        // Stereo, 16-bit, with a chunk before "fmt " that the reader must skip.
        let frames = (0..<1_001).flatMap { [Int16($0), Int16(-$0 - 2)] }
        var wav = Data("RIFF".utf8) + le32(0) + Data("WAVE".utf8) + Data("LIST".utf8) + le32(3) + Data([1, 2, 3, 0])
        wav += Data("fmt ".utf8) + le32(16) + le16(1) + le16(2) + le32(16_000) + le32(64_000) + le16(4) + le16(16)
        wav += Data("data".utf8) + le32(0xFFFF_FFFF) + PCM16.bytes(frames)  // size unset: to the end
        try wav.write(to: URL(filePath: path))
        let whole = try WAVFile.read(path: path)
        let reader = try #require(try WAVStreamReader(path: path))
        #expect(reader.frames == 1_001 && reader.channels == 2 && reader.sampleRate == 16_000)
        var streamed: [Int16] = []
        while case let block = try reader.readMono(160), !block.isEmpty {
            #expect(block.count <= 160)
            streamed += block
        }
        #expect(streamed == whole.mono)
        #expect(streamed.count == 1_001)
    }

    @Test func aWAVInAnotherFormatIsLeftToTheWholeReaderAndNonsenseIsAnError() throws {
        let path = FileManager.default.temporaryDirectory.path + "/hark-stream-\(UUID().uuidString).wav"
        defer { try? FileManager.default.removeItem(atPath: path) }
        var float = Data("RIFF".utf8) + le32(44) + Data("WAVEfmt ".utf8) + le32(16)
        float += le16(3) + le16(1) + le32(16_000) + le32(64_000) + le16(4) + le16(32)
        float += Data("data".utf8) + le32(8) + Data(count: 8)
        try float.write(to: URL(filePath: path))
        #expect(try WAVStreamReader(path: path) == nil)
        try Data("nonsense".utf8).write(to: URL(filePath: path))
        #expect(throws: WAVError.self) { try WAVStreamReader(path: path) }
        #expect(throws: WAVError.self) { try WAVStreamReader(path: path + ".missing") }
    }

    @Test func aStreamedWAVAppearsWholeAtItsPathOnlyWhenFinished() throws {
        let path = FileManager.default.temporaryDirectory.path + "/hark-out-\(UUID().uuidString).wav"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = try WAVStreamWriter(path: path, sampleRate: 24_000)
        let samples = (0..<5_000).map { Int16(truncatingIfNeeded: $0 * 7) }
        try writer.write(Array(samples[0..<1_234]))
        try writer.write([])
        try writer.write(Array(samples[1_234...]))
        #expect(!FileManager.default.fileExists(atPath: path))
        try writer.finish()
        #expect(writer.samples == 5_000)
        #expect(try WAVFile.read(path: path) == WAVAudio(samples: samples, sampleRate: 24_000, channels: 1))
        #expect(!FileManager.default.fileExists(atPath: path + ".partial"))
        #expect(throws: WAVError.self) { try WAVStreamWriter(path: "/nonexistent-dir/x.wav", sampleRate: 24_000) }
    }

    func le32(_ value: Int) -> Data { withUnsafeBytes(of: UInt32(value).littleEndian) { Data($0) } }
    func le16(_ value: Int) -> Data { withUnsafeBytes(of: UInt16(value).littleEndian) { Data($0) } }
}
