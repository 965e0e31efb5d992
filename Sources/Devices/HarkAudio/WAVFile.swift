import HarkCore
import HarkDSP

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The audio of a WAV file: interleaved samples as 16-bit integers, whatever the file stored.
public struct WAVAudio: Sendable, Equatable {
    /// Interleaved samples, converted to 16-bit.
    public var samples: [Int16]
    /// Sample rate in Hz.
    public var sampleRate: Int
    /// Channels per frame.
    public var channels: Int

    public init(samples: [Int16], sampleRate: Int, channels: Int) {
        self.samples = samples
        self.sampleRate = sampleRate
        self.channels = channels
    }

    /// The frames folded to mono by averaging the channels.
    public var mono: [Int16] {
        guard channels > 1 else { return samples }
        var out = [Int16]()
        out.reserveCapacity(samples.count / channels)
        var index = 0
        while index + channels <= samples.count {
            var sum = 0
            for channel in 0..<channels { sum += Int(samples[index + channel]) }
            out.append(Int16(sum / channels))
            index += channels
        }
        return out
    }
}

/// Why a WAV file could not be read or written.
public struct WAVError: Error, CustomStringConvertible, Equatable, Sendable {
    /// What went wrong, for a caller that acts on it (a command refuses ``noSamples`` up front).
    public enum Kind: String, Sendable, Hashable {
        /// The file could not be opened, read or written (or is not a regular file).
        case unreadable
        /// Not a RIFF/WAVE file, or its chunks contradict each other or the file's size.
        case malformed
        /// A well-formed file in a format, rate or channel count Hark does not take.
        case unsupported
        /// Larger than Hark reads whole (``WAVFile/maximumFileBytes``).
        case tooLarge
        /// A well-formed file without a single whole frame of audio.
        case noSamples
    }

    /// What went wrong.
    public let kind: Kind
    /// One line for a person, naming the file where known.
    public let description: String

    /// An error of `kind` that says `description`.
    public init(_ kind: Kind, _ description: String) {
        self.kind = kind
        self.description = description
    }

    /// The same error with `path: ` in front.
    public func naming(_ path: String) -> WAVError { WAVError(kind, "\(path): \(description)") }
}

/// The `fmt ` chunk of a WAV file, checked: a sample format Hark converts, a rate within
/// ``SampleRates/wavFile`` and 1…``WAVFile/maximumChannels`` channels.
public struct WAVFormat: Sendable, Hashable {
    /// 1 for integer PCM, 3 for IEEE float (`WAVE_FORMAT_EXTENSIBLE` resolved to its subformat).
    public var tag: Int
    /// Channels per frame.
    public var channels: Int
    /// Sample rate in Hz.
    public var sampleRate: Int
    /// Bits per stored sample: 8, 16, 24 or 32.
    public var bitsPerSample: Int

    /// Bytes of one frame (all channels).
    public var bytesPerFrame: Int { channels * bitsPerSample / 8 }
    /// Whether samples are 16-bit integers, as Hark streams them without conversion.
    public var isPCM16: Bool { tag == 1 && bitsPerSample == 16 }

    /// Reads and checks the body of a `fmt ` chunk (16 to ``WAVFile/maximumFormatChunkBytes`` bytes).
    public init(chunk: [UInt8]) throws {
        guard chunk.count >= 16 else { throw WAVError(.malformed, "fmt chunk of \(chunk.count) bytes (at least 16)") }
        guard chunk.count <= WAVFile.maximumFormatChunkBytes else {
            throw WAVError(.malformed, "fmt chunk of \(chunk.count) bytes (at most \(WAVFile.maximumFormatChunkBytes))")
        }
        func u16(_ at: Int) -> Int { Int(chunk[at]) | Int(chunk[at + 1]) << 8 }
        func u32(_ at: Int) -> Int { u16(at) | u16(at + 2) << 16 }
        var tag = u16(0)
        if tag == 0xFFFE, chunk.count >= 40 { tag = u16(24) }
        channels = u16(2)
        sampleRate = u32(4)
        bitsPerSample = u16(14)
        self.tag = tag
        guard channels > 0 else { throw WAVError(.malformed, "no channels") }
        guard channels <= WAVFile.maximumChannels else {
            throw WAVError(.unsupported, "\(channels) channels (at most \(WAVFile.maximumChannels))")
        }
        let rates = SampleRates.wavFile
        guard rates.contains(sampleRate) else {
            throw WAVError(
                .unsupported,
                "sample rate \(sampleRate) Hz (Hark takes \(rates.lowerBound)–\(rates.upperBound) Hz)"
            )
        }
        switch (tag, bitsPerSample) {
        case (1, 8), (1, 16), (1, 24), (1, 32), (3, 32): break
        default: throw WAVError(.unsupported, "unsupported sample format (format tag \(tag), \(bitsPerSample) bits)")
        }
    }
}

