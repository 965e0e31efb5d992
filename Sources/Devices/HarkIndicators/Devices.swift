/// The push-to-talk button as the appliance uses it: gestures out (after recognition and the board's
/// gesture map), health in. HarkBoardIO's reader (GPIO, evdev, a terminal key) implements it.
public protocol Button: AnyObject, Sendable {
    /// Starts reading; `handler` gets each action, on the reader's own thread. Throws when it cannot start.
    func start(_ handler: @escaping @Sendable (ButtonAction) -> Void) throws
    /// Stops reading.
    func stop()
    /// Maps gestures to the actions of `mode` from now on: a reload that changes the mode changes what the
    /// button does (hold to talk, or tap to cancel).
    func setMode(_ mode: InteractionMode)
    /// Turns of the reader's loop (its progress, for the watchdog).
    var turns: Int { get }
    /// Reads that failed.
    var errorCount: Int { get }
}

/// The LEDs as the appliance uses them: what to show in, progress out. ``LEDDriver`` implements it.
public protocol Indicator: AnyObject, Sendable {
    /// Shows `input` from the next frame on.
    func update(_ input: IndicatorInput)
    /// Frames rendered (progress, for the watchdog).
    var framesRendered: Int { get }
    /// True while nothing animates (no frames are due).
    var isResting: Bool { get }
}

extension LEDDriver: Indicator {}
