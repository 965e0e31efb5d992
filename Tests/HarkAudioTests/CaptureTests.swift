import Glibc
import HarkAudio
import HarkCore
import Testing

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Capture through the real alsa-lib paths: the `file` plugin over `null`, reading test-made raw files.
/// Serialized: an unpaced capture thread runs flat out until stopped, and other suites time things.
@Suite(.serialized) struct CaptureTests {
    private func configuration(
        _ device: AudioDevice,
        format: SampleFormat,
        channels: Int,
        rate: Int,
        map: ChannelMap = .pick(0)
    ) -> AudioCapture.Configuration {
        AudioCapture.Configuration(
            device: device,
            request: PCMRequest(formats: [format], channels: channels, rates: [rate]),
            channelMap: map,
            queueBound: .seconds(2),
            frontEnd: .off,
            backpressure: true
        )
    }

    @Test func s16MonoAt16kHzArrivesSampleExact() async throws {
        let directory = try makeTemporaryDirectory()
        let input = testSignal(count: 32_000)
        try rawBytes((input + [Int16](repeating: 0, count: 16_000)).map { [Int32($0)] }, format: .s16LE)
            .write(to: URL(filePath: directory + "/in.raw"))
        let device = AudioDevice.rawFile(output: directory + "/out.raw", input: directory + "/in.raw")
        let capture = AudioCapture(configuration: configuration(device, format: .s16LE, channels: 1, rate: 16_000))
        try capture.start()
        let result = await collect(capture, count: input.count)
        capture.stop()
        let (samples, contiguous) = try #require(result)
        #expect(contiguous)
        #expect(Array(samples.prefix(input.count)) == input)
        #expect(capture.format?.format == .s16LE)
        #expect(capture.format?.rate == 16_000)
        #expect(capture.statistics.frames > 0)
    }

    @Test func s24In32StereoAveragesExactly() async throws {
        let directory = try makeTemporaryDirectory()
        let left = testSignal(count: 16_000, seed: 3)
        let right = testSignal(count: 16_000, seed: 4)
        // 24-bit samples: the 16-bit value shifted up 8 bits, plus low bits the average rounds away.
        let frames = (0..<(left.count + 8000)).map { index -> [Int32] in
            index < left.count ? [Int32(left[index]) << 8 | 0x40, Int32(right[index]) << 8] : [0, 0]
        }
        try rawBytes(frames, format: .s24LE).write(to: URL(filePath: directory + "/in.raw"))
        let device = AudioDevice.rawFile(output: directory + "/out.raw", input: directory + "/in.raw")
        let capture = AudioCapture(
            configuration: configuration(device, format: .s24LE, channels: 2, rate: 16_000, map: .average([0, 1]))
        )
        try capture.start()
        let result = await collect(capture, count: left.count)
        capture.stop()
        let (samples, contiguous) = try #require(result)
        #expect(contiguous)
        let expected = (0..<left.count).map { index -> Int16 in
            let sum = (Float(Int32(left[index]) << 8 | 0x40) / 256) + Float(right[index])
            return Int16((sum * 0.5).rounded())
        }
        #expect(Array(samples.prefix(left.count)) == expected)
        #expect(capture.format?.format == .s24LE)
        #expect(capture.format?.channels == 2)
    }

    @Test func delayAndSumAlignsTheChannels() async throws {
        let directory = try makeTemporaryDirectory()
        let signal = testSignal(count: 16_000, seed: 9).map { $0 / 2 }
        // Channel 0 hears the talker 3 samples after channel 1.
        let frames = (0..<(signal.count + 8000)).map { index -> [Int32] in
            let late = index >= 3 && index - 3 < signal.count ? Int32(signal[index - 3]) : 0
            let early = index < signal.count ? Int32(signal[index]) : 0
            return [late, early]
        }
        try rawBytes(frames, format: .s16LE).write(to: URL(filePath: directory + "/in.raw"))
        let device = AudioDevice.rawFile(output: directory + "/out.raw", input: directory + "/in.raw")
        let map = ChannelMap.delayAndSum([.init(channel: 0, delay: 0), .init(channel: 1, delay: 3)])
        let capture = AudioCapture(
            configuration: configuration(device, format: .s16LE, channels: 2, rate: 16_000, map: map)
        )
        try capture.start()
        let result = await collect(capture, count: signal.count)
        capture.stop()
        let (samples, _) = try #require(result)
        let expected = [Int16](repeating: 0, count: 3) + signal.prefix(signal.count - 3)
        #expect(Array(samples.prefix(signal.count)) == expected)
        #expect(ChannelMap(parsing: map.description) == map)
    }

