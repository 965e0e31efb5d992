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
