import Glibc
import HarkAppliance
import HarkCore
import HarkTestKit
import Testing

/// The local voice detector and the pre-roll gate, as values.
@Suite struct VoiceGateTests {
    private func frame(level amplitude: Double, seed: UInt64) -> [Int16] {
        signal(count: 320, seed: seed).map { Int16(Double($0) * amplitude / 16_000) }
    }

    @Test func vadStartsAfterTheAttackAndEndsAfterTheHangover() {
        var vad = EnergyVAD(attack: .milliseconds(60), hangover: .milliseconds(200))
        var events: [(Int, EnergyVAD.Event)] = []
        let levels =
            [Double](repeating: -70, count: 50) + [Double](repeating: -20, count: 20)
            + [Double](repeating: -70, count: 20)
        for (index, level) in levels.enumerated() {
            if let event = vad.process(level: level, duration: .milliseconds(20)) { events.append((index, event)) }
        }
        #expect(events.map(\.1) == [.speechStarted, .speechEnded])
        #expect(events.first?.0 == 52)  // the third loud frame: 60 ms
        #expect(events.last?.0 == 79)  // the tenth quiet frame: 200 ms
        #expect(vad.noiseFloor < -60)
    }

    @Test func gateReleasesThePreRollWhenSpeechStarts() {
        var gate = VoiceGate(preRoll: .milliseconds(500))
        var released: [[Int16]] = []
        var preRollStamps: [UInt64?] = []
        var started = false
        for index in 0..<100 {
            let result = gate.process(chunk(frame(level: 30, seed: UInt64(index)), capturedAt: UInt64(index)))
            #expect(result.frames.isEmpty)
            if result.event != nil { started = true }
        }
        #expect(!started)
        for index in 100..<110 {
            let result = gate.process(chunk(frame(level: 8000, seed: UInt64(index)), capturedAt: UInt64(index)))
            released += result.frames.map(\.samples)
            if result.event == .speechStarted { preRollStamps = result.frames.map(\.capturedAt) }
            if result.event == .speechStarted { started = true }
        }
        #expect(started)
        #expect(gate.isOpen)
        // 500 ms of pre-roll plus the frame that opened the gate, then one frame per loud frame after it.
        let quietReleased = released.prefix { PCM16.levelDBFS($0) < -40 }
        #expect(quietReleased.count >= 22)
        #expect(released.count == quietReleased.count + 10)
        // Each released frame keeps its own capture time: the pre-roll's frames in order, up to the one that opened it.
        // The third loud frame opened it (the attack: 60 ms).
        #expect(preRollStamps.count >= 22)
        #expect(preRollStamps == (103 - preRollStamps.count..<103).map { UInt64($0) })
    }

    private func chunk(_ samples: [Int16], capturedAt: UInt64? = nil) -> AudioChunk {
        AudioChunk(samples: samples, sampleRate: 16_000, capturedAt: capturedAt)
    }

    /// A deterministic signal: a sweep plus a pseudo-random component.
    private func signal(count: Int, seed: UInt64) -> [Int16] {
        var state = seed
        return (0..<count).map { index in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let noise = Int(Int16(truncatingIfNeeded: state >> 48)) / 4
            let tone = Int(12_000 * sin(Double(index) * 0.05 + Double(index * index) * 1e-6))
            return Int16(max(-32768, min(32767, tone + noise)))
        }
    }
}
