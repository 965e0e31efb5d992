import CGPIO
import FoundationEssentials
import Glibc
import HarkBoard
import HarkCore

/// The kernel's GPIO v2 character-device uAPI (`linux/gpio.h`), for trixie and later where libgpiod
/// 2.x changed its API. The request and event structs are built and decoded here as bytes (pure, tested
/// against the C layout); only the ioctls go through the C shim.
public enum GPIOv2 {
    /// `GPIO_V2_LINE_FLAG_*`
    public struct Flags: OptionSet, Sendable, Hashable {
        public let rawValue: UInt64
        public init(rawValue: UInt64) { self.rawValue = rawValue }
        public static let activeLow = Flags(rawValue: 1 << 1)
        public static let input = Flags(rawValue: 1 << 2)
        public static let output = Flags(rawValue: 1 << 3)
        public static let edgeRising = Flags(rawValue: 1 << 4)
        public static let edgeFalling = Flags(rawValue: 1 << 5)
        public static let biasPullUp = Flags(rawValue: 1 << 8)
        public static let biasPullDown = Flags(rawValue: 1 << 9)
        public static let biasDisabled = Flags(rawValue: 1 << 10)
    }

    /// Sizes and offsets of `struct gpio_v2_line_request` (checked against the C compiler in the tests).
    public static let requestSize = 592
    static let consumerOffset = 256
    static let configFlagsOffset = 288
    static let configNumAttrsOffset = 296
    static let configAttrsOffset = 320
    static let configAttrSize = 24
    static let numLinesOffset = 560
    static let eventBufferSizeOffset = 564
    static let fdOffset = 588
    /// `sizeof(struct gpio_v2_line_event)`
    public static let eventSize = 48

    /// `GPIO_V2_LINE_ATTR_ID_OUTPUT_VALUES`, `GPIO_V2_LINE_ATTR_ID_DEBOUNCE`
    static let attrOutputValues: UInt32 = 2
    static let attrDebounce: UInt32 = 3

    /// The flags for a line as an input with both edges, or as an output.
    public static func flags(for line: GPIOLineSpec, output: Bool) -> Flags {
        var flags: Flags = output ? [.output] : [.input, .edgeRising, .edgeFalling]
        if line.activeLow { flags.insert(.activeLow) }
        switch line.bias {
        case .asIs: break
        case .disabled: flags.insert(.biasDisabled)
        case .pullUp: flags.insert(.biasPullUp)
        case .pullDown: flags.insert(.biasPullDown)
        }
        return flags
    }

    /// The bytes of a `struct gpio_v2_line_request` for one line: its flags, optional kernel debounce
    /// (µs) and initial output value as line attributes.
    public static func lineRequest(
        offset: UInt32,
        consumer: String,
        flags: Flags,
        debounceMicroseconds: UInt32? = nil,
        initialOutput: Bool? = nil,
        eventBufferSize: UInt32 = 16
    ) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: requestSize)
        func put<T: FixedWidthInteger>(_ value: T, at position: Int) {
            withUnsafeBytes(of: value.littleEndian) { bytes.replaceSubrange(position..<position + $0.count, with: $0) }
        }
        put(offset, at: 0)
        let name = Array(consumer.utf8.prefix(31))
        bytes.replaceSubrange(consumerOffset..<consumerOffset + name.count, with: name)
        put(flags.rawValue, at: configFlagsOffset)
        var attributes = 0
        func attribute(id: UInt32, value: UInt64) {
            let base = configAttrsOffset + attributes * configAttrSize
            put(id, at: base)
            put(value, at: base + 8)
            put(UInt64(1), at: base + 16)  // mask: line 0 of this request
            attributes += 1
        }
        if let debounceMicroseconds, debounceMicroseconds > 0 {
            attribute(id: attrDebounce, value: UInt64(debounceMicroseconds))
        }
        if let initialOutput { attribute(id: attrOutputValues, value: initialOutput ? 1 : 0) }
        put(UInt32(attributes), at: configNumAttrsOffset)
        put(UInt32(1), at: numLinesOffset)
        put(eventBufferSize, at: eventBufferSizeOffset)
        return bytes
    }

    /// The line fd the kernel wrote back into a request.
    static func requestFD(_ bytes: [UInt8]) -> Int32 {
        bytes.withUnsafeBytes { Int32(littleEndian: $0.loadUnaligned(fromByteOffset: fdOffset, as: Int32.self)) }
    }

    /// One `struct gpio_v2_line_event`.
    public struct Event: Sendable, Hashable {
        public var timestampNanoseconds: UInt64
        /// `GPIO_V2_LINE_EVENT_RISING_EDGE` (1) or `_FALLING_EDGE` (2).
        public var id: UInt32
        public var offset: UInt32
        public var sequence: UInt32
        public var lineSequence: UInt32

        /// Rising is inactive→active (active-low applied by the kernel).
        public var edge: LineEdge { LineEdge(active: id == 1, timestamp: .nanoseconds(Int64(timestampNanoseconds))) }
    }

    /// Decodes whole events from bytes read from a line fd; a trailing partial event is left out.
    public static func decodeEvents(_ bytes: [UInt8]) -> [Event] {
        bytes.withUnsafeBytes { raw in
            stride(from: 0, to: raw.count - eventSize + 1, by: eventSize).map { base in
                func u32(_ at: Int) -> UInt32 {
                    UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: base + at, as: UInt32.self))
                }
                return Event(
                    timestampNanoseconds: UInt64(
                        littleEndian: raw.loadUnaligned(fromByteOffset: base, as: UInt64.self)
                    ),
                    id: u32(8),
                    offset: u32(12),
                    sequence: u32(16),
                    lineSequence: u32(20)
                )
            }
        }
    }
}

