import CGPIO
import Glibc
import HarkIndicators
import Synchronization

/// CLOCK_MONOTONIC, the timebase of GPIO and (once set) evdev event timestamps.
public enum MonotonicClock {
    /// clock_gettime(CLOCK_MONOTONIC)
    public static func now() -> Duration {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return .seconds(time.tv_sec) + .nanoseconds(time.tv_nsec)
    }
}

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
    /// action to the supervisor). Runs until ``stop()``.
    public func start(_ handler: @escaping @Sendable (ButtonAction) -> Void) {
        guard !running.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let box = Unmanaged.passRetained(
            ThreadBody { [self] in
                while running.load(ordering: .acquiring) {
                    do {
                        for action in try step(maximumWait: .milliseconds(200)) { handler(action) }
                    } catch {
                        errors.add(1, ordering: .relaxed)
                        var pause = timespec(tv_sec: 0, tv_nsec: 200_000_000)
                        nanosleep(&pause, nil)
                    }
                }
            }
        )
        var thread = pthread_t()
        let result = pthread_create(
            &thread,
            nil,
            { raw in
                let body = Unmanaged<ThreadBody>.fromOpaque(raw!).takeRetainedValue()
                body.run()
                return nil
            },
            box.toOpaque()
        )
        if result == 0 {
            pthread_detach(thread)
        } else {
            box.release()
            running.store(false, ordering: .releasing)
        }
    }

    /// Asks the thread to stop; it ends within one wait (at most 200 ms).
    public func stop() { running.store(false, ordering: .releasing) }
}

private final class ThreadBody: Sendable {
    let run: @Sendable () -> Void
    init(_ run: @escaping @Sendable () -> Void) { self.run = run }
}
