import CGPIO
import Glibc
import HarkBoard

/// GPIO through libgpiod 1.6 (Raspberry Pi OS bookworm). Chips are opened by label
/// (`gpiod_chip_open_by_label`), the first of the line's labels present wins.
public struct LibgpiodBackend: GPIOBackend {
    public init() {}

    /// The libgpiod 1.6 request flags for a line's bias and active-low (`GPIOD_LINE_REQUEST_FLAG_*`).
    public static func flags(for line: GPIOLineSpec) -> Int32 {
        var flags: Int32 = 0
        if line.activeLow { flags |= Int32(GPIOD_LINE_REQUEST_FLAG_ACTIVE_LOW) }
        switch line.bias {
        case .asIs: break
        case .disabled: flags |= Int32(GPIOD_LINE_REQUEST_FLAG_BIAS_DISABLE)
        case .pullUp: flags |= Int32(GPIOD_LINE_REQUEST_FLAG_BIAS_PULL_UP)
        case .pullDown: flags |= Int32(GPIOD_LINE_REQUEST_FLAG_BIAS_PULL_DOWN)
        }
        return flags
    }

    /// libgpiod 1.6 has no debounce: the gesture recogniser debounces in software.
    public func requestInput(_ line: GPIOLineSpec, debounce: Duration, consumer: String) throws -> any GPIOInputLine {
        try LibgpiodLine(
            line,
            type: Int32(GPIOD_LINE_REQUEST_EVENT_BOTH_EDGES),
            initial: false,
            consumer: consumer
        )
    }

    public func requestOutput(_ line: GPIOLineSpec, initial: Bool, consumer: String) throws -> any GPIOOutputLine {
        try LibgpiodLine(
            line,
            type: Int32(GPIOD_LINE_REQUEST_DIRECTION_OUTPUT),
            initial: initial,
            consumer: consumer
        )
    }
}

/// One requested line: owns the chip handle (`gpiod_chip_close` in `deinit`, which releases the line).
final class LibgpiodLine: GPIOInputLine, GPIOOutputLine, @unchecked Sendable {
    private let chip: OpaquePointer
    private let line: OpaquePointer

    init(_ spec: GPIOLineSpec, type: Int32, initial: Bool, consumer: String) throws {
        guard let chip = spec.chips.lazy.compactMap({ gpiod_chip_open_by_label($0) }).first else {
            throw GPIOError.noChip(spec.chips)
        }
        guard let line = gpiod_chip_get_line(chip, UInt32(spec.offset)) else {
            let code = errno
            gpiod_chip_close(chip)
            throw GPIOError.request("gpiod_chip_get_line(\(spec.offset))", errno: code)
        }
        let result = consumer.withCString { name in
            var config = gpiod_line_request_config(
                consumer: name,
                request_type: type,
                flags: LibgpiodBackend.flags(for: spec)
            )
            return gpiod_line_request(line, &config, initial ? 1 : 0)
        }
        if result != 0 {
            let code = errno
            gpiod_chip_close(chip)
            throw GPIOError.request("gpiod_line_request(\(spec.offset))", errno: code)
        }
        self.chip = chip
        self.line = line
    }

    deinit {
        gpiod_line_release(line)
        gpiod_chip_close(chip)
    }

    /// gpiod_line_get_value
    func value() throws -> Bool {
        let value = gpiod_line_get_value(line)
        if value < 0 { throw GPIOError.io("gpiod_line_get_value", errno: errno) }
        return value == 1
    }

    /// gpiod_line_event_wait, then gpiod_line_event_read for each pending event.
    func waitForEdges(timeout: Duration) throws -> [LineEdge] {
        var edges: [LineEdge] = []
        var wait = timespec(
            tv_sec: Int(timeout.components.seconds),
            tv_nsec: Int(timeout.components.attoseconds / 1_000_000_000)
        )
        while true {
            let ready = gpiod_line_event_wait(line, &wait)
            if ready < 0 {
                if errno == EINTR { continue }
                throw GPIOError.io("gpiod_line_event_wait", errno: errno)
            }
            if ready == 0 { return edges }
            var event = gpiod_line_event()
            if gpiod_line_event_read(line, &event) != 0 { throw GPIOError.io("gpiod_line_event_read", errno: errno) }
            edges.append(Self.edge(event))
            wait = timespec(tv_sec: 0, tv_nsec: 0)  // drain what is already queued, then return
        }
    }

    /// A libgpiod event as an edge: rising means inactive→active (the kernel applies active-low).
    static func edge(_ event: gpiod_line_event) -> LineEdge {
        LineEdge(
            active: event.event_type == Int32(GPIOD_LINE_EVENT_RISING_EDGE),
            timestamp: .seconds(event.ts.tv_sec) + .nanoseconds(event.ts.tv_nsec)
        )
    }

    /// gpiod_line_set_value
    func set(_ active: Bool) throws {
        if gpiod_line_set_value(line, active ? 1 : 0) != 0 { throw GPIOError.io("gpiod_line_set_value", errno: errno) }
    }
}
