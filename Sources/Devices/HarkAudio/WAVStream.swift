import HarkCore
import HarkDSP

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

/// Reads the samples of a WAV file a block at a time, so a long recording never sits in memory whole: 16-bit PCM
/// (``init(path:)``), or every format ``WAVFormat`` takes (``init(anyFormat:)``), converted to 16-bit a block at a
/// time. Every chunk size is checked against the file's size (when it has one: a pipe is read as it comes) and the
/// `fmt ` chunk as ``WAVFormat`` checks it. ``readMono(path:sampleRate:maximumSamples:)`` converts a whole
/// recording's rate as it reads, its bound checked from the header first.
public final class WAVStreamReader {
    /// Most frames one ``readMono(_:)`` returns, whatever it is asked for.
    public static let maximumFramesPerRead = 1 << 20

    /// Sample rate in Hz.
    public let sampleRate: Int
    /// Channels per frame.
    public let channels: Int
    /// Frames in the file (as its header states them, for a pipe).
    public let frames: Int
    /// The stored sample format.
    public let format: WAVFormat
    private let file: UnsafeMutablePointer<FILE>
    private var framesLeft: Int
    private let path: String

    /// Opens `path`; nil when it is a WAV file in another sample format than 16-bit PCM (read it with
    /// ``init(anyFormat:)`` then). Throws ``WAVError`` naming `path` when it cannot be read, is not a WAV file,
    /// passes a limit, or holds no samples (``WAVError/Kind/noSamples``).
    public convenience init?(path: String) throws {
        try self.init(path: path, anyFormat: false)
    }

    /// Opens `path` in any sample format ``WAVFormat`` takes (8, 16, 24 or 32-bit integers, 32-bit floats), each
    /// block converted to 16-bit as it is read. Throws as ``init(path:)`` does.
    public convenience init(anyFormat path: String) throws {
        try self.init(path: path, anyFormat: true)!
    }

    private init?(path: String, anyFormat: Bool) throws {
        guard let file = fopen(path, "rb") else {
            throw WAVError(.unreadable, "cannot read \(path): \(String(cString: strerror(errno)))")
        }
        let header: (format: WAVFormat, frames: Int)
        do {
            header = try Self.readHeader(file)
        } catch let error as WAVError {
            fclose(file)
            throw error.naming(path)
        }
        guard anyFormat || header.format.isPCM16 else {
            fclose(file)
            return nil
        }
        self.file = file
        self.path = path
        format = header.format
        sampleRate = header.format.sampleRate
        channels = header.format.channels
        frames = header.frames
        framesLeft = header.frames
    }

    /// The recording at `path` as mono samples at `sampleRate`, read and converted a block at a time (any sample
    /// format, any rate the resampler takes). A recording whose converted samples would pass `maximumSamples` is
    /// refused from its header, before any sample is read: what `hark wake` reads. Throws ``WAVError`` naming
    /// `path`, or the resampler's error for a rate it does not take.
    public static func readMono(
        path: String,
        sampleRate: Int,
        maximumSamples: Int = Resampler.maximumSamplesPerCall
    ) throws -> [Int16] {
        let reader = try WAVStreamReader(anyFormat: path)
        // Frames fit 32 bits (a data chunk's size) and rates are at most a few hundred kHz: no overflow.
        let expected = reader.frames * max(sampleRate, 0) / max(reader.sampleRate, 1)
        guard expected <= maximumSamples else {
            let minutes = reader.frames / max(reader.sampleRate, 1) / 60
            throw WAVError(
                .tooLarge,
                "\(path): \(minutes) minutes of audio, more than the \(maximumSamples / max(sampleRate, 1) / 60) "
                    + "minutes read at once"
            )
        }
        let resampler =
            reader.sampleRate == sampleRate ? nil : try Resampler(inputRate: reader.sampleRate, outputRate: sampleRate)
        var out: [Int16] = []
        out.reserveCapacity(min(expected, 1 << 20) + 64)
        while true {
            let block = try reader.readMono(1 << 16)
            if block.isEmpty { break }
            out += try resampler?.process(block) ?? block
        }
        guard let resampler else { return out }
        out += resampler.flush()
        let converted = min(expected, reader.framesRead * sampleRate / max(reader.sampleRate, 1))
        if out.count > converted { out.removeSubrange(converted...) }
        return out
    }

    /// Frames read so far.
    public var framesRead: Int { frames - framesLeft }

    deinit { fclose(file) }

