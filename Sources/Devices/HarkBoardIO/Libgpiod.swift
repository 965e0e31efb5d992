import CGPIO
import Glibc
import HarkBoard

/// GPIO through libgpiod 1.6 (Raspberry Pi OS bookworm). Chips are opened by label
/// (`gpiod_chip_open_by_label`), the first of the line's labels present wins. Built against a
/// libgpiod 2.x header (trixie), every request fails with a clear error: use ``GPIOv2Backend`` there.
public struct LibgpiodBackend: GPIOBackend {
    public init() {}

    /// Whether this build has libgpiod 1.x.
    public static var isAvailable: Bool { hark_gpiod_available() == 1 }

    static func bias(_ bias: Bias) -> Int32 {
        switch bias {
        case .asIs: Int32(HARK_GPIOD_BIAS_AS_IS.rawValue)
        case .disabled: Int32(HARK_GPIOD_BIAS_DISABLED.rawValue)
        case .pullUp: Int32(HARK_GPIOD_BIAS_PULL_UP.rawValue)
        case .pullDown: Int32(HARK_GPIOD_BIAS_PULL_DOWN.rawValue)
        }
    }

    /// The libgpiod 1.6 request flags for a line's bias and active-low (`GPIOD_LINE_REQUEST_FLAG_*`).
    public static func flags(for line: GPIOLineSpec) -> Int32 {
        hark_gpiod_flags(bias(line.bias), line.activeLow ? 1 : 0)
    }

    /// libgpiod 1.6 has no debounce: the gesture recogniser debounces in software.
    public func requestInput(_ line: GPIOLineSpec, debounce: Duration, consumer: String) throws -> any GPIOInputLine {
        try LibgpiodLine(line, output: false, initial: false, consumer: consumer)
    }

    public func requestOutput(_ line: GPIOLineSpec, initial: Bool, consumer: String) throws -> any GPIOOutputLine {
        try LibgpiodLine(line, output: true, initial: initial, consumer: consumer)
    }
}

/// One requested line; released (and its chip closed) in `deinit`.
final class LibgpiodLine: GPIOInputLine, GPIOOutputLine, @unchecked Sendable {
    private let handle: UnsafeMutableRawPointer

    init(_ spec: GPIOLineSpec, output: Bool, initial: Bool, consumer: String) throws {
        guard LibgpiodBackend.isAvailable else {
            throw GPIOError.request(
                "libgpiod 1.x (this build has a libgpiod 2.x header; use the GPIO v2 uAPI)",
                errno: ENOTSUP
            )
        }
        var lastError: Int32 = ENODEV
        for label in spec.chips {
            let handle = hark_gpiod_request(
                label,
                UInt32(spec.offset),
                consumer,
                output ? 1 : 0,
                LibgpiodBackend.bias(spec.bias),
                spec.activeLow ? 1 : 0,
                initial ? 1 : 0
            )
            if let handle {
                self.handle = handle
                return
            }
            lastError = errno
            if lastError != ENODEV {
                throw GPIOError.request("gpiod_line_request(\(label) \(spec.offset))", errno: lastError)
            }
        }
        throw GPIOError.noChip(spec.chips)
    }

    deinit { hark_gpiod_release(handle) }

    /// gpiod_line_get_value
    func value() throws -> Bool {
        let value = hark_gpiod_get_value(handle)
        if value < 0 { throw GPIOError.io("gpiod_line_get_value", errno: errno) }
        return value == 1
    }

    /// gpiod_line_event_wait, then gpiod_line_event_read for each pending event. Rising is
    /// inactive→active (the kernel applies active-low).
    func waitForEdges(timeout: Duration) throws -> [LineEdge] {
        var edges: [LineEdge] = []
        var wait = timespec(
            tv_sec: Int(timeout.components.seconds),
            tv_nsec: Int(timeout.components.attoseconds / 1_000_000_000)
        )
        while true {
            var rising: Int32 = 0
            var nanoseconds: Int64 = 0
            let result = hark_gpiod_next_event(handle, &wait, &rising, &nanoseconds)
            if result < 0 {
                if errno == EINTR { continue }
                throw GPIOError.io("gpiod_line_event_wait", errno: errno)
            }
            if result == 0 { return edges }
            edges.append(LineEdge(active: rising == 1, timestamp: .nanoseconds(nanoseconds)))
            wait = timespec(tv_sec: 0, tv_nsec: 0)  // drain what is already queued, then return
        }
    }

    /// gpiod_line_set_value
    func set(_ active: Bool) throws {
        if hark_gpiod_set_value(handle, active ? 1 : 0) != 0 {
            throw GPIOError.io("gpiod_line_set_value", errno: errno)
        }
    }
}
