import RealModule

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A block of signed 16-bit mono samples at a known rate: the unit audio travels in between stages.
public struct AudioChunk: Sendable, Hashable {
    /// Samples, native endianness.
    public var samples: [Int16]
    /// Sample rate in Hz.
    public var sampleRate: Int

    /// When the newest sample was captured (the capture read that delivered it returned), in nanoseconds of
    /// the monotonic clock, when the chunk came from a microphone that says (nil otherwise). Carried for
    /// latency figures only: not part of the chunk's value (equality and hashing ignore it).
    public var capturedAt: UInt64?

    public init(samples: [Int16], sampleRate: Int, capturedAt: UInt64? = nil) {
        self.samples = samples
        self.sampleRate = sampleRate
        self.capturedAt = capturedAt
    }

    public static func == (lhs: AudioChunk, rhs: AudioChunk) -> Bool {
        lhs.sampleRate == rhs.sampleRate && lhs.samples == rhs.samples
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(samples)
        hasher.combine(sampleRate)
    }

    /// How long the chunk plays.
    public var duration: Duration {
        .nanoseconds(Int64(samples.count) * 1_000_000_000 / Int64(max(sampleRate, 1)))
    }

    /// Little-endian PCM16 bytes, as the wire formats carry them.
    public var littleEndianBytes: Data {
        PCM16.bytes(samples)
    }
}

/// Conversions between samples and little-endian PCM16 bytes.
public enum PCM16 {
    /// Little-endian bytes of `samples`.
    public static func bytes(_ samples: [Int16]) -> Data {
        samples.withUnsafeBufferPointer { buffer in
            #if _endian(little)
                return Data(buffer: buffer)
            #else
                return Data(buffer.map { $0.littleEndian }.withUnsafeBufferPointer { Data(buffer: $0) })
            #endif
        }
    }

    /// Samples from little-endian bytes; a trailing odd byte is ignored.
    public static func samples(_ bytes: Data) -> [Int16] {
        let count = bytes.count / 2
        var out = [Int16](repeating: 0, count: count)
        out.withUnsafeMutableBytes { destination in
            bytes.withUnsafeBytes { source in
                destination.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[0..<(count * 2)]))
            }
        }
        #if !_endian(little)
            for index in out.indices { out[index] = Int16(littleEndian: out[index]) }
        #endif
        return out
    }

    /// Root-mean-square level of `samples` in dBFS (−∞ for silence, as −200).
    ///
    /// Inlinable, so each caller gets it specialised for its collection: called through the generic
    /// entry point from another module it allocated once per sample (the voice detector measures every
    /// microphone frame: 16 000 allocations a second).
    @inlinable
    public static func levelDBFS<C: Collection>(_ samples: C) -> Double where C.Element == Int16 {
        guard !samples.isEmpty else { return -200 }
        let sum =
            samples.withContiguousStorageIfAvailable { buffer in
                buffer.reduce(0.0) { $0 + Double($1) * Double($1) }
            } ?? samples.reduce(0.0) { $0 + Double($1) * Double($1) }
        let rms = (sum / Double(samples.count)).squareRoot()
        return rms > 0 ? 20 * Double.log10(rms / 32768) : -200
    }
}

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

/// Why a WAV file could not be read.
public struct WAVError: Error, CustomStringConvertible, Equatable {
    public let description: String
    /// An error that says `description`.
    public init(_ description: String) { self.description = description }
}

/// Reads and writes RIFF/WAVE files: PCM 8/16/24/32-bit and 32-bit float, any rate and channel count.
public enum WAVFile {
    /// Reads the WAV file at `path`.
    public static func read(path: String) throws -> WAVAudio {
        let data: Data
        do {
            data = try Data(contentsOf: URL(filePath: path))
        } catch {
            throw WAVError("cannot read \(path): \(error)")
        }
        do {
            return try decode(data)
        } catch let error as WAVError {
            throw WAVError("\(path): \(error.description)")
        }
    }

