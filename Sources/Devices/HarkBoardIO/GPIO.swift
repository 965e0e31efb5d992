import HarkBoard

/// One edge seen on an input line: the new logical level (active-low already applied) and the kernel's
/// timestamp (CLOCK_MONOTONIC).
public struct LineEdge: Sendable, Hashable {
    public var active: Bool
    public var timestamp: Duration

    public init(active: Bool, timestamp: Duration) {
        self.active = active
        self.timestamp = timestamp
    }
}

/// Where button edges come from (a GPIO line, an evdev device, a terminal). `waitForEdges` blocks:
/// call it on a dedicated thread, never on the cooperative pool. Timestamps are CLOCK_MONOTONIC.
public protocol EdgeSource: Sendable {
    /// Waits up to `timeout` for edges and returns those that arrived (empty on timeout).
    func waitForEdges(timeout: Duration) throws -> [LineEdge]
}

/// A requested input line with edge events.
public protocol GPIOInputLine: EdgeSource {
    /// The logical level now (true = active, i.e. pressed).
    func value() throws -> Bool
}

/// A requested output line.
public protocol GPIOOutputLine: Sendable {
    /// Drives the line to its logical level (true = active, i.e. lit).
    func set(_ active: Bool) throws
}

/// Where GPIO lines come from: libgpiod 1.6 (bookworm), the GPIO v2 uAPI (trixie and later), or a fake chip.
public protocol GPIOBackend: Sendable {
    /// Requests `line` as an input reporting both edges, with its bias and active-low, and (where the
    /// kernel offers it) kernel debounce of `debounce`.
    func requestInput(_ line: GPIOLineSpec, debounce: Duration, consumer: String) throws -> any GPIOInputLine
    /// Requests `line` as an output, driven to `initial` at once.
    func requestOutput(_ line: GPIOLineSpec, initial: Bool, consumer: String) throws -> any GPIOOutputLine
}

/// A GPIO operation failed.
public struct GPIOError: Error, CustomStringConvertible, Sendable {
    private enum Code: Sendable { case noChip, request, io }
    private let code: Code
    public let description: String

    static func noChip(_ labels: [String]) -> GPIOError {
        GPIOError(
            code: .noChip,
            description: "no GPIO chip labelled \(labels.joined(separator: " or ")) on this system"
        )
    }
    static func request(_ what: String, errno: Int32) -> GPIOError {
        GPIOError(code: .request, description: "\(what) failed: \(ErrnoText.describe(errno))")
    }
    static func io(_ what: String, errno: Int32) -> GPIOError {
        GPIOError(code: .io, description: "\(what) failed: \(ErrnoText.describe(errno))")
    }

    /// No chip with any of the labels exists.
    public var isMissingChip: Bool { code == .noChip }
}

/// A test double for GPIO: records every output level and lets a test push input edges. Shipped in
/// the module (not an ad-hoc stub) so any layer's tests can drive a button or read an LED with it.
public final class FakeGPIOChip: GPIOBackend, @unchecked Sendable {
    /// The chip labels this fake answers to.
    public let labels: [String]
    private let lock = SimpleLock()
    private var levels: [Int: Bool] = [:]
    private var pending: [Int: [LineEdge]] = [:]
    private var history: [Int: [Bool]] = [:]
    /// What each request asked for, in order: offset, input or output, debounce.
    public private(set) var requests: [(offset: Int, output: Bool, debounce: Duration)] = []

    public init(labels: [String]) { self.labels = labels }

    /// The logical level of `offset` now.
    public func level(_ offset: Int) -> Bool { lock.with { levels[offset] ?? false } }

    /// Every level an output line was driven to, in order.
    public func outputs(_ offset: Int) -> [Bool] { lock.with { history[offset] ?? [] } }

    /// Pushes an edge onto an input line (the next `waitForEdges` returns it).
    public func push(_ offset: Int, active: Bool, at timestamp: Duration) {
        lock.with {
            levels[offset] = active
            pending[offset, default: []].append(LineEdge(active: active, timestamp: timestamp))
        }
    }

    private func check(_ line: GPIOLineSpec) throws {
        guard line.chips.contains(where: labels.contains) else { throw GPIOError.noChip(line.chips) }
    }

    public func requestInput(_ line: GPIOLineSpec, debounce: Duration, consumer: String) throws -> any GPIOInputLine {
        try check(line)
        lock.with { requests.append((line.offset, false, debounce)) }
        return Input(chip: self, offset: line.offset)
    }

    public func requestOutput(_ line: GPIOLineSpec, initial: Bool, consumer: String) throws -> any GPIOOutputLine {
        try check(line)
        lock.with { requests.append((line.offset, true, .zero)) }
        let output = Output(chip: self, offset: line.offset)
        try output.set(initial)
        return output
    }

    private struct Input: GPIOInputLine {
        let chip: FakeGPIOChip
        let offset: Int
        func value() throws -> Bool { chip.level(offset) }
        func waitForEdges(timeout: Duration) throws -> [LineEdge] {
            chip.lock.with {
                let edges = chip.pending[offset] ?? []
                chip.pending[offset] = []
                return edges
            }
        }
    }

    private struct Output: GPIOOutputLine {
        let chip: FakeGPIOChip
        let offset: Int
        func set(_ active: Bool) throws {
            chip.lock.with {
                chip.levels[offset] = active
                chip.history[offset, default: []].append(active)
            }
        }
    }
}

/// Picks the GPIO backend for this build: libgpiod 1.6 when the build has it (bookworm), else the
/// kernel's GPIO v2 uAPI (trixie and later, whose libgpiod 2.x has another API).
public enum GPIOBackends {
    /// `libgpiod`, `uapi`, or `auto` (libgpiod when available); nil for any other name.
    public static func named(_ name: String) -> (any GPIOBackend)? {
        switch name {
        case "libgpiod": LibgpiodBackend()
        case "uapi": GPIOv2Backend()
        case "auto": LibgpiodBackend.isAvailable ? LibgpiodBackend() : GPIOv2Backend()
        default: nil
        }
    }
}