/// Reads and writes RIFF/WAVE files: PCM 8/16/24/32-bit and 32-bit float, 8–192 kHz, up to 32 channels.
/// Every size a file states is checked against the file's own size before use.
public enum WAVFile {
    /// Largest file ``read(path:)`` takes whole (256 MiB: 46 minutes of 48 kHz 16-bit stereo). A longer
    /// 16-bit recording is read a block at a time by HarkAudio's `WAVStreamReader`.
    public static let maximumFileBytes = 256 << 20
    /// Most channels a file may have.
    public static let maximumChannels = 32
    /// Largest `fmt ` chunk taken (40 bytes is the largest standard one).
    public static let maximumFormatChunkBytes = 1024

    /// Reads the WAV file at `path`: a regular file of at most ``maximumFileBytes``. Throws ``WAVError``
    /// naming `path`.
    public static func read(path: String) throws -> WAVAudio {
        let data = try contents(path: path)
        do {
            return try decode(data)
        } catch let error as WAVError {
            throw error.naming(path)
        }
    }

    /// The bytes of the WAV file at `path`: a regular file (a link to one is followed) of at most
    /// ``maximumFileBytes``. Throws ``WAVError`` naming `path`.
    public static func contents(path: String) throws -> Data {
        let attributes: [FileAttributeKey: Any]
        do {
            attributes = try ReadableFile.attributes(atPath: path)
        } catch {
            throw WAVError(.unreadable, "cannot read \(path): \(fileErrorReason(error))")
        }
        guard attributes[.type] as? FileAttributeType == .typeRegular else {
            throw WAVError(.unreadable, "cannot read \(path): not a regular file")
        }
        let stated = attributes[.size]
        // FoundationEssentials states the size as UInt, Foundation on other platforms as another integer.
        let size =
            (stated as? UInt).map { Int(clamping: $0) } ?? (stated as? UInt64).map { Int(clamping: $0) }
            ?? (stated as? Int64).map { Int(clamping: $0) } ?? (stated as? Int) ?? 0
        if size > maximumFileBytes {
            throw WAVError(.tooLarge, "\(path): \(size) bytes, more than the \(maximumFileBytes >> 20) MiB read whole")
        }
        let data: Data
        do {
            data = try Data(contentsOf: URL(filePath: path))
        } catch {
            throw WAVError(.unreadable, "cannot read \(path): \(fileErrorReason(error))")
        }
        guard data.count <= maximumFileBytes else {
            throw WAVError(.tooLarge, "\(path): more than the \(maximumFileBytes >> 20) MiB read whole")
        }
        return data
    }

