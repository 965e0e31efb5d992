import HarkCore
import HarkIndicators

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

    /// Writes `self` as JSON to `path` atomically (a temporary file renamed over it).
    public func write(to path: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(self).write(to: URL(fileURLWithPath: path), options: .atomic)
    }

    /// Reads a status file.
    public static func read(from path: String) throws -> ApplianceStatus {
        try JSONDecoder().decode(ApplianceStatus.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
    }

    /// The text `hark status` prints, `now` in seconds since 1970.
    public func rendered(now: Double) -> String {
        let uptime = Duration.seconds(max(0, now - startedAt))
        let age = max(0, now - updatedAt)
        var lines = [
            "state:       \(line)",
            "mode:        \(mode) (\(backend), board \(board))",
            "uptime:      \(Self.clock(uptime)) (pid \(pid))",
            "sessions:    \(sessions) opened, \(reconnects) reconnects",
            "audio:       \(droppedFrames) dropped frames, \(xruns) xruns, \(underruns) underruns"
                + ((resentSamples ?? 0) > 0 ? ", \(Self.decimal(Double(resentSamples ?? 0) / 16)) ms sent again" : ""),
            "watchdog:    \(watchdogPings) pings",
        ]
        var latencies: [String] = []
        if let interrupt = lastInterruptMilliseconds {
            latencies.append("interrupt to silence \(Self.decimal(interrupt)) ms")
        }
        if let capture = captureLatencyMicroseconds {
            latencies.append("capture to queue \(Self.decimal(capture)) µs (p50)")
        }
        if let wire = captureToWire { latencies.append("capture to wire \(wire.rendered)") }
        if let speaker = receivedToSpeaker { latencies.append("received to speaker \(speaker.rendered)") }
        for (index, latency) in latencies.enumerated() {
            lines.append((index == 0 ? "latency:     " : "             ") + latency)
        }
        if let lastError { lines.append("last error:  \(lastError)") }
        if age > 15 { lines.append("note:        last updated \(Int(age)) s ago; is the daemon running?") }
        return lines.joined(separator: "\n")
    }

    private static func clock(_ duration: Duration) -> String {
        let total = Int(duration.components.seconds)
        let (days, hours, minutes, seconds) = (total / 86_400, total / 3600 % 24, total / 60 % 60, total % 60)
        let time = [hours, minutes, seconds].map { $0 < 10 ? "0\($0)" : "\($0)" }.joined(separator: ":")
        return days > 0 ? "\(days)d \(time)" : time
    }

    fileprivate static func decimal(_ value: Double) -> String {
        let tenths = Int((value * 10).rounded())
        return "\(tenths / 10).\(tenths % 10)"
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

    public init(p50: Double, p99: Double, max: Double, count: Int) {
        self.p50 = p50
        self.p99 = p99
        self.max = max
        self.count = count
    }

    /// `p50 12.3 ms, p99 45.6 ms (max 78.9 ms, 1234 measured)`.
    public var rendered: String {
        let ms = { (value: Double) in ApplianceStatus.decimal(value) + " ms" }
        return "p50 \(ms(p50)), p99 \(ms(p99)) (max \(ms(max)), \(count) measured)"
    }
}
