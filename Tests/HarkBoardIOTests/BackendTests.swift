import CGPIO
import FoundationEssentials
import HarkBoard
import HarkBoardIO
import HarkCore
import HarkIndicators
import Testing

/// A fresh temp folder, removed by the caller.
func temporaryFolder() throws -> String {
    let path = FileManager.default.temporaryDirectory.path + "/hark-io-\(UInt64.random(in: 0...UInt64.max))"
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

func contents(_ path: String) -> [UInt8] { FileManager.default.contents(atPath: path).map { Array($0) } ?? [] }

@Suite struct APA102Tests {
    @Test func encodesStartPixelsInBlueGreenRedOrderAndEnd() {
        let bytes = APA102.encode([RGB(1, 2, 3), RGB(255, 128, 0), .off], brightness: 10)
        #expect(
            bytes == [
                0, 0, 0, 0,
                0xEA, 3, 2, 1,
                0xEA, 0, 128, 255,
                0xEA, 0, 0, 0,
                0, 0, 0, 0,
            ]
        )
        // Brightness is clamped to 5 bits; a long strip gets one end byte per 16 pixels.
        let ring = APA102.encode(Array(repeating: RGB(9, 9, 9), count: 80), brightness: 99)
        #expect(ring.count == 4 + 80 * 4 + 5)
        #expect(ring[4] == 0xFF)
        #expect(ring.suffix(5) == [0, 0, 0, 0, 0])
    }

    @Test func writesEachFrameToTheDeviceAfterPoweringTheLEDs() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let device = folder + "/spidev0.1"
        #expect(FileManager.default.createFile(atPath: device, contents: nil))
        let chip = FakeGPIOChip(labels: ["pinctrl-bcm2711"])
        let power = try chip.requestOutput(
            GPIOLineSpec(chips: ["pinctrl-bcm2711"], offset: 5),
            initial: false,
            consumer: "hark"
        )
        let output = try APA102Output(sink: try FileSink(path: device), brightness: 31, power: power)
        #expect(chip.outputs(5) == [false, true])
        try output.show([RGB(10, 20, 30)])
        try output.show([RGB(40, 50, 60)])
        #expect(
            contents(device) == [0, 0, 0, 0, 0xFF, 30, 20, 10, 0, 0, 0, 0] + [0, 0, 0, 0, 0xFF, 60, 50, 40, 0, 0, 0, 0]
        )
    }

    @Test func aMissingSpiDeviceIsAClearError() {
        #expect(throws: FileError.self) { try FileSink(path: "/nonexistent/spidev9.9") }
    }
}

@Suite struct SysfsLEDTests {
    @Test func writesBrightnessScaledToEachLEDsMaximumAndClearsTheTrigger() throws {
        let root = try temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: root) }
        for (name, max) in [("hark:green:status", "1\n"), ("hark:red:mic", "255\n")] {
            try FileManager.default.createDirectory(atPath: root + "/" + name, withIntermediateDirectories: true)
            #expect(FileManager.default.createFile(atPath: root + "/\(name)/max_brightness", contents: Data(max.utf8)))
            #expect(FileManager.default.createFile(atPath: root + "/\(name)/brightness", contents: Data("0\n".utf8)))
            #expect(
                FileManager.default.createFile(atPath: root + "/\(name)/trigger", contents: Data("[heartbeat]".utf8))
            )
        }
        let output = try SysfsLEDOutput(names: ["hark:green:status", "hark:red:mic"], root: root)
        #expect(contents(root + "/hark:green:status/trigger") == Array("none".utf8))
        try output.show([RGB(0, 200, 0), RGB(100, 0, 0)])
        #expect(contents(root + "/hark:green:status/brightness") == Array("1".utf8))
        #expect(contents(root + "/hark:red:mic/brightness") == Array("100".utf8))
        try output.show([RGB(0, 100, 0), .off])
        #expect(contents(root + "/hark:green:status/brightness") == Array("0".utf8))
        #expect(contents(root + "/hark:red:mic/brightness") == Array("0".utf8))
        #expect(throws: FileError.self) { try SysfsLEDOutput(names: ["absent"], root: root) }
    }
}