    /// Decodes WAV bytes (without copying them first: a long recording is converted in place). A data chunk
    /// that states more than the bytes hold (or 0xFFFFFFFF, a recording still being written) runs to the
    /// end; any other chunk that passes the end is an error.
    public static func decode(_ data: Data) throws -> WAVAudio {
        try data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws -> WAVAudio in
            let (format, payload) = try layout(bytes)
            let samples = samples(from: UnsafeRawBufferPointer(rebasing: bytes[payload]), format: format)
            return WAVAudio(samples: samples, sampleRate: format.sampleRate, channels: format.channels)
        }
    }

    /// The format of WAV bytes and their whole frames, from the chunks before the samples, with nothing decoded:
    /// what a reader checks its bounds against first.
    public static func header(_ data: Data) throws -> (format: WAVFormat, frames: Int) {
        try data.withUnsafeBytes { bytes in
            let (format, payload) = try layout(bytes)
            return (format, payload.count / format.bytesPerFrame)
        }
    }

    /// The format and where the whole frames of the samples lie in `bytes` (see ``decode(_:)``).
    private static func layout(_ bytes: UnsafeRawBufferPointer) throws -> (WAVFormat, Range<Int>) {
        guard bytes.count >= 12, Array(bytes[0..<4]) == Array("RIFF".utf8), Array(bytes[8..<12]) == Array("WAVE".utf8)
        else { throw WAVError(.malformed, "not a RIFF/WAVE file") }
        func u32(_ at: Int) -> Int {
            Int(bytes[at]) | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2]) << 16 | Int(bytes[at + 3]) << 24
        }
        var offset = 12
        var format: WAVFormat?
        while offset + 8 <= bytes.count {
            let id = Array(bytes[offset..<offset + 4])
            let size = u32(offset + 4)
            let body = offset + 8
            let remaining = bytes.count - body
            if id == Array("data".utf8) {
                guard let format else { throw WAVError(.malformed, "data chunk before fmt chunk") }
                let stated = size > remaining || size == 0xFFFF_FFFF ? remaining : size
                let frames = stated / format.bytesPerFrame
                guard frames > 0 else {
                    throw WAVError(.noSamples, "no audio (the data chunk holds no whole frame)")
                }
                return (format, body..<body + frames * format.bytesPerFrame)
            }
            guard size <= remaining else {
                throw WAVError(
                    .malformed,
                    "chunk \(chunkName(id)) of \(size) bytes runs past the end of the file (\(remaining) bytes left)"
                )
            }
            if id == Array("fmt ".utf8) {
                guard format == nil else { throw WAVError(.malformed, "a second fmt chunk") }
                format = try WAVFormat(chunk: Array(bytes[body..<body + size]))
            }
            offset = body + size + (size & 1)
        }
        throw WAVError(.malformed, "no data chunk")
    }

    /// A file error in a few words: the system's reason (`no such file`, `permission denied`, or the
    /// errno name) rather than the whole error value.
    static func fileErrorReason(_ error: any Error) -> String {
        guard let cocoa = error as? CocoaError, let posix = cocoa.userInfo["NSUnderlyingError"] as? POSIXError else {
            return "\(error)"
        }
        // By name: the codes' members live in the C library's module, which the core does not import.
        let name = "\(posix.code)"
        switch name {
        case "ENOENT": return "no such file"
        case "EACCES", "EPERM": return "permission denied"
        case "EISDIR": return "a directory"
        default: return name
        }
    }

    /// A chunk id for a message: its four characters when printable ASCII, else their hex.
    public static func chunkName(_ id: [UInt8]) -> String {
        if id.allSatisfy({ (0x20..<0x7F).contains($0) }) { return "'\(String(decoding: id, as: UTF8.self))'" }
        return "0x"
            + id.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }
            .joined()
    }

    /// The payload's samples (whole frames of `format`) as 16-bit integers: what a streaming reader converts a
    /// block at a time.
    public static func samples(from payload: UnsafeRawBufferPointer, format: WAVFormat) -> [Int16] {
        switch (format.tag, format.bitsPerSample) {
        case (1, 16):
            let count = payload.count / 2
            var out = [Int16](repeating: 0, count: count)
            out.withUnsafeMutableBytes {
                $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: payload[0..<(count * 2)]))
            }
            #if !_endian(little)
                for index in out.indices { out[index] = Int16(littleEndian: out[index]) }
            #endif
            return out
        case (1, 8):
            return payload.map { Int16((Int($0) - 128) << 8) }
        case (1, 24):
            return stride(from: 0, to: payload.count - 2, by: 3).map { index in
                let value = Int32(payload[index + 1]) | Int32(Int8(bitPattern: payload[index + 2])) << 8
                return Int16(truncatingIfNeeded: value)
            }
        case (1, 32):
            return stride(from: 0, to: payload.count - 3, by: 4).map { index in
                Int16(truncatingIfNeeded: Int32(payload[index + 2]) | Int32(Int8(bitPattern: payload[index + 3])) << 8)
            }
        default:  // (3, 32): WAVFormat admits no other
            return stride(from: 0, to: payload.count - 3, by: 4).map { index in
                let pattern =
                    UInt32(payload[index]) | UInt32(payload[index + 1]) << 8
                    | UInt32(payload[index + 2]) << 16 | UInt32(payload[index + 3]) << 24
                let value = Float(bitPattern: pattern)
                // NaN becomes silence; ±∞ and out-of-range values clip.
                guard !value.isNaN else { return 0 }
                return Int16(max(-32768, min(32767, (value * 32768).rounded())))
            }
        }
    }

    /// WAV bytes for 16-bit `samples` (interleaved when `channels` > 1).
    public static func encode(samples: [Int16], sampleRate: Int, channels: Int = 1) -> Data {
        header(sampleRate: sampleRate, channels: channels, dataBytes: samples.count * 2) + PCM16.bytes(samples)
    }

    /// The 44-byte header of a 16-bit PCM WAV file whose data chunk holds `dataBytes` bytes; nil (or more than
    /// 4 GiB) states 0xFFFFFFFF, "to the end of the file", as a stream whose length is not known yet.
    /// Values past their fields' range are clamped, never a trap.
    public static func header(sampleRate: Int, channels: Int = 1, dataBytes: Int?) -> Data {
        var out = Data()
        out.reserveCapacity(44)
        let rate = max(0, min(sampleRate, Int(UInt32.max)))
        let channels = max(0, min(channels, Int(UInt16.max)))
        let dataSize = min(dataBytes.map { max(0, $0) } ?? Int(UInt32.max), Int(UInt32.max))
        func put32(_ value: Int) {
            withUnsafeBytes(of: UInt32(clamping: value).littleEndian) { out.append(contentsOf: $0) }
        }
        func put16(_ value: Int) {
            withUnsafeBytes(of: UInt16(clamping: value).littleEndian) { out.append(contentsOf: $0) }
        }
        out.append(contentsOf: Array("RIFF".utf8))
        put32(36 + dataSize)
        out.append(contentsOf: Array("WAVEfmt ".utf8))
        put32(16)
        put16(1)
        put16(channels)
        put32(rate)
        put32(rate * channels * 2)
        put16(channels * 2)
        put16(16)
        out.append(contentsOf: Array("data".utf8))
        put32(dataSize)
        return out
    }

    /// Writes 16-bit `samples` as a WAV file at `path`, atomically.
    public static func write(path: String, samples: [Int16], sampleRate: Int, channels: Int = 1) throws {
        try encode(samples: samples, sampleRate: sampleRate, channels: channels)
            .write(to: URL(filePath: path), options: .atomic)
    }
}

extension WAVFile {
    /// The recording at `path` as mono samples at `sampleRate` (channels mixed, the rate converted when it
    /// differs). Throws a ``WAVError`` for a file it cannot use, one whose converted samples would pass
    /// ``Resampler/maximumSamplesPerCall`` (checked from its header, before any sample is decoded), or the
    /// resampler's error. (`hark converse` and `hark wake` read a block at a time: HarkAudio's `WAVStreamReader`.)
    public static func readMono(path: String, sampleRate: Int) throws -> [Int16] {
        let data = try contents(path: path)
        let (format, frames) = try header(data)
        let converted = frames * max(sampleRate, 0) / max(format.sampleRate, 1)
        guard converted <= Resampler.maximumSamplesPerCall, frames <= Resampler.maximumSamplesPerCall else {
            throw WAVError(
                .tooLarge,
                "\(path): \(frames) frames at \(format.sampleRate) Hz, more than the "
                    + "\(Resampler.maximumSamplesPerCall) samples converted at once"
            )
        }
        let audio = try decode(data)
        guard audio.sampleRate != sampleRate else { return audio.mono }
        return try Resampler.convert(audio.mono, from: audio.sampleRate, to: sampleRate)
    }
}