/// GPIO through the GPIO v2 uAPI: chips found by label among `/dev/gpiochip*` (`GPIO_GET_CHIPINFO_IOCTL`).
public struct GPIOv2Backend: GPIOBackend {
    /// Where the chip devices are (`/dev`).
    public var deviceDirectory: String

    public init(deviceDirectory: String = "/dev") { self.deviceDirectory = deviceDirectory }

    /// The path of the first chip whose label is one of `labels`, trying labels in order.
    public func chipPath(labels: [String]) throws -> String {
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: deviceDirectory)) ?? [])
            .filter { $0.hasPrefix("gpiochip") }.sorted()
        var found: [String: String] = [:]
        for name in names {
            let path = deviceDirectory + "/" + name
            guard let chip = try? OwnedDescriptor.open(path, O_RDONLY) else { continue }
            var info = gpiochip_info()
            guard hark_gpio_chip_info(chip.fd, &info) == 0 else { continue }
            let label = withUnsafeBytes(of: info.label) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if found[label] == nil { found[label] = path }
        }
        guard let path = labels.lazy.compactMap({ found[$0] }).first else { throw GPIOError.noChip(labels) }
        return path
    }

    private func request(_ bytes: [UInt8], line: GPIOLineSpec) throws -> OwnedDescriptor {
        let chip = try OwnedDescriptor.open(try chipPath(labels: line.chips), O_RDWR)
        var request = bytes
        let result = request.withUnsafeMutableBytes {
            hark_gpio_v2_get_line(chip.fd, $0.baseAddress!.assumingMemoryBound(to: gpio_v2_line_request.self))
        }
        if result != 0 { throw GPIOError.request("GPIO_V2_GET_LINE_IOCTL(\(line.offset))", errno: errno) }
        return OwnedDescriptor(GPIOv2.requestFD(request))
    }

    public func requestInput(_ line: GPIOLineSpec, debounce: Duration, consumer: String) throws -> any GPIOInputLine {
        let micros = debounce.nanoseconds / 1000
        let bytes = GPIOv2.lineRequest(
            offset: UInt32(line.offset),
            consumer: consumer,
            flags: GPIOv2.flags(for: line, output: false),
            debounceMicroseconds: UInt32(clamping: micros)
        )
        return GPIOv2Line(descriptor: try request(bytes, line: line))
    }

    public func requestOutput(_ line: GPIOLineSpec, initial: Bool, consumer: String) throws -> any GPIOOutputLine {
        let bytes = GPIOv2.lineRequest(
            offset: UInt32(line.offset),
            consumer: consumer,
            flags: GPIOv2.flags(for: line, output: true),
            initialOutput: initial
        )
        return GPIOv2Line(descriptor: try request(bytes, line: line))
    }
}

/// A line requested through the v2 uAPI; the line fd is closed (and the line released) in `deinit`.
final class GPIOv2Line: GPIOInputLine, GPIOOutputLine {
    private let descriptor: OwnedDescriptor

    init(descriptor: OwnedDescriptor) { self.descriptor = descriptor }

    /// GPIO_V2_LINE_GET_VALUES_IOCTL
    func value() throws -> Bool {
        var values = gpio_v2_line_values(bits: 0, mask: 1)
        if hark_gpio_v2_get_values(descriptor.fd, &values) != 0 {
            throw GPIOError.io("GPIO_V2_LINE_GET_VALUES_IOCTL", errno: errno)
        }
        return values.bits & 1 == 1
    }

    /// poll, then read whole `gpio_v2_line_event`s.
    func waitForEdges(timeout: Duration) throws -> [LineEdge] {
        guard try descriptor.waitReadable(timeout: timeout, path: "GPIO line") else { return [] }
        let bytes = try descriptor.read(upTo: GPIOv2.eventSize * 16, path: "GPIO line")
        return GPIOv2.decodeEvents(bytes).map(\.edge)
    }

    /// GPIO_V2_LINE_SET_VALUES_IOCTL
    func set(_ active: Bool) throws {
        var values = gpio_v2_line_values(bits: active ? 1 : 0, mask: 1)
        if hark_gpio_v2_set_values(descriptor.fd, &values) != 0 {
            throw GPIOError.io("GPIO_V2_LINE_SET_VALUES_IOCTL", errno: errno)
        }
    }
}
