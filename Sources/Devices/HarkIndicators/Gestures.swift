import HarkCore

/// What a button did, after debouncing.
public enum ButtonEvent: String, Sendable, Hashable, CaseIterable {
    /// Went down (push-to-talk starts here).
    case press
    /// Came up (push-to-talk ends here).
    case release
    /// A short press, with no second one within the double-tap window.
    case tap
    /// Two short presses within the double-tap window.
    case doubleTap = "double_tap"
    /// Held down for the long-hold time (reported while still held).
    case longHold = "long_hold"
}

/// Which gesture does what, per mode.
public struct GestureMap: Sendable, Hashable {
    public var actions: [InteractionMode: [ButtonEvent: ButtonAction]]

    public init(_ actions: [InteractionMode: [ButtonEvent: ButtonAction]]) { self.actions = actions }

    /// The action for `event` in `mode` (`.none` if the map leaves it out).
    public func action(for event: ButtonEvent, in mode: InteractionMode) -> ButtonAction {
        actions[mode]?[event] ?? .none
    }

    /// Whether `mode` gives double taps a meaning: if not, taps are reported without waiting.
    public func usesDoubleTap(in mode: InteractionMode) -> Bool {
        (actions[mode]?[.doubleTap] ?? .none) != .none
    }

    public static let standard = GestureMap([
        .pushToTalk: [.press: .talkStart, .release: .talkEnd, .doubleTap: .muteToggle],
        .alwaysListening: [.tap: .cancel, .doubleTap: .muteToggle, .longHold: .endConversation],
        .kiosk: [.tap: .cancel, .longHold: .endConversation],
    ])
}

/// Timing of the gesture recogniser.
public struct GestureTiming: Sendable, Hashable {
    /// Edges within this time of the last accepted edge are contact bounce.
    public var debounce: Duration
    /// The longest press that still counts as a tap, and the longest gap between two taps of a double tap.
    public var doubleTapWindow: Duration
    /// Held this long, a press is a long hold.
    public var longHold: Duration

    public init(
        debounce: Duration = .milliseconds(20),
        doubleTapWindow: Duration = .milliseconds(300),
        longHold: Duration = .milliseconds(800)
    ) {
        self.debounce = debounce
        self.doubleTapWindow = doubleTapWindow
        self.longHold = longHold
    }
}

/// Turns raw button levels into debounced ``ButtonEvent``s. A plain value with injected time: feed it
/// every raw edge with ``edge(pressed:at:)`` and call ``tick(at:)`` at ``nextDeadline`` (or any time).
///
/// Debounce reacts at once: the first edge is accepted immediately (the button feels instant), edges
/// in the following `debounce` are ignored, and at its end the level is re-read so a real change
/// inside the window is not lost.
public struct GestureRecognizer: Sendable {
    public var timing: GestureTiming
    /// When false, a short press is reported as a tap on release, without waiting for a second one.
    public var detectsDoubleTap: Bool

    /// The debounced level.
    public private(set) var isPressed = false
    private var rawPressed = false
    private var lockoutUntil: Duration = .zero
    private var pressedAt: Duration?
    private var longHoldReported = false
    /// A tap whose release waits for a possible second tap until this time.
    private var pendingTapUntil: Duration?
    /// The press in progress is the second of a possible double tap.
    private var secondPress = false

    public init(timing: GestureTiming = GestureTiming(), detectsDoubleTap: Bool = true) {
        self.timing = timing
        self.detectsDoubleTap = detectsDoubleTap
    }

    /// When ``tick(at:)`` must next be called for the recogniser to keep its promises, if ever.
    public var nextDeadline: Duration? {
        var deadlines: [Duration] = []
        if rawPressed != isPressed { deadlines.append(lockoutUntil) }
        if let pressedAt, !longHoldReported { deadlines.append(pressedAt + timing.longHold) }
        if let pendingTapUntil { deadlines.append(pendingTapUntil) }
        return deadlines.min()
    }

    /// A raw edge from the hardware (already active-low corrected): `pressed` is the new level.
    public mutating func edge(pressed: Bool, at now: Duration) -> [ButtonEvent] {
        var events = tick(at: now)
        rawPressed = pressed
        if now >= lockoutUntil && pressed != isPressed { events += accept(pressed, at: now) }
        return events
    }

    /// Lets time pass: reports long holds, taps whose double-tap window ended, and a level that
    /// changed during the debounce window.
    public mutating func tick(at now: Duration) -> [ButtonEvent] {
        var events: [ButtonEvent] = []
        if let until = pendingTapUntil, now >= until {
            pendingTapUntil = nil
            events.append(.tap)
        }
        if let pressedAt, !longHoldReported, now >= pressedAt + timing.longHold {
            longHoldReported = true
            secondPress = false
            events.append(.longHold)
        }
        if now >= lockoutUntil && rawPressed != isPressed { events += accept(rawPressed, at: max(lockoutUntil, now)) }
        return events
    }

    private mutating func accept(_ pressed: Bool, at now: Duration) -> [ButtonEvent] {
        isPressed = pressed
        lockoutUntil = now + timing.debounce
        if pressed {
            pressedAt = now
            longHoldReported = false
            if pendingTapUntil != nil {
                pendingTapUntil = nil
                secondPress = true
            }
            return [.press]
        }
        var events: [ButtonEvent] = [.release]
        if let start = pressedAt, !longHoldReported, now - start <= timing.doubleTapWindow {
            if secondPress {
                events.append(.doubleTap)
            } else if detectsDoubleTap {
                pendingTapUntil = now + timing.doubleTapWindow
            } else {
                events.append(.tap)
            }
        }
        secondPress = false
        pressedAt = nil
        return events
    }
}
