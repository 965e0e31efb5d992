import Glibc
import HarkAudio
import HarkCore
import Testing

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The VAD, the pre-roll gate, the echo reference's alignment and the echo canceller, as values and offline.
@Suite struct FrontEndTests {
    private func frame(level amplitude: Double, seed: UInt64) -> [Int16] {
        testSignal(count: 320, seed: seed).map { Int16(Double($0) * amplitude / 16_000) }
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
        var started = false
        for index in 0..<100 {
            let result = gate.process(frame(level: 30, seed: UInt64(index)))
            #expect(result.frames.isEmpty)
            if result.event != nil { started = true }
        }
        #expect(!started)
        for index in 100..<110 {
            let result = gate.process(frame(level: 8000, seed: UInt64(index)))
            released += result.frames
            if result.event == .speechStarted { started = true }
        }
        #expect(started)
        #expect(gate.isOpen)
        // 500 ms of pre-roll plus the frame that opened the gate, then one frame per loud frame after it.
        let quietReleased = released.prefix { PCM16.levelDBFS($0) < -40 }
        #expect(quietReleased.count >= 22)
        #expect(released.count == quietReleased.count + 10)
    }

    @Test func echoReferenceIsReadByPlayTime() {
        let reference = EchoReference(sampleRate: 16_000, history: .seconds(1))
        let block = (0..<1600).map { Int16($0) }
        let start: UInt64 = 5_000_000_000
        block.withUnsafeBufferPointer { reference.write($0.baseAddress!, count: 1600, playTime: start) }
        var out = [Int16](repeating: -1, count: 320)
        out.withUnsafeMutableBufferPointer { reference.read(into: $0.baseAddress!, count: 320, at: start + 10_000_000) }
        #expect(out == Array(block[160..<480]))
        // Before anything played, and after the end: silence.
        out.withUnsafeMutableBufferPointer { reference.read(into: $0.baseAddress!, count: 320, at: start - 10_000_000) }
        #expect(out == [Int16](repeating: 0, count: 160) + Array(block[0..<160]))
        // A later block after an idle gap is placed by its own time; the gap reads as silence.
        block.withUnsafeBufferPointer {
            reference.write($0.baseAddress!, count: 1600, playTime: start + 200_000_000)
        }
        out.withUnsafeMutableBufferPointer {
            reference.read(into: $0.baseAddress!, count: 320, at: start + 150_000_000)
        }
        #expect(out == [Int16](repeating: 0, count: 320))
        out.withUnsafeMutableBufferPointer {
            reference.read(into: $0.baseAddress!, count: 320, at: start + 200_000_000)
        }
        #expect(out == Array(block[0..<320]))
    }

    @Test func echoCancellerRemovesALinearEcho() {
        let canceller = EchoCanceller(
            options: FrontEndOptions(
                echoTail: .milliseconds(100),
                residualEchoSuppression: false,
                noiseSuppression: false
            )
        )
        let far = testSignal(count: 16_000 * 8, seed: 31).map { $0 / 2 }
        let delay = 400
        var micEnergy = 0.0
        var outEnergy = 0.0
        for start in stride(from: 0, to: far.count, by: 320) {
            let reference = Array(far[start..<(start + 320)])
            let mic = (start..<(start + 320)).map { index -> Int16 in
                index >= delay
                    ? Int16(Double(far[index - delay]) * 0.3 + Double(far[max(0, index - delay - 37)]) * 0.1) : 0
            }
            let out = canceller.process(microphone: mic, reference: reference)
            if start >= 16_000 * 5 {
                micEnergy += mic.reduce(0) { $0 + Double($1) * Double($1) }
                outEnergy += out.reduce(0) { $0 + Double($1) * Double($1) }
            }
        }
        let erle = 10 * log10(micEnergy / max(outEnergy, 1))
        #expect(erle > 20, "ERLE \(erle) dB")
    }
}
