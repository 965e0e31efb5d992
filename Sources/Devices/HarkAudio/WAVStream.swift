import HarkCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Reads the samples of a 16-bit PCM WAV file a block at a time, so a long recording never sits in
/// memory whole. Other sample formats are read whole with ``WAVFile/read(path:)``.
public final class WAVStreamReader {
    /// Sample rate in Hz.
    public let sampleRate: Int
    /// Channels per frame.
    public let channels: Int
    /// Frames in the file.
    public let frames: Int
    private let file: UnsafeMutablePointer<FILE>
    private var framesLeft: Int
    private let path: String

    /// Opens `path`; nil when it is a WAV file in another sample format than 16-bit PCM (read it whole
    /// then). Throws ``WAVError`` when it cannot be read or is not a WAV file.
    public init?(path: String) throws {
        guard let file = fopen(path, "rb") else {
            throw WAVError("cannot read \(path): \(String(cString: strerror(errno)))")
        }
        func bytes(_ count: Int) -> [UInt8]? {
            var out = [UInt8](repeating: 0, count: count)
            return fread(&out, 1, count, file) == count ? out : nil
        }
        func u16(_ b: [UInt8], _ at: Int) -> Int { Int(b[at]) | Int(b[at + 1]) << 8 }
        func u32(_ b: [UInt8], _ at: Int) -> Int { u16(b, at) | u16(b, at + 2) << 16 }
        guard let riff = bytes(12), riff[0..<4].elementsEqual("RIFF".utf8), riff[8..<12].elementsEqual("WAVE".utf8)
        else {
            fclose(file)
            throw WAVError("\(path): not a RIFF/WAVE file")
        }
        var format: (tag: Int, channels: Int, rate: Int, bits: Int)?
        while let header = bytes(8) {
            let size = u32(header, 4)
            if header[0..<4].elementsEqual("fmt ".utf8) {
                guard size >= 16, let body = bytes(size + (size & 1)) else { break }
                var tag = u16(body, 0)
                if tag == 0xFFFE, size >= 40 { tag = u16(body, 24) }
                format = (tag, u16(body, 2), u32(body, 4), u16(body, 14))
            } else if header[0..<4].elementsEqual("data".utf8) {
                guard let format else {
                    fclose(file)
                    throw WAVError("\(path): data chunk before fmt chunk")
                }
                guard format.tag == 1, format.bits == 16 else {
                    fclose(file)
                    return nil
                }
                guard format.channels > 0, format.rate > 0 else {
                    fclose(file)
                    throw WAVError("\(path): zero channels or rate")
                }
                // A streamed WAV may leave the size unset: read to the end of the file then.
                var payload = size
                let start = ftell(file)
                if fseek(file, 0, SEEK_END) == 0 {
                    let available = ftell(file) - start
                    if size == 0xFFFF_FFFF || size > available { payload = available }
                    fseek(file, start, SEEK_SET)
                }
                self.file = file
                self.path = path
                sampleRate = format.rate
                channels = format.channels
                frames = payload / (2 * format.channels)
                framesLeft = frames
                return
            } else if fseek(file, size + (size & 1), SEEK_CUR) != 0 {
                break
            }
        }
        fclose(file)
        throw WAVError("\(path): no data chunk")
    }

    deinit { fclose(file) }

    /// Up to `count` frames folded to mono (the channels averaged); empty at the end.
    public func readMono(_ count: Int) throws -> [Int16] {
        let wanted = min(count, framesLeft)
        guard wanted > 0 else { return [] }
        var interleaved = [Int16](repeating: 0, count: wanted * channels)
        let got = interleaved.withUnsafeMutableBytes { fread($0.baseAddress, 2 * channels, wanted, file) }
        guard got > 0 else {
            if ferror(file) != 0 { throw WAVError("cannot read \(path): \(String(cString: strerror(errno)))") }
            framesLeft = 0
            return []
        }
        framesLeft -= got
        #if !_endian(little)
            for index in interleaved.indices { interleaved[index] = Int16(littleEndian: interleaved[index]) }
        #endif
        guard channels > 1 else {
            if got < wanted { interleaved.removeLast(wanted - got) }
            return interleaved
        }
        return WAVAudio(samples: Array(interleaved[0..<(got * channels)]), sampleRate: sampleRate, channels: channels)
            .mono
    }
}

/// Writes a 16-bit mono WAV file as the samples come: into a temporary file beside `path`, renamed to
/// `path` by ``finish()`` once the header holds the final sizes (a reader never sees half a file).
/// Not locked: its owner calls it from one place at a time (behind its own lock).
public final class WAVStreamWriter: @unchecked Sendable {
    /// Samples written so far.
    public private(set) var samples = 0
    private let path: String
    private let temporary: String
    private var file: UnsafeMutablePointer<FILE>?
    private let sampleRate: Int

    /// Creates the temporary file and writes a header. Throws ``WAVError`` naming `path` when it cannot.
    public init(path: String, sampleRate: Int) throws {
        self.path = path
        self.sampleRate = sampleRate
        temporary = path + ".partial"
        guard let file = fopen(temporary, "wb") else {
            throw WAVError("cannot write \(path): \(String(cString: strerror(errno)))")
        }
        self.file = file
        setvbuf(file, nil, _IOFBF, 64 << 10)
        try put(WAVFile.encode(samples: [], sampleRate: sampleRate))
    }

    deinit {
        if let file {
            fclose(file)
            unlink(temporary)
        }
    }

    /// Appends `chunk`.
    public func write(_ chunk: [Int16]) throws {
        guard !chunk.isEmpty else { return }
        try put(PCM16.bytes(chunk))
        samples += chunk.count
    }

    /// Writes the sizes into the header and moves the file to its path.
    public func finish() throws {
        guard let file else { return }
        self.file = nil
        defer { fclose(file) }
        let dataSize = samples * 2
        func patch(at offset: Int, _ value: Int) -> Bool {
            var little = UInt32(truncatingIfNeeded: value).littleEndian
            return fseek(file, offset, SEEK_SET) == 0 && fwrite(&little, 4, 1, file) == 1
        }
        guard patch(at: 4, 36 + dataSize), patch(at: 40, dataSize), fflush(file) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw WAVError("cannot write \(path): \(reason)")
        }
        guard rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw WAVError("cannot write \(path): \(reason)")
        }
    }

    private func put(_ data: Data) throws {
        guard let file else { return }
        let written = data.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
        guard written == data.count else { throw WAVError("cannot write \(path): \(String(cString: strerror(errno)))") }
    }
}
