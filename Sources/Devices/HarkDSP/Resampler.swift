import CSpeexDSP
import HarkCore

/// Why a DSP block could not be made.
public struct DSPError: Error, CustomStringConvertible, Sendable {
    public let description: String
}

/// Sample-rate conversion of mono PCM16 with the speexdsp resampler (`speex_resampler_*`).
/// One owner: not for use from two threads at once.
public final class Resampler {
    private let state: OpaquePointer
    /// Input rate in Hz.
    public let inputRate: Int
    /// Output rate in Hz.
    public let outputRate: Int

    /// Most samples one call takes in or gives out (64 Mi: 128 MiB of output, 70 minutes at 16 kHz). A call
    /// that would pass it is refused before anything is allocated.
    public static let maximumSamplesPerCall = 1 << 26

    /// A resampler from `inputRate` to `outputRate`, both within ``SampleRates/resampling``; `quality`
    /// 0 (fast) … 10 (best), 5 is speexdsp's default for voice. Stands for `speex_resampler_init`.
    public init(inputRate: Int, outputRate: Int, quality: Int = 5) throws {
        try Self.check(inputRate, outputRate)
        guard (0...10).contains(quality) else {
            throw DSPError(description: "resampler quality \(quality) is not 0–10")
        }
        var error: Int32 = 0
        guard let state = speex_resampler_init(1, UInt32(inputRate), UInt32(outputRate), Int32(quality), &error)
        else {
            throw DSPError(description: "cannot resample \(inputRate) Hz to \(outputRate) Hz (speexdsp error \(error))")
        }
        self.state = state
        self.inputRate = inputRate
        self.outputRate = outputRate
        speex_resampler_skip_zeros(state)
    }

    deinit { speex_resampler_destroy(state) }

    /// Converts the next block of input; returns what the resampler produced for it. Throws ``DSPError``
    /// (allocating nothing) when the block or its output would pass ``maximumSamplesPerCall``.
    /// Stands for `speex_resampler_process_int`.
    public func process(_ input: [Int16]) throws -> [Int16] {
        guard inputRate != outputRate else { return input }
        let room = try Self.outputRoom(forInput: input.count, from: inputRate, to: outputRate)
        var output = [Int16](repeating: 0, count: room)
        var consumed = 0
        var produced = 0
        input.withUnsafeBufferPointer { inBuffer in
            output.withUnsafeMutableBufferPointer { outBuffer in
                while consumed < inBuffer.count {
                    var inLength = UInt32(inBuffer.count - consumed)
                    var outLength = UInt32(outBuffer.count - produced)
                    if outLength == 0 { break }
                    speex_resampler_process_int(
                        state,
                        0,
                        inBuffer.baseAddress! + consumed,
                        &inLength,
                        outBuffer.baseAddress! + produced,
                        &outLength
                    )
                    consumed += Int(inLength)
                    produced += Int(outLength)
                    if inLength == 0 && outLength == 0 { break }
                }
            }
        }
        output.removeSubrange(produced...)
        return output
    }

    /// Pushes silence through so the last input samples come out; call once at the end of a stream.
    public func flush() -> [Int16] {
        guard inputRate != outputRate else { return [] }
        // The filter's latency: at most a few hundred samples at these rates and qualities.
        let latency = min(Int(speex_resampler_get_input_latency(state)), 1 << 16)
        return (try? process([Int16](repeating: 0, count: latency))) ?? []
    }

    /// Converts a whole signal at once (a file, a received chunk), including the tail. Both rates must be
    /// within ``SampleRates/resampling`` and the signal and its output at most ``maximumSamplesPerCall``
    /// long; else it throws ``DSPError`` before allocating anything.
    public static func convert(_ samples: [Int16], from inputRate: Int, to outputRate: Int) throws -> [Int16] {
        try check(inputRate, outputRate)
        guard inputRate != outputRate else { return samples }
        _ = try outputRoom(forInput: samples.count, from: inputRate, to: outputRate)
        let resampler = try Resampler(inputRate: inputRate, outputRate: outputRate)
        var out = try resampler.process(samples)
        out += resampler.flush()
        let expected = samples.count * outputRate / inputRate
        if out.count > expected { out.removeSubrange(expected...) }
        return out
    }

    /// Throws unless both rates are within ``SampleRates/resampling``.
    private static func check(_ inputRate: Int, _ outputRate: Int) throws {
        let range = SampleRates.resampling
        guard range.contains(inputRate), range.contains(outputRate) else {
            throw DSPError(
                description:
                    "cannot resample \(inputRate) Hz to \(outputRate) Hz: rates must be \(range.lowerBound)–\(range.upperBound) Hz"
            )
        }
    }

    /// The output room `count` input samples need, or a ``DSPError`` past ``maximumSamplesPerCall``.
    private static func outputRoom(forInput count: Int, from inputRate: Int, to outputRate: Int) throws -> Int {
        // The rates are checked (≤ 384 000), so the product cannot overflow for a count within the maximum.
        let limit = maximumSamplesPerCall
        guard count <= limit, case let room = count * outputRate / inputRate + 16, room <= limit else {
            throw DSPError(
                description:
                    "cannot resample \(count) samples from \(inputRate) Hz to \(outputRate) Hz in one call (at most \(limit) samples in or out)"
            )
        }
        return room
    }
}
