import HarkAppliance
import HarkAudio
import HarkCore

/// The supervisor's side of the control socket: `announce` (a WAV the command checked and left where the daemon
/// reads it, checked again here: a local absolute path, within the announcement bounds), the timers and alarms
/// (``TimerControlService``) and music and radio (``MediaControlService``).
struct ApplianceControl: ControlService {
    let core: Supervisor
    /// The music and radio (nil: media.enabled is off).
    var media: ApplianceMedia?

    func handle(_ request: ControlRequest) async -> ControlReply {
        if request.op.hasPrefix("media.") { return await MediaControlService(media: media).handle(request) }
        guard request.op == "announce" else { return await core.timerService.handle(request) }
        guard case .string(let file)? = request.args["file"], file.hasPrefix("/"), file.utf8.count <= 4096,
            !file.contains("\0")
        else {
            return .failure("announce: file must be the absolute path of a WAV recording")
        }
        var chime = false
        switch request.args["chime"] {
        case nil, .null?: break
        case .bool(let value)?: chime = value
        default: return .failure("announce: chime must be true or false")
        }
        let samples: [Int16]
        do {
            _ = try await AnnouncementSource.load(file)  // the bounds: size, rate, channels, length
            samples = try WAVFile.readMono(path: file, sampleRate: 24_000)
        } catch {
            return .failure("announce: \(RemoteText.printable(String(describing: error), limit: 300))")
        }
        return await core.announce(AudioChunk(samples: samples, sampleRate: 24_000), chime: chime)
    }
}
