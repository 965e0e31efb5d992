import HarkCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What the daemon is doing, as `hark status` shows it: written atomically to the status file whenever
/// it changes (and every few seconds for the counters).
public struct ApplianceStatus: Codable, Sendable, Hashable {
    /// The shown state: an overlay (`offline`, `error`, `muted`, ...) or the conversation state.
    public var state: String
    /// The `STATUS=` line.
    public var line: String
    /// The conversation state underneath any overlay.
    public var conversation: String
    /// Overlays in force, highest first.
    public var overlays: [String]
    public var mode: String
    public var backend: String
    public var board: String
    /// The daemon's process id.
    public var pid: Int32
    /// When the daemon started: the 22nd field of `/proc/PID/stat` (clock ticks after boot), by which `hark reload`
    /// tells the daemon from a process that took its id (absent in files written before it was recorded).
    public var processStartTicks: UInt64?
    /// When the daemon started (seconds since 1970).
    public var startedAt: Double
    /// When this was written (seconds since 1970).
    public var updatedAt: Double
    /// Connections to the service after the first of each session (resumptions and reconnects).
    public var reconnects: Int
    /// Sessions opened since the start.
    public var sessions: Int
    /// Microphone frames dropped (capture queue overflow or the session's hold bound).
    public var droppedFrames: Int
    /// Microphone samples sent again on a new connection because the service had not confirmed them
    /// (absent in files written before it was counted).
    public var resentSamples: Int?
    /// ALSA overruns (capture) plus underruns the device reported (playback).
    public var xruns: Int
    /// Jitter-buffer underruns (silence played while answer audio was expected).
    public var underruns: Int
    /// Watchdog pings sent.
    public var watchdogPings: Int
    /// The last interrupt-to-silence time in milliseconds, if an interrupt happened.
    public var lastInterruptMilliseconds: Double?
    /// The capture device's frame latency (read to queued) p50, in microseconds, if measured.
    public var captureLatencyMicroseconds: Double?
    /// A microphone frame from its capture to its message going out on the connection (fresh audio;
    /// audio held over a reconnect counts its wait too), since the start.
    public var captureToWire: LatencySummary?
    /// Answer audio that found the jitter buffer empty (an answer's first, or after it ran dry), from the
    /// appliance taking it from the session to the ALSA write of its first sample (the prebuffer's wait
    /// included), since the start. Audio queued behind earlier audio waits its turn to play, not counted.
    public var receivedToSpeaker: LatencySummary?
    /// The last error a person should know of (never a secret).
    public var lastError: String?
    /// The service's name for the current session (Gemini's `setupComplete.sessionId`), if it gave one.
    public var serviceSession: String?
    /// The wake-word detector, when sessions open on a wake word.
    public var wake: WakeStatus?
    /// Reloads asked for (SIGHUP) and how the last one went; absent before the first. `hark reload` waits on it.
    public var reloads: ReloadStatus?
    /// The timers and alarms (absent when they are turned off): `hark timers` reads them here without the socket.
    public var timers: TimerStatus?
    /// Each MCP server's standing, one line each (`home: ready, 12 tools`); absent without servers.
    public var toolServers: [String]?
    /// What the music and radio player plays, and its title (`playing jazz — Artist - Song`); absent when nothing
    /// was asked.
    public var media: String?

    public init(
        state: String = "booting",
        line: String = "booting",
        conversation: String = "idle",
        overlays: [String] = [],
        mode: String = "",
        backend: String = "",
        board: String = "",
        pid: Int32 = 0,
        startedAt: Double = 0,
        updatedAt: Double = 0,
        reconnects: Int = 0,
        sessions: Int = 0,
        droppedFrames: Int = 0,
        resentSamples: Int? = nil,
        xruns: Int = 0,
        underruns: Int = 0,
        watchdogPings: Int = 0,
        lastInterruptMilliseconds: Double? = nil,
        captureLatencyMicroseconds: Double? = nil,
        captureToWire: LatencySummary? = nil,
        receivedToSpeaker: LatencySummary? = nil,
        lastError: String? = nil
    ) {
        self.state = state
        self.line = line
        self.conversation = conversation
        self.overlays = overlays
        self.mode = mode
        self.backend = backend
        self.board = board
        self.pid = pid
        self.startedAt = startedAt
        self.updatedAt = updatedAt
        self.reconnects = reconnects
        self.sessions = sessions
        self.droppedFrames = droppedFrames
        self.resentSamples = resentSamples
        self.xruns = xruns
        self.underruns = underruns
        self.watchdogPings = watchdogPings
        self.lastInterruptMilliseconds = lastInterruptMilliseconds
        self.captureLatencyMicroseconds = captureLatencyMicroseconds
        self.captureToWire = captureToWire
        self.receivedToSpeaker = receivedToSpeaker
        self.lastError = lastError
    }

