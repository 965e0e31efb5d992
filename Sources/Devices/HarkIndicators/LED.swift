import HarkCore

/// One LED's colour, 8 bits per channel (brightness is folded into the channel values).
public struct RGB: Sendable, Hashable, CustomStringConvertible {
    public var red: UInt8
    public var green: UInt8
    public var blue: UInt8

    public init(_ red: UInt8, _ green: UInt8, _ blue: UInt8) {
        self.red = red
        self.green = green
        self.blue = blue
    }

    /// Dark.
    public static let off = RGB(0, 0, 0)

    /// Parses `#rrggbb` (the board files' colour syntax); nil for anything else.
    public init?(hex: String) {
        let digits = Array(hex.utf8)
        guard digits.count == 7, digits[0] == UInt8(ascii: "#") else { return nil }
        var value: UInt32 = 0
        for digit in digits[1...] {
            let nibble: UInt8
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = digit - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = digit - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = digit - UInt8(ascii: "A") + 10
            default: return nil
            }
            value = value << 4 | UInt32(nibble)
        }
        self.init(UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff))
    }

    /// This colour at `level`/255 of its brightness (integer arithmetic, so frames are exact).
    public func scaled(_ level: Int) -> RGB {
        let level = max(0, min(255, level))
        func scale(_ channel: UInt8) -> UInt8 { UInt8((Int(channel) * level + 127) / 255) }
        return RGB(scale(red), scale(green), scale(blue))
    }

    /// The brightest channel: what a single-colour LED (GPIO, sysfs) shows of this colour.
    public var brightness: UInt8 { max(red, green, blue) }

    public var description: String {
        let hex = Array("0123456789abcdef")
        return "#" + [red, green, blue].map { "\(hex[Int($0 >> 4)])\(hex[Int($0 & 15)])" }.joined()
    }
}

/// How a set of LEDs shows one state.
public enum LEDPattern: Sendable, Hashable {
    /// Dark.
    case off
    /// Steady colour.
    case solid(RGB)
    /// On for `duty`/100 of each `period`, then off; starts on.
    case blink(RGB, period: Duration, duty: Int)
    /// Brightness rises and falls smoothly over `period` (quadratic ease of a triangle wave); starts dark.
    case breathe(RGB, period: Duration)
    /// One bright pixel goes round the ring once per `period` with a tail of `tail` fading pixels
    /// (each half as bright as the one before); on a single LED it is a blink.
    case spin(RGB, period: Duration, tail: Int)
    /// Brightness follows the audio level (0...1): on a ring, that fraction of the pixels is lit;
    /// on a single LED, that fraction of the brightness. A `floor` (0...255) keeps it visible in silence.
    case level(RGB, floor: Int)

    /// The names the board files use for the pattern kinds.
    public static let kinds = ["off", "solid", "blink", "breathe", "spin", "level"]
}

/// How the microphone-live indication is drawn: one pixel forced to a colour on every frame while
/// the microphone is live, whatever else is shown. On a single LED, that LED.
public struct MicrophoneLiveMark: Sendable, Hashable {
    public var pixel: Int
    public var color: RGB

    public init(pixel: Int = 0, color: RGB = RGB(255, 0, 0)) {
        self.pixel = pixel
        self.color = color
    }
}

/// The state→pattern table (configurable per board; the appliance configuration may override it).
public struct PatternTable: Sendable, Hashable {
    public var patterns: [ShownState: LEDPattern]

    public init(_ patterns: [ShownState: LEDPattern]) { self.patterns = patterns }

    /// The pattern for `state`; a state the table leaves out is dark.
    public subscript(state: ShownState) -> LEDPattern {
        get { patterns[state] ?? .off }
        set { patterns[state] = newValue }
    }

    /// A table that tells every state apart on a ring or a single RGB LED.
    public static let standard = PatternTable([
        .conversation(.idle): .off,
        .conversation(.listening): .level(RGB(0, 0, 255), floor: 48),
        .conversation(.thinking): .spin(RGB(0, 160, 255), period: .milliseconds(1000), tail: 2),
        .conversation(.speaking): .level(RGB(0, 255, 96), floor: 48),
        .overlay(.booting): .breathe(RGB(255, 255, 255), period: .milliseconds(2000)),
        .overlay(.fatal): .solid(RGB(255, 0, 0)),
        .overlay(.alert): .blink(RGB(255, 160, 0), period: .milliseconds(500), duty: 50),
        .overlay(.error): .blink(RGB(255, 0, 0), period: .milliseconds(1000), duty: 50),
        .overlay(.offline): .breathe(RGB(255, 128, 0), period: .milliseconds(2000)),
        .overlay(.muted): .solid(RGB(255, 0, 0)),
        .overlay(.buttonHeld): .solid(RGB(255, 255, 255)),
        .overlay(.wake): .spin(RGB(255, 255, 255), period: .milliseconds(500), tail: 3),
    ])
}
