import HarkAudio
import HarkCore
import Testing

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The one speaker path: the alert mixed under the agent's voice, as a value and through the real playback thread
/// (alsa-lib's `file` plugin over `null`), into what the device gets.
@Suite(.serialized) struct SpeakerMixerTests {
    /// A mixer at 2 kHz: lanes fade over 10 samples, media ducks over 60 and comes back over 1200.
    private func mixer() -> SpeakerMixer { SpeakerMixer(rate: 2000, duckDecibels: -20) }

    private func ring(_ samples: [Float]) -> SampleRing {
        let ring = SampleRing(capacity: max(1, samples.count))
        ring.write(samples)
        return ring
    }

    @Test func theAlertRingsAtFullLevelAloneAndDuckedUnderTheVoice() {
        var mix = mixer()
        #expect(mix.rampSamples == 10)
        #expect(mix.mixed(voice: [500, 500], silence: 2) == [500, 500, 0, 0])  // nothing rings: the voice as it is
        mix.setAlert(MixerSound([Int16](repeating: 1000, count: 40), limit: 100))
        let alone = mix.mixed(voice: [], silence: 30)
        // Faded in over 10 samples (no click), then at full level.
        #expect(alone.prefix(10).map { $0.rounded() } == [100, 200, 300, 400, 500, 600, 700, 800, 900, 1000])
        #expect(alone.dropFirst(10).allSatisfy { $0 == 1000 })
        // The voice comes: the alert ramps down to a quarter under it; the voice itself is untouched.
        let under = mix.mixed(voice: [Float](repeating: 2000, count: 30))
        #expect(under[0].rounded() == 2000 + 900)
        #expect(under.dropFirst(8).allSatisfy { $0 == 2250 })
        // Stopped: it fades out within the ramp and then adds nothing.
        mix.setAlert(nil)
        let after = mix.mixed(voice: [], silence: 20)
        #expect(after[0] < 250 && after[0] > 0)
        #expect(after.dropFirst(3).allSatisfy { $0 == 0 })
        #expect(!mix.isActive)
    }

    @Test func theAlertLoopsFromItsStartAndALongSoundIsCut() {
        var mix = mixer()
        mix.setAlert(MixerSound([1000, 2000, 3000, 4000, 5000, 6000], limit: 4))
        let first = mix.mixed(voice: [], silence: 30)
        // After the 10-sample fade the loop is the first four samples, again and again.
        let expected = (10..<30).map { Float([1000, 2000, 3000, 4000][$0 % 4]) }
        #expect(Array(first.dropFirst(10)) == expected)
        mix.setAlert(MixerSound([7000, 8000], limit: 4))  // a new sound starts from its beginning
        #expect(Array(mix.mixed(voice: [], silence: 3)) == [7000, 8000, 7000])
    }

    private func playback(_ directory: String) -> AudioPlayback {
        AudioPlayback(
            configuration: AudioPlayback.Configuration(
                device: .rawFile(output: directory + "/out.raw"),
                request: PCMRequest(formats: [.s16LE], channels: 1, rates: [16_000]),
                inputRate: 16_000,
                prebuffer: .milliseconds(60),
                pace: 0
            )
        )
    }

    @Test func theDeviceGetsTheAlertAloneThenUnderTheVoiceAndItOutlivesABargeIn() async throws {
        let directory = try makeTemporaryDirectory()
        let player = playback(directory)
        try player.start()
        player.setAlert(AudioChunk(samples: [Int16](repeating: 1000, count: 1600), sampleRate: 16_000))
        #expect(await eventually { player.statistics.framesWritten >= 4800 })
        // An answer over it, to its end.
        player.enqueue(AudioChunk(samples: [Int16](repeating: 2000, count: 8000), sampleRate: 16_000))
        let end = await withDeadline(.seconds(20), onTimeout: { player.stop() }) { await player.finishTurn() }
        guard case .played = end else {
            Issue.record("turn ended with \(String(describing: end))")
            return
        }
        // A barge-in silences the voice lane; the alert rings on.
        player.enqueue(AudioChunk(samples: [Int16](repeating: 3000, count: 16_000), sampleRate: 16_000))
        #expect(await eventually { player.buffered < .milliseconds(900) })
        player.interrupt()
        let written = player.statistics.framesWritten
        #expect(await eventually { player.statistics.framesWritten >= written + 3200 })
        player.setAlert(nil)
        #expect(await eventually { !player.isAlerting })
        player.stop()
        let samples = try readRaw(directory + "/out.raw", format: .s16LE, channels: 1).map { Int16($0[0]) }
        // Alone at full level, under the voice at a quarter, never the voice alone while it rings.
        let counts = Dictionary(grouping: samples, by: { $0 }).mapValues(\.count)
        #expect(counts[1000, default: 0] >= 4800 + 2400)
        #expect(counts[2250, default: 0] >= 7800)
        #expect(counts[2000, default: 0] < 10)  // (a sample of a fade may pass through the value)
        #expect(counts[3250, default: 0] > 0)
        #expect(samples.last == 0 || samples.last == 1000)
    }
}