@Suite struct GPIOTests {
    let button = GPIOLineSpec(chips: ["pinctrl-rp1", "pinctrl-bcm2711"], offset: 17, bias: .pullUp, activeLow: true)

    @Test func backendsByName() {
        #expect(GPIOBackends.named("auto") is LibgpiodBackend)  // libgpiod 1.6 is on this machine
        #expect(GPIOBackends.named("uapi") is GPIOv2Backend)
        #expect(GPIOBackends.named("libgpiod") is LibgpiodBackend)
        #expect(GPIOBackends.named("sysfs") == nil)
    }

    @Test func libgpiodFlagsCarryBiasAndActiveLow() {
        #expect(LibgpiodBackend.isAvailable)  // this machine has libgpiod 1.6
        // GPIOD_LINE_REQUEST_FLAG_ACTIVE_LOW is bit 2, _BIAS_PULL_UP bit 5 in libgpiod 1.6.
        #expect(LibgpiodBackend.flags(for: button) == 1 << 2 | 1 << 5)
        #expect(
            LibgpiodBackend.flags(for: button)
                == Int32(GPIOD_LINE_REQUEST_FLAG_ACTIVE_LOW | GPIOD_LINE_REQUEST_FLAG_BIAS_PULL_UP)
        )
        #expect(LibgpiodBackend.flags(for: GPIOLineSpec(chips: ["x"], offset: 1)) == 0)
        #expect(
            LibgpiodBackend.flags(for: GPIOLineSpec(chips: ["x"], offset: 1, bias: .pullDown))
                == Int32(GPIOD_LINE_REQUEST_FLAG_BIAS_PULL_DOWN)
        )
    }

    @Test func v2FlagsMatchTheKernelHeader() {
        let input = GPIOv2.flags(for: button, output: false)
        let expected =
            UInt64(GPIO_V2_LINE_FLAG_INPUT.rawValue) | UInt64(GPIO_V2_LINE_FLAG_EDGE_RISING.rawValue)
            | UInt64(GPIO_V2_LINE_FLAG_EDGE_FALLING.rawValue) | UInt64(GPIO_V2_LINE_FLAG_ACTIVE_LOW.rawValue)
            | UInt64(GPIO_V2_LINE_FLAG_BIAS_PULL_UP.rawValue)
        #expect(input.rawValue == expected)
        let output = GPIOv2.flags(for: GPIOLineSpec(chips: ["x"], offset: 5, bias: .disabled), output: true)
        #expect(
            output.rawValue == UInt64(GPIO_V2_LINE_FLAG_OUTPUT.rawValue)
                | UInt64(GPIO_V2_LINE_FLAG_BIAS_DISABLED.rawValue)
        )
    }

    @Test func v2LineRequestBytesAreTheCStruct() {
        #expect(GPIOv2.requestSize == hark_gpio_v2_line_request_size())
        #expect(GPIOv2.eventSize == hark_gpio_v2_line_event_size())
        let bytes = GPIOv2.lineRequest(
            offset: 17,
            consumer: "hark-button",
            flags: GPIOv2.flags(for: button, output: false),
            debounceMicroseconds: 20_000,
            initialOutput: nil,
            eventBufferSize: 16
        )
        var request = gpio_v2_line_request()
        withUnsafeMutableBytes(of: &request) { $0.copyBytes(from: bytes) }
        #expect(request.offsets.0 == 17)
        #expect(request.offsets.1 == 0)
        #expect(request.num_lines == 1)
        #expect(request.event_buffer_size == 16)
        #expect(request.config.flags == GPIOv2.flags(for: button, output: false).rawValue)
        #expect(request.config.num_attrs == 1)
        #expect(request.config.attrs.0.attr.id == UInt32(GPIO_V2_LINE_ATTR_ID_DEBOUNCE.rawValue))
        #expect(request.config.attrs.0.attr.debounce_period_us == 20_000)
        #expect(request.config.attrs.0.mask == 1)
        #expect(request.fd == 0)
        let consumer = withUnsafeBytes(of: request.consumer) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        #expect(consumer == "hark-button")

        let led = GPIOv2.lineRequest(offset: 27, consumer: "hark-led", flags: [.output], initialOutput: true)
        withUnsafeMutableBytes(of: &request) { $0.copyBytes(from: led) }
        #expect(request.config.num_attrs == 1)
        #expect(request.config.attrs.0.attr.id == UInt32(GPIO_V2_LINE_ATTR_ID_OUTPUT_VALUES.rawValue))
        #expect(request.config.attrs.0.attr.values == 1)
    }

    @Test func v2EventsDecodeFromKernelBytes() {
        var first = gpio_v2_line_event()
        first.timestamp_ns = 5_000_000_123
        first.id = UInt32(GPIO_V2_LINE_EVENT_RISING_EDGE.rawValue)
        first.offset = 17
        first.seqno = 1
        first.line_seqno = 1
        var second = first
        second.timestamp_ns = 5_080_000_000
        second.id = UInt32(GPIO_V2_LINE_EVENT_FALLING_EDGE.rawValue)
        second.seqno = 2
        second.line_seqno = 2
        let bytes = withUnsafeBytes(of: first) { Array($0) } + withUnsafeBytes(of: second) { Array($0) } + [1, 2, 3]
        let events = GPIOv2.decodeEvents(bytes)
        #expect(events.count == 2)
        #expect(events.first?.offset == 17)
        #expect(
            events.map(\.edge) == [
                LineEdge(active: true, timestamp: .nanoseconds(5_000_000_123)),
                LineEdge(active: false, timestamp: .nanoseconds(5_080_000_000)),
            ]
        )
        #expect(events.map(\.lineSequence) == [1, 2])
    }

    @Test func aChipIsFoundByLabelNotNumber() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // No chip devices: the error names every label tried.
        let error = #expect(throws: GPIOError.self) {
            try GPIOv2Backend(deviceDirectory: folder).chipPath(labels: ["pinctrl-rp1", "pinctrl-bcm2711"])
        }
        #expect(error?.isMissingChip == true)
        #expect(error?.description == "no GPIO chip labelled pinctrl-rp1 or pinctrl-bcm2711 on this system")
        #expect(throws: GPIOError.self) {
            try LibgpiodBackend().requestInput(button, debounce: .zero, consumer: "hark")
        }
    }

    @Test func gpioLEDsFollowTheFrameThroughAFakeChip() throws {
        let chip = FakeGPIOChip(labels: ["pinctrl-rp1"])
        let spec = GPIOLineSpec(chips: ["pinctrl-bcm2711", "pinctrl-rp1"], offset: 27)
        let output = GPIOLEDOutput(lines: [try chip.requestOutput(spec, initial: false, consumer: "hark")])
        var engine = LEDEngine(
            pixelCount: 1,
            table: PatternTable([
                .conversation(.thinking): .blink(RGB(255, 255, 255), period: .milliseconds(400), duty: 50)
            ])
        )
        engine.update(IndicatorInput(conversation: .thinking), at: .zero)
        for millis in [0, 100, 200, 300, 400] { try output.show(engine.frame(at: .milliseconds(millis))) }
        #expect(chip.outputs(27) == [false, true, true, false, false, true])
        #expect(throws: GPIOError.self) {
            try chip.requestOutput(
                GPIOLineSpec(chips: ["pinctrl-bcm2835"], offset: 1),
                initial: false,
                consumer: "hark"
            )
        }
    }

    @Test func aButtonOnAFakeChipDrivesGesturesToActions() throws {
        let chip = FakeGPIOChip(labels: ["pinctrl-rp1"])
        let line = try chip.requestInput(button, debounce: .milliseconds(20), consumer: "hark")
        #expect(chip.requests.map(\.debounce) == [.milliseconds(20)])
        var interpreter = ButtonInterpreter(map: .standard, mode: .pushToTalk)
        chip.push(17, active: true, at: .seconds(100))
        chip.push(17, active: false, at: .seconds(100) + .milliseconds(2))  // bounce
        chip.push(17, active: true, at: .seconds(100) + .milliseconds(4))
        #expect(interpreter.handle(try line.waitForEdges(timeout: .zero)) == [.talkStart])
        #expect(try line.value())
        chip.push(17, active: false, at: .seconds(102))
        #expect(interpreter.handle(try line.waitForEdges(timeout: .zero)) == [.talkEnd])
        #expect(try line.waitForEdges(timeout: .zero) == [])
    }
}