    @Test func s32FourChannelsAt48kHzPickOneAndResample() async throws {
        let directory = try makeTemporaryDirectory()
        let count = 48_000 * 2
        let tone = sine(frequency: 440, rate: 48_000, count: count, amplitude: 10_000)
        let other = testSignal(count: count, seed: 5)
        let frames = (0..<count).map { index -> [Int32] in
            [Int32(other[index]) << 16, 0, Int32(tone[index].rounded()) << 16, Int32(other[index]) << 16]
        }
        try rawBytes(frames, format: .s32LE).write(to: URL(filePath: directory + "/in.raw"))
        let device = AudioDevice.rawFile(output: directory + "/out.raw", input: directory + "/in.raw")
        let capture = AudioCapture(
            configuration: configuration(device, format: .s32LE, channels: 4, rate: 48_000, map: .pick(2))
        )
        try capture.start()
        let result = await collect(capture, count: 16_000)
        capture.stop()
        let (samples, contiguous) = try #require(result)
        #expect(contiguous)
        #expect(capture.format?.rate == 48_000)
        #expect(capture.format?.channels == 4)
        // Skip the resampler's start, then the 16 kHz output must be the same 440 Hz tone.
        let steady = samples[1600..<16_000].map(Double.init)
        let fit = fitSine(Array(steady), frequency: 440, rate: 16_000)
        #expect(abs(fit.amplitude - 10_000) < 100, "amplitude \(fit.amplitude)")
        #expect(fit.residual < 30, "residual RMS \(fit.residual)")
    }

    @Test func aFullQueueDropsTheOldestAndCounts() async throws {
        let directory = try makeTemporaryDirectory()
        try rawBytes(testSignal(count: 16_000).map { [Int32($0)] }, format: .s16LE)
            .write(to: URL(filePath: directory + "/in.raw"))
        let device = AudioDevice.rawFile(output: directory + "/out.raw", input: directory + "/in.raw")
        var settings = configuration(device, format: .s16LE, channels: 1, rate: 16_000)
        settings.queueBound = .milliseconds(200)
        settings.backpressure = false
        let capture = AudioCapture(configuration: settings)
        try capture.start()
        #expect(await eventually { capture.statistics.dropped > 0 })
        capture.stop()
        var sequences: [Int] = []
        while let frame = await capture.next() { sequences.append(frame.sequence) }
        #expect(sequences.count <= 10)
        #expect((sequences.first ?? 0) > 0)
        #expect(sequences == Array(sequences.sorted()))
        #expect(capture.statistics.dropped + sequences.count <= capture.statistics.frames)
    }

    @Test func negotiationReportsWhatTheDeviceGave() throws {
        let directory = try makeTemporaryDirectory()
        try Data(count: 48_000 * 24).write(to: URL(filePath: directory + "/in.raw"))
        let device = AudioDevice.rawFile(output: directory + "/out.raw", input: directory + "/in.raw")
        let capture = AudioCapture(
            configuration: AudioCapture.Configuration(
                device: device,
                request: PCMRequest(formats: [.s32LE, .s16LE], channels: 6, rates: [44_100]),
                channelMap: .average([0, 5]),
                frontEnd: .off
            )
        )
        try capture.start()
        capture.stop()
        let format = try #require(capture.format)
        #expect(format.format == .s32LE)
        #expect(format.channels == 6)
        #expect(format.rate == 44_100)
        #expect(format.periodFrames > 0 && format.bufferFrames >= format.periodFrames)

        let bad = AudioCapture(
            configuration: AudioCapture.Configuration(
                device: device,
                request: PCMRequest(formats: [.s16LE], channels: 2, rates: [16_000]),
                channelMap: .pick(3),
                frontEnd: .off
            )
        )
        #expect(throws: AudioError.self) { try bad.start() }
        let missing = AudioCapture(configuration: AudioCapture.Configuration(device: .named("hark_no_such_pcm")))
        #expect(throws: AudioError.self) { try missing.start() }
    }

