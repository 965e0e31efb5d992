// Fuzz target: sample rates and sizes from outside into the resampler and the playback queue.
// `HarkFuzzKit` explains the two builds (libFuzzer, or a replay of the files named).

import HarkAudio
import HarkCore
import HarkDSP
import HarkFuzzKit

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// One playback queue for the whole run (never started: `enqueue` converts and queues, which is the part a
/// received chunk reaches).
let playback = AudioPlayback(configuration: AudioPlayback.Configuration(inputRate: 24_000))

/// The input: two 8-byte little-endian integers (input and output rate, any value), a byte of split size,
/// then samples. The same bytes are read as a MIME type too, whose rate a session would play at. The
/// conversions must throw or succeed with bounded output; a trap is a bug.
func fuzzOne(_ data: Data) {
    let bytes = [UInt8](data)
    func integer(at offset: Int) -> Int {
        guard offset + 8 <= bytes.count else { return 24_000 }
        var value: UInt64 = 0
        for index in (offset..<offset + 8).reversed() { value = value << 8 | UInt64(bytes[index]) }
        return Int(truncatingIfNeeded: value)
    }
    let inputRate = integer(at: 0)
    let outputRate = integer(at: 8)
    let split = bytes.count > 16 ? Int(bytes[16]) * 7 + 1 : 160
    let samples = bytes.count > 17 ? PCM16.samples(Data(bytes[17...])) : []

    if let out = try? Resampler.convert(samples, from: inputRate, to: outputRate) {
        precondition(out.count <= samples.count * outputRate / inputRate, "more output than the ratio allows")
    }
    if let resampler = try? Resampler(inputRate: inputRate, outputRate: outputRate) {
        var start = 0
        while start < samples.count {
            let end = min(samples.count, start + split)
            _ = try? resampler.process(Array(samples[start..<end]))
            start = end
        }
        _ = resampler.flush()
    }
    playback.enqueue(AudioChunk(samples: samples, sampleRate: inputRate))

    // The bytes as a MIME type: a rate it states is within the Live range or refused.
    let mime = MIMEAudioRate(mimeType: String(decoding: bytes, as: UTF8.self))
    if case .supported(let rate) = mime {
        precondition(SampleRates.serverAudio.contains(rate))
        playback.enqueue(AudioChunk(samples: Array(samples.prefix(4_800)), sampleRate: rate))
    }
    if case .unsupported(let text) = mime {
        precondition(text.unicodeScalars.allSatisfy { (0x20..<0x7F).contains($0.value) || $0 == "…" })
    }
}

/// libFuzzer's entry point: one input; 0 keeps it eligible for the corpus.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    fuzzOne(FuzzDriver.data(start, count))
    return 0
}

/// Fuzzes (under `HARK_FUZZING`) or replays the files named on the command line.
@main
enum FuzzRunner {
    static func main() throws { try FuzzDriver.run(fuzzTestOneInput, replay: fuzzOne) }
}
