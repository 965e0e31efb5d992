/// The interaction seams: the button and the LEDs as the appliance sees them (beside ``Microphone`` and
/// ``Speaker``), and the vocabulary they speak: button actions, the interaction modes, what is shown. The devices
/// (HarkBoardIO's readers, HarkIndicators' LED engine) implement them; the appliance and the tests' doubles use
/// them.

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

/// The LEDs as the appliance uses them: what to show in, progress out. HarkIndicators' `LEDDriver` implements it.
public protocol Indicator: AnyObject, Sendable {
    /// Shows `input` from the next frame on.
    func update(_ input: IndicatorInput)
    /// Frames rendered (progress, for the watchdog).
    var framesRendered: Int { get }
    /// True while nothing animates (no frames are due).
    var isResting: Bool { get }
}

/// What the appliance does on a gesture.
public enum ButtonAction: String, Sendable, Hashable, CaseIterable {
    case none
    /// Manual activity start (push-to-talk).
    case talkStart = "talk_start"
    /// Manual activity end (push-to-talk).
    case talkEnd = "talk_end"
    /// Toggle the microphone mute.
    case muteToggle = "mute_toggle"
    /// Cancel the agent's answer (interrupt playback).
    case cancel
    case volumeUp = "volume_up"
    case volumeDown = "volume_down"
    /// End the conversation (start a fresh one next time).
    case endConversation = "end_conversation"
}

/// How the appliance is used (DESIGN.md: who uses it); each has its own gesture map.
public enum InteractionMode: String, Sendable, Hashable, CaseIterable {
    case pushToTalk = "push_to_talk"
    case alwaysListening = "always_listening"
    case kiosk
}

/// An overlay shown over the conversation state; the cases are in priority order, highest first
/// (DESIGN.md "One set of states").
public enum Overlay: String, Sendable, Hashable, CaseIterable, Comparable {
    case booting
    case fatal
    /// A timer or an alarm rings (until it is stopped, or rang its time unheard).
    case alert
    case error
    case offline
    case muted
    case buttonHeld = "button_held"
    /// A wake word was just heard (a second's animation as the microphone opens).
    case wake

    /// The position in the priority order: 0 is the highest.
    public var priority: Int { Self.allCases.firstIndex(of: self)! }

    public static func < (lhs: Overlay, rhs: Overlay) -> Bool { lhs.priority < rhs.priority }
}

/// Anything the state→pattern table can name: a conversation state or an overlay.
public enum ShownState: Sendable, Hashable, CustomStringConvertible {
    case conversation(ConversationState)
    case overlay(Overlay)

    /// The name the board files use (`idle`, `thinking`, `offline`, `button_held`, ...).
    public var name: String {
        switch self {
        case .conversation(let state): state.rawValue
        case .overlay(let overlay): overlay.rawValue
        }
    }

    /// Every name, conversation states first.
    public static let all: [ShownState] =
        ConversationState.allCases.map { .conversation($0) } + Overlay.allCases.map { .overlay($0) }

    /// The state of that board-file name, or nil.
    public init?(name: String) {
        guard let found = Self.all.first(where: { $0.name == name }) else { return nil }
        self = found
    }

    public var description: String { name }
}

/// What the LEDs are asked to show: one conversation state, any number of overlays, whether the
/// microphone is live and the current audio level.
public struct IndicatorInput: Sendable, Hashable {
    public var conversation: ConversationState
    public var overlays: Set<Overlay>
    /// The microphone is capturing and its audio may reach the agent. Shown on every frame.
    public var microphoneLive: Bool
    /// Audio level 0...1 for level-following patterns (input while listening, output while speaking).
    public var level: Double

    public init(
        conversation: ConversationState = .idle,
        overlays: Set<Overlay> = [],
        microphoneLive: Bool = false,
        level: Double = 0
    ) {
        self.conversation = conversation
        self.overlays = overlays
        self.microphoneLive = microphoneLive
        self.level = level
    }

    /// What wins: the highest overlay present, else the conversation state.
    public var shown: ShownState {
        if let top = overlays.min() { return .overlay(top) }
        return .conversation(conversation)
    }
}