    @Test func mutedCaptureLetsNothingOut() async throws {
        let directory = try makeTemporaryDirectory()
        try rawBytes(testSignal(count: 16_000).map { [Int32($0)] }, format: .s16LE)
            .write(to: URL(filePath: directory + "/in.raw"))
        let device = AudioDevice.rawFile(output: directory + "/out.raw", input: directory + "/in.raw")
        let capture = AudioCapture(configuration: configuration(device, format: .s16LE, channels: 1, rate: 16_000))
        capture.isMuted = true
        try capture.start()
        #expect(await eventually { capture.statistics.frames > 50 })
        capture.stop()
        #expect(await capture.next() == nil)
        #expect(capture.level == -200)
    }

    @Test func aDeviceThatAppearsLaterIsOpenedWithBackoff() async throws {
        let directory = try makeTemporaryDirectory()
        let input = testSignal(count: 8000, seed: 11)
        let device = AudioDevice.rawFile(output: directory + "/out.raw", input: directory + "/in.raw")
        var settings = configuration(device, format: .s16LE, channels: 1, rate: 16_000)
        settings.reopenBackoff = Backoff(initial: .milliseconds(20), cap: .milliseconds(100))
        let capture = AudioCapture(configuration: settings)
        #expect(throws: AudioError.self) { try capture.start() }
        try capture.start(waitForDevice: true)
        #expect(capture.statistics.lastError != nil)
        try rawBytes((input + [Int16](repeating: 0, count: 8000)).map { [Int32($0)] }, format: .s16LE)
            .write(to: URL(filePath: directory + "/in.raw"))
        let result = await collect(capture, count: input.count)
        capture.stop()
        let (samples, _) = try #require(result)
        #expect(Array(samples.prefix(input.count)) == input)
    }

    @Test func pacedCaptureReadsInDeviceTime() async throws {
        let directory = try makeTemporaryDirectory()
        let input = testSignal(count: 16_000, seed: 12)
        try rawBytes((input + [Int16](repeating: 0, count: 16_000)).map { [Int32($0)] }, format: .s16LE)
            .write(to: URL(filePath: directory + "/in.raw"))
        let device = AudioDevice.rawFile(output: directory + "/out.raw", input: directory + "/in.raw")
        var settings = configuration(device, format: .s16LE, channels: 1, rate: 16_000)
        settings.pace = 20
        let capture = AudioCapture(configuration: settings)
        let started = ContinuousClock.now
        try capture.start()
        let result = await collect(capture, count: input.count)
        let elapsed = ContinuousClock.now - started
        capture.stop()
        let (samples, contiguous) = try #require(result)
        // One second of audio at 20 times real time: 50 ms, whatever the load (a generous upper bound).
        #expect(elapsed >= .milliseconds(40), "captured in \(elapsed)")
        #expect(elapsed < .seconds(1), "captured in \(elapsed)")
        #expect(contiguous)
        #expect(Array(samples.prefix(input.count)) == input)
    }

    @Test func anOverrunOnAPacedDeviceIsRecovered() async throws {
        let directory = try makeTemporaryDirectory()
        let input = testSignal(count: 48_000, seed: 15)
        try rawBytes((input + [Int16](repeating: 0, count: 16_000)).map { [Int32($0)] }, format: .s16LE)
            .write(to: URL(filePath: directory + "/in.raw"))
        let device = AudioDevice.rawFile(output: directory + "/out.raw", input: directory + "/in.raw")
        var settings = configuration(device, format: .s16LE, channels: 1, rate: 16_000)
        // Four times real time: a 10 ms period lasts 2.5 ms, the 40 ms device buffer 10 ms.
        settings.pace = 4
        settings.queueBound = .milliseconds(200)
        let capture = AudioCapture(configuration: settings)
        try capture.start()
        // The queue fills (10 frames) and, with backpressure, the capture thread waits for room while the
        // device runs on.
        #expect(await eventually { capture.statistics.frames >= 10 })
        // The stimulus: the consumer stalls for twenty device buffers, so the device overruns.
        try await Task.sleep(for: .milliseconds(200))
        let result = await collect(capture, count: 32_000)
        capture.stop()
        let (samples, contiguous) = try #require(result)
        #expect(capture.statistics.overruns >= 1)
        #expect(capture.statistics.lastError == nil, "\(capture.statistics.lastError ?? "")")
        // Recovered with snd_pcm_recover, frames flow on; the file device loses no input in an overrun.
        #expect(contiguous)
        #expect(Array(samples.prefix(32_000)) == Array(input.prefix(32_000)))
    }

