import Glibc
import HarkAudio
import HarkCore
import Testing

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The echo canceller, as values and offline (the reference's alignment: EchoAlignmentTests).
@Suite struct FrontEndTests {
    private func frame(level amplitude: Double, seed: UInt64) -> [Int16] {
        testSignal(count: 320, seed: seed).map { Int16(Double($0) * amplitude / 16_000) }
    }

    @Test func preprocessorDelaysByOneFrame() {
        #expect(EchoCanceller(options: .off).latency == 0)
        #expect(
            EchoCanceller(options: FrontEndOptions(residualEchoSuppression: false, noiseSuppression: false)).latency
                == 0
        )
        let canceller = EchoCanceller(
            options: FrontEndOptions(echoCancellation: false, residualEchoSuppression: false, noiseSuppression: true)
        )
        #expect(canceller.latency == 320)
        #expect(!canceller.cancelsEcho)
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
    /// While the speaker is silent (beyond the echo tail) the canceller is not run, and the microphone passes
    /// unchanged; when the speaker plays again after the gap the adapted canceller cancels at once, with no echo
    /// of the sound from before the gap subtracted from the quiet room.
    @Test func aSilentSpeakerSkipsTheCancellerAndItPicksUpAgainAfterTheGap() {
        let canceller = EchoCanceller(
            options: FrontEndOptions(
                echoTail: .milliseconds(100),
                residualEchoSuppression: false,
                noiseSuppression: false
            )
        )
        let farSpeech = testSignal(count: 16_000 * 6, seed: 41).map { $0 / 2 }
        // 6 s of far end, 2 s of silence from the speaker (the room talks: a near-end signal), 2 s of far end again.
        let far = farSpeech.prefix(16_000 * 4) + [Int16](repeating: 0, count: 16_000 * 2) + farSpeech.suffix(16_000 * 2)
        let near = testSignal(count: 16_000 * 2, seed: 43).map { $0 / 8 }
        let delay = 400
        var gapIn = 0.0
        var gapOut = 0.0
        var afterMic = 0.0
        var afterOut = 0.0
        for start in stride(from: 0, to: far.count, by: 320) {
            let reference = Array(far[start..<(start + 320)])
            let mic = (start..<(start + 320)).map { index -> Int16 in
                let echo = index >= delay ? Double(far[index - delay]) * 0.3 : 0
                let talker = (64_000..<96_000).contains(index) ? Double(near[index - 64_000]) : 0
                return Int16(clamping: Int(echo + talker))
            }
            let out = canceller.process(microphone: mic, reference: reference)
            if (64_000 + 4_000..<96_000).contains(start) {
                // The gap, once the echo has died away: the near end passes exactly.
                gapIn += mic.reduce(0) { $0 + Double($1) * Double($1) }
                gapOut += zip(mic, out).reduce(0) { $0 + Double($1.0 - $1.1) * Double($1.0 - $1.1) }
            }
            if (96_000 + 3_200..<(96_000 + 16_000)).contains(start) {
                afterMic += mic.reduce(0) { $0 + Double($1) * Double($1) }
                afterOut += out.reduce(0) { $0 + Double($1) * Double($1) }
            }
        }
        #expect(canceller.framesIdle >= (32_000 - 2_000) / 320 - 2)
        #expect(gapIn > 0 && gapOut == 0, "the near end changed while the speaker was silent")
        let erle = 10 * log10(afterMic / max(afterOut, 1))
        #expect(erle > 15, "ERLE after the gap \(erle) dB")
    }

    /// Noise suppression in a quiet room passes the microphone unchanged, one frame late as the preprocessor's
    /// output is; in a noisy room (a floor above the level for a second) it suppresses the noise; with the level
    /// unset it always runs.
    @Test func noiseSuppressionPassesAQuietRoomUnchangedAndSuppressesANoisyOne() {
        // Speech-like bursts with silent pauses, then the same bursts over steady white noise.
        let bursts = testSignal(count: 16_000 * 4, seed: 51).enumerated().map { index, sample in
            (index / 4_000) % 2 == 0 ? sample / 4 : 0
        }
        var state: UInt64 = 53
        let noise = (0..<16_000 * 4).map { _ -> Int16 in  // white, about -33 dBFS
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int16(truncatingIfNeeded: state >> 48) / 48
        }
        let input = bursts + zip(bursts, noise).map { Int16(clamping: Int($0) + Int($1)) }
        func run(_ options: FrontEndOptions) -> (output: [Int16], canceller: EchoCanceller) {
            let canceller = EchoCanceller(options: options)
            var output: [Int16] = []
            for start in stride(from: 0, to: input.count, by: 320) {
                output += canceller.process(
                    microphone: Array(input[start..<(start + 320)]),
                    reference: [Int16](repeating: 0, count: 320)
                )
            }
            return (output, canceller)
        }
        let quietRoom = FrontEndOptions(echoCancellation: false, residualEchoSuppression: false, noiseSuppression: true)
        let (output, canceller) = run(quietRoom)
        // The quiet room (the first 4 s): every sample as it came, 320 samples late.
        #expect(Array(output[320..<(16_000 * 4)]) == Array(input[0..<(16_000 * 4 - 320)]))
        #expect(canceller.framesPassed >= 16_000 * 4 / 320 - 1)
        // The noisy room, three seconds after the noise began: the pauses' noise is suppressed (by 5.5 dB here).
        func energy(_ samples: ArraySlice<Int16>) -> Double { samples.reduce(0) { $0 + Double($1) * Double($1) } }
        let pause = (16_000 * 7 + 4_000 + 320)..<(16_000 * 7 + 8_000)  // a pause of the bursts, over noise
        let suppressed =
            10 * log10(energy(input[pause.lowerBound - 320..<pause.upperBound - 320]) / energy(output[pause]))
        #expect(suppressed > 3, "noise suppressed by \(suppressed) dB")
        // Unset: it runs in the quiet room too.
        var always = quietRoom
        always.quietRoomLevel = nil
        let (processed, unset) = run(always)
        #expect(unset.framesPassed == 0)
        #expect(Array(processed[320..<(16_000 * 4)]) != Array(input[0..<(16_000 * 4 - 320)]))
    }
}
