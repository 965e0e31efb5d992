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

    /// A resampler from `inputRate` to `outputRate`; `quality` 0 (fast) … 10 (best), 5 is speexdsp's default
    /// for voice. Stands for `speex_resampler_init`.
    public init(inputRate: Int, outputRate: Int, quality: Int = 5) throws {
        var error: Int32 = 0
        guard inputRate > 0, outputRate > 0,
            let state = speex_resampler_init(1, UInt32(inputRate), UInt32(outputRate), Int32(quality), &error)
        else {
            throw DSPError(description: "cannot resample \(inputRate) Hz to \(outputRate) Hz (speexdsp error \(error))")
        }
        self.state = state
        self.inputRate = inputRate
        self.outputRate = outputRate
        speex_resampler_skip_zeros(state)
    }

    deinit { speex_resampler_destroy(state) }

    /// Converts the next block of input; returns what the resampler produced for it.
    /// Stands for `speex_resampler_process_int`.
    public func process(_ input: [Int16]) -> [Int16] {
        guard inputRate != outputRate else { return input }
        var output = [Int16](repeating: 0, count: input.count * outputRate / inputRate + 16)
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
        let latency = Int(speex_resampler_get_input_latency(state))
        return process([Int16](repeating: 0, count: latency))
    }

    /// Converts a whole signal at once (a file), including the tail.
    public static func convert(_ samples: [Int16], from inputRate: Int, to outputRate: Int) throws -> [Int16] {
        guard inputRate != outputRate else { return samples }
        let resampler = try Resampler(inputRate: inputRate, outputRate: outputRate)
        var out = resampler.process(samples)
        out += resampler.flush()
        let expected = samples.count * outputRate / inputRate
        if out.count > expected { out.removeSubrange(expected...) }
        return out
    }
}
