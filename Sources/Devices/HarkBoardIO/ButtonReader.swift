import CGPIO
import Glibc
import HarkCore
import HarkIndicators
import HarkPlatform
import Synchronization

/// A `gpio-keys` button read from `/dev/input/event*` (or a `/dev/input/by-path/...` link).
public final class EvdevButton: EdgeSource {
    private let descriptor: OwnedDescriptor
    public let path: String
    public let keyCode: Int

    /// Opens the device and asks for CLOCK_MONOTONIC timestamps (`EVIOCSCLOCKID`; a plain file in tests
    /// refuses it, which is harmless: its recorded times are used as they are).
    public init(path: String, keyCode: Int) throws {
        self.path = path
        self.keyCode = keyCode
        descriptor = try OwnedDescriptor.open(path, O_RDONLY | O_NONBLOCK)
        var clock = CLOCK_MONOTONIC
        _ = hark_evdev_set_clock(descriptor.fd, &clock)
    }

    /// poll, then read whole `input_event`s and keep this key's presses and releases.
    public func waitForEdges(timeout: Duration) throws -> [LineEdge] {
        guard try descriptor.waitReadable(timeout: timeout, path: path) else { return [] }
        do {
            let bytes = try descriptor.read(upTo: Evdev.eventSize * 64, path: path)
            return Evdev.edges(Evdev.decode(bytes), keyCode: keyCode)
        } catch  where error.errno == EAGAIN {
            return []
        }
    }
}

/// The button loop: waits for edges (no longer than the gesture recogniser's next deadline), turns
/// them into actions and hands them on. ``step(maximumWait:)`` is one turn, tested with a fake chip;
/// ``start(_:)`` runs it on a dedicated thread (never the cooperative pool), as the real-time rules ask.
public final class ButtonReader: Sendable {
    private let source: any EdgeSource
    private let interpreter: Mutex<ButtonInterpreter>
    private let now: @Sendable () -> Duration
    private let running = Atomic<Bool>(false)
    private let errors = Atomic<Int>(0)
    private let steps = Atomic<Int>(0)
    private let thread = Mutex<DeviceThread?>(nil)

    /// `now` is the time in the sources' timebase (CLOCK_MONOTONIC on a device; a test's own clock).
    public init(
        source: any EdgeSource,
        interpreter: ButtonInterpreter,
        now: @escaping @Sendable () -> Duration = MonotonicClock.now
    ) {
        self.source = source
        self.interpreter = Mutex(interpreter)
        self.now = now
    }

    /// How many turns the button loop made (it turns at least every 200 ms): its heartbeat, for the watchdog.
    public var turns: Int { steps.load(ordering: .relaxed) }

    /// How many reads failed (each is followed by a short pause, never a spin).
    public var errorCount: Int { errors.load(ordering: .relaxed) }

    /// One turn: waits for edges up to the next gesture deadline (at most `maximumWait`), then returns
    /// the actions of the edges and of any deadline that passed.
    public func step(maximumWait: Duration = .seconds(1)) throws -> [ButtonAction] {
        let deadline = interpreter.withLock { $0.recognizer.nextDeadline }
        let wait = deadline.map { max(.zero, min(maximumWait, $0 - now())) } ?? maximumWait
        let edges = try source.waitForEdges(timeout: wait)
        let time = now()
        return interpreter.withLock { interpreter in
            interpreter.handle(edges) + interpreter.tick(at: time)
        }
    }

    /// Starts the button thread; `handler` gets each action on that thread (keep it short: hand the
    /// action to the supervisor). Runs until ``stop()``; a second call while it runs does nothing. Throws
    /// ``DeviceThreadError`` when the thread cannot be started (the button would be dead).
    public func start(_ handler: @escaping @Sendable (ButtonAction) -> Void) throws {
        guard !running.exchange(true, ordering: .acquiringAndReleasing) else { return }
        do {
            let started = try DeviceThread(name: "hark-button") { [self] in
                while running.load(ordering: .acquiring) {
                    steps.add(1, ordering: .relaxed)
                    do {
                        for action in try step(maximumWait: .milliseconds(200)) { handler(action) }
                    } catch {
                        errors.add(1, ordering: .relaxed)
                        var pause = timespec(tv_sec: 0, tv_nsec: 200_000_000)
                        nanosleep(&pause, nil)
                    }
                }
            }
            thread.withLock { $0 = started }
        } catch {
            running.store(false, ordering: .releasing)
            throw error
        }
    }

    /// Interprets gestures for `mode` from the next edge on (a reload changed the mode).
    public func setMode(_ mode: InteractionMode) {
        interpreter.withLock { $0.switchMode(to: mode) }
    }

    /// Stops the thread and waits for it to end (within one wait, at most 200 ms).
    public func stop() {
        running.store(false, ordering: .releasing)
        let started = thread.withLock { state -> DeviceThread? in
            defer { state = nil }
            return state
        }
        started?.join()
    }
}

/// The `host` board's button as an edge source: a key on a terminal (standard input), put in raw mode
/// (no line buffering, no echo) while this lives and restored in `deinit`. Not a terminal (a pipe in
/// tests): read as it is.
public final class TerminalKeySource: EdgeSource {
    private let fd: Int32
    private let saved: termios?
    private let button: Mutex<TerminalKeyButton>
    private let now: @Sendable () -> Duration
    /// The input reached its end (standard input is /dev/null, as under systemd, or a closed pipe): no key
    /// will ever come, so waits just sleep instead of polling a descriptor that is always readable.
    private let ended = Atomic(false)

    public init(
        fd: Int32 = 0,
        key: UInt8 = UInt8(ascii: " "),
        now: @escaping @Sendable () -> Duration = MonotonicClock.now
    ) {
        self.fd = fd
        self.now = now
        button = Mutex(TerminalKeyButton(key: key))
        var settings = termios()
        if tcgetattr(fd, &settings) == 0 {
            saved = settings
            settings.c_lflag &= ~tcflag_t(ICANON | ECHO)
            _ = tcsetattr(fd, TCSANOW, &settings)
        } else {
            saved = nil
        }
    }

    deinit {
        if var saved { _ = tcsetattr(fd, TCSANOW, &saved) }
    }

    /// poll, then read the keys typed; after the end of the input, only wait out `timeout`.
    public func waitForEdges(timeout: Duration) throws -> [LineEdge] {
        let millis = Int32(clamping: max(0, timeout.milliseconds))
        if ended.load(ordering: .relaxed) {
            _ = poll(nil, 0, millis)
            return []
        }
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&descriptor, 1, millis)
        if ready < 0 {
            if errno == EINTR { return [] }
            throw FileError(path: "terminal", operation: "poll", errno: errno)
        }
        if ready == 0 { return [] }
        var buffer = [UInt8](repeating: 0, count: 64)
        let got = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, 64) }
        if got < 0 {
            if errno == EINTR || errno == EAGAIN { return [] }
            throw FileError(path: "terminal", operation: "read", errno: errno)
        }
        if got == 0 {
            ended.store(true, ordering: .relaxed)
            return []
        }
        let time = now()
        return button.withLock { $0.feed(Array(buffer[..<got]), at: time) }
    }
}
extension ButtonReader: Button {}