    /// Reads the chunks up to the data chunk's samples: its format and frames, or nil for a format other
    /// than 16-bit PCM.
    private static func readHeader(_ file: UnsafeMutablePointer<FILE>) throws -> (format: WAVFormat, frames: Int) {
        var status = stat()
        guard fstat(fileno(file), &status) == 0 else {
            throw WAVError(.unreadable, "cannot read: \(String(cString: strerror(errno)))")
        }
        switch status.st_mode & S_IFMT {
        case S_IFDIR: throw WAVError(.unreadable, "cannot read: a directory")
        case S_IFREG, S_IFIFO, S_IFCHR: break
        default: throw WAVError(.unreadable, "cannot read: not a file")
        }
        // A regular file's size bounds every chunk; a pipe is taken as it comes.
        let fileSize: Int? = status.st_mode & S_IFMT == S_IFREG ? Int(status.st_size) : nil
        func bytes(_ count: Int) -> [UInt8]? {
            var out = [UInt8](repeating: 0, count: count)
            return fread(&out, 1, count, file) == count ? out : nil
        }
        /// Moves `count` bytes on: a seek in a file, reads of at most 64 KiB in a pipe.
        func skip(_ count: Int) -> Bool {
            guard count > 0 else { return true }
            if fileSize != nil { return fseek(file, count, SEEK_CUR) == 0 }
            var left = count
            var scratch = [UInt8](repeating: 0, count: min(count, 1 << 16))
            while left > 0 {
                let got = fread(&scratch, 1, min(left, scratch.count), file)
                if got == 0 { return false }
                left -= got
            }
            return true
        }
        func u32(_ b: [UInt8], _ at: Int) -> Int {
            Int(b[at]) | Int(b[at + 1]) << 8 | Int(b[at + 2]) << 16 | Int(b[at + 3]) << 24
        }
        guard let riff = bytes(12), riff[0..<4].elementsEqual("RIFF".utf8), riff[8..<12].elementsEqual("WAVE".utf8)
        else { throw WAVError(.malformed, "not a RIFF/WAVE file") }
        var offset = 12
        var format: WAVFormat?
        while let header = bytes(8) {
            let id = Array(header[0..<4])
            let size = u32(header, 4)
            let body = offset + 8
            let remaining = fileSize.map { $0 - body }
            if id.elementsEqual("data".utf8) {
                guard let format else { throw WAVError(.malformed, "data chunk before fmt chunk") }
                // A streamed WAV may leave the size unset (0xFFFFFFFF) or too large: read to the end then.
                var payload = size
                if let remaining, size == 0xFFFF_FFFF || size > remaining { payload = remaining }
                let frames = payload / format.bytesPerFrame
                guard frames > 0 else { throw WAVError(.noSamples, "no audio (the data chunk holds no whole frame)") }
                return (format, frames)
            }
            if let remaining, size > remaining {
                throw WAVError(
                    .malformed,
                    "chunk \(WAVFile.chunkName(id)) of \(size) bytes runs past the end of the file (\(remaining) bytes left)"
                )
            }
            if id.elementsEqual("fmt ".utf8) {
                guard format == nil else { throw WAVError(.malformed, "a second fmt chunk") }
                // Checked before anything is read: the size comes from the file.
                guard (16...WAVFile.maximumFormatChunkBytes).contains(size) else {
                    throw WAVError(
                        .malformed,
                        "fmt chunk of \(size) bytes (16 to \(WAVFile.maximumFormatChunkBytes))"
                    )
                }
                guard let chunk = bytes(size) else { throw WAVError(.malformed, "fmt chunk cut short") }
                format = try WAVFormat(chunk: chunk)
                guard skip(size & 1) else { break }
            } else if !skip(size + (size & 1)) {
                break
            }
            offset = body + size + (size & 1)
        }
        if ferror(file) != 0 { throw WAVError(.unreadable, "cannot read: \(String(cString: strerror(errno)))") }
        throw WAVError(.malformed, "no data chunk")
    }

