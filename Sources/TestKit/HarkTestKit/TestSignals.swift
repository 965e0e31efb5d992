import HarkAudio
import HarkCore
import RealModule

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Deterministic test audio.
public enum TestSignals {
    /// A speech-like signal: voiced bursts (a 140 Hz buzz with harmonics and a four-syllables-a-second
    /// envelope) of `burst`, each followed by `gap` of silence, for `total`. The same signal as
    /// `scripts/lib/make-speech.py`.
    public static func speech(
        total: Duration,
        burst: Duration = .milliseconds(1600),
        gap: Duration = .milliseconds(2400),
        sampleRate: Int = 16_000
    ) -> [Int16] {
        let count = Int(total.milliseconds) * sampleRate / 1000
        let burstSeconds = burst.seconds
        let period = burstSeconds + gap.seconds
        var out = [Int16](repeating: 0, count: count)
        for n in 0..<count {
            let t = Double(n) / Double(sampleRate)
            let phase = t.truncatingRemainder(dividingBy: period)
            guard phase < burstSeconds else { continue }
            let syllable = 0.5 - 0.5 * Double.cos(2 * .pi * phase * 4)
            var buzz = 0.0
            for k in [1.0, 2, 3, 5, 7] { buzz += Double.sin(2 * .pi * 140 * k * t) / k }
            out[n] = Int16(max(-32768, min(32767, 0.35 * syllable * buzz * 32767)))
        }
        return out
    }

    /// A sine tone of `seconds` at `frequency`, `amplitude` of full scale (speech to an energy detector).
    public static func tone(
        seconds: Double,
        frequency: Double = 300,
        amplitude: Double = 0.3,
        sampleRate: Int = 16_000
    ) -> [Int16] {
        let count = Int((seconds * Double(sampleRate)).rounded())
        let step = 2 * Double.pi * frequency / Double(sampleRate)
        return (0..<count).map { Int16((amplitude * 32767 * Double.sin(step * Double($0))).rounded()) }
    }

    /// Writes `samples` to a new WAV file in the temporary directory and returns its path.
    public static func writeTemporaryWAV(_ samples: [Int16], sampleRate: Int = 16_000, name: String = "input") throws
        -> String
    {
        let path =
            FileManager.default.temporaryDirectory.path + "/hark-\(name)-\(UInt64.random(in: 0...UInt64.max)).wav"
        try WAVFile.write(path: path, samples: samples, sampleRate: sampleRate)
        return path
    }
}
