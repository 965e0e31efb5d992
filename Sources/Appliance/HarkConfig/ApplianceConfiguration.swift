import HarkBackends
import HarkCore
import HarkWake

/// How the appliance is used: one configuration key, each a complete experience.
public enum ApplianceMode: String, Sendable, Hashable, CaseIterable {
    /// Hands-free: the service's voice detection, barge-in, echo cancellation; a tap mutes. The session
    /// opens when the local voice detector hears speech and closes after the idle time.
    case speaker
    /// Hold the button to talk (manual activity start/end); pressing while the agent speaks interrupts it.
    case pushToTalk = "push-to-talk"
    /// The voice tutor: greets first when a visitor starts (button or voice); a fresh conversation per visitor.
    case kiosk

    /// What the mode needs of the backend, with its name for a person.
    public var needs: [(BackendCapabilities, String)] {
        switch self {
        case .speaker: [(.serverVoiceDetection, "server-side voice detection")]
        case .pushToTalk: [(.manualActivity, "manual activity (the button marks the turn)")]
        case .kiosk: [(.greetingFirst, "the agent greeting first")]
        }
    }
}

/// Audio settings (`audio:`); device names default to the board's.
public struct AudioSettings: Sendable, Hashable {
    /// `audio.capture_device`: an ALSA PCM name overriding the board's.
    public var captureDevice: String?
    /// `audio.playback_device`: an ALSA PCM name overriding the board's.
    public var playbackDevice: String?
    /// `audio.capture_file`: read the microphone from a raw 16-bit file instead (development, tests).
    public var captureFile: String?
    /// `audio.playback_file`: write the speaker to a raw 16-bit file instead (development, tests).
    public var playbackFile: String?
    /// `audio.file_pace`: how fast file-backed devices run against real time (1 = real time, 0 = unpaced).
    public var filePace = 1.0
    /// `audio.echo_cancellation`
    public var echoCancellation = true
    /// `audio.noise_suppression`
    public var noiseSuppression = true
    /// `audio.automatic_gain`
    public var automaticGain = false
    /// `audio.prebuffer`: the jitter buffer's prebuffer.
    public var prebuffer: Duration = .milliseconds(60)
    /// `audio.volume`: the starting volume 0–100 when none was saved; nil takes the board's default.
    public var volume: Int?
    /// `audio.mixer_control`: an ALSA mixer control to drive instead of software volume, or nil.
    public var mixerControl: String?

    public init() {}
}

/// When sessions open and close (`session:`).
public struct SessionSettings: Sendable, Hashable {
    /// `session.idle_timeout`: speaker and kiosk close the session after this long with nobody talking.
    public var idleTimeout: Duration = .seconds(30)
    /// `session.greeting`: kiosk: the text turn that makes the agent greet first.
    public var greeting: String?
    /// `session.vad_threshold`: local voice detector sensitivity (dB above the noise floor).
    public var vadThreshold = 9.0
    /// `session.pre_roll`: audio kept from before speech starts, sent first.
    public var preRoll: Duration = .milliseconds(500)
    /// `session.trigger`: speaker and kiosk: what opens a session: `wake` (a wake word), `voice` (any speech
    /// the local voice detector hears) or `auto` (the wake word when its runtime is installed, else voice).
    public var trigger = "auto"

    /// The values of ``trigger``.
    public static let triggers = ["auto", "wake", "voice"]

    public init() {}
}

/// The wake word (`wake:`): what the on-device detector listens for, and what happens around it.
public struct WakeSettings: Sendable, Hashable {
    /// `wake.words`: built-in names (microWakeWord's `okay_nabu`, `hey_jarvis`, `alexa`, `hey_mycroft`, Apache-2.0;
    /// openWakeWord's `oww_hey_jarvis`, ..., non-commercial) or paths of models (a microWakeWord manifest `.json`,
    /// or a `.tflite`); several listen at once. Each may carry its own threshold (`alexa:0.7`).
    public var words = [WakeRuntime.defaultWord]
    /// `wake.stop_words`: words that stop what rings or speaks, heard only then, never opening a session (a stop
    /// model given by its path: no wheel brings one). None by default.
    public var stopWords: [String] = []
    /// `wake.threshold`: a model probability above this is a detection (for each word without its own or a
    /// manifest's cutoff: openWakeWord's).
    public var threshold = 0.5
    /// `wake.refractory`: after a detection, the same word is not detected again for this long.
    public var refractory: Duration = .seconds(2)
    /// `wake.quiet_level`: audio below this RMS level (dBFS) is quiet; the detector's models do not run on it.
    public var quietLevel = -60.0
    /// `wake.follow_ups`: speaker mode: while the session is open, a follow-up question needs no wake word.
    public var followUps = true
    /// `wake.send_wake_word`: the wake word itself goes to the agent with the question.
    public var sendWakeWord = false

