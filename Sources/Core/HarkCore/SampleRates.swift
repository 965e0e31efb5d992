/// The sample rates Hark takes from outside, in one place. A rate is a number a service, a file or a
/// device states; it reaches sizes (a resampler's output is input × out ÷ in) and C calls that take
/// 32-bit values, so each entry point checks it against one of these ranges first.
public enum SampleRates {
    /// Rates a Live model sends answer audio at (`audio/pcm;rate=N`): 8000–48000 Hz. Both backends'
    /// MIME parsing uses it; a message that states another rate is not audio the device plays.
    public static let serverAudio: ClosedRange<Int> = 8_000...48_000
    /// Rates a WAV file may have: 8000–192000 Hz.
    public static let wavFile: ClosedRange<Int> = 8_000...192_000
    /// Rates the resamplers convert between (the WAV range, and sound cards up to 384 kHz): at most a
    /// ratio of 48 either way.
    public static let resampling: ClosedRange<Int> = 8_000...384_000
}

/// The sample rate an audio MIME type states, such as `audio/pcm;rate=24000`.
///
/// Parameters are `;`-separated `name=value` pairs; the name `rate` is matched without regard to case
/// and spaces, its value may be quoted, and must be 1–9 decimal digits within
/// ``SampleRates/serverAudio``. Anything else stated is ``unsupported(_:)``: the message is skipped,
/// never played at a guessed rate.
public enum MIMEAudioRate: Sendable, Hashable, CustomStringConvertible {
    /// The MIME type states no rate: the protocol's default applies.
    case unstated
    /// A rate within ``SampleRates/serverAudio``.
    case supported(Int)
    /// A rate stated but not usable; the stated text, at most 24 printable ASCII characters (others
    /// shown as `?`), for a log line.
    case unsupported(String)

    /// The rate `mimeType` states (``unstated`` for nil).
    public init(mimeType: String?) {
        guard let mimeType else {
            self = .unstated
            return
        }
        for parameter in mimeType.split(separator: ";") {
            guard let equals = parameter.firstIndex(of: "=") else { continue }
            let name = parameter[..<equals].trimmedWhitespace
            guard name.lowercased() == "rate" else { continue }
            var value = Substring(parameter[parameter.index(after: equals)...].trimmedWhitespace)
            if value.count >= 2, value.first == "\"", value.last == "\"" { value = value.dropFirst().dropLast() }
            if (1...9).contains(value.utf8.count), value.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
                let rate = Int(value), SampleRates.serverAudio.contains(rate)
            {
                self = .supported(rate)
            } else {
                self = .unsupported(Self.printable(value))
            }
            return
        }
        self = .unstated
    }

    /// The rate to play at: the stated one, `fallback` when none is stated, nil when the stated one is unusable.
    public func rate(default fallback: Int) -> Int? {
        switch self {
        case .unstated: fallback
        case .supported(let rate): rate
        case .unsupported: nil
        }
    }

    public var description: String {
        switch self {
        case .unstated: "no rate stated"
        case .supported(let rate): "\(rate) Hz"
        case .unsupported(let text): "unsupported rate \"\(text)\""
        }
    }

    /// `text` cut to 24 characters, control and non-ASCII characters as `?`.
    private static func printable(_ text: Substring) -> String {
        var out = String(text.unicodeScalars.prefix(24).map { (0x20..<0x7F).contains($0.value) ? Character($0) : "?" })
        if text.unicodeScalars.count > 24 { out += "…" }
        return out
    }
}
