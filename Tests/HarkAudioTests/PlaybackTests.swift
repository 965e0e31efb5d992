import Glibc
import HarkAudio
import HarkCore
import Testing

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Playback through the real alsa-lib paths: the `file` plugin over `null`, writing a raw file the test reads
/// (unpaced, `pace` 0, unless a test says otherwise).
@Suite(.serialized) struct PlaybackTests {
    private func playback(
        _ directory: String,
        format: SampleFormat = .s16LE,
        channels: Int = 1,
        rate: Int = 16_000,
        inputRate: Int = 16_000,
        prebuffer: Duration = .milliseconds(60)
    ) -> AudioPlayback {
        AudioPlayback(
            configuration: AudioPlayback.Configuration(
                device: .rawFile(output: directory + "/out.raw"),
                request: PCMRequest(formats: [format], channels: channels, rates: [rate]),
                inputRate: inputRate,
                prebuffer: prebuffer,
                pace: 0
            )
        )
    }

    private func finish(_ playback: AudioPlayback) async -> PlaybackEnd? {
        await withDeadline(.seconds(20), onTimeout: { playback.stop() }) { await playback.finishTurn() }
    }

    @Test func s16MonoPlaysSampleExactAndDrains() async throws {
        let directory = try makeTemporaryDirectory()
        let player = playback(directory)
        // Queued before the start: the file device is not paced, so a producer racing it would underrun.
        let input = testSignal(count: 16_000, seed: 21)
        for start in stride(from: 0, to: input.count, by: 480) {
            player.enqueue(AudioChunk(samples: Array(input[start..<min(input.count, start + 480)]), sampleRate: 16_000))
        }
        try player.start()
        let end = await finish(player)
        guard case .played = end else {
            Issue.record("turn ended with \(String(describing: end))")
            return
        }
        #expect(player.statistics.framesWritten >= input.count)
        player.stop()
        let written = try readRaw(directory + "/out.raw", format: .s16LE, channels: 1).map { Int16($0[0]) }
        #expect(Array(written.prefix(input.count)) == input)
        #expect(written.dropFirst(input.count).allSatisfy { $0 == 0 })
        #expect(player.statistics.dropped == 0)
        // Only the first chunk found the jitter buffer empty and was timed; the rest waited their turn to play
        // behind it, which is the answer's length, not latency.
        #expect(player.writeLatencies.count == 1)
    }