    /// Up to `count` frames (at most ``maximumFramesPerRead``) folded to mono (the channels averaged);
    /// empty at the end.
    public func readMono(_ count: Int) throws -> [Int16] {
        guard format.isPCM16 else { return try readConvertedMono(count) }
        let wanted = min(count, framesLeft, Self.maximumFramesPerRead)
        guard wanted > 0 else { return [] }
        var interleaved = [Int16](repeating: 0, count: wanted * channels)
        let got = interleaved.withUnsafeMutableBytes { fread($0.baseAddress, 2 * channels, wanted, file) }
        guard got > 0 else {
            if ferror(file) != 0 {
                throw WAVError(.unreadable, "cannot read \(path): \(String(cString: strerror(errno)))")
            }
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

    /// ``readMono(_:)`` for a format other than 16-bit PCM: the block's bytes, converted as ``WAVFile`` converts them.
    private func readConvertedMono(_ count: Int) throws -> [Int16] {
        let wanted = min(count, framesLeft, Self.maximumFramesPerRead)
        guard wanted > 0 else { return [] }
        let frameBytes = format.bytesPerFrame
        var bytes = [UInt8](repeating: 0, count: wanted * frameBytes)
        let got = bytes.withUnsafeMutableBytes { fread($0.baseAddress, frameBytes, wanted, file) }
        guard got > 0 else {
            if ferror(file) != 0 {
                throw WAVError(.unreadable, "cannot read \(path): \(String(cString: strerror(errno)))")
            }
            framesLeft = 0
            return []
        }
        framesLeft -= got
        let samples = bytes.withUnsafeBytes {
            WAVFile.samples(from: UnsafeRawBufferPointer(rebasing: $0[0..<(got * frameBytes)]), format: format)
        }
        guard channels > 1 else { return samples }
        return WAVAudio(samples: samples, sampleRate: sampleRate, channels: channels).mono
    }
}

/// Writes a 16-bit mono WAV file as the samples come.
///
/// A new file or a regular one is written into a temporary file beside `path` (`PATH.partial-` and 16 hex
/// digits, created with `O_CREAT | O_EXCL | O_NOFOLLOW`, mode 0644: never through a link planted at that
/// name) and renamed to `path` by ``finish()`` once the header holds the final sizes, so a reader never
/// sees half a file. A character device (`/dev/null`, a terminal) is written directly, its header stating
/// "to the end". Any other kind of file at `path` (a directory, a pipe, a socket, a block device) is refused.
///
/// Not locked: its owner calls it from one place at a time (behind its own lock).
public final class WAVStreamWriter: @unchecked Sendable {
    /// Samples accepted by ``write(_:)`` so far.
    public private(set) var samples = 0
    /// True when `path` is a character device written directly (no temporary file, no rename).
    public let writesDirectly: Bool
    /// The first write that failed, if one did: later writes are refused with it, and ``finish()`` keeps
    /// what reached the file before it.
    public private(set) var writeError: WAVError?
    private let path: String
    /// The temporary file, nil when writing directly.
    private let temporary: String?
    private var descriptor: Int32
    /// Bytes not yet handed to the kernel.
    private var pending: [UInt8] = []
    /// Bytes that reached the file, the header included.
    private var written = 0
    private static let headerBytes = 44
    private static let bufferBytes = 64 << 10

    /// Creates the temporary file (or opens the device) and writes a header. Throws ``WAVError`` naming
    /// `path` when `path` is empty or names something that is neither a regular file nor a character
    /// device, when `sampleRate` is outside ``SampleRates/wavFile``, or when it cannot write.
    public init(path: String, sampleRate: Int) throws {
        guard !path.isEmpty else { throw WAVError(.unreadable, "no output file named (an empty path)") }
        let rates = SampleRates.wavFile
        guard rates.contains(sampleRate) else {
            throw WAVError(
                .unsupported,
                "cannot write \(path): sample rate \(sampleRate) Hz (\(rates.lowerBound)–\(rates.upperBound) Hz)"
            )
        }
        self.path = path
        var status = stat()
        var direct = false
        if stat(path, &status) == 0 {
            switch status.st_mode & S_IFMT {
            case S_IFREG: break
            case S_IFCHR: direct = true
            default:
                throw WAVError(
                    .unreadable,
                    "cannot write \(path): it exists and is not a regular file or a character device"
                )
            }
        } else if errno != ENOENT {
            throw WAVError(.unreadable, "cannot write \(path): \(String(cString: strerror(errno)))")
        }
        writesDirectly = direct
        if direct {
            // No O_CREAT, no O_TRUNC: the device stays the device.
            descriptor = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC)
            temporary = nil
            guard descriptor >= 0 else {
                throw WAVError(.unreadable, "cannot write \(path): \(String(cString: strerror(errno)))")
            }
            var opened = stat()
            guard fstat(descriptor, &opened) == 0, opened.st_mode & S_IFMT == S_IFCHR else {
                close(descriptor)
                descriptor = -1
                throw WAVError(.unreadable, "cannot write \(path): it changed while it was opened")
            }
        } else {
            var name = ""
            var fd: Int32 = -1
            for _ in 0..<16 {
                let suffix = String(UInt64.random(in: 0...UInt64.max), radix: 16)
                name = path + ".partial-" + String(repeating: "0", count: 16 - suffix.count) + suffix
                fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
                if fd >= 0 || errno != EEXIST { break }
            }
            guard fd >= 0 else {
                throw WAVError(.unreadable, "cannot write \(path): \(String(cString: strerror(errno)))")
            }
            descriptor = fd
            temporary = name
        }
        pending.reserveCapacity(Self.bufferBytes)
        pending += WAVFile.header(sampleRate: sampleRate, dataBytes: direct ? nil : 0)
        do {
            try flush()
        } catch {
            discard()
            throw error
        }
    }

    deinit { discard() }

    /// Appends `chunk`. After a failed write every later one throws the same error.
    public func write(_ chunk: [Int16]) throws {
        if let writeError { throw writeError }
        guard descriptor >= 0 else { throw WAVError(.unreadable, "cannot write \(path): already finished") }
        guard !chunk.isEmpty else { return }
        #if _endian(little)
            chunk.withUnsafeBytes { pending.append(contentsOf: $0) }
        #else
            for sample in chunk { withUnsafeBytes(of: sample.littleEndian) { pending.append(contentsOf: $0) } }
        #endif
        samples += chunk.count
        if pending.count >= Self.bufferBytes { try flush() }
    }

    /// Completes the file with every sample that reached it and moves it to its path (a device is only
    /// flushed and closed). Also after a failed write or an interrupted run: what reached the file is kept
    /// as a whole WAV file. Returns how many samples the finished file holds; a second call returns the
    /// same and does nothing. Throws ``WAVError`` when the file cannot be completed or moved (the
    /// temporary file is kept then, and the error names it).
    @discardableResult
    public func finish() throws -> Int {
        guard descriptor >= 0 else { return kept }
        try? flush()
        let dataBytes = (written - Self.headerBytes) / 2 * 2
        kept = dataBytes / 2
        let fd = descriptor
        descriptor = -1
        defer { close(fd) }
        guard let temporary else { return kept }
        func patch(at offset: Int, _ value: Int) -> Bool {
            var little = UInt32(clamping: value).littleEndian
            return pwrite(fd, &little, 4, off_t(offset)) == 4
        }
        guard ftruncate(fd, off_t(Self.headerBytes + dataBytes)) == 0, patch(at: 4, 36 + dataBytes),
            patch(at: 40, dataBytes), fsync(fd) == 0
        else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw WAVError(.unreadable, "cannot write \(path): \(reason)")
        }
        // Re-checked: something put at the path since the start must not be replaced unless it is a file.
        var status = stat()
        if lstat(path, &status) == 0, status.st_mode & S_IFMT != S_IFREG, status.st_mode & S_IFMT != S_IFLNK {
            throw WAVError(
                .unreadable,
                "cannot write \(path): it is no longer a regular file; the audio is in \(temporary)"
            )
        }
        guard rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            throw WAVError(.unreadable, "cannot write \(path): \(reason); the audio is in \(temporary)")
        }
        return kept
    }

    /// Drops what was written: closes the file and removes the temporary one (a device is only closed).
    /// What ``deinit`` does for a writer never finished.
    public func discard() {
        guard descriptor >= 0 else { return }
        close(descriptor)
        descriptor = -1
        if let temporary { unlink(temporary) }
    }

    /// Samples in the finished file (set by ``finish()``).
    private var kept = 0

    /// Hands the pending bytes to the kernel; on failure keeps count of what reached the file.
    private func flush() throws {
        var start = 0
        defer { pending.removeFirst(start) }
        while start < pending.count {
            let result = pending[start...].withUnsafeBytes { writeBytes(descriptor, $0.baseAddress, $0.count) }
            if result > 0 {
                start += result
                written += result
            } else if result < 0 && errno == EINTR {
                continue
            } else {
                let reason = result == 0 ? "nothing written" : String(cString: strerror(errno))
                let error = WAVError(.unreadable, "cannot write \(path): \(reason)")
                writeError = error
                start = pending.count
                throw error
            }
        }
    }
}

/// `write(2)`, named apart from ``WAVStreamWriter/write(_:)``.
private func writeBytes(_ descriptor: Int32, _ bytes: UnsafeRawPointer?, _ count: Int) -> Int {
    write(descriptor, bytes, count)
}
