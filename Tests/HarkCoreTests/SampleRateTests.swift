import HarkCore
import HarkDSP
import Testing

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Rates from outside (a MIME type, a caller) reach sizes and 32-bit C arguments: each is checked first.
@Suite struct SampleRateTests {
    @Test func aMIMETypeStatesASupportedRateOrNone() {
        #expect(MIMEAudioRate(mimeType: "audio/pcm;rate=24000") == .supported(24_000))
        #expect(MIMEAudioRate(mimeType: "audio/pcm; Rate = \"16000\" ") == .supported(16_000))
        #expect(MIMEAudioRate(mimeType: "audio/L16;codec=pcm;rate=8000") == .supported(8_000))
        #expect(MIMEAudioRate(mimeType: "audio/pcm;rate=48000") == .supported(48_000))
        #expect(MIMEAudioRate(mimeType: "audio/pcm") == .unstated)
        #expect(MIMEAudioRate(mimeType: "") == .unstated)
        #expect(MIMEAudioRate(mimeType: nil) == .unstated)
        #expect(MIMEAudioRate(mimeType: "audio/pcm;samplerate=16000") == .unstated)
        #expect(MIMEAudioRate(mimeType: "audio/pcm").rate(default: 24_000) == 24_000)
    }

    @Test func aRateALiveModelCannotSendIsUnsupported() {
        for text in ["4294967296", "0", "-5", "1e9", "abc", "", "1", "7999", "48001", "+24000", "24000.0", "١٦٠٠٠"] {
            let rate = MIMEAudioRate(mimeType: "audio/pcm;rate=\(text)")
            #expect(rate == .unsupported(text == "١٦٠٠٠" ? "?????" : text), "rate=\(text)")
            #expect(rate.rate(default: 24_000) == nil)
        }
        // What a log line shows of it: printable ASCII, at most 24 characters.
        #expect(MIMEAudioRate(mimeType: "audio/pcm;rate=\u{1B}[31m") == .unsupported("?[31m"))
        let long = MIMEAudioRate(mimeType: "audio/pcm;rate=" + String(repeating: "9", count: 100))
        #expect(long == .unsupported(String(repeating: "9", count: 24) + "…"))
        #expect(SampleRates.serverAudio == 8_000...48_000)
    }

    @Test func theResamplerRefusesRatesOutsideItsRangeInsteadOfTrapping() {
        let samples = [Int16](repeating: 100, count: 480)
        for rate in [4_294_967_296, 0, -5, 1, 7_999, 384_001, Int.max, Int.min] {
            #expect(throws: DSPError.self, "\(rate) Hz") { try Resampler.convert(samples, from: rate, to: 24_000) }
            #expect(throws: DSPError.self, "\(rate) Hz") { try Resampler.convert(samples, from: 24_000, to: rate) }
            #expect(throws: DSPError.self, "\(rate) Hz") { try Resampler(inputRate: rate, outputRate: 16_000) }
        }
        #expect(throws: DSPError.self) { try Resampler(inputRate: 16_000, outputRate: 24_000, quality: Int.max) }
        // Equal rates outside the range are refused too: the chunk is not audio anyone plays.
        #expect(throws: DSPError.self) { try Resampler.convert(samples, from: 1, to: 1) }
    }

    @Test func oneCallsOutputIsBoundedBeforeAnythingIsAllocated() throws {
        // 8 kHz → 384 kHz multiplies by 48: an input of 1.4 M samples would make more than the maximum.
        let limit = Resampler.maximumSamplesPerCall
        let input = [Int16](repeating: 0, count: limit / 48 + 1)
        let error = try #require(throws: DSPError.self) { _ = try Resampler.convert(input, from: 8_000, to: 384_000) }
        #expect(error.description.contains("in one call"))
        let resampler = try Resampler(inputRate: 8_000, outputRate: 384_000)
        #expect(throws: DSPError.self) { _ = try resampler.process(input) }
        // Within the bound the same conversion works.
        #expect(try Resampler.convert([Int16](repeating: 0, count: 800), from: 8_000, to: 384_000).count == 38_400)
    }
}