    @Test func aDeviceThatVanishesMidStreamIsReopenedWithBackoff() async throws {
        // The device's sink below closes its pipe: the write into it must fail (EPIPE), not kill the process.
        signal(SIGPIPE, SIG_IGN)
        let directory = try makeTemporaryDirectory()
        let before = testSignal(count: 32_000, seed: 13)
        let after = testSignal(count: 16_000, seed: 14)
        try rawBytes(before.map { [Int32($0)] }, format: .s16LE).write(to: URL(filePath: directory + "/in.raw"))
        // The file plugin pipes what it captured into this sink. The first one takes the input away and stops
        // reading after 0.5 s of audio: the device is gone (reads fail with EIO, opening fails until the input
        // is back). Later ones read on.
        let sink = """
            if [ -e \(directory)/vanished ]; then exec cat >/dev/null; fi
            touch \(directory)/vanished
            rm -f \(directory)/in.raw
            exec head -c 16000 >/dev/null
            """
        try Data(sink.utf8).write(to: URL(filePath: directory + "/sink.sh"))
        let device = AudioDevice.rawFile(output: "|sh \(directory)/sink.sh", input: directory + "/in.raw")
        var settings = configuration(device, format: .s16LE, channels: 1, rate: 16_000)
        settings.reopenBackoff = Backoff(initial: .milliseconds(10), cap: .milliseconds(50))
        // Room for all the sink and its pipe buffer take before the device is gone: the test reads nothing yet.
        settings.queueBound = .seconds(10)
        let capture = AudioCapture(configuration: settings)
        try capture.start()
        #expect(await eventually { capture.statistics.lastError?.contains("cannot open") == true })
        #expect(capture.statistics.reopens == 0)

        // The device comes back.
        try rawBytes((after + [Int16](repeating: 0, count: 16_000)).map { [Int32($0)] }, format: .s16LE)
            .write(to: URL(filePath: directory + "/in.raw"), options: .atomic)
        let size = capture.frameSize
        let expected = stride(from: 0, to: after.count, by: size).map { Array(after[$0..<($0 + size)]) }
        let result = await withDeadline(.seconds(20), onTimeout: { capture.stop() }) {
            () -> (gone: [Int16], resumed: [[Int16]], contiguous: Bool)? in
            var received: [[Int16]] = []
            var next = 0
            var contiguous = true
            while true {
                guard let frame = await capture.next() else { return nil }
                if frame.sequence != next { contiguous = false }
                next = frame.sequence + 1
                received.append(frame.samples)
                if let start = received.firstIndex(of: expected[0]), received.count - start >= expected.count {
                    return (received[..<start].flatMap { $0 }, Array(received[start...]), contiguous)
                }
            }
        }
        capture.stop()
        let (gone, resumed, contiguous) = try #require(result)
        #expect(Array(gone.prefix(4800)) == Array(before.prefix(4800)))
        #expect(resumed == expected)
        #expect(contiguous)
        #expect(capture.statistics.reopens == 1)
        #expect(capture.statistics.outages == 1)
    }

    @Test func levelMeterFollowsTheInput() async throws {
        let directory = try makeTemporaryDirectory()
        let tone = sine(frequency: 1000, rate: 16_000, count: 64_000, amplitude: 16_384).map { [Int32($0.rounded())] }
        try rawBytes(tone, format: .s16LE).write(to: URL(filePath: directory + "/in.raw"))
        let device = AudioDevice.rawFile(output: directory + "/out.raw", input: directory + "/in.raw")
        let capture = AudioCapture(configuration: configuration(device, format: .s16LE, channels: 1, rate: 16_000))
        try capture.start()
        let frame = await withDeadline(.seconds(10), onTimeout: { capture.stop() }) { await capture.next() }
        capture.stop()
        // A half-scale sine is −6 dB peak, −9 dB RMS.
        let level = try #require(frame).level
        #expect(abs(level - (-9.03)) < 0.2, "level \(level)")
    }
}
