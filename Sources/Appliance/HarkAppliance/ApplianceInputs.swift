import HarkCore
import Synchronization

/// Everything that reaches the supervisor's loop, in two lanes: microphone frames in a bounded buffer that
/// drops the oldest (and counts it) when the loop falls behind, and control inputs (button, session events,
/// stop, ...) that are never dropped. A stalled loop loses frames — audio nobody could have used in time —
/// but never a stop, a drained speaker, a button press or a session event.
///
/// Session events come from a session that may send faster than the loop takes them (a flooding service):
/// ``deliver(_:)`` waits while ``controlBound`` controls are waiting, so the session's own bounded event
/// stream takes the pressure, and memory here stays bounded without dropping a control.
public final class ApplianceInputs: Sendable {
    /// One input.
    public enum Input: Sendable {
        case frame(CapturedFrame)
        case control(Control)
    }

    /// An input that is never dropped.
    public enum Control: Sendable {
        case event(ApplianceEvent)
        case session(generation: Int, SessionEvent)
        case sessionEnded(generation: Int, SessionFailure?)
        case drained(turn: Int)
        case reload(ApplianceBehaviour)
        /// A reload that could not be applied (the running configuration stays), and why.
        case reloadFailed(String)
        case stop
    }

    private struct State {
        var frames: [CapturedFrame] = []
        var frameHead = 0
        var controls: [Control] = []
        var controlHead = 0
        var droppedFrames = 0
        var waiter: CheckedContinuation<Input, Never>?
        var roomWaiters: [CheckedContinuation<Void, Never>] = []

        var frameCount: Int { frames.count - frameHead }
        var controlCount: Int { controls.count - controlHead }

        mutating func popControl() -> Control {
            let control = controls[controlHead]
            controlHead += 1
            if controlHead > 256, controlHead * 2 > controls.count {
                controls.removeFirst(controlHead)
                controlHead = 0
            }
            return control
        }

        mutating func popFrame() -> CapturedFrame {
            let frame = frames[frameHead]
            frameHead += 1
            if frameHead > 64, frameHead * 2 > frames.count {
                frames.removeFirst(frameHead)
                frameHead = 0
            }
            return frame
        }
    }

    private let state = Mutex(State())
    /// Most frames held (the newest are kept).
    public let frameBound: Int
    /// Controls waiting beyond which ``deliver(_:)`` waits for room.
    public let controlBound: Int

    /// - Parameters:
    ///   - frameBound: frames held while the loop is busy (200: four seconds of 20 ms frames).
    public init(frameBound: Int = 200, controlBound: Int = 1024) {
        self.frameBound = max(1, frameBound)
        self.controlBound = max(1, controlBound)
    }

    /// Frames dropped because the loop fell behind.
    public var droppedFrames: Int { state.withLock { $0.droppedFrames } }

    /// Inputs waiting: (frames, controls).
    public var waiting: (frames: Int, controls: Int) { state.withLock { ($0.frameCount, $0.controlCount) } }

    /// A microphone frame; the oldest waiting frame is dropped (and counted) when the buffer is full.
    public func post(frame: CapturedFrame) {
        let waiter = state.withLock { state -> CheckedContinuation<Input, Never>? in
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.frames.append(frame)
            if state.frameCount > frameBound {
                _ = state.popFrame()
                state.droppedFrames += 1
            }
            return nil
        }
        waiter?.resume(returning: .frame(frame))
    }

    /// A control input; never dropped, never waits.
    public func post(_ control: Control) {
        let waiter = state.withLock { state -> CheckedContinuation<Input, Never>? in
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.controls.append(control)
            return nil
        }
        waiter?.resume(returning: .control(control))
    }

    /// A control input from a source that may outpace the loop: waits while ``controlBound`` controls wait.
    public func deliver(_ control: Control) async {
        while state.withLock({ $0.controlCount >= controlBound }) {
            await withCheckedContinuation { continuation in
                let wait = state.withLock { state -> Bool in
                    guard state.controlCount >= controlBound else { return false }
                    state.roomWaiters.append(continuation)
                    return true
                }
                if !wait { continuation.resume() }
            }
        }
        post(control)
    }

    /// The next input: controls first, then frames, in the order each arrived. One consumer. A cancelled
    /// consumer gets `.stop`.
    public func next() async -> Input {
        await withTaskCancellationHandler {
            await take()
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Input, Never>? in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: .control(.stop))
        }
    }

    private func take() async -> Input {
        await withCheckedContinuation { continuation in
            let (ready, woken) = state.withLock { state -> (Input?, [CheckedContinuation<Void, Never>]) in
                if state.controlCount > 0 {
                    let control = state.popControl()
                    var woken: [CheckedContinuation<Void, Never>] = []
                    if state.controlCount < controlBound {
                        woken = state.roomWaiters
                        state.roomWaiters = []
                    }
                    return (.control(control), woken)
                }
                if state.frameCount > 0 { return (.frame(state.popFrame()), []) }
                // Checked under the lock the cancellation handler takes: it finds the waiter, or this sees it.
                if Task.isCancelled { return (.control(.stop), []) }
                state.waiter = continuation
                return (nil, [])
            }
            for waiter in woken { waiter.resume() }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