    /// Decodes WAV bytes (without copying them first: a long recording is converted in place).
    public static func decode(_ data: Data) throws -> WAVAudio {
        try data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws -> WAVAudio in
            guard bytes.count >= 12, Array(bytes[0..<4]) == Array("RIFF".utf8),
                Array(bytes[8..<12]) == Array("WAVE".utf8)
            else { throw WAVError("not a RIFF/WAVE file") }
            func u16(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 }
            func u32(_ at: Int) -> Int { u16(at) | u16(at + 2) << 16 }
            var offset = 12
            var format: (tag: Int, channels: Int, rate: Int, bits: Int)?
            while offset + 8 <= bytes.count {
                let id = String(decoding: bytes[offset..<offset + 4], as: UTF8.self)
                var size = u32(offset + 4)
                let body = offset + 8
                if id == "fmt " {
                    guard size >= 16, body + 16 <= bytes.count else { throw WAVError("short fmt chunk") }
                    var tag = u16(body)
                    if tag == 0xFFFE, size >= 40 { tag = u16(body + 24) }
                    format = (tag, u16(body + 2), u32(body + 4), u16(body + 14))
                } else if id == "data" {
                    guard let format else { throw WAVError("data chunk before fmt chunk") }
                    if size > bytes.count - body || size == 0xFFFF_FFFF { size = bytes.count - body }
                    guard format.channels > 0, format.rate > 0 else { throw WAVError("zero channels or rate") }
                    let payload = UnsafeRawBufferPointer(rebasing: bytes[body..<body + size])
                    let samples = try convert(payload, tag: format.tag, bits: format.bits)
                    return WAVAudio(samples: samples, sampleRate: format.rate, channels: format.channels)
                }
                offset = body + size + (size & 1)
            }
            throw WAVError("no data chunk")
        }
    }

    private static func convert(_ payload: UnsafeRawBufferPointer, tag: Int, bits: Int) throws -> [Int16] {
        switch (tag, bits) {
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
        case (3, 32):
            return stride(from: 0, to: payload.count - 3, by: 4).map { index in
                let pattern =
                    UInt32(payload[index]) | UInt32(payload[index + 1]) << 8
                    | UInt32(payload[index + 2]) << 16 | UInt32(payload[index + 3]) << 24
                let value = Float(bitPattern: pattern)
                return Int16(max(-32768, min(32767, (value * 32768).rounded())))
            }
        default:
            throw WAVError("unsupported sample format (format tag \(tag), \(bits) bits)")
        }
    }

    /// WAV bytes for 16-bit `samples` (interleaved when `channels` > 1).
    public static func encode(samples: [Int16], sampleRate: Int, channels: Int = 1) -> Data {
        var out = Data()
        let dataSize = samples.count * 2
        func put32(_ value: Int) { withUnsafeBytes(of: UInt32(value).littleEndian) { out.append(contentsOf: $0) } }
        func put16(_ value: Int) { withUnsafeBytes(of: UInt16(value).littleEndian) { out.append(contentsOf: $0) } }
        out.append(contentsOf: Array("RIFF".utf8))
        put32(36 + dataSize)
        out.append(contentsOf: Array("WAVEfmt ".utf8))
        put32(16)
        put16(1)
        put16(channels)
        put32(sampleRate)
        put32(sampleRate * channels * 2)
        put16(channels * 2)
        put16(16)
        out.append(contentsOf: Array("data".utf8))
        put32(dataSize)
        out.append(PCM16.bytes(samples))
        return out
    }

    /// Writes 16-bit `samples` as a WAV file at `path`, atomically.
    public static func write(path: String, samples: [Int16], sampleRate: Int, channels: Int = 1) throws {
        try encode(samples: samples, sampleRate: sampleRate, channels: channels)
            .write(to: URL(filePath: path), options: .atomic)
    }
}
