import Glibc
import HarkAudio
import HarkCore
import Testing

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A playback device without a clock of its own (alsa-lib's `file` plugin over `null`, named in an
/// asoundrc-style configuration as a user's would be) is paced by the wall clock: it neither spins writing
/// silence while the jitter buffer is dry nor reports a turn played before it could have been heard.
/// Serialized: these measure wall time.
@Suite(.serialized) struct PacingTests {
    /// A file PCM named `hark_named_speaker`, defined the way an `~/.asoundrc` or `/etc/asound.conf` would.
    private func namedFileDevice(_ path: String) -> AudioDevice {
        let text = """
            pcm.hark_named_speaker {
                type file
                slave.pcm { type null }
                file "\(path)"
                format raw
            }
            """
        return AudioDevice(name: "hark_named_speaker", configuration: text)
    }

    private func fileSize(_ path: String) -> Int {
        var status = stat()
        return stat(path, &status) == 0 ? Int(status.st_size) : 0
    }

    /// Frames a device at 16 kHz plays in `elapsed`.
    private func realTimeFrames(_ elapsed: Duration) -> Int { Int(elapsed.milliseconds) * 16 }

    @Test func anIdleSpeakerWithoutAClockWritesRealTimeNotGigabytes() async throws {
        let directory = try makeTemporaryDirectory()
        let output = directory + "/speaker.raw"
        let player = AudioPlayback(
            configuration: AudioPlayback.Configuration(
                device: namedFileDevice(output),
                request: PCMRequest(formats: [.s16LE], channels: 1, rates: [16_000]),
                inputRate: 16_000
            )
        )
        let started = ContinuousClock.now
        try player.start()
        // An answer of 200 ms, and the turn left open (as `hark converse` leaves it until the end): the jitter
        // buffer runs dry and the speaker is kept fed with silence.
        player.enqueue(AudioChunk(samples: testSignal(count: 3200, seed: 41), sampleRate: 16_000))
        try await Task.sleep(for: .milliseconds(800))
        player.stop()
        let elapsed = ContinuousClock.now - started
        let written = player.statistics.framesWritten
        let period = try #require(player.format?.periodFrames)
        // Real time, give or take what the device buffer holds ahead: not as fast as the thread can write.
        #expect(written <= realTimeFrames(elapsed) + 4 * period, "\(written) frames in \(elapsed)")
        #expect(written >= realTimeFrames(.milliseconds(400)), "\(written) frames in \(elapsed)")
        #expect(player.statistics.silenceFrames > 0)
        #expect(fileSize(output) == written * 2)
    }

    @Test func aTurnOnADeviceWithoutAClockEndsWhenItWouldHaveBeenHeard() async throws {
        let directory = try makeTemporaryDirectory()
        let output = directory + "/speaker.raw"
        let player = AudioPlayback(
            configuration: AudioPlayback.Configuration(
                device: namedFileDevice(output),
                request: PCMRequest(formats: [.s16LE], channels: 1, rates: [16_000]),
                inputRate: 16_000
            )
        )
        try player.start()
        let input = testSignal(count: 8000, seed: 42)  // 500 ms
        let started = ContinuousClock.now
        player.enqueue(AudioChunk(samples: input, sampleRate: 16_000))
        let end = await withDeadline(.seconds(20), onTimeout: { player.stop() }) { await player.finishTurn() }
        let elapsed = ContinuousClock.now - started
        player.stop()
        guard case .played = end else {
            Issue.record("turn ended with \(String(describing: end))")
            return
        }
        #expect(elapsed >= .milliseconds(450), "played in \(elapsed)")
        #expect(elapsed < .seconds(5), "played in \(elapsed)")
        let written = try readRaw(output, format: .s16LE, channels: 1).map { Int16($0[0]) }
        #expect(Array(written.prefix(input.count)) == input)
    }

    @Test func anUnpacedFileStillWritesSilenceNoFasterThanRealTime() async throws {
        let directory = try makeTemporaryDirectory()
        let output = directory + "/speaker.raw"
        let player = AudioPlayback(
            configuration: AudioPlayback.Configuration(
                device: .rawFile(output: output),
                request: PCMRequest(formats: [.s16LE], channels: 1, rates: [16_000]),
                inputRate: 16_000,
                pace: 0
            )
        )
        let started = ContinuousClock.now
        try player.start()
        player.enqueue(AudioChunk(samples: testSignal(count: 1600, seed: 43), sampleRate: 16_000))
        #expect(await eventually { player.statistics.silenceFrames > 0 })
        try await Task.sleep(for: .milliseconds(500))
        player.stop()
        let elapsed = ContinuousClock.now - started
        let written = player.statistics.framesWritten
        let period = try #require(player.format?.periodFrames)
        // The answer went out at once (unpaced); the silence after it, a period per period.
        #expect(written <= 1600 + realTimeFrames(elapsed) + 4 * period, "\(written) frames in \(elapsed)")
        #expect(fileSize(output) == written * 2)
    }
}
