import HarkCore
import Synchronization

/// Runs an ``LEDEngine`` at its fixed frame rate on an injected clock and sends each changed frame to
/// an ``LEDOutput``. Inputs arrive from any task through ``update(_:)``; ``run(clock:)`` is the one
/// long-running loop (its owner runs it as a service).
public final class LEDDriver: Sendable {
    private struct State {
        var engine: LEDEngine
        var pendingInput: IndicatorInput?
        var lastFrame: [RGB]?
        var framesShown = 0
        var framesRendered = 0
        var failures = 0
        /// Waiting for an input because the frame cannot change without one.
        var resting = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state: Mutex<State>
    private let output: any LEDOutput

    public init(engine: LEDEngine, output: any LEDOutput) {
        state = Mutex(State(engine: engine))
        self.output = output
    }

    /// Asks the LEDs to show `input` from the next frame on.
    public func update(_ input: IndicatorInput) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.pendingInput = input
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// True while the shown frame is static and the driver waits for the next input (no frames are
    /// rendered meanwhile, by design: the watchdog must not count that as a stall).
    public var isResting: Bool { state.withLock { $0.resting } }

    /// How many frames were sent to the output (unchanged frames are not resent).
    public var framesShown: Int { state.withLock { $0.framesShown } }

    /// How many frames were rendered, changed or not: the driver's heartbeat, for the watchdog.
    public var framesRendered: Int { state.withLock { $0.framesRendered } }

    /// How many frames the output failed to show (counted, not thrown: the LEDs must not stop the appliance).
    public var failures: Int { state.withLock { $0.failures } }

    /// Draws frames at the engine's frame rate until cancelled. Time is measured from the clock's
    /// `now` at the start; frames fall on a fixed grid, so a late wake-up never shifts later frames.
    /// While the shown pattern is static and its frame is shown, it sleeps until the next input.
    public func run<C: Clock>(clock: C) async throws where C.Duration == Duration {
        let start = clock.now
        while true {
            let elapsed = start.duration(to: clock.now)
            let (frame, next, rest) = state.withLock { state -> ([RGB]?, Duration, Bool) in
                if let input = state.pendingInput {
                    state.engine.update(input, at: elapsed)
                    state.pendingInput = nil
                }
                let frame = state.engine.frame(at: elapsed)
                state.framesRendered += 1
                let next = state.engine.nextFrameTime(after: elapsed)
                let rest = state.engine.isStatic && frame == state.lastFrame
                if frame == state.lastFrame { return (nil, next, rest) }
                state.lastFrame = frame
                return (frame, next, false)
            }
            if rest {
                await waitForInput()
                try Task.checkCancellation()
                continue
            }
            if let frame {
                do {
                    try output.show(frame)
                    state.withLock { $0.framesShown += 1 }
                } catch {
                    state.withLock {
                        $0.failures += 1
                        $0.lastFrame = nil  // try again on the next frame
                    }
                }
            }
            try await clock.sleep(until: start.advanced(by: next), tolerance: nil)
        }
    }

    /// Returns at the next ``update(_:)`` (at once if one is pending) or when the task is cancelled.
    private func waitForInput() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.pendingInput != nil || Task.isCancelled { return true }
                    state.resting = true
                    state.waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
            state.withLock { $0.resting = false }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
    }
}

extension LEDDriver: Indicator {}
