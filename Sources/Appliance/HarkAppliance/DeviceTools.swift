import HarkCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What the device tools reach on the appliance: the speaker's volume, the microphone's mute and the
/// device's condition. The appliance implements it; tests pass their own.
public protocol DeviceControls: Sendable {
    /// The playback volume, 0–100.
    func volume() async -> Int
    /// Sets the playback volume (clamped to 0–100); returns what it became.
    func setVolume(_ percent: Int) async -> Int
    /// Whether the microphone is muted.
    func isMuted() async -> Bool
    /// Mutes or unmutes the microphone (the LEDs show it).
    func setMuted(_ muted: Bool) async
    /// Uptime, network, firmware version and the like, as a JSON object for the model.
    func status() async -> JSONValue
}

/// Which device tools to declare.
public struct DeviceToolSet: OptionSet, Sendable, Hashable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// `set_volume`, `get_volume`
    public static let volume = DeviceToolSet(rawValue: 1)
    /// `set_microphone_muted`
    public static let mute = DeviceToolSet(rawValue: 2)
    /// `get_time`
    public static let clock = DeviceToolSet(rawValue: 4)
    /// `get_device_status`
    public static let status = DeviceToolSet(rawValue: 8)
    /// `set_timer`, `list_timers`, `cancel_timer`, `add_time_to_timer`, `set_alarm`, `list_alarms`, `cancel_alarm`,
    /// `snooze_alarm`, `stop_ringing` (declared when the appliance passes its timers).
    public static let timers = DeviceToolSet(rawValue: 16)
    /// `play_media`, `pause_media`, `resume_media`, `stop_media`, `now_playing` (declared when the appliance passes
    /// its player).
    public static let media = DeviceToolSet(rawValue: 32)
    public static let all: DeviceToolSet = [.volume, .mute, .clock, .status, .timers, .media]
}

/// The tools the agent can call on the device in every mode, declared with JSON schemas.
public enum DeviceTools {
    /// Why a tool call's arguments were refused (the model gets the text).
    public struct ArgumentError: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// How each tool runs when the service can run calls without blocking the conversation: a volume change is
    /// confirmed once the agent is idle, a mute needs no reply at all, and what the user asked about (the time,
    /// the volume, the device) is answered at once. `tools.NAME` in the configuration overrides one.
    public static let defaultBehaviors: [String: ToolBehavior] = [
        "set_volume": .nonBlocking(.whenIdle),
        "get_volume": .nonBlocking(.interrupt),
        "set_microphone_muted": .nonBlocking(.silent),
        "get_time": .nonBlocking(.interrupt),
        "get_device_status": .nonBlocking(.interrupt),
        "set_timer": .nonBlocking(.whenIdle),
        "list_timers": .nonBlocking(.interrupt),
        "cancel_timer": .nonBlocking(.whenIdle),
        "add_time_to_timer": .nonBlocking(.whenIdle),
        "set_alarm": .nonBlocking(.whenIdle),
        "list_alarms": .nonBlocking(.interrupt),
        "cancel_alarm": .nonBlocking(.whenIdle),
        "snooze_alarm": .nonBlocking(.whenIdle),
        "stop_ringing": .nonBlocking(.silent),
        "play_media": .nonBlocking(.whenIdle),
        "pause_media": .nonBlocking(.silent),
        "resume_media": .nonBlocking(.silent),
        "stop_media": .nonBlocking(.silent),
        "now_playing": .nonBlocking(.interrupt),
    ]

    /// The tools of `set`, acting on `controls` (and `timers` and `media`: their tools are declared only with them);
    /// `now` and `timeZone` give the time (injected in tests); `behaviors` overrides ``defaultBehaviors`` by tool
    /// name.
    public static func make(
        _ set: DeviceToolSet = .all,
        controls: any DeviceControls,
        timers: (any TimerControls)? = nil,
        media: (any MediaControls)? = nil,
        now: @escaping @Sendable () -> Date = { Date() },
        timeZone: TimeZone = .current,
        behaviors: [String: ToolBehavior] = [:]
    ) -> [LocalTool] {
        let behavior = { (name: String) in behaviors[name] ?? defaultBehaviors[name] ?? .blocking }
        var tools: [LocalTool] = []
        if set.contains(.volume) {
            tools.append(
                LocalTool(
                    name: "set_volume",
                    description: "Sets the speaker volume of this device, in percent (0 is silent, 100 is loudest).",
                    parameters: [
                        "type": "object",
                        "properties": [
                            "percent": [
                                "type": "integer", "description": "The new volume, 0 to 100.", "minimum": 0,
                                "maximum": 100,
                            ]
                        ],
                        "required": ["percent"],
                    ],
                    behavior: behavior("set_volume")
                ) { arguments in
                    let percent = try integer("percent", in: arguments, range: 0...100)
                    let volume = await controls.setVolume(percent)
                    return ["volume": .number(Double(volume))]
                }
            )
            tools.append(
                LocalTool(
                    name: "get_volume",
                    description:
                        "Tells the speaker volume of this device in percent, and whether its microphone is muted.",
                    behavior: behavior("get_volume")
                ) { _ in
                    [
                        "volume": .number(Double(await controls.volume())),
                        "microphone_muted": .bool(await controls.isMuted()),
                    ]
                }
            )
        }
        if set.contains(.mute) {
            tools.append(
                LocalTool(
                    name: "set_microphone_muted",
                    description:
                        "Mutes or unmutes this device's microphone. While muted the device hears nothing until someone unmutes it with its button.",
                    parameters: [
                        "type": "object",
                        "properties": ["muted": ["type": "boolean", "description": "true to mute, false to unmute."]],
                        "required": ["muted"],
                    ],
                    behavior: behavior("set_microphone_muted")
                ) { arguments in
                    let muted = try boolean("muted", in: arguments)
                    await controls.setMuted(muted)
                    return ["microphone_muted": .bool(muted)]
                }
            )
        }
        if set.contains(.clock) {
            tools.append(
                LocalTool(
                    name: "get_time",
                    description: "Tells the current local date, time and weekday where this device is.",
                    behavior: behavior("get_time")
                ) { _ in
                    timeReport(now(), timeZone: timeZone)
                }
            )
        }
        if set.contains(.status) {
            tools.append(
                LocalTool(
                    name: "get_device_status",
                    description:
                        "Tells how this device is doing: uptime, network, firmware version, audio volume and microphone mute.",
                    behavior: behavior("get_device_status")
                ) { _ in
                    await controls.status()
                }
            )
        }
        if set.contains(.timers), let timers {
            tools += timerTools(timers, behavior: behavior)
        }
        if set.contains(.media), let media {
            tools += mediaTools(media, behavior: behavior)
        }
        return tools
    }

