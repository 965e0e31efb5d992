import HarkCore

/// Everything that reaches the supervisor's loop, in two lanes (two ``BoundedQueue``s the loop waits on together):
/// microphone frames in a bounded buffer that drops the oldest (and counts it) when the loop falls behind, and
/// control inputs (button, session events, stop, ...) that are never dropped. A stalled loop loses frames — audio
/// nobody could have used in time — but never a stop, a drained speaker, a button press or a session event.
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
        /// Called once every input before it has been handled (the control socket waits for a reload this way).
        case settled(@Sendable () -> Void)
        case stop
    }

    /// Where the loop waits: both lanes ring it.
    private let arrivals = EventCount()
    private let frames: BoundedQueue<CapturedFrame>
    private let controls: BoundedQueue<Control>

    /// Most frames held (the newest are kept).
    public let frameBound: Int
    /// Controls waiting beyond which ``deliver(_:)`` waits for room.
    public let controlBound: Int

    /// - Parameters:
    ///   - frameBound: frames held while the loop is busy (200: four seconds of 20 ms frames).
    public init(frameBound: Int = 200, controlBound: Int = 1024) {
        self.frameBound = max(1, frameBound)
        self.controlBound = max(1, controlBound)
        frames = BoundedQueue(bound: self.frameBound, overflow: .dropOldest, arrivals: arrivals)
        controls = BoundedQueue(bound: self.controlBound, overflow: .waitForRoom, arrivals: arrivals)
    }

    /// Frames dropped because the loop fell behind.
    public var droppedFrames: Int { frames.statistics.dropped }

    /// Inputs waiting: (frames, controls).
    public var waiting: (frames: Int, controls: Int) { (frames.count, controls.count) }

    /// Deliveries waiting for room in the control lane now.
    public var deliveriesWaiting: Int { controls.producersWaiting }

    /// A microphone frame; the oldest waiting frame is dropped (and counted) when the buffer is full.
    public func post(frame: CapturedFrame) { frames.push(frame) }

    /// A microphone frame from the one task that reads the microphone: waits while the buffer is full, so the
    /// microphone's own bounded queue holds what the loop has not taken, and drops (and counts) there. A frame is
    /// then dropped in one place and counted once.
    public func deliver(frame: CapturedFrame) async {
        await frames.waitForRoom(below: frameBound)
        frames.push(frame)
    }

    /// A control input; never dropped, never waits.
    public func post(_ control: Control) { controls.push(control) }

    /// A control input from a source that may outpace the loop: waits while ``controlBound`` controls wait.
    public func deliver(_ control: Control) async { await controls.pushWhenRoom(control) }

    /// The next input: controls first, then frames, in the order each arrived. One consumer. A cancelled
    /// consumer gets `.stop`.
    public func next() async -> Input {
        while !Task.isCancelled {
            let ticket = arrivals.ticket()
            if let control = controls.poll() { return .control(control) }
            if let frame = frames.poll() { return .frame(frame) }
            await arrivals.wait(after: ticket)
        }
        return .control(.stop)
    }
}