    /// The most words at once.
    public static let wordLimit = 8
    /// The most stop words at once.
    public static let stopWordLimit = 4

    public init() {}
}

/// Which short generated sounds play (`earcons:`).
public struct EarconSettings: Sendable, Hashable {
    /// `earcons.listening_start`
    public var listeningStart = true
    /// `earcons.cancel`
    public var cancel = true
    /// `earcons.error`
    public var error = true
    /// `earcons.offline`
    public var offline = true
    /// `earcons.volume`: 0–100, relative to the playback volume.
    public var volume = 40

    public init() {}
}

/// Timers and alarms (`timers:`): kept in the state directory, ringing through the speaker without a network.
public struct TimerSettings: Sendable, Hashable {
    /// `timers.enabled`: false turns timers and alarms off (no tools, the control socket refuses them).
    public var enabled = true
    /// `timers.ring_for`: how long a ring lasts unheard before it stops by itself and is reported missed.
    public var ringFor: Duration = .seconds(300)
    /// `timers.volume`: the alert's loudness, 0–100 of full scale (before the playback volume).
    public var volume = 70

    public init() {}
}

/// The metrics a fleet scrapes (`metrics:`).
public struct MetricsSettings: Sendable, Hashable {
    /// `metrics.textfile`: where the Prometheus text file for node_exporter's textfile collector is written (every
    /// 15 s and at exit, atomically); nil (the default): no file.
    public var textfile: String?

    public init() {}
}

/// How `hark-update` updates the device (`update:`); the daemon itself only validates these.
public struct UpdateSettings: Sendable, Hashable {
    /// `update.window`: the local time of day updates are installed in, `HH:MM-HH:MM` (may cross midnight).
    public var window = "02:00-05:00"
    /// `update.health_for`: how long a new release must stay healthy before it is kept.
    public var healthFor: Duration = .seconds(600)

    public init() {}
}

/// Which device tools the agent may call (`tools:`).
public struct ToolSettings: Sendable, Hashable {
    /// `tools.volume`: set_volume / get_volume
    public var volume = true
    /// `tools.mute`: mute_microphone
    public var mute = true
    /// `tools.clock`: get_time
    public var clock = true
    /// `tools.status`: device_status
    public var status = true
    /// `tools.timers`: set_timer, list_timers, cancel_timer, add_time_to_timer, set_alarm, list_alarms,
    /// cancel_alarm, snooze_alarm, stop_ringing (when `timers.enabled`)
    public var timers = true
    /// `tools.media`: play_media, pause_media, resume_media, stop_media, now_playing (when `media.enabled`)
    public var media = true
    /// `tools.set_volume`: how a volume change runs (`blocking`, `silent`, `when_idle`, `interrupt`; models whose
    /// calls always block ignore it). The defaults are the tools' own (`DeviceTools.defaultBehaviors`).
    public var setVolume = "when_idle"
    /// `tools.get_volume`
    public var getVolume = "interrupt"
    /// `tools.set_microphone_muted`
    public var setMicrophoneMuted = "silent"
    /// `tools.get_time`
    public var getTime = "interrupt"
    /// `tools.get_device_status`
    public var getDeviceStatus = "interrupt"
    /// `tools.set_timer`: a new timer is confirmed once the agent is idle.
    public var setTimer = "when_idle"
    /// `tools.list_timers`: the user asked.
    public var listTimers = "interrupt"
    /// `tools.cancel_timer`
    public var cancelTimer = "when_idle"
    /// `tools.add_time_to_timer`
    public var addTimeToTimer = "when_idle"
    /// `tools.set_alarm`
    public var setAlarm = "when_idle"
    /// `tools.list_alarms`: the user asked.
    public var listAlarms = "interrupt"
    /// `tools.cancel_alarm`
    public var cancelAlarm = "when_idle"
    /// `tools.snooze_alarm`
    public var snoozeAlarm = "when_idle"
    /// `tools.stop_ringing`: the ring stopping is its own reply.
    public var stopRinging = "silent"
    /// `tools.play_media`: the music starting is confirmed once the agent is idle.
    public var playMedia = "when_idle"
    /// `tools.pause_media`: the music pausing is its own reply.
    public var pauseMedia = "silent"
    /// `tools.resume_media`
    public var resumeMedia = "silent"
    /// `tools.stop_media`
    public var stopMedia = "silent"
    /// `tools.now_playing`: the user asked.
    public var nowPlaying = "interrupt"