    /// The whole number `name` of a call's `arguments`, within `range`. A number with a fraction is rounded
    /// (50.0 is 50); anything else — missing, another type, NaN, ±∞, out of range once rounded — throws an
    /// ``ArgumentError`` that says what was wrong, before any conversion that could trap.
    public static func integer(_ name: String, in arguments: JSONValue, range: ClosedRange<Int>) throws -> Int {
        let wanted = "\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound)"
        guard case .number(let number) = try argument(name, in: arguments, wanted: wanted) else {
            throw ArgumentError(description: "\(wanted), not \(kind(of: arguments[name]))")
        }
        // Int(exactly:) is nil for NaN, ±∞ and anything past Int's range: no conversion here can trap.
        guard let whole = Int(exactly: number.rounded()), range.contains(whole) else {
            throw ArgumentError(description: "\(wanted) (got \(number))")
        }
        return whole
    }

    /// The string `name` of a call's `arguments`, nil when it is missing or null; another type throws an
    /// ``ArgumentError``. At most `limit` characters.
    public static func optionalString(_ name: String, in arguments: JSONValue, limit: Int = 200) throws -> String? {
        guard case .object(let members) = arguments else {
            throw ArgumentError(description: "the arguments are \(kind(of: arguments)), not an object")
        }
        switch members[name] {
        case nil, .null?:
            return nil
        case .string(let text)?:
            guard text.count <= limit else {
                throw ArgumentError(description: "\(name) must be at most \(limit) characters")
            }
            return text
        case let other:
            throw ArgumentError(description: "\(name) must be a string, not \(kind(of: other))")
        }
    }

    /// The boolean `name` of a call's `arguments`; anything else throws an ``ArgumentError``.
    public static func boolean(_ name: String, in arguments: JSONValue) throws -> Bool {
        let wanted = "\(name) must be true or false"
        guard case .bool(let value) = try argument(name, in: arguments, wanted: wanted) else {
            throw ArgumentError(description: "\(wanted), not \(kind(of: arguments[name]))")
        }
        return value
    }

    /// The member `name` of the arguments object, or an ``ArgumentError`` saying it is missing.
    private static func argument(_ name: String, in arguments: JSONValue, wanted: String) throws -> JSONValue {
        guard case .object(let members) = arguments else {
            throw ArgumentError(description: "\(wanted); the arguments are \(kind(of: arguments)), not an object")
        }
        guard let value = members[name] else { throw ArgumentError(description: "\(wanted); it is missing") }
        return value
    }

    /// What kind of JSON value `value` is, for an error message (never the value itself: it may be long).
    private static func kind(of value: JSONValue?) -> String {
        switch value {
        case nil, .null?: "null"
        case .bool?: "a boolean"
        case .number?: "a number"
        case .string?: "a string"
        case .array?: "an array"
        case .object?: "an object"
        }
    }

    /// The local time as the model reads it: ISO 8601 with offset, the weekday, the time zone.
    public static func timeReport(_ date: Date, timeZone: TimeZone) -> JSONValue {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second, .weekday], from: date)
        let weekdays = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
        let offset = timeZone.secondsFromGMT(for: date)
        let sign = offset < 0 ? "-" : "+"
        let two = { (value: Int) in value < 10 ? "0\(value)" : "\(value)" }
        let zone = "\(sign)\(two(abs(offset) / 3600)):\(two(abs(offset) / 60 % 60))"
        let local =
            "\(parts.year ?? 0)-\(two(parts.month ?? 0))-\(two(parts.day ?? 0))T\(two(parts.hour ?? 0)):\(two(parts.minute ?? 0)):\(two(parts.second ?? 0))\(zone)"
        return [
            "local_time": .string(local),
            "weekday": .string(weekdays[(((parts.weekday ?? 1) - 1) % 7 + 7) % 7]),
            "time_zone": .string(timeZone.identifier),
        ]
    }
}
