import CGPIO
import FoundationEssentials
import Glibc
import HarkBoard
import HarkIndicators

/// Where bytes for a device go: a `/dev/spidev*` device, or a plain file in tests.
public protocol ByteSink: Sendable {
    func write(_ bytes: [UInt8]) throws
}

/// A file or device opened for writing; each `write` is one write(2) of the whole buffer (one SPI
/// transfer on spidev).
public final class FileSink: ByteSink {
    private let descriptor: OwnedDescriptor
    public let path: String

    /// Opens `path` for writing; with `spiSpeedHz`, also sets SPI mode 0 and that clock
    /// (`SPI_IOC_WR_MODE`, `SPI_IOC_WR_MAX_SPEED_HZ`), which only a spidev device accepts.
    public init(path: String, spiSpeedHz: Int? = nil) throws {
        self.path = path
        descriptor = try OwnedDescriptor.open(path, O_WRONLY)
        if let spiSpeedHz {
            var mode: UInt8 = 0
            var speed = UInt32(spiSpeedHz)
            if hark_spi_set_mode(descriptor.fd, &mode) != 0 || hark_spi_set_speed(descriptor.fd, &speed) != 0 {
                throw FileError(path: path, operation: "configure SPI", errno: errno)
            }
        }
    }

    public func write(_ bytes: [UInt8]) throws { try descriptor.writeAll(bytes, path: path) }
}

/// The terminal LEDs' sink: an inherited descriptor (standard output), written as it is and never reopened by
/// path (`/dev/stdout` reopened is a new open file at offset 0: on `hark run > log` its frames overwrote the
/// log's first lines). It draws only while the descriptor is a terminal (`isatty`, checked once); on a pipe
/// or a file it writes nothing, since the daemon already logs each change of state as a line there.
public final class TerminalSink: ByteSink {
    /// The descriptor written to; not owned, never closed here.
    public let descriptor: Int32
    /// True when ``descriptor`` is a terminal, so frames are drawn.
    public let isTerminal: Bool

    /// A sink on `descriptor` (standard output by default); stands for `isatty`.
    public init(descriptor: Int32 = STDOUT_FILENO) {
        self.descriptor = descriptor
        isTerminal = isatty(descriptor) == 1
    }

    /// Writes all of `bytes` when ``isTerminal``; otherwise does nothing.
    public func write(_ bytes: [UInt8]) throws {
        guard isTerminal else { return }
        try Descriptors.writeAll(descriptor, bytes, path: "descriptor \(descriptor)")
    }
}

/// The APA102 / DotStar wire format.
public enum APA102 {
    /// One frame: a start frame of 32 zero bits; per pixel `0b111` + 5-bit global brightness, then blue,
    /// green, red; an end frame of zero bytes, one per 16 pixels (at least 4) to clock the data through.
    public static func encode(_ frame: [RGB], brightness: Int) -> [UInt8] {
        let global = UInt8(0xE0) | UInt8(max(0, min(31, brightness)))
        var bytes: [UInt8] = [0, 0, 0, 0]
        bytes.reserveCapacity(4 + frame.count * 4 + 4)
        for pixel in frame { bytes += [global, pixel.blue, pixel.green, pixel.red] }
        bytes += [UInt8](repeating: 0, count: max(4, (frame.count + 15) / 16))
        return bytes
    }
}

/// APA102 pixels on a byte sink, with the optional power-enable line switched on first (ReSpeaker 4-mic).
public final class APA102Output: LEDOutput {
    private let sink: any ByteSink
    private let brightness: Int
    private let power: (any GPIOOutputLine)?

    public init(sink: any ByteSink, brightness: Int, power: (any GPIOOutputLine)? = nil) throws {
        self.sink = sink
        self.brightness = brightness
        self.power = power
        try power?.set(true)
    }

    public func show(_ frame: [RGB]) throws { try sink.write(APA102.encode(frame, brightness: brightness)) }
}

/// Plain GPIO LEDs: a pixel is lit when its brightest channel is at least half (on/off only).
public final class GPIOLEDOutput: LEDOutput {
    private let lines: [any GPIOOutputLine]

    public init(lines: [any GPIOOutputLine]) { self.lines = lines }

    public func show(_ frame: [RGB]) throws {
        for (line, pixel) in zip(lines, frame) { try line.set(pixel.brightness >= 128) }
    }
}

/// Kernel LED class devices (`ROOT/NAME/brightness`, scaled to each LED's `max_brightness`). The trigger
/// is set to `none` at start so a kernel trigger does not fight the engine. `root` is `/sys/class/leds`
/// on a device and a temp folder in tests.
public final class SysfsLEDOutput: LEDOutput {
    private let files: [(path: String, max: Int)]

    public init(names: [String], root: String = "/sys/class/leds") throws {
        files = try names.map { name in
            let base = root + "/" + name
            let maxText = FileManager.default.contents(atPath: base + "/max_brightness")
                .map { String(decoding: $0, as: UTF8.self).filter(\.isNumber) }
            guard let maxText, let max = Int(maxText), max > 0 else {
                throw FileError(path: base + "/max_brightness", operation: "read", errno: ENOENT)
            }
            if FileManager.default.fileExists(atPath: base + "/trigger") {
                try OwnedDescriptor.open(base + "/trigger", O_WRONLY | O_TRUNC).writeAll(
                    Array("none".utf8),
                    path: base + "/trigger"
                )
            }
            return (base + "/brightness", max)
        }
    }

    /// The value written for a pixel: its brightest channel scaled to `max` (rounded).
    public static func value(_ pixel: RGB, max: Int) -> Int { (Int(pixel.brightness) * max + 127) / 255 }

    public func show(_ frame: [RGB]) throws {
        for (file, pixel) in zip(files, frame) {
            let text = Array("\(Self.value(pixel, max: file.max))".utf8)
            try OwnedDescriptor.open(file.path, O_WRONLY | O_TRUNC).writeAll(text, path: file.path)
        }
    }
}

/// The `host` board's LEDs: a row of coloured blocks redrawn in place on a terminal (24-bit colour).
public final class TerminalLEDOutput: LEDOutput {
    private let sink: any ByteSink

    public init(sink: any ByteSink) { self.sink = sink }

    /// One frame as terminal text: carriage return, a block per pixel in its colour, colour reset.
    public static func render(_ frame: [RGB]) -> String {
        "\r" + frame.map { "\u{1B}[38;2;\($0.red);\($0.green);\($0.blue)m\u{25CF} " }.joined() + "\u{1B}[0m"
    }

    public func show(_ frame: [RGB]) throws { try sink.write(Array(Self.render(frame).utf8)) }
}
