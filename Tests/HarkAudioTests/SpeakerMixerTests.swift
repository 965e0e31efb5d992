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

    @Test func mediaFadesInDucksByTwentyDecibelsWithinAnAttackAndComesBackWithinASecond() {
        var mix = mixer()
        let media = ring([Float](repeating: 1000, count: 4000))
        mix.setMedia(media)
        let start = mix.mixed(voice: [], silence: 20)
        #expect(start.prefix(10).map { $0.rounded() } == [100, 200, 300, 400, 500, 600, 700, 800, 900, 1000])
        #expect(start.dropFirst(10).allSatisfy { $0 == 1000 })
        #expect(mix.mediaPlaying)
        // The wake word: down by 0.9 / 60 of full level per sample, at 100 (−20 dB) from the 60th sample on (30 ms at
        // 2 kHz; the design asks for 100 ms).
        mix.ducking = [.wakeWord]
        let ducked = mix.mixed(voice: [], silence: 200)
        #expect(abs(ducked[0] - 985) < 0.01)
        #expect(abs(ducked[29] - 550) < 0.05)
        #expect(ducked.dropFirst(59).allSatisfy { abs($0 - 100) < 0.01 })
        #expect(abs(1000 / ducked[199] - 10) < 0.001)  // −20 dB is a tenth of the amplitude
        // Cleared: back by 0.9 / 1200 per sample, at full level after 1200 samples (0.6 s; the design asks for 1 s).
        mix.ducking = []
        let back = mix.mixed(voice: [], silence: 1400)
        #expect(abs(back[599] - 550) < 0.5)
        #expect(back[1198] < 1000)
        #expect(back.dropFirst(1199).allSatisfy { abs($0 - 1000) < 0.01 })
    }

    @Test func aDryRingPlaysSilenceCountedAndADetachedOneFadesOutAndIsLetGo() {
        var mix = mixer()
        let media = ring([Float](repeating: 1000, count: 100))
        mix.setMedia(media)
        let dry = mix.mixed(voice: [], silence: 130)
        // 100 samples (the first ten fading in), then silence for the 30 the ring did not have: counted once.
        #expect(dry[50] == 1000 && dry.dropFirst(100).allSatisfy { $0 == 0 })
        #expect(mix.mediaMissing == 30 && mix.mediaUnderruns == 1 && !mix.mediaPlaying)
        _ = mix.mixed(voice: [], silence: 10)
        #expect(mix.mediaMissing == 40 && mix.mediaUnderruns == 1)
        media.write([Float](repeating: 500, count: 50))
        #expect(mix.mixed(voice: [], silence: 50).allSatisfy { $0 == 500 })
        #expect(mix.mediaPlaying && mix.mediaUnderruns == 1)
        media.write([Float](repeating: 500, count: 40))
        mix.setMedia(nil)
        let gone = mix.mixed(voice: [], silence: 20)
        #expect(gone.prefix(10).map { $0.rounded() } == [450, 400, 350, 300, 250, 200, 150, 100, 50, 0])
        #expect(!mix.isActive && !mix.mediaPlaying)
        let left = media.count
        #expect(mix.mixed(voice: [], silence: 20) == [Float](repeating: 0, count: 20))
        #expect(media.count == left)  // no longer read
        #expect(mix.holdsOnly(alert: nil, media: nil))
    }

    @Test func theVoiceNeverPlaysOverMediaAtFullLevel() {
        var mix = mixer()
        mix.setMedia(ring([Float](repeating: 1000, count: 8000)))
        _ = mix.mixed(voice: [], silence: 40)
        // The voice waits to be played: the media lane ducks first, and says when it may start.
        mix.voiceWaiting = true
        var waited = 0
        while !mix.readyForVoice && waited < 1000 {
            _ = mix.mixed(voice: [], silence: 1)
            waited += 1
        }
        #expect(waited >= 59 && waited <= 61)  // the attack, 60 samples (30 ms), give or take the rounding of its steps
        let spoken = mix.mixed(voice: [Float](repeating: 3000, count: 400))
        #expect(spoken.allSatisfy { abs($0 - 3100) < 0.01 })
        // A voice that comes with no warning ducks the media under it at once, over the attack.
        var sudden = mixer()
        sudden.setMedia(ring([Float](repeating: 1000, count: 8000)))
        _ = sudden.mixed(voice: [], silence: 40)
        let over = sudden.mixed(voice: [Float](repeating: 3000, count: 100))
        #expect(over[0] < 4000 && over.dropFirst(59).allSatisfy { abs($0 - 3100) < 0.01 })
    }

    @Test func theAlertDucksTheMediaAndABargeInLeavesBothToFadeInAgain() {
        var mix = mixer()
        mix.setMedia(ring([Float](repeating: 1000, count: 8000)))
        _ = mix.mixed(voice: [], silence: 40)
        mix.setAlert(MixerSound([Int16](repeating: 2000, count: 100), limit: 100))
        let ringing = mix.mixed(voice: [], silence: 100)
        // The alert at full level over the media at −20 dB.
        #expect(ringing.dropFirst(60).allSatisfy { abs($0 - 2100) < 0.01 })
        mix.restartFades()
        let again = mix.mixed(voice: [], silence: 20)
        #expect(abs(again[0] - 210) < 0.01)  // both lanes from a tenth of their level: no click
        #expect(again.dropFirst(10).allSatisfy { abs($0 - 2100) < 0.01 })
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

    @Test func theDeviceGetsMediaDuckedWithinAHundredMillisecondsBackWithinASecondAndNeverUnderTheVoice() async throws {
        let directory = try makeTemporaryDirectory()
        let player = playback(directory)
        let media = SampleRing(capacity: 16_000 * 30)
        media.write([Float](repeating: 1000, count: 16_000 * 30))
        try player.start()
        player.setMedia(media)
        #expect(await eventually { player.mediaPlaying && player.statistics.framesWritten >= 4800 })
        // The wake word heard: where the device's stream was then, and where it reached −20 dB.
        let duckedAt = player.statistics.framesWritten
        player.setDuck(.wakeWord, true)
        #expect(player.ducking == [.wakeWord])
        #expect(await eventually { player.statistics.framesWritten >= duckedAt + 8000 })
        let clearedAt = player.statistics.framesWritten
        player.setDuck(.wakeWord, false)
        #expect(await eventually { player.statistics.framesWritten >= clearedAt + 19_200 })
        // An answer over the media, to its end; then the media alone again, then detached.
        player.enqueue(AudioChunk(samples: [Int16](repeating: 3000, count: 8000), sampleRate: 16_000))
        let end = await withDeadline(.seconds(20), onTimeout: { player.stop() }) { await player.finishTurn() }
        guard case .played = end else {
            Issue.record("turn ended with \(String(describing: end))")
            return
        }
        let answered = player.statistics.framesWritten
        #expect(await eventually { player.statistics.framesWritten >= answered + 19_200 })
        player.setMedia(nil)
        #expect(await eventually { !player.mediaPlaying })
        player.stop()
        #expect(player.statistics.mediaUnderruns == 0)
        let samples = try readRaw(directory + "/out.raw", format: .s16LE, channels: 1).map { Int16($0[0]) }
        guard samples.count > answered + 19_200 else {
            Issue.record("the device got \(samples.count) samples")
            return
        }
        // Down to a tenth (−20 dB) within 100 ms (1600 samples at 16 kHz) of the call, in what the device got.
        let down = samples[duckedAt...].firstIndex(of: 100) ?? samples.count
        #expect(down - duckedAt <= 1600)
        #expect(samples[(down + 10)..<clearedAt].allSatisfy { $0 == 100 })
        // Back to full level within a second (16 000 samples) of the last reason clearing.
        let up = samples[clearedAt...].firstIndex(of: 1000) ?? samples.count
        #expect(up - clearedAt <= 16_000 && up - clearedAt > 1600)
        // The voice: every sample of it over media ducked to a tenth, none over media at full level (4000).
        let voiced = samples.filter { $0 > 2000 }
        #expect(voiced.count >= 7990 && voiced.count <= 8010)
        #expect(voiced.allSatisfy { $0 <= 3100 })
        #expect(voiced.filter { $0 == 3100 }.count >= 7990)
        // After the answer the media comes back to full level.
        #expect(samples[(answered + 16_000)..<(answered + 19_200)].allSatisfy { $0 == 1000 })
    }
}
