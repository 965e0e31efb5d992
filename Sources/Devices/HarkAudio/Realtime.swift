import CALSA
import CSpeexDSP
import Glibc
import HarkCore
import HarkPlatform

extension Wakeup {
    /// Waits the whole `nanoseconds` however often it is signalled, unless `cancelled()` turns true (checked
    /// at each signal): a backoff that new work arriving must not cut short.
    func pause(nanoseconds: UInt64, unless cancelled: () -> Bool) {
        let end = monotonicNanoseconds() &+ nanoseconds
        while !cancelled() {
            let now = monotonicNanoseconds()
            guard now < end else { return }
            wait(nanoseconds: end - now)
        }
    }
}

/// Interleaved device samples to and from floats at 16-bit scale (±32768), without allocation.
enum SampleConversion {
    /// Sample `index` (interleaved position) of `raw` in `format`, at 16-bit scale.
    @inline(__always)
    static func load(_ raw: UnsafeRawPointer, _ index: Int, _ format: SampleFormat) -> Float {
        switch format {
        case .s16LE:
            return Float(Int16(littleEndian: raw.loadUnaligned(fromByteOffset: index * 2, as: Int16.self)))
        case .s32LE:
            return Float(Int32(littleEndian: raw.loadUnaligned(fromByteOffset: index * 4, as: Int32.self))) / 65536
        case .s24LE:
            let word = UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: index * 4, as: UInt32.self))
            return Float(Int32(bitPattern: word << 8) >> 8) / 256
        }
    }

    /// Stores `value` (16-bit scale, clipped) at interleaved position `index` of `raw` in `format`.
    @inline(__always)
    static func store(_ value: Float, _ raw: UnsafeMutableRawPointer, _ index: Int, _ format: SampleFormat) {
        switch format {
        case .s16LE:
            raw.storeBytes(of: clip16(value).littleEndian, toByteOffset: index * 2, as: Int16.self)
        case .s32LE:
            let scaled = max(-2_147_483_648, min(2_147_483_520, (value * 65536).rounded()))
            raw.storeBytes(of: Int32(scaled).littleEndian, toByteOffset: index * 4, as: Int32.self)
        case .s24LE:
            let scaled = max(-8_388_608, min(8_388_607, (value * 256).rounded()))
            raw.storeBytes(of: Int32(scaled).littleEndian, toByteOffset: index * 4, as: Int32.self)
        }
    }

    /// `value` rounded and clipped to Int16.
    @inline(__always)
    static func clip16(_ value: Float) -> Int16 {
        Int16(max(-32768, min(32767, value.rounded())))
    }
}

/// The speexdsp resampler on caller-owned float buffers: no allocation per call, for audio threads.
/// Stands for `speex_resampler_init` / `speex_resampler_process_float`.
final class StreamResampler {
    private let state: OpaquePointer?
    let inputRate: Int
    let outputRate: Int

    /// Throws ``AudioError`` unless both rates are within ``SampleRates/resampling`` (a rate passed on from
    /// a device or a chunk must not trap or size buffers by an absurd ratio) and `quality` is 0–10.
    init(inputRate: Int, outputRate: Int, quality: Int = 5) throws {
        let range = SampleRates.resampling
        guard range.contains(inputRate), range.contains(outputRate), (0...10).contains(quality) else {
            throw AudioError.invalid(
                "cannot resample \(inputRate) Hz to \(outputRate) Hz: rates must be \(range.lowerBound)–\(range.upperBound) Hz"
            )
        }
        self.inputRate = inputRate
        self.outputRate = outputRate
        guard inputRate != outputRate else {
            state = nil
            return
        }
        var error: Int32 = 0
        guard let state = speex_resampler_init(1, UInt32(inputRate), UInt32(outputRate), Int32(quality), &error)
        else {
            throw AudioError.invalid("cannot resample \(inputRate) Hz to \(outputRate) Hz (speexdsp \(error))")
        }
        speex_resampler_skip_zeros(state)
        self.state = state
    }

    deinit { if let state { speex_resampler_destroy(state) } }

    /// Most output `count` input samples can make.
    func maximumOutput(forInput count: Int) -> Int { count * outputRate / inputRate + 8 }

    /// Converts `count` samples of `input` into `output` (room for ``maximumOutput(forInput:)``); returns
    /// how many samples were produced.
    func process(_ input: UnsafePointer<Float>, count: Int, into output: UnsafeMutablePointer<Float>, room: Int) -> Int
    {
        guard let state else {
            let n = min(count, room)
            output.update(from: input, count: n)
            return n
        }
        var consumed = 0
        var produced = 0
        while consumed < count, produced < room {
            var inLength = UInt32(count - consumed)
            var outLength = UInt32(room - produced)
            speex_resampler_process_float(state, 0, input + consumed, &inLength, output + produced, &outLength)
            consumed += Int(inLength)
            produced += Int(outLength)
            if inLength == 0 && outLength == 0 { break }
        }
        return produced
    }

    /// Forgets the history (`speex_resampler_reset_mem`), after a discontinuity.
    func reset() {
        if let state {
            speex_resampler_reset_mem(state)
            speex_resampler_skip_zeros(state)
        }
    }
}
