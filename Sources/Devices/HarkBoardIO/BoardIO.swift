import HarkBoard
import HarkIndicators

/// Opens what a board profile describes: its LED output and its button source.
public struct BoardIO: Sendable {
    /// Where GPIO lines come from (libgpiod 1.6 on bookworm, ``GPIOv2Backend`` on trixie, a fake in tests).
    public var gpio: any GPIOBackend
    /// The kernel LED class folder (`/sys/class/leds`; a temp folder in tests).
    public var sysfsRoot: String
    /// Where a terminal board draws its LEDs (standard output on a development machine).
    public var terminal: any ByteSink
    /// The consumer name GPIO requests show (`gpioinfo`).
    public var consumer: String
    /// Where a terminal board reads its key (standard input on a development machine).
    public var terminalInput: Int32

    public init(
        gpio: any GPIOBackend = LibgpiodBackend(),
        sysfsRoot: String = "/sys/class/leds",
        terminal: any ByteSink,
        consumer: String = "hark",
        terminalInput: Int32 = 0
    ) {
        self.terminalInput = terminalInput
        self.gpio = gpio
        self.sysfsRoot = sysfsRoot
        self.terminal = terminal
        self.consumer = consumer
    }

    /// The LED output of `profile`, or nil for a board without LEDs.
    public func ledOutput(for profile: BoardProfile) throws -> (any LEDOutput)? {
        switch profile.leds {
        case .none:
            return nil
        case .apa102(_, let device, let speed, let brightness, let powerEnable):
            let power = try powerEnable.map { try gpio.requestOutput($0, initial: true, consumer: consumer) }
            return try APA102Output(
                sink: try FileSink(path: device, spiSpeedHz: speed),
                brightness: brightness,
                power: power
            )
        case .gpio(let lines):
            return GPIOLEDOutput(
                lines: try lines.map { try gpio.requestOutput($0, initial: false, consumer: consumer) }
            )
        case .sysfs(let names):
            return try SysfsLEDOutput(names: names, root: sysfsRoot)
        case .terminal:
            return TerminalLEDOutput(sink: terminal)
        }
    }

    /// The button of `profile` as a blocking edge source, or nil for a board without one.
    public func buttonSource(for profile: BoardProfile) throws -> (any EdgeSource)? {
        switch profile.button {
        case .none:
            return nil
        case .terminal(let key):
            return TerminalKeySource(fd: terminalInput, key: key.utf8.first ?? UInt8(ascii: " "))
        case .gpio(let line, let debounce):
            return try gpio.requestInput(line, debounce: debounce, consumer: consumer)
        case .evdev(let device, let keyCode):
            return try EvdevButton(path: device, keyCode: keyCode)
        }
    }

    /// The gesture timing of `profile` (its debounce; the standard tap and hold times).
    public static func gestureTiming(for profile: BoardProfile) -> GestureTiming {
        var timing = GestureTiming()
        if case .gpio(_, let debounce) = profile.button { timing.debounce = debounce }
        return timing
    }
}