    /// The one line a person reads in `systemctl status` and `hark status`: the highest overlay with its
    /// reason (`offline: retrying in 8 s`, `error: API key rejected`), else the conversation state.
    public static func line(indicator: IndicatorInput, link: LinkState?, fatal: String? = nil) -> String {
        switch indicator.shown {
        case .overlay(.booting): return "booting"
        case .overlay(.fatal): return "fatal: \(fatal ?? "giving up")"
        case .overlay(.error):
            if case .rejected(let failure, let retry)? = link {
                let what =
                    switch failure.kind {
                    case .authentication: "API key rejected"
                    case .untrusted: "server certificate not trusted"
                    default: "configuration rejected"
                    }
                let again = retry.map { "; retrying in \($0.humanDescription)" } ?? ""
                return "error: \(what) (\(failure.message))\(again)"
            }
            return "error"
        case .overlay(.offline):
            if case .offline(let reason, let retry)? = link {
                return "offline: retrying in \(retry.humanDescription) (\(reason))"
            }
            if case .connecting(let attempt)? = link, attempt > 1 {
                return "offline: reconnecting (attempt \(attempt))"
            }
            return "offline: connecting"
        case .overlay(let overlay): return overlay.rawValue.replacing("_", with: " ")
        case .conversation(let state): return state.rawValue
        }
    }

    /// The largest status file read (a written one is about 2 KiB).
    public static let fileLimit = 64 * 1024

    /// Writes `self` as JSON to `path` atomically (a temporary file renamed over it); a failure is a
    /// ``StatusFileError`` that says why in a few words.
    public func write(to path: String) throws(StatusFileError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        do {
            try encoder.encode(self).write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw StatusFileError(.unwritable, path: path, reason: FileFailure.reason(error))
        }
    }

    /// Reads a status file: a missing file, one that cannot be read, and one that is not a status file
    /// (damaged, too large, something else) are told apart (``StatusFileError/Kind``).
    public static func read(from path: String) throws(StatusFileError) -> ApplianceStatus {
        try readWithText(from: path).status
    }

    /// Reads a status file as ``read(from:)`` does, and returns its text too, as `hark status --json`
    /// prints it: the JSON as written, with every control character that JSON lets through raw (DEL, the
    /// C1 controls, line separators, direction controls: all inside strings) written as a `\u` escape, so
    /// the text is the same JSON and cannot drive a terminal.
    public static func readWithText(from path: String) throws(StatusFileError) -> (
        status: ApplianceStatus, text: String
    ) {
        let data = try data(from: path)
        do {
            let status = try JSONDecoder().decode(ApplianceStatus.self, from: data)
            var text = String.UnicodeScalarView()
            for scalar in String(decoding: data, as: UTF8.self).unicodeScalars {
                // Outside strings valid JSON has only whitespace; C0 inside strings is always escaped.
                guard RemoteText.needsEscaping(scalar), scalar.value > 0x20 else {
                    text.append(scalar)
                    continue
                }
                let hex = String(scalar.value, radix: 16)
                text.append(contentsOf: ("\\u" + String(repeating: "0", count: 4 - hex.count) + hex).unicodeScalars)
            }
            return (status, String(text))
        } catch {
            let reason =
                switch error {
                case DecodingError.dataCorrupted: data.isEmpty ? "empty" : "not JSON"
                case DecodingError.keyNotFound(let key, _): "no \(RemoteText.printable(key.stringValue, limit: 60))"
                case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
                    "a wrong value at \(RemoteText.printable(context.codingPath.map(\.stringValue).joined(separator: "."), limit: 60))"
                default: "unreadable JSON"
                }
            throw StatusFileError(.notStatus, path: path, reason: reason)
        }
    }

