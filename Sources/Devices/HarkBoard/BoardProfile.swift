import HarkIndicators

/// One board + HAT combination, as a file in `board/` describes it (see `board/README.md`).
public struct BoardProfile: Sendable, Hashable {
    /// The file's name without `.yaml`; what the configuration selects.
    public var name: String
    /// One line for people.
    public var description: String
    public var detect: DetectionRule
    public var audio: AudioDevices
    public var button: ButtonSpec
    public var leds: LEDSpec
    /// Which gesture does what, per mode (the appliance configuration may override it).
    public var gestures: GestureMap
    /// The state→pattern table (the appliance configuration may override it).
    public var patterns: PatternTable
    /// How the microphone-live indication is drawn (`leds.mic_live`).
    public var microphoneLive: MicrophoneLiveMark
    /// LED frames per second (`leds.frame_rate`).
    public var frameRate: Int

    /// An LED engine set up as this board says.
    public func makeLEDEngine() -> LEDEngine {
        LEDEngine(
            pixelCount: leds.pixelCount,
            frameRate: frameRate,
            table: patterns,
            microphoneLiveMark: microphoneLive
        )
    }
}

/// How a board is recognised. Every non-empty list must have one entry that the running system shows
/// (a substring of the model, the HAT product, or an ALSA card id); a rule with all lists empty never matches.
public struct DetectionRule: Sendable, Hashable {
    /// Substrings of `/proc/device-tree/model`, e.g. `Raspberry Pi 5`.
    public var model: [String] = []
    /// Substrings of `/proc/device-tree/hat/product` (the HAT EEPROM).
    public var hatProduct: [String] = []
    /// ALSA card ids (`/proc/asound/card*/id`), e.g. `seeed2micvoicec`.
    public var alsaCard: [String] = []

    public init(model: [String] = [], hatProduct: [String] = [], alsaCard: [String] = []) {
        self.model = model
        self.hatProduct = hatProduct
        self.alsaCard = alsaCard
    }

    /// Whether the rule says anything at all.
    public var isEmpty: Bool { model.isEmpty && hatProduct.isEmpty && alsaCard.isEmpty }
}

/// The ALSA devices and the default volume.
public struct AudioDevices: Sendable, Hashable {
    public var capture: PCMSpec
    public var playback: PCMSpec
    /// Output volume at first start, percent 0...100.
    public var defaultVolume: Int
}

/// One ALSA PCM.
public struct PCMSpec: Sendable, Hashable {
    /// The ALSA PCM name, e.g. `plughw:CARD=seeed2micvoicec,DEV=0`: the first of ``alternatives``.
    public var pcm: String { alternatives[0] }
    /// The PCM names the board file lists, in order of preference (a HAT's card is named differently by
    /// its vendor driver and by the kernel's: `seeed2micvoicec` or `wm8960soundcard`). Never empty.
    public var alternatives: [String]
    /// Channels the device is opened with.
    public var channels: Int
    /// Sample rate the device is opened with (Hz).
    public var rate: Int
    /// Capture: the device channels that carry microphones, in array order (downmixed or beamformed from these).
    /// Playback: the device channels the mono answer is written to.
    public var channelMap: [Int]

    /// The PCM to open on a machine whose ALSA cards are `cards` (`/proc/asound/card*/id`): the first
    /// alternative naming a present card (`CARD=id`), else one naming no card, else the first.
    public func resolved(cards: [String]) -> String {
        func card(_ name: String) -> String? {
            guard let range = name.firstRange(of: "CARD=") else { return nil }
            return String(name[range.upperBound...].prefix { $0 != "," })
        }
        if let present = alternatives.first(where: { card($0).map(cards.contains) ?? false }) { return present }
        return alternatives.first { card($0) == nil } ?? pcm
    }
}

/// GPIO line bias.
public enum Bias: String, Sendable, Hashable, CaseIterable {
    case asIs = "as-is"
    case disabled
    case pullUp = "pull-up"
    case pullDown = "pull-down"
}

/// One GPIO line, named by chip label (never by chip number, which changes across kernels).
public struct GPIOLineSpec: Sendable, Hashable {
    /// Chip labels tried in order, e.g. `[pinctrl-rp1, pinctrl-bcm2711]`; the first present wins.
    public var chips: [String]
    /// The line offset on that chip (the BCM GPIO number on Raspberry Pi).
    public var offset: Int
    public var bias: Bias
    /// The line is active (pressed, lit) when low.
    public var activeLow: Bool

    public init(chips: [String], offset: Int, bias: Bias = .asIs, activeLow: Bool = false) {
        self.chips = chips
        self.offset = offset
        self.bias = bias
        self.activeLow = activeLow
    }
}

/// The push-to-talk button.
public enum ButtonSpec: Sendable, Hashable {
    case none
    /// A GPIO line read with libgpiod 1.6 or the GPIO v2 uAPI; `debounce` is asked of the kernel and done
    /// in software as well.
    case gpio(GPIOLineSpec, debounce: Duration)
    /// A `gpio-keys` button read as evdev input events.
    case evdev(device: String, keyCode: Int)
    /// A key on the terminal (development).
    case terminal(key: String)

    /// The kinds the board files accept.
    public static let kinds = ["none", "gpio", "evdev", "terminal"]
}

/// The status LEDs.
public enum LEDSpec: Sendable, Hashable {
    case none
    /// APA102 / DotStar pixels on a SPI device; `powerEnable` is a GPIO that powers them (ReSpeaker 4-mic),
    /// `brightness` the APA102 global brightness 0...31.
    case apa102(count: Int, spiDevice: String, speedHz: Int, brightness: Int, powerEnable: GPIOLineSpec?)
    /// Plain GPIO LEDs, one per pixel, on or off.
    case gpio(lines: [GPIOLineSpec])
    /// Kernel LED class devices (`/sys/class/leds/NAME`), one per pixel, e.g. from a `gpio-leds` overlay.
    case sysfs(names: [String])
    /// A line on the terminal (development) with `count` pixels.
    case terminal(count: Int)

    /// The kinds the board files accept.
    public static let kinds = ["none", "apa102", "gpio", "sysfs", "terminal"]

    /// How many pixels the engine draws.
    public var pixelCount: Int {
        switch self {
        case .none: 1
        case .apa102(let count, _, _, _, _): count
        case .gpio(let lines): lines.count
        case .sysfs(let names): names.count
        case .terminal(let count): count
        }
    }
}
