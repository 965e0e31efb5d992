import HarkCore

/// What the media player does.
public enum MediaState: String, Sendable, Equatable {
    /// Nothing was asked.
    case idle
    /// Opening the source: connecting, probing the container.
    case connecting
    /// Audio flows into the ring.
    case playing
    /// Paused: nothing is read; what was decoded waits in the ring.
    case paused
    /// Stopped when asked, or at the end of a file.
    case stopped
    /// Ended by an error (``MediaStatus/failure`` says which).
    case failed
}

/// Why a source could not play, in words an agent or a person can be told.
public struct MediaFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// The kind of failure.
    public enum Kind: String, Sendable, Equatable {
        /// The configuration does not allow the source (scheme, host, length, station name).
        case refused
        /// The server could not be reached, or answered with an error.
        case unreachable
        /// Opening the source took longer than its deadline.
        case timedOut = "timed out"
        /// No audio came for the stall timeout while playing.
        case stalled
        /// The container or the audio in it could not be read.
        case malformed
        /// The source holds no audio, or audio no decoder here reads.
        case unsupported
        /// The device could not start decoding (a thread, memory).
        case device
    }

    /// The kind.
    public let kind: Kind
    /// One printable line that says what failed.
    public let message: String

    /// A failure of `kind`, `message` made printable and bounded.
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = RemoteText.printable(message, limit: 300)
    }

    public var description: String { "\(kind.rawValue): \(message)" }
}

/// The media player's status, as the tools, the control socket and the log show it.
public struct MediaStatus: Sendable, Equatable {
    /// The state.
    public var state: MediaState = .idle
    /// What plays or played: the station's name or the shown (redacted) URL.
    public var source: String?
    /// The stream's title (ICY `StreamTitle`), printable and bounded.
    public var title: String?
    /// The codec, rate and channels of the audio, once known (`mp3, 44100 Hz, 2 channels`).
    public var format: String?
    /// Why it failed, when it did.
    public var failure: MediaFailure?
    /// True when a file or finite stream played to its end.
    public var ended = false

    /// A status (idle unless told).
    public init(state: MediaState = .idle, source: String? = nil) {
        self.state = state
        self.source = source
    }

    /// One line for a person or an agent: `playing Radio X — Artist - Song`, `failed: stalled: ...`.
    public var summary: String {
        var line = state.rawValue
        if let source { line += " \(source)" }
        if let title, !title.isEmpty { line += " — \(title)" }
        if ended { line += " (ended)" }
        if let failure { line += ": \(failure)" }
        return line
    }
}

/// The deadlines of the decoding thread's phases, as a value on an injected `now` (nanoseconds of a monotonic
/// clock): opening a source has ``openTimeout``; while playing, no decoded audio for ``stallTimeout`` is a stall.
/// A trickle (a server that sends a byte a second) keeps the connection alive but decodes nothing: a stall too.
public struct MediaWatch: Sendable, Equatable {
    /// The phase watched.
    public enum Phase: Sendable, Equatable {
        /// Not in a libavformat call (paused, waiting for room): nothing expires.
        case idle
        /// Opening; expires at the deadline.
        case opening(deadline: UInt64)
        /// Reading and decoding; expires when no audio came by the deadline.
        case streaming(deadline: UInt64)
    }

    /// How long opening a source may take.
    public let openTimeout: Duration
    /// How long playing may go without decoded audio.
    public let stallTimeout: Duration
    /// The phase.
    public private(set) var phase: Phase = .idle

    /// A watch with these timeouts.
    public init(openTimeout: Duration, stallTimeout: Duration) {
        self.openTimeout = openTimeout
        self.stallTimeout = stallTimeout
    }

    /// Opening starts at `now`.
    public mutating func opening(now: UInt64) { phase = .opening(deadline: now &+ Self.nanoseconds(openTimeout)) }

    /// Audio came (or streaming starts) at `now`: the stall deadline moves on.
    public mutating func heard(now: UInt64) { phase = .streaming(deadline: now &+ Self.nanoseconds(stallTimeout)) }

    /// Outside libavformat (paused, waiting for room in the ring): nothing expires.
    public mutating func rest() { phase = .idle }

    /// What expired at `now`, if anything.
    public func expired(now: UInt64) -> MediaFailure.Kind? {
        switch phase {
        case .idle: nil
        case .opening(let deadline): now >= deadline ? .timedOut : nil
        case .streaming(let deadline): now >= deadline ? .stalled : nil
        }
    }

    static func nanoseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0 else { return 0 }
        return UInt64(min(seconds, 1_000_000)) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
    }
}

/// The ICY metadata of a stream (`StreamTitle='Artist - Song';StreamUrl='...';`): the title, printable and bounded.
public enum ICYMetadata {
    /// The longest title kept, in Unicode scalars.
    public static let titleLimit = 160

    /// The `StreamTitle` of `packet`, printable and at most ``titleLimit`` scalars; nil when it has none.
    public static func title(_ packet: some Collection<UInt8>) -> String? {
        let bytes = Array(packet.prefix(4080))
        let key = Array("StreamTitle='".utf8)
        guard let start = bytes.firstRange(of: key)?.upperBound else { return nil }
        let rest = bytes[start...]
        let end =
            rest.firstRange(of: Array("';".utf8))?.lowerBound ?? rest.lastIndex(of: UInt8(ascii: "'")) ?? rest.endIndex
        let title = RemoteText.printable(bytes: bytes[start..<end], limit: titleLimit)
        return title.isEmpty ? nil : title
    }
}