    private static func data(from path: String) throws(StatusFileError) -> Data {
        var isFolder = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else {
            throw StatusFileError(.missing, path: path)
        }
        if let attributes = try? ReadableFile.attributes(atPath: path) {
            // Never a device or a FIFO that would hang or fill memory.
            guard !isFolder, (attributes[.type] as? FileAttributeType) == .typeRegular else {
                throw StatusFileError(.notStatus, path: path, reason: isFolder ? "a folder" : "not a regular file")
            }
            let size = (attributes[.size] as? Int) ?? (attributes[.size] as? UInt64).map { Int(clamping: $0) } ?? 0
            guard size <= fileLimit else {
                throw StatusFileError(.notStatus, path: path, reason: "\(size) bytes, far more than a status file")
            }
        }
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw StatusFileError(.unreadable, path: path, reason: FileFailure.reason(error))
        }
        guard data.count <= fileLimit else {
            throw StatusFileError(.notStatus, path: path, reason: "\(data.count) bytes, far more than a status file")
        }
        return data
    }

    /// The text `hark status` prints, `now` in seconds since 1970. Every text from the file is shown
    /// printable and bounded (``RemoteText``): the file is not trusted to hold only what the daemon wrote,
    /// and `lastError` quotes the service.
    public func rendered(now: Double) -> String {
        // Bounded, so that no value in the file can trap a conversion (a century is plenty).
        let century = 100 * 365 * 86_400.0
        let uptime = Duration.seconds(min(max(0, now - startedAt), century))
        let age = min(max(0, now - updatedAt), century)
        let (line, mode, backend, board) = (Self.shown(line), Self.shown(mode), Self.shown(backend), Self.shown(board))
        var lines = [
            "state:       \(line)",
            "mode:        \(mode) (\(backend), board \(board))",
            "uptime:      \(Self.clock(uptime)) (pid \(pid))",
            "sessions:    \(sessions) opened, \(reconnects) reconnects"
                + (serviceSession.map { ", service session \(Self.shown($0))" } ?? ""),
            "audio:       \(droppedFrames) dropped frames, \(xruns) xruns, \(underruns) underruns"
                + ((resentSamples ?? 0) > 0
                    ? ", \(Self.decimal(AudioFormat.microphone.seconds(resentSamples ?? 0) * 1000)) ms sent again"
                    : ""),
            "watchdog:    \(watchdogPings) pings",
        ]
        // Silencing a speaker that plays nothing takes no time: the playback counts it, a person would
        // not call it an interruption.
        var latencies: [String] = []
        if let interrupt = lastInterruptMilliseconds, interrupt >= 0.05 {
            latencies.append("interrupt to silence \(Self.decimal(interrupt)) ms")
        } else {
            latencies.append("interrupt to silence: none yet")
        }
        if let capture = captureLatencyMicroseconds {
            latencies.append("capture to queue \(Self.decimal(capture)) µs (p50)")
        }
        if let wire = captureToWire { latencies.append("capture to wire \(wire.rendered)") }
        if let speaker = receivedToSpeaker { latencies.append("received to speaker \(speaker.rendered)") }
        for (index, latency) in latencies.enumerated() {
            lines.append((index == 0 ? "latency:     " : "             ") + latency)
        }
        if let wake {
            let share = wake.audioSeconds > 0 ? wake.cpuSeconds / wake.audioSeconds * 100 : 0
            let words = wake.words.prefix(16).map(Self.shown).joined(separator: ", ")
            lines.append(
                "wake word:   \(words): \(Self.count(wake.detections, "detection")), "
                    + "\(Self.count(wake.falseStarts, "false start")); "
                    + "\(Self.decimal(wake.cpuSeconds)) s CPU (\(Self.decimal(share)) % of one core)"
                    + (wake.droppedSeconds > 0 ? ", \(Self.decimal(wake.droppedSeconds)) s of audio unheard" : "")
            )
        }
        for server in (toolServers ?? []).prefix(16) {
            lines.append("MCP server:  \(Self.shown(server))")
        }
        if let reloads {
            lines.append(
                "reloads:     \(reloads.count), the last "
                    + (reloads.failure.map { "failed, running the configuration before it: \(Self.shown($0))" }
                        ?? "applied")
            )
        }
        if let timers { lines += timers.rendered(now: now) }
        if let media { lines.append("media:       \(Self.shown(media))") }
        if let lastError { lines.append("last error:  \(Self.shown(lastError))") }
        if age > 15 { lines.append("note:        last updated \(Int(age)) s ago; is the daemon running?") }
        return lines.joined(separator: "\n")
    }

    /// `1 detection`, `2 detections`.
    private static func count(_ value: Int, _ noun: String) -> String { "\(value) \(noun)\(value == 1 ? "" : "s")" }

    /// Text from the file as `hark status` shows it: printable, at most 300 Unicode scalars.
    private static func shown(_ text: String) -> String { RemoteText.printable(text, limit: 300) }

    private static func clock(_ duration: Duration) -> String {
        let total = Int(duration.components.seconds)
        let (days, hours, minutes, seconds) = (total / 86_400, total / 3600 % 24, total / 60 % 60, total % 60)
        let time = [hours, minutes, seconds].map { $0 < 10 ? "0\($0)" : "\($0)" }.joined(separator: ":")
        return days > 0 ? "\(days)d \(time)" : time
    }

    fileprivate static func decimal(_ value: Double) -> String {
        guard value.isFinite, abs(value) < 1e12 else { return value.isNaN ? "nan" : "∞" }
        let tenths = Int((value * 10).rounded())
        return (tenths < 0 ? "-" : "") + "\(abs(tenths) / 10).\(abs(tenths) % 10)"
    }
}

