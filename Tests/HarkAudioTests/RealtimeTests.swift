import Glibc
import HarkAudio
import HarkCore
import Testing

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Paced in real time through PulseAudio's null sink (`pulseaudio` + `libasound2-plugins`, the ALSA `pulse`
/// plugin): the drain must wait for the audio's real duration, an interruption must silence within a period,
/// and the echo canceller must remove the speaker signal captured back from the sink's monitor, aligned by
/// the measured delays. Gated: runs only with `HARK_REALTIME_TESTS=1` and a PulseAudio server that has a
/// null sink named `HARK_PULSE_SINK` (default `hark_null`); `scripts/test-audio-realtime` sets both up.
@Suite(.serialized) struct RealtimeTests {
    private static var enabled: Bool { ProcessInfo.processInfo.environment["HARK_REALTIME_TESTS"] == "1" }

    private static var devices: (speaker: AudioDevice, microphone: AudioDevice) {
        let sink = ProcessInfo.processInfo.environment["HARK_PULSE_SINK"] ?? "hark_null"
        let text = """
            pcm.hark_rt_speaker { type pulse device "\(sink)" }
            ctl.hark_rt_speaker { type pulse device "\(sink)" }
            pcm.hark_rt_mic { type pulse device "\(sink).monitor" }
            """
        return (
            AudioDevice(name: "hark_rt_speaker", configuration: text),
            AudioDevice(name: "hark_rt_mic", configuration: text)
        )
    }

    @Test(
        .enabled(
            if: RealtimeTests.enabled,
            "real time through PulseAudio: set HARK_REALTIME_TESTS=1 with a null sink (scripts/test-audio-realtime)"
        )
    )
    func pacedPlaybackDrainsAfterTheAudioAndInterruptsWithinAPeriod() async throws {
        let player = AudioPlayback(
            configuration: AudioPlayback.Configuration(
                device: Self.devices.speaker,
                request: PCMRequest(formats: [.s16LE], channels: 2, rates: [48_000], period: .milliseconds(10))
            )
        )
        try player.start()
        defer { player.stop() }
        let format = try #require(player.format)
        let period = format.periodFrames

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
        print(
            "RealtimeTests: \(format); drained after \(elapsed); queue-to-write p50 \(latencies[latencies.count / 2] / 1000) µs"
        )

        // Interrupt mid-answer: silent within one period (plus scheduling slack).
        let written = player.statistics.framesWritten
        player.enqueue(AudioChunk(samples: tone + tone + tone, sampleRate: 24_000))
        #expect(await eventually { player.statistics.framesWritten > written + 20 * period })
        player.interrupt()
        #expect(await eventually { player.statistics.interrupts == 1 })
        let latency = Double(player.statistics.lastInterruptLatency) / 1e6
        let periodMilliseconds = Double(period) * 1000 / Double(format.rate)
        print("RealtimeTests: interrupt-to-silence \(latency) ms (period \(periodMilliseconds) ms)")
        #expect(latency <= periodMilliseconds + 5)
        #expect(player.buffered == .zero)
    }

    /// A named volume control is what the volume sets: the sink's "Master" control through alsa-lib's `pulse`
    /// control plugin (a card's "Speaker" on a board), read back through a control of its own.
    @Test(
        .enabled(
            if: RealtimeTests.enabled,
            "real time through PulseAudio: set HARK_REALTIME_TESTS=1 with a null sink (scripts/test-audio-realtime)"
        )
    )
    func theVolumeSetsTheNamedControl() async throws {
        let speaker = Self.devices.speaker
        let player = AudioPlayback(
            configuration: AudioPlayback.Configuration(
                device: speaker,
                request: PCMRequest(formats: [.s16LE], channels: 2, rates: [48_000]),
                mixerControl: "Master"
            )
        )
        player.volume = 0.25
        try player.start()
        defer { player.stop() }
        let control = try MixerControl(card: speaker.name, configuration: speaker.configuration, name: "Master")
        // The server tells the other control of the change: await it.
        #expect(await eventually { abs(control.volume - 0.25) < 0.01 }, "the control reads \(control.volume)")
        player.volume = 0.75
        #expect(await eventually { abs(control.volume - 0.75) < 0.01 }, "the control reads \(control.volume)")
        #expect(player.statistics.lastError == nil)
    }

