import HarkAppliance
import HarkAudio
import HarkConfig
import HarkCore
import HarkMedia
import Logging
import Synchronization

/// The appliance's music and radio: one player, its ring attached to the playback's media lane while it plays
/// (so the echo canceller's reference holds the music, and the mixer ducks it under speech), detached when it
/// pauses, stops or fails. A failure reaches the log (the player's) and the reply of the play that asked for it.
final class ApplianceMedia: MediaControls {
    private let player: MediaPlayer
    private let settings: MediaSettings
    private let attach: @Sendable (SampleRing?) -> Void

    /// A player at the playback's `outputRate`, attaching rings with `attach` (the playback's `setMedia`).
    init(
        settings: MediaSettings,
        outputRate: Int,
        logger: Logger,
        attach: @escaping @Sendable (SampleRing?) -> Void
    ) {
        self.settings = settings
        self.attach = attach
        player = MediaPlayer(configuration: settings.playerConfiguration(outputRate: outputRate), logger: logger) {
            status in
            // A source that failed or ended is let go of; the lane fades out what it had.
            if status.state == .failed || status.state == .stopped { attach(nil) }
        }
    }

    /// Stops what plays and waits for the decoding thread (at shutdown).
    func shutdown() {
        attach(nil)
        player.shutdown()
    }

    /// The status as `hark status` shows it: nil when nothing was asked.
    var summary: String? {
        let status = player.status
        return status.state == .idle ? nil : status.summary
    }

    func media(_ request: MediaRequest) async -> MediaReply {
        switch request {
        case .play(let source):
            return await play(source)
        case .pause:
            guard player.pause() else { return reply(false, "Nothing is playing.") }
            attach(nil)
            return reply(true, "Paused.")
        case .resume:
            guard player.resume(), let ring = player.ring else { return reply(false, "Nothing is paused.") }
            attach(ring)
            return reply(true, "Playing again.")
        case .stop:
            let stopped = player.stop()
            attach(nil)
            return reply(stopped, stopped ? "Stopped." : "Nothing is playing.")
        case .status:
            let status = player.status
            guard status.state != .idle else { return reply(true, "Nothing plays.") }
            return reply(true, status.summary + (status.format.map { " [\($0)]" } ?? ""))
        }
    }

    private func play(_ source: String) async -> MediaReply {
        let station = settings.station(named: source)
        if station == nil, !source.contains("/") {
            let names = settings.stations.map(\.name)
            let known =
                names.isEmpty ? "no stations are configured" : "the stations are " + names.joined(separator: ", ")
            return reply(false, "There is no station called \(RemoteText.printable(source, limit: 60)); \(known).")
        }
        do {
            attach(try player.play(station?.url ?? source, name: station?.name))
        } catch {
            return reply(false, "It cannot play: \(error.message)")
        }
        // The reply waits until it plays or fails, within the open timeout.
        let deadline = ContinuousClock.now + settings.openTimeout + .seconds(2)
        while ContinuousClock.now < deadline {
            let status = player.status
            switch status.state {
            case .playing, .paused:
                return reply(true, "Playing \(status.source ?? "it").")
            case .failed:
                return reply(false, "It cannot play: \(status.failure?.description ?? "it failed").")
            case .stopped:
                return reply(status.ended, status.ended ? "It played to its end." : "It was stopped.")
            case .idle, .connecting:
                try? await Task.sleep(for: .milliseconds(50))
            }
        }
        return reply(false, "It is still connecting.")
    }

    private func reply(_ ok: Bool, _ message: String) -> MediaReply {
        let status = player.status
        var data: [String: JSONValue] = [
            "state": .string(status.state.rawValue),
            "stations": .array(settings.stations.map { .string($0.name) }),
        ]
        if let source = status.source { data["source"] = .string(source) }
        if let title = status.title { data["title"] = .string(title) }
        if let format = status.format { data["format"] = .string(format) }
        if let failure = status.failure { data["failure"] = .string(failure.description) }
        return MediaReply(ok: ok, message: message, data: .object(data))
    }
}

/// Where the player's rings go: the playback once the devices are open (before that, and without one, nowhere).
final class MediaLane: Sendable {
    private let target = Mutex<AudioPlayback?>(nil)

    /// The playback whose media lane plays the rings.
    var playback: AudioPlayback? {
        get { target.withLock { $0 } }
        set { target.withLock { $0 = newValue } }
    }

    /// Attaches `ring` to the playback's media lane (nil detaches).
    func attach(_ ring: SampleRing?) { playback?.setMedia(ring) }
}
