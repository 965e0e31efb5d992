import HarkCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The simulator's answer audio: deterministic beeps, 24 kHz mono PCM16.
///
/// - A beep lasts 250 ms: 200 ms of sine tone (10 ms linear fade in and out, peak 0.25 of full scale,
///   about −15 dBFS RMS) then 50 ms of silence.
/// - Answer K's tone is 440, 550, 660 or 880 Hz for K mod 4 = 1, 2, 3, 0: consecutive answers sound different.
/// - An answer to U seconds of speech has `clamp(4 + round(4 × U), 4, 40)` beeps: 1 s + U, capped at 10 s.
///   A text turn's answer has 4 beeps (1 s).
/// - It is sent in chunks of 125 ms (3000 samples, two per beep).
public enum ModelAudio {
    /// Output sample rate.
    public static let sampleRate = 24_000
    /// The MIME type of answer audio.
    public static let mimeType = "audio/pcm;rate=24000"
    /// Samples per beep (250 ms).
    public static let beepSamples = 6_000
    /// Samples of tone in a beep (200 ms).
    public static let toneSamples = 4_800
    /// Samples per chunk (125 ms).
    public static let chunkSamples = 3_000
    /// One chunk's duration.
    public static let chunkDuration: Duration = .milliseconds(125)
    /// Beeps in the answer to a text turn.
    public static let textTurnBeeps = 4
    /// The tone of each answer, by turn number modulo 4 (turn 1 → 440 Hz).
    public static let frequencies = [440, 550, 660, 880]

    /// Beeps in the answer to `speech` of user audio.
    public static func beepCount(speech: Duration) -> Int {
        let seconds = Double(speech.nanoseconds) / 1e9
        return min(40, max(4, 4 + Int((4 * seconds).rounded())))
    }

    /// The tone frequency of answer `turn`.
    public static func frequency(turn: Int) -> Int {
        frequencies[((turn - 1) % frequencies.count + frequencies.count) % frequencies.count]
    }

    /// The little-endian PCM16 bytes of chunk `index` of answer `turn` (chunk 2k is the first half of beep k).
    public static func chunk(turn: Int, index: Int) -> Data {
        let tone = ((turn - 1) % frequencies.count + frequencies.count) % frequencies.count
        return chunks[tone][index & 1]
    }

    /// The samples of one beep of answer `turn`.
    public static func beep(turn: Int) -> [Int16] {
        synthesizeBeep(frequency: frequency(turn: turn))
    }

    /// The first and second half of a beep, per tone, computed once.
    private static let chunks: [[Data]] = frequencies.map { frequency in
        let beep = synthesizeBeep(frequency: frequency)
        return [
            littleEndianBytes(beep[0..<chunkSamples]),
            littleEndianBytes(beep[chunkSamples..<beepSamples]),
        ]
    }

    private static func synthesizeBeep(frequency: Int) -> [Int16] {
        let fade = 240
        let peak = 0.25 * 32767
        var samples = [Int16](repeating: 0, count: beepSamples)
        for index in 0..<toneSamples {
            let envelope = Double(min(index, toneSamples - 1 - index, fade)) / Double(fade)
            let phase = 2 * Double.pi * Double(frequency) * Double(index) / Double(sampleRate)
            samples[index] = Int16((peak * min(envelope, 1) * sin(phase)).rounded())
        }
        return samples
    }

    private static func littleEndianBytes(_ samples: ArraySlice<Int16>) -> Data {
        var data = Data(capacity: samples.count * 2)
        for sample in samples {
            let value = UInt16(bitPattern: sample)
            data.append(UInt8(truncatingIfNeeded: value))
            data.append(UInt8(truncatingIfNeeded: value >> 8))
        }
        return data
    }
}