    /// The sink's monitor hears what was played, some delay later: prints at which filter tap the echo sits
    /// against the reference the capture path aligned with each captured frame, read the front end's lead ahead
    /// (it must be steady, and within 0 ..< tail for the canceller), the live ERLE and the capture latency.
    @Test(
        .enabled(
            if: RealtimeTests.enabled,
            "real time through PulseAudio: set HARK_REALTIME_TESTS=1 with a null sink (scripts/test-audio-realtime)"
        )
    )
    func echoReferenceLinesUpWithTheSinkMonitor() async throws {
        let reference = EchoReference()
        let options = FrontEndOptions(residualEchoSuppression: false, noiseSuppression: false)
        let player = AudioPlayback(
            configuration: AudioPlayback.Configuration(
                device: Self.devices.speaker,
                request: PCMRequest(formats: [.s16LE], channels: 2, rates: [48_000])
            ),
            echoReference: reference
        )
        func microphone(_ frontEnd: FrontEndOptions) -> AudioCapture {
            AudioCapture(
                configuration: AudioCapture.Configuration(
                    device: Self.devices.microphone,
                    request: PCMRequest(formats: [.s16LE], channels: 2, rates: [48_000]),
                    channelMap: .average([0, 1]),
                    frontEnd: frontEnd
                ),
                echoReference: reference
            )
        }
        let cancelled = microphone(options)
        let raw = microphone(.off)
        try player.start()
        try cancelled.start()
        try raw.start()
        defer {
            player.stop()
            cancelled.stop()
            raw.stop()
        }
        var state: UInt64 = 5
        let far = (0..<240_000).map { _ -> Int16 in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int16(truncatingIfNeeded: state >> 48) / 4
        }
        player.enqueue(AudioChunk(samples: far, sampleRate: 24_000))
        async let withAEC: Double = {
            var total = 0.0
            for index in 0..<450 {
                guard let frame = await cancelled.next() else { break }
                if index >= 250 { total += frame.samples.reduce(0) { $0 + Double($1) * Double($1) } }
            }
            return total
        }()
        var microphoneSamples: [Int16] = []
        var referenceSamples: [Int16] = []
        var latencies: [UInt64] = []
        var echoEnergy = 0.0
        for index in 0..<450 {
            guard let frame = await raw.next() else { break }
            microphoneSamples += frame.samples
            var block = [Int16](repeating: 0, count: frame.samples.count)
            if let index = frame.referenceIndex {
                block.withUnsafeMutableBufferPointer {
                    reference.read(into: $0.baseAddress!, count: $0.count, from: index)
                }
            }
            referenceSamples += block
            latencies.append(frame.enqueuedAt > frame.capturedAt ? frame.enqueuedAt - frame.capturedAt : 0)
            if index >= 250 { echoEnergy += frame.samples.reduce(0) { $0 + Double($1) * Double($1) } }
        }
        let echoLeft = await withAEC
        // Per half second: the lag (ms) at which the echo best matches the reference, where the match is clear.
        var lags: [Double] = []
        for window in stride(from: 8000, to: microphoneSamples.count - 8000, by: 8000) {
            var best = 0
            var bestValue = -Double.infinity
            var sum = 0.0
            for lag in stride(from: -4000, through: 8000, by: 4) {
                var value = 0.0
                for i in stride(from: window, to: window + 4000, by: 2) where i - lag >= 0 {
                    value += Double(microphoneSamples[i]) * Double(referenceSamples[i - lag])
                }
                sum += abs(value)
                if value > bestValue {
                    bestValue = value
                    best = lag
                }
            }
            if bestValue > 10 * sum / 3001 { lags.append(Double(best) / 16) }
        }
        let sorted = latencies.sorted()
        print(
            "RealtimeTests: echo at filter taps \(lags) ms (lead \(options.referenceLead), tail "
                + "\(options.echoTail)); live ERLE \(10 * log10(echoEnergy / max(echoLeft, 1))) dB; capture-to-queue "
                + "p50 \(Double(sorted[sorted.count / 2]) / 1e6) ms, p99 \(Double(sorted[sorted.count * 99 / 100]) / 1e6) ms"
        )
        // PulseAudio's null sink is a loose stand-in for a sound card: it rewinds and re-renders, its monitor
        // delivers in bursts, and its delay reports jump by hundreds of milliseconds on a loaded machine. So this
        // checks what must hold there — the paths run, and where the echo is clearly found it is found at one
        // steady place — and prints the rest for a person to read.
        #expect(microphoneSamples.count >= 450 * 320)
        #expect(echoEnergy > 0)
        if let first = lags.first { #expect(lags.allSatisfy { abs($0 - first) <= 2 }, "lags \(lags) ms") }
    }
}