    @Test func twentyFourKilohertzBecomesStereoS32At48kHz() async throws {
        let directory = try makeTemporaryDirectory()
        let player = playback(directory, format: .s32LE, channels: 2, rate: 48_000, inputRate: 24_000)
        try player.start()
        let tone = sine(frequency: 440, rate: 24_000, count: 24_000, amplitude: 8000).map { Int16($0.rounded()) }
        player.enqueue(AudioChunk(samples: tone, sampleRate: 24_000))
        let end = await finish(player)
        player.stop()
        guard case .played = end else {
            Issue.record("turn ended with \(String(describing: end))")
            return
        }
        let frames = try readRaw(directory + "/out.raw", format: .s32LE, channels: 2)
        #expect(frames.count >= 47_000)
        #expect(frames.allSatisfy { $0[0] == $0[1] })
        let left = frames[4800..<43_200].map { Double($0[0]) / 65536 }
        let fit = fitSine(Array(left), frequency: 440, rate: 48_000)
        #expect(abs(fit.amplitude - 8000) < 80, "amplitude \(fit.amplitude)")
        #expect(fit.residual < 30, "residual RMS \(fit.residual)")
        #expect(
            player.format
                == NegotiatedFormat(
                    format: .s32LE,
                    channels: 2,
                    rate: 48_000,
                    periodFrames: player.format?.periodFrames ?? 0,
                    bufferFrames: player.format?.bufferFrames ?? 0
                )
        )
    }

    @Test func softwareVolumeScalesTheSamples() async throws {
        let directory = try makeTemporaryDirectory()
        let player = playback(directory)
        player.volume = 0.5
        try player.start()
        let input = testSignal(count: 8000, seed: 22)
        player.enqueue(AudioChunk(samples: input, sampleRate: 16_000))
        _ = await finish(player)
        player.stop()
        let written = try readRaw(directory + "/out.raw", format: .s16LE, channels: 1).map { Int16($0[0]) }
        #expect(Array(written.prefix(input.count)) == input.map { Int16((Float($0) * 0.5).rounded()) })
    }

    @Test func volumePersistsAcrossRestarts() throws {
        let directory = try makeTemporaryDirectory()
        let file = VolumeFile(path: directory + "/volume")
        var configuration = AudioPlayback.Configuration(device: .rawFile(output: directory + "/out.raw"))
        configuration.volumeFile = file
        #expect(AudioPlayback(configuration: configuration).volume == 1)
        AudioPlayback(configuration: configuration).volume = 0.25
        #expect(file.load() == 0.25)
        #expect(AudioPlayback(configuration: configuration).volume == 0.25)
        AudioPlayback(configuration: configuration).volume = 7
        #expect(AudioPlayback(configuration: configuration).volume == 1)
        try Data("loud\n".utf8).write(to: URL(filePath: file.path))
        #expect(file.load() == nil)
    }

    @Test func aMissingMixerControlIsAClearError() {
        // No sound card on the build machines: the mixer path must fail cleanly, naming what it looked for.
        #expect(throws: AudioError.self) { try MixerControl(card: "hw:CARD=hark_no_such_card", name: "Speaker") }
    }

    @Test func aNamedVolumeControlTheDeviceLacksFailsTheStart() throws {
        // A file device is on no card and its configuration defines no control device: the start fails,
        // naming the control, instead of playing at a volume nobody can change.
        let directory = try makeTemporaryDirectory()
        var configuration = AudioPlayback.Configuration(device: .rawFile(output: directory + "/out.raw"), pace: 0)
        configuration.mixerControl = "HarkSpeaker"
        let player = AudioPlayback(configuration: configuration)
        #expect {
            try player.start()
        } throws: { error in
            "\(error)".contains("playback volume control \"HarkSpeaker\" on hark_file")
        }
        player.stop()
    }

    @Test func interruptDiscardsTheQueue() async throws {
        let directory = try makeTemporaryDirectory()
        // A prebuffer longer than the audio keeps it queued until the interruption.
        let player = playback(directory, prebuffer: .seconds(30))
        try player.start()
        player.enqueue(AudioChunk(samples: testSignal(count: 32_000, seed: 23), sampleRate: 16_000))
        #expect(player.buffered == .seconds(2))
        player.interrupt()
        #expect(player.buffered == .zero)
        #expect(await eventually { player.statistics.interrupts == 1 })
        let latency = player.statistics.lastInterruptLatency
        #expect(latency < 100_000_000, "interrupt took \(latency) ns")

        // What comes after plays normally, and only it.
        let next = testSignal(count: 4800, seed: 24)
        player.enqueue(AudioChunk(samples: next, sampleRate: 16_000))
        let end = await finish(player)
        player.stop()
        guard case .played = end else {
            Issue.record("turn ended with \(String(describing: end))")
            return
        }
        let written = try readRaw(directory + "/out.raw", format: .s16LE, channels: 1).map { Int16($0[0]) }
        #expect(Array(written.prefix(next.count)) == next)
        #expect(written.dropFirst(next.count).allSatisfy { $0 == 0 })
    }

    @Test func interruptFadesOutWithinAPeriodThenDrops() async throws {
        let directory = try makeTemporaryDirectory()
        // Paced (ten times real time) so the interruption lands mid-turn; a 10 ms period is 160 frames, the
        // 5 ms fade 80.
        let player = AudioPlayback(
            configuration: AudioPlayback.Configuration(
                device: .rawFile(output: directory + "/out.raw"),
                request: PCMRequest(formats: [.s16LE], channels: 1, rates: [16_000]),
                inputRate: 16_000,
                pace: 10,
                interruptFade: .milliseconds(5)
            )
        )
        let input = testSignal(count: 64_000, seed: 29)
        player.enqueue(AudioChunk(samples: input, sampleRate: 16_000))
        try player.start()
        #expect(await eventually { player.statistics.framesWritten >= 4000 })
        player.interrupt()
        #expect(await eventually { player.statistics.interrupts == 1 })
        player.stop()
        let written = try readRaw(directory + "/out.raw", format: .s16LE, channels: 1).map { Int16($0[0]) }
        // Whole periods of the input, then the next 80 samples under the ramp (80 − k) / 81, then nothing.
        let fade = 80
        let cut = try #require(written.count >= fade ? written.count - fade : nil)
        #expect(cut > 0 && cut % 160 == 0, "\(cut) samples before the fade")
        #expect(cut < input.count - fade)
        #expect(Array(written.prefix(cut)) == Array(input.prefix(cut)))
        let expected = (0..<fade).map { k -> Int16 in
            let gain = Float(fade - k) / Float(fade + 1)
            let value: Float = Float(input[cut + k]) * gain * 1
            return Int16(value.rounded())
        }
        #expect(Array(written.suffix(fade)) == expected)
        #expect(player.statistics.lastInterruptLatency < 100_000_000)
    }

    @Test func withoutAFadeAnInterruptCutsAtAPeriod() async throws {
        let directory = try makeTemporaryDirectory()
        let player = AudioPlayback(
            configuration: AudioPlayback.Configuration(
                device: .rawFile(output: directory + "/out.raw"),
                request: PCMRequest(formats: [.s16LE], channels: 1, rates: [16_000]),
                inputRate: 16_000,
                pace: 10,
                interruptFade: .zero
            )
        )
        let input = testSignal(count: 64_000, seed: 30)
        player.enqueue(AudioChunk(samples: input, sampleRate: 16_000))
        try player.start()
        #expect(await eventually { player.statistics.framesWritten >= 4000 })
        player.interrupt()
        #expect(await eventually { player.statistics.interrupts == 1 })
        player.stop()
        let written = try readRaw(directory + "/out.raw", format: .s16LE, channels: 1).map { Int16($0[0]) }
        #expect(written.count % 160 == 0 && written.count < input.count)
        #expect(written == Array(input.prefix(written.count)))
    }

    @Test func underrunPlaysSilenceAndIsCounted() async throws {
        let directory = try makeTemporaryDirectory()
        let player = playback(directory, prebuffer: .milliseconds(40))
        try player.start()
        let first = testSignal(count: 1600, seed: 25)
        let second = testSignal(count: 1600, seed: 26)
        player.enqueue(AudioChunk(samples: first, sampleRate: 16_000))
        #expect(await eventually { player.statistics.underruns >= 1 && player.statistics.silenceFrames > 0 })
        player.enqueue(AudioChunk(samples: second, sampleRate: 16_000))
        let end = await finish(player)
        player.stop()
        guard case .played = end else {
            Issue.record("turn ended with \(String(describing: end))")
            return
        }
        let written = try readRaw(directory + "/out.raw", format: .s16LE, channels: 1).map { Int16($0[0]) }
        #expect(Array(written.prefix(first.count)) == first)
        let rest = Array(written.dropFirst(first.count))
        let resume = try #require(rest.firstIndex { $0 != 0 })
        #expect(resume > 0, "silence between the two bursts")
        #expect(Array(rest[resume..<(resume + second.count)]) == second)
    }

    @Test func pacedPlaybackPlaysInDeviceTime() async throws {
        let directory = try makeTemporaryDirectory()
        let player = AudioPlayback(
            configuration: AudioPlayback.Configuration(
                device: .rawFile(output: directory + "/out.raw"),
                request: PCMRequest(formats: [.s16LE], channels: 1, rates: [16_000]),
                inputRate: 16_000,
                pace: 20
            )
        )
        let input = testSignal(count: 16_000, seed: 27)
        player.enqueue(AudioChunk(samples: input, sampleRate: 16_000))
        let started = ContinuousClock.now
        try player.start()
        let end = await finish(player)
        let elapsed = ContinuousClock.now - started
        player.stop()
        guard case .played = end else {
            Issue.record("turn ended with \(String(describing: end))")
            return
        }
        // One second of audio at 20 times real time: 50 ms, whatever the load (a generous upper bound).
        #expect(elapsed >= .milliseconds(40), "played in \(elapsed)")
        #expect(elapsed < .seconds(1), "played in \(elapsed)")
        let written = try readRaw(directory + "/out.raw", format: .s16LE, channels: 1).map { Int16($0[0]) }
        #expect(Array(written.prefix(input.count)) == input)
    }

    @Test func aDeviceThatVanishesMidStreamIsReopenedWithBackoff() async throws {
        // The device's sink below closes its pipe: the write into it must fail (EPIPE), not kill the process.
        signal(SIGPIPE, SIG_IGN)
        let directory = try makeTemporaryDirectory()
        // The file plugin pipes what it plays into this sink. The first one stops reading after 0.5 s of audio:
        // the device is gone (writes fail with EIO). The next one keeps the rest.
        let sink = """
            if [ -e \(directory)/vanished ]; then exec cat >\(directory)/out.raw; fi
            touch \(directory)/vanished
            exec head -c 16000 >/dev/null
            """
        try Data(sink.utf8).write(to: URL(filePath: directory + "/sink.sh"))
        var configuration = AudioPlayback.Configuration(
            device: .rawFile(output: "|sh \(directory)/sink.sh"),
            request: PCMRequest(formats: [.s16LE], channels: 1, rates: [16_000]),
            inputRate: 16_000,
            pace: 0
        )
        configuration.reopenBackoff = Backoff(initial: .milliseconds(10), cap: .milliseconds(50))
        let player = AudioPlayback(configuration: configuration)
        let input = testSignal(count: 64_000, seed: 28)
        player.enqueue(AudioChunk(samples: input, sampleRate: 16_000))
        try player.start()
        let end = await finish(player)
        player.stop()
        guard case .played = end else {
            Issue.record("turn ended with \(String(describing: end))")
            return
        }
        #expect(player.statistics.reopens == 1)
        #expect(player.statistics.lastError?.contains("playback write failed") == true)
        // One outage, over once the reopened device had played for a second.
        #expect(player.statistics.outages == 1)
        #expect(player.statistics.failingFor == nil)
        // The reopened device plays on from where the queue stood (what the first sink and its pipe buffer
        // took is lost with it): a contiguous part of the input reaches the second sink.
        let path = directory + "/out.raw"
        let size = { ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0 }
        #expect(await eventually { size() >= 16_000 })
        let written = try readRaw(path, format: .s16LE, channels: 1).map { Int16($0[0]) }
        let head = Array(written.prefix(8000))
        #expect(head.count == 8000)
        let offset = (0...(input.count - head.count)).first { Array(input[$0..<($0 + head.count)]) == head }
        #expect(offset != nil, "what the reopened device played is not a part of the input")
    }

    @Test func aDeviceThatOpensButFailsAtOnceBacksOffFurtherEachTime() async throws {
        // alsa-lib's file plugin opens its file at the first write: a directory there opens as a device and
        // fails every write. Each reopening must wait longer than the one before (one outage), not start over.
        let directory = try makeTemporaryDirectory()
        var configuration = AudioPlayback.Configuration(
            device: .rawFile(output: directory),
            request: PCMRequest(formats: [.s16LE], channels: 1, rates: [16_000]),
            inputRate: 16_000,
            pace: 0
        )
        configuration.reopenBackoff = Backoff(initial: .milliseconds(20), cap: .seconds(5))
        let player = AudioPlayback(configuration: configuration)
        player.enqueue(AudioChunk(samples: testSignal(count: 16_000, seed: 29), sampleRate: 16_000))
        let started = ContinuousClock.now
        try player.start()
        #expect(await eventually(.seconds(20)) { player.statistics.reopens >= 5 })
        let elapsed = ContinuousClock.now - started
        player.stop()
        // Waits drawn from the upper halves of 20, 40, 80, 160 and 320 ms: at least 310 ms in all (starting
        // over at 20 ms each time would take at most 100 ms).
        #expect(elapsed >= .milliseconds(310), "five reopenings in \(elapsed)")
        #expect(player.statistics.outages == 1)
        #expect(player.statistics.failingFor != nil)
    }

    @Test func anEmptyTurnEndsAtOnce() async throws {
        let directory = try makeTemporaryDirectory()
        let player = playback(directory)
        try player.start()
        let end = await finish(player)
        player.stop()
        guard case .played = end else {
            Issue.record("turn ended with \(String(describing: end))")
            return
        }
        #expect(await player.finishTurn() == .stopped)
    }
}