    /// The behaviour of each tool, by its name.
    public var behaviors: [String: ToolBehavior] {
        let named = [
            "set_volume": setVolume, "get_volume": getVolume, "set_microphone_muted": setMicrophoneMuted,
            "get_time": getTime, "get_device_status": getDeviceStatus, "set_timer": setTimer,
            "list_timers": listTimers, "cancel_timer": cancelTimer, "add_time_to_timer": addTimeToTimer,
            "set_alarm": setAlarm, "list_alarms": listAlarms, "cancel_alarm": cancelAlarm,
            "snooze_alarm": snoozeAlarm, "stop_ringing": stopRinging,
            "play_media": playMedia, "pause_media": pauseMedia, "resume_media": resumeMedia, "stop_media": stopMedia,
            "now_playing": nowPlaying,
        ]
        return named.compactMapValues { ToolBehavior(name: $0) }
    }

    public init() {}
}

/// Everything `hark run` reads from its configuration file (`/etc/hark/hark.yaml`), after environment
/// overrides (`HARK_MODE`, `HARK_GEMINI_MODEL`, ...). Secrets are never here: only where to find them.
public struct ApplianceConfiguration: Sendable, Hashable {
    /// `mode`
    public var mode: ApplianceMode = .speaker
    /// `backend`: the name of one of the registry's backends.
    public var backend = Backends.all[0].name
    /// `board`: a board name, or "auto" to detect it.
    public var board = "auto"
    /// `board_dir`: where board files are.
    public var boardDirectory = "/usr/share/hark/board"
    /// `state_dir`: the resumption handle and the saved volume live here.
    public var stateDirectory = "/var/lib/hark"
    /// `status_file`: where `hark status` reads the daemon's state.
    public var statusFile = "/run/hark/status.json"
    /// `control_socket`: the daemon's control socket (`hark reload`, `hark timers`, ...); nil: `control.sock` in
    /// the runtime directory (``controlSocketPath(environment:)``).
    public var controlSocket: String?
    /// `log_level`: trace, debug, info, notice, warning, error.
    public var logLevel = "info"
    /// `log_transcripts`: transcripts are not logged unless this is on (privacy).
    public var logTranscripts = false
    /// Each backend's section (`gemini:`, `datagrid:`), by backend name, its keys' defaults where not set.
    public var backends: [String: BackendSettings] = Dictionary(
        uniqueKeysWithValues: Backends.all.map { ($0.name, $0.defaultSettings) }
    )
    public var audio = AudioSettings()
    public var session = SessionSettings()
    public var wake = WakeSettings()
    public var earcons = EarconSettings()
    public var tools = ToolSettings()
    public var timers = TimerSettings()
    public var media = MediaSettings()
    public var metrics = MetricsSettings()
    public var update = UpdateSettings()
    /// `mcp.servers`: the MCP servers whose tools the agent may call.
    public var mcpServers: [MCPServerConfiguration] = []

    public init() {}

    /// The control socket's path: `control_socket` when set, else `control.sock` in the runtime directory systemd
    /// names (`$RUNTIME_DIRECTORY`, from the unit's `RuntimeDirectory=hark`; the first when it names several), else
    /// in `/run/hark`.
    public func controlSocketPath(environment: [String: String]) -> String {
        if let controlSocket { return controlSocket }
        let named = environment["RUNTIME_DIRECTORY"]?.split(separator: ":").first.map(String.init)
        let directory = named.flatMap { $0.hasPrefix("/") ? $0 : nil } ?? "/run/hark"
        return (directory.hasSuffix("/") ? directory : directory + "/") + "control.sock"
    }

    /// The chosen backend's section.
    public var backendSettings: BackendSettings {
        get { backends[backend] ?? Backends.named(backend)?.defaultSettings ?? BackendSettings(values: [:]) }
        set { backends[backend] = newValue }
    }

    /// The value of a backend key by its dotted path (`gemini.model`), or nil.
    public func setting(_ path: String) -> SettingValue? {
        guard let dot = path.firstIndex(of: ".") else { return nil }
        return backends[String(path[..<dot])]?[String(path[path.index(after: dot)...])]
    }

    /// The text of a backend key by its dotted path (`gemini.model`), or nil.
    public func text(_ path: String) -> String? {
        if case .text(let text)? = setting(path) { return text }
        return nil
    }
}
