import HarkCore
import HarkIndicators

/// Linux evdev `struct input_event` on 64-bit (24 bytes: timeval, type, code, value), as read from
/// `/dev/input/event*` for a `gpio-keys` button.
public enum Evdev {
    /// `sizeof(struct input_event)` on 64-bit Linux.
    public static let eventSize = 24
    /// `EV_KEY`
    public static let keyType: UInt16 = 1

    /// One input event.
    public struct Event: Sendable, Hashable {
        public var time: Duration
        public var type: UInt16
        public var code: UInt16
        public var value: Int32

        public init(time: Duration, type: UInt16, code: UInt16, value: Int32) {
            self.time = time
            self.type = type
            self.code = code
            self.value = value
        }
    }

    /// Decodes whole events from bytes read from an event device; a trailing partial event is left out.
    public static func decode(_ bytes: [UInt8]) -> [Event] {
        bytes.withUnsafeBytes { raw in
            stride(from: 0, to: raw.count - eventSize + 1, by: eventSize).map { base in
                let seconds = Int64(littleEndian: raw.loadUnaligned(fromByteOffset: base, as: Int64.self))
                let micros = Int64(littleEndian: raw.loadUnaligned(fromByteOffset: base + 8, as: Int64.self))
                return Event(
                    time: .seconds(seconds) + .microseconds(micros),
                    type: UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: base + 16, as: UInt16.self)),
                    code: UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: base + 18, as: UInt16.self)),
                    value: Int32(littleEndian: raw.loadUnaligned(fromByteOffset: base + 20, as: Int32.self))
                )
            }
        }
    }

    /// The press and release edges of key `code` (value 1 and 0; autorepeat 2 and other events are dropped).
    public static func edges(_ events: [Event], keyCode: Int) -> [LineEdge] {
        events.compactMap { event in
            guard event.type == keyType, Int(event.code) == keyCode, event.value == 0 || event.value == 1 else {
                return nil
            }
            return LineEdge(active: event.value == 1, timestamp: event.time)
        }
    }
}

/// The `host` board's button: a key on a terminal in raw mode. A terminal reports no key releases, so
/// the key toggles: the first press is a press, the next one its release.
public struct TerminalKeyButton: Sendable {
    public let key: UInt8
    public private(set) var pressed = false

    public init(key: UInt8 = UInt8(ascii: " ")) { self.key = key }

    /// The edges in bytes read from the terminal at `now` (other keys are ignored).
    public mutating func feed(_ bytes: [UInt8], at now: Duration) -> [LineEdge] {
        bytes.filter { $0 == key }.map { _ in
            pressed.toggle()
            return LineEdge(active: pressed, timestamp: now)
        }
    }
}

/// Feeds line edges into a gesture recogniser and maps its events to actions for a mode: the glue the
/// button thread runs (edges in, actions out), as a value.
public struct ButtonInterpreter: Sendable {
    public var recognizer: GestureRecognizer
    public var map: GestureMap
    public var mode: InteractionMode

    public init(map: GestureMap, mode: InteractionMode, timing: GestureTiming = GestureTiming()) {
        self.map = map
        self.mode = mode
        recognizer = GestureRecognizer(timing: timing, detectsDoubleTap: map.usesDoubleTap(in: mode))
    }

    /// Interprets what comes next for `mode` (a reloaded configuration changed it). A gesture under way is
    /// forgotten: its release, if it comes, starts nothing.
    public mutating func switchMode(to mode: InteractionMode) {
        guard mode != self.mode else { return }
        self = ButtonInterpreter(map: map, mode: mode, timing: recognizer.timing)
    }

    /// The actions for `edges` (events that map to `.none` are left out).
    public mutating func handle(_ edges: [LineEdge]) -> [ButtonAction] {
        edges.flatMap { recognizer.edge(pressed: $0.active, at: $0.timestamp) }.compactMap(action)
    }

    /// The actions due at `now` (long holds, taps whose double-tap window closed).
    public mutating func tick(at now: Duration) -> [ButtonAction] {
        recognizer.tick(at: now).compactMap(action)
    }

    private func action(_ event: ButtonEvent) -> ButtonAction? {
        let action = map.action(for: event, in: mode)
        return action == .none ? nil : action
    }
}
