import HarkCore
import RealModule

/// A short generated sound that tells a visitor what happened without looking at the LEDs.
/// No audio assets: each is a few sine tones with soft edges, made at the playback rate.
public enum Earcon: String, Sendable, Hashable, CaseIterable {
    /// The microphone opened for the user (a rising two-tone chirp).
    case listeningStart = "listening_start"
    /// The agent's answer was cancelled (a short falling tone).
    case cancel
    /// The service refused the device: authentication or configuration (two low beeps).
    case error
    /// The network or the service went away; the device is reconnecting (a slow falling pair).
    case offline

    /// The tones: (frequency in Hz, duration in ms), a zero frequency is a pause.
    var tones: [(frequency: Double, milliseconds: Int)] {
        switch self {
        case .listeningStart: [(660, 70), (990, 90)]
        case .cancel: [(700, 60), (470, 110)]
        case .error: [(330, 140), (0, 80), (330, 140)]
        case .offline: [(520, 120), (0, 40), (390, 180)]
        }
    }

    /// The sound as mono PCM16 at `sampleRate`, peaking at `level` (0–1) of full scale.
    public func samples(sampleRate: Int = 24_000, level: Double = 0.3) -> [Int16] {
        Self.render(tones, sampleRate: sampleRate, level: level)
    }

    /// What a timer or an alarm rings with, looped by the speaker while it rings: four short high beeps and a
    /// pause, 1.4 s.
    public static func alert(sampleRate: Int = 24_000, level: Double = 0.5) -> AudioChunk {
        let beep: (frequency: Double, milliseconds: Int) = (1760, 110)
        let gap: (frequency: Double, milliseconds: Int) = (0, 90)
        let tones = [beep, gap, beep, gap, beep, gap, beep, (0, 690)]
        return AudioChunk(samples: render(tones, sampleRate: sampleRate, level: level), sampleRate: sampleRate)
    }

    /// `tones` as mono PCM16 at `sampleRate`, peaking at `level` (0–1) of full scale, each with soft edges.
    static func render(
        _ tones: [(frequency: Double, milliseconds: Int)],
        sampleRate: Int,
        level: Double
    ) -> [Int16] {
        let peak = max(0, min(1, level)) * Double(Int16.max)
        let ramp = max(1, sampleRate * 5 / 1000)  // 5 ms fade in and out: no clicks
        var output: [Int16] = []
        for tone in tones {
            let count = sampleRate * tone.milliseconds / 1000
            output.reserveCapacity(output.count + count)
            for index in 0..<count {
                guard tone.frequency > 0 else {
                    output.append(0)
                    continue
                }
                let edge = Double(min(index, count - 1 - index, ramp)) / Double(ramp)
                let phase = 2 * Double.pi * tone.frequency * Double(index) / Double(sampleRate)
                output.append(Int16((peak * min(1, edge) * Double.sin(phase)).rounded()))
            }
        }
        return output
    }

    /// The sound as a chunk for the speaker.
    public func chunk(sampleRate: Int = 24_000, level: Double = 0.3) -> AudioChunk {
        AudioChunk(samples: samples(sampleRate: sampleRate, level: level), sampleRate: sampleRate)
    }
}
