import HarkAudio
import HarkCore
import Testing

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Paced in real time through PulseAudio's null sink (`pulseaudio` + `libasound2-plugins`, the ALSA `pulse`
/// PCM): the drain must wait for the audio's real duration, and an interruption must silence within a period.
/// Gated: runs only with `HARK_REALTIME_TESTS=1` (and a running PulseAudio with a null sink as default).
@Suite struct RealtimeTests {
    private static var enabled: Bool { ProcessInfo.processInfo.environment["HARK_REALTIME_TESTS"] == "1" }

    @Test func pacedPlaybackDrainsAfterTheAudioAndInterruptsWithinAPeriod() async throws {
        guard Self.enabled else {
            print("RealtimeTests skipped: set HARK_REALTIME_TESTS=1 with PulseAudio's null sink as the default sink")
            return
        }
        let device = AudioDevice(
            name: ProcessInfo.processInfo.environment["HARK_REALTIME_PLAYBACK"] ?? "pulse"
        )
        let player = AudioPlayback(
            configuration: AudioPlayback.Configuration(
                device: device,
                request: PCMRequest(formats: [.s16LE], channels: 2, rates: [48_000], period: .milliseconds(10))
            )
        )
        try player.start()
        defer { player.stop() }
        let period = try #require(player.format).periodFrames

        // One second of audio: the drain reports after at least that much real time.
        let tone = sine(frequency: 440, rate: 24_000, count: 24_000, amplitude: 3000).map { Int16($0.rounded()) }
        let started = ContinuousClock.now
        player.enqueue(AudioChunk(samples: tone, sampleRate: 24_000))
        let end = await withDeadline(.seconds(10), onTimeout: { player.stop() }) { await player.finishTurn() }
        let elapsed = ContinuousClock.now - started
        guard case .played = end else {
            Issue.record("turn ended with \(String(describing: end))")
            return
        }
        #expect(elapsed >= .milliseconds(950), "drained after \(elapsed)")
        let latencies = player.writeLatencies.sorted()
        print("RealtimeTests: drain after \(elapsed), queue-to-write p50 \(latencies[latencies.count / 2]) ns")

        // Interrupt mid-answer: silent within one period (plus scheduling slack).
        player.enqueue(AudioChunk(samples: tone + tone + tone, sampleRate: 24_000))
        #expect(await eventually { player.statistics.framesWritten > 48_000 + 10 * period })
        player.interrupt()
        #expect(await eventually { player.statistics.interrupts == 1 })
        let latency = Double(player.statistics.lastInterruptLatency) / 1e6
        let periodMilliseconds = Double(period) / 48
        print("RealtimeTests: interrupt-to-silence \(latency) ms (period \(periodMilliseconds) ms)")
        #expect(latency <= periodMilliseconds + 5)
    }
}