/// The timers and alarms in `hark status` (and for `hark timers` without the control socket).
public struct TimerStatus: Codable, Sendable, Hashable {
    /// A timer or an alarm.
    public struct Entry: Codable, Sendable, Hashable {
        public var label: String
        /// When it rings (next), seconds since 1970.
        public var at: Double
        /// An alarm's local time, `HH:MM`.
        public var time: String?
        /// An alarm's weekdays (`mon`, ...); empty: once.
        public var days: [String]?

        public init(label: String, at: Double, time: String? = nil, days: [String]? = nil) {
            self.label = label
            self.at = at
            self.time = time
            self.days = days
        }
    }

    /// The timers, soonest first.
    public var timers: [Entry]
    /// The alarms, soonest first.
    public var alarms: [Entry]
    /// What rings now, in the order it began.
    public var ringing: [String]
    /// What rang unheard or late since the start, newest last (at most 8).
    public var missed: [String]

    public init(timers: [Entry] = [], alarms: [Entry] = [], ringing: [String] = [], missed: [String] = []) {
        self.timers = timers
        self.alarms = alarms
        self.ringing = ringing
        self.missed = missed
    }

    /// The lines of `hark status`, `now` in seconds since 1970 (every text shown printable and bounded).
    func rendered(now: Double) -> [String] {
        func shown(_ text: String) -> String { RemoteText.printable(text, limit: 60) }
        func left(_ at: Double) -> String {
            let seconds = Int(min(max(0, at - now), 1e9).rounded(.up))
            let clock = [seconds / 3600, seconds / 60 % 60, seconds % 60].map { $0 < 10 ? "0\($0)" : "\($0)" }
            return clock.joined(separator: ":")
        }
        var entries = timers.prefix(40).map { "\(shown($0.label)) in \(left($0.at))" }
        entries += alarms.prefix(40).map { alarm in
            let days = (alarm.days ?? []).prefix(7).map(shown).joined(separator: " ")
            return "\(shown(alarm.label)) at \(shown(alarm.time ?? "?"))\(days.isEmpty ? "" : " (\(days))")"
                + " in \(left(alarm.at))"
        }
        var lines = ["timers:      " + (entries.isEmpty ? "none set" : entries.joined(separator: "; "))]
        if !ringing.isEmpty { lines.append("ringing:     " + ringing.prefix(40).map(shown).joined(separator: ", ")) }
        if !missed.isEmpty { lines.append("missed:      " + missed.prefix(8).map(shown).joined(separator: "; ")) }
        return lines
    }
}

