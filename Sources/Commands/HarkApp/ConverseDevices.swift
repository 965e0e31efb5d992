import HarkAppliance
import HarkAudio
import HarkCore
import Synchronization

/// The sound devices a converse run uses instead of (or besides) files: a microphone that replaces
/// `--input` and a speaker that plays the answer as it arrives. The speaker's samples are the echo
/// canceller's reference for the microphone.
struct ConverseDevices: Sendable {
    let capture: AudioCapture?
    let playback: AudioPlayback?

    /// Opens the devices the options name; throws a usage error naming the device that failed.
    static func open(_ options: ConverseOptions) throws -> ConverseDevices {
        let reference = options.captureDevice != nil && options.playbackDevice != nil ? EchoReference() : nil
        var playback: AudioPlayback?
        if let device = options.playbackDevice {
            var configuration = AudioPlayback.Configuration(device: device)
            if let request = options.playbackRequest { configuration.request = request }
            let player = AudioPlayback(configuration: configuration, echoReference: reference)
            do {
                try player.start()
            } catch {
                throw ConverseUsageError("cannot open the playback device \(device): \(error)")
            }
            playback = player
        }
        var capture: AudioCapture?
        if let device = options.captureDevice {
            var configuration = AudioCapture.Configuration(device: device, backpressure: options.captureBackpressure)
            if let request = options.captureRequest { configuration.request = request }
            configuration.frontEnd.echoCancellation = reference != nil
            let microphone = AudioCapture(configuration: configuration, echoReference: reference)
            do {
                try microphone.start()
            } catch {
                playback?.stop()
                throw ConverseUsageError("cannot open the capture device \(device): \(error)")
            }
            capture = microphone
        }
        return ConverseDevices(capture: capture, playback: playback)
    }

    /// Streams the microphone into `session` for `duration`, then marks the end of the input.
    func feedMicrophone(
        into session: any VoiceSession,
        for duration: Duration,
        manualActivity: Bool,
        backpressure: Bool
    ) async -> Int {
        guard let capture else { return 0 }
        let clock = ContinuousClock()
        let end = clock.now + duration
        var sent = 0
        while clock.now < end, !Task.isCancelled, let frame = await capture.next() {
            // A file-backed device runs faster than real time: keep pace with the session instead of
            // overflowing its hold bound.
            if backpressure { await session.waitForInputRoom(below: 16_000 * 2) }
            session.send(.audio(AudioChunk(samples: frame.samples, sampleRate: 16_000)))
            sent += frame.samples.count
        }
        session.send(manualActivity ? .activityEnd : .audioStreamEnd)
        return sent
    }

    /// The answer audio as it arrives; an interruption silences the speaker at once.
    func play(_ event: SessionEvent) {
        guard let playback else { return }
        switch event {
        case .audio(let chunk): playback.enqueue(chunk)
        case .interrupted: playback.interrupt()
        default: break
        }
    }

    /// Waits until the last answer sample has left the speaker (at most `limit`), then closes the devices.
    func finish(within limit: Duration) async {
        capture?.stop()
        guard let playback else { return }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { _ = await playback.finishTurn() }
            group.addTask { try? await Task.sleep(for: limit) }
            _ = await group.next()
            playback.stop()
            group.cancelAll()
        }
    }
}

/// The device tools' controls for `hark converse --tools`: volume and mute kept in memory for the run, the
/// status real (version, system, network, uptime of the run).
final class InMemoryDeviceControls: DeviceControls {
    private struct State {
        var volume = 50
        var muted = false
    }
    private let state = Mutex(State())
    private let started = ContinuousClock.now

    func volume() async -> Int { state.withLock { $0.volume } }

    func setVolume(_ percent: Int) async -> Int {
        state.withLock { state in
            state.volume = max(0, min(100, percent))
            return state.volume
        }
    }

    func isMuted() async -> Bool { state.withLock { $0.muted } }

    func setMuted(_ muted: Bool) async { state.withLock { $0.muted = muted } }

    func status() async -> JSONValue {
        let (volume, muted) = state.withLock { ($0.volume, $0.muted) }
        let uptime = started.duration(to: .now).components.seconds
        return [
            "firmware_version": .string(HarkVersion.current),
            "operating_system": .string(HarkVersion.operatingSystem()),
            "network": .string(HarkVersion.networkSummary()),
            "uptime_seconds": .number(Double(uptime)),
            "volume_percent": .number(Double(volume)),
            "microphone_muted": .bool(muted),
            "board": "none (hark converse)",
        ]
    }
}