@Suite struct EvdevAndTerminalTests {
    /// A recorded gpio-keys press and release of KEY_PROG1 (148), each followed by a SYN_REPORT.
    static func record(_ seconds: Int64, _ micros: Int64, _ type: UInt16, _ code: UInt16, _ value: Int32) -> [UInt8] {
        withUnsafeBytes(of: seconds.littleEndian) { Array($0) } + withUnsafeBytes(of: micros.littleEndian) { Array($0) }
            + withUnsafeBytes(of: type.littleEndian) { Array($0) }
            + withUnsafeBytes(of: code.littleEndian) { Array($0) }
            + withUnsafeBytes(of: value.littleEndian) { Array($0) }
    }

    @Test func evdevKeyEventsDecodeToEdges() {
        #expect(Evdev.eventSize == hark_input_event_size())
        let bytes =
            Self.record(1700, 250_000, 1, 148, 1) + Self.record(1700, 250_000, 0, 0, 0)
            + Self.record(1700, 900_000, 1, 148, 2) + Self.record(1701, 5, 1, 149, 1)
            + Self.record(1701, 100_000, 1, 148, 0) + Self.record(1701, 100_000, 0, 0, 0) + [0, 1]
        let events = Evdev.decode(bytes)
        #expect(events.count == 6)
        #expect(events[0] == Evdev.Event(time: .seconds(1700) + .milliseconds(250), type: 1, code: 148, value: 1))
        #expect(
            Evdev.edges(events, keyCode: 148) == [
                LineEdge(active: true, timestamp: .seconds(1700) + .milliseconds(250)),
                LineEdge(active: false, timestamp: .seconds(1701) + .milliseconds(100)),
            ]
        )
    }

    @Test func terminalKeyToggles() {
        var key = TerminalKeyButton()
        #expect(key.feed(Array("a ".utf8), at: .seconds(1)) == [LineEdge(active: true, timestamp: .seconds(1))])
        #expect(key.feed(Array("x".utf8), at: .seconds(2)) == [])
        #expect(key.feed([32], at: .seconds(3)) == [LineEdge(active: false, timestamp: .seconds(3))])
    }

    @Test func terminalLEDsRenderAsColouredBlocks() throws {
        #expect(
            TerminalLEDOutput.render([RGB(255, 0, 0), .off])
                == "\r\u{1B}[38;2;255;0;0m\u{25CF} \u{1B}[38;2;0;0;0m\u{25CF} \u{1B}[0m"
        )
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        #expect(FileManager.default.createFile(atPath: folder + "/tty", contents: nil))
        try TerminalLEDOutput(sink: try FileSink(path: folder + "/tty")).show([RGB(1, 2, 3)])
        #expect(contents(folder + "/tty") == Array(TerminalLEDOutput.render([RGB(1, 2, 3)]).utf8))
    }
}