/// The wake-word detector in `hark status`.
public struct WakeStatus: Codable, Sendable, Hashable {
    /// The words listened for.
    public var words: [String]
    /// Detections since the start.
    public var detections: Int
    /// Detections after which nothing was said.
    public var falseStarts: Int
    /// CPU time the detector has spent, seconds.
    public var cpuSeconds: Double
    /// Audio it has heard, seconds.
    public var audioSeconds: Double
    /// Audio it could not keep up with (dropped), seconds.
    public var droppedSeconds: Double

    public init(
        words: [String],
        detections: Int,
        falseStarts: Int,
        cpuSeconds: Double,
        audioSeconds: Double,
        droppedSeconds: Double
    ) {
        self.words = words
        self.detections = detections
        self.falseStarts = falseStarts
        self.cpuSeconds = cpuSeconds
        self.audioSeconds = audioSeconds
        self.droppedSeconds = droppedSeconds
    }
}

/// The configuration reloads in `hark status`.
public struct ReloadStatus: Codable, Sendable, Hashable {
    /// Reloads handled since the start, applied or not.
    public var count: Int
    /// Why the last one was not applied (the file, line and key); nil when it was.
    public var failure: String?

    public init(count: Int, failure: String? = nil) {
        self.count = count
        self.failure = failure
    }
}

/// A status file that cannot be read or written, said in one line for a person.
public struct StatusFileError: Error, CustomStringConvertible, Sendable, Hashable {
    /// What went wrong.
    public enum Kind: Sendable, Hashable {
        /// There is no file: the daemon is not running, or has never written it.
        case missing
        /// The file is there but cannot be read (permissions).
        case unreadable
        /// The file is there but holds no status: damaged, too large, or something else.
        case notStatus
        /// The daemon cannot write it.
        case unwritable
    }

    /// What went wrong.
    public var kind: Kind
    /// The status file.
    public var path: String
    /// Why, in a few words, when known (`permission denied`, `not JSON`).
    public var reason: String?

    /// An error of `kind` about the status file at `path`.
    public init(_ kind: Kind, path: String, reason: String? = nil) {
        self.kind = kind
        self.path = path
        self.reason = reason
    }

    public var description: String {
        let because = reason.map { " (\($0))" } ?? ""
        let text =
            switch kind {
            case .missing:
                "no status file at \(path): is the appliance running? (systemctl status hark; "
                    + "a daemon that cannot write it says so in journalctl -u hark)"
            case .unreadable:
                "cannot read the status file \(path)\(because): run hark status as root or as the hark user"
            case .notStatus: "\(path) is not a status file\(because): damaged, or not written by hark"
            case .unwritable: "cannot write the status file \(path)\(because)"
            }
        return RemoteText.printable(text, limit: 1000)
    }
}

/// Percentiles of one latency, in milliseconds.
public struct LatencySummary: Codable, Sendable, Hashable {
    /// The median.
    public var p50: Double
    /// The 99th percentile.
    public var p99: Double
    /// The largest seen.
    public var max: Double
    /// Values measured.
    public var count: Int
    /// The sum of the values measured (the metrics' summary needs it; absent in files written before it was kept).
    public var sum: Double?

    public init(p50: Double, p99: Double, max: Double, count: Int, sum: Double? = nil) {
        self.p50 = p50
        self.p99 = p99
        self.max = max
        self.count = count
        self.sum = sum
    }

    /// `p50 12.3 ms, p99 45.6 ms (max 78.9 ms, 1234 measured)`.
    public var rendered: String {
        let ms = { (value: Double) in ApplianceStatus.decimal(value) + " ms" }
        return "p50 \(ms(p50)), p99 \(ms(p99)) (max \(ms(max)), \(count) measured)"
    }
}
