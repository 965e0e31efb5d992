import HarkCore

extension DeviceTools {
    /// The timer and alarm tools over `timers`, each with its behaviour.
    static func timerTools(_ timers: any TimerControls, behavior: (String) -> ToolBehavior) -> [LocalTool] {
        let label: JSONValue = [
            "type": "string",
            "description": "A short name for it, such as pasta (at most 64 characters).",
        ]
        let which: JSONValue = [
            "type": "string",
            "description": "The label of the one meant; leave it out to mean all of them.",
        ]
        func tool(
            _ name: String,
            _ description: String,
            _ properties: [String: JSONValue] = [:],
            required: [String] = [],
            _ request: @escaping @Sendable (JSONValue) throws -> TimerRequest
        ) -> LocalTool {
            let parameters: JSONValue? =
                properties.isEmpty
                ? nil
                : [
                    "type": "object",
                    "properties": .object(properties),
                    "required": .array(required.map { .string($0) }),
                ]
            return LocalTool(name: name, description: description, parameters: parameters, behavior: behavior(name)) {
                arguments in
                await timers.timers(try request(arguments)).toolResult
            }
        }
        return [
            tool(
                "set_timer",
                "Sets a countdown timer on this device; it rings here when it ends, even without a network. Give the length in seconds (1 to 86400).",
                [
                    "seconds": [
                        "type": "integer", "description": "How long, in seconds.", "minimum": 1, "maximum": 86_400,
                    ],
                    "label": label,
                ],
                required: ["seconds"]
            ) { arguments in
                .setTimer(
                    seconds: try integer("seconds", in: arguments, range: TimerBook.durations),
                    label: try optionalString("label", in: arguments)
                )
            },
            tool("list_timers", "Tells the timers and alarms set on this device, and what rings now.") { _ in .list },
            tool(
                "cancel_timer",
                "Cancels a timer on this device by its label, or every timer when no label is given.",
                ["label": which]
            ) { arguments in
                .cancelTimers(label: try optionalString("label", in: arguments))
            },
            tool(
                "add_time_to_timer",
                "Adds time to a running timer (a negative number takes time off). Without a label, the timer that ends soonest.",
                [
                    "seconds": [
                        "type": "integer", "description": "Seconds to add.", "minimum": -86_400, "maximum": 86_400,
                    ],
                    "label": which,
                ],
                required: ["seconds"]
            ) { arguments in
                .addTime(
                    seconds: try integer("seconds", in: arguments, range: -86_400...86_400),
                    label: try optionalString("label", in: arguments)
                )
            },
            tool(
                "set_alarm",
                "Sets an alarm on this device at a local time of day; it rings here even without a network. It rings once, or on the given weekdays every week.",
                [
                    "time": ["type": "string", "description": "The local time, 24-hour HH:MM, such as 07:30."],
                    "label": label,
                    "days": [
                        "type": "array",
                        "description":
                            "The weekdays it repeats on (mon, tue, wed, thu, fri, sat, sun); leave out for once.",
                        "items": ["type": "string", "enum": .array(Weekday.allCases.map { .string($0.name) })],
                    ],
                ],
                required: ["time"]
            ) { arguments in
                let (hour, minute) = try TimerRequest.time(try requiredString("time", in: arguments))
                return .setAlarm(
                    hour: hour,
                    minute: minute,
                    days: try TimerRequest.days(arguments["days"]),
                    label: try optionalString("label", in: arguments)
                )
            },
            tool("list_alarms", "Tells the alarms and timers set on this device, and what rings now.") { _ in .list },
            tool(
                "cancel_alarm",
                "Cancels an alarm on this device by its label, or every alarm when no label is given.",
                ["label": which]
            ) { arguments in
                .cancelAlarms(label: try optionalString("label", in: arguments))
            },
            tool(
                "snooze_alarm",
                "Silences the ringing alarm and rings it again after some minutes (9 unless told).",
                [
                    "minutes": ["type": "integer", "description": "1 to 60.", "minimum": 1, "maximum": 60],
                    "label": which,
                ]
            ) { arguments in
                let minutes =
                    arguments["minutes"].map { $0 == .null } == false
                    ? try integer("minutes", in: arguments, range: TimerBook.snoozes) : 9
                return .snooze(label: try optionalString("label", in: arguments), minutes: minutes)
            },
            tool("stop_ringing", "Stops every timer and alarm ringing on this device now.") { _ in .stopRinging },
        ]
    }

    /// The string `name` of a call's `arguments`; missing or another type throws an ``ArgumentError``.
    static func requiredString(_ name: String, in arguments: JSONValue) throws -> String {
        guard let text = try optionalString(name, in: arguments) else {
            throw ArgumentError(description: "\(name) must be a string; it is missing")
        }
        return text
    }
}

extension TimerRequest {
    /// The hour and minute of `HH:MM` (or `H:MM`), or an ``DeviceTools/ArgumentError``.
    public static func time(_ text: String) throws -> (hour: Int, minute: Int) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard text.count <= 5, parts.count == 2, (1...2).contains(parts[0].count), parts[1].count == 2,
            parts.allSatisfy({ $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
            let hour = Int(parts[0]), let minute = Int(parts[1]), (0...23).contains(hour), (0...59).contains(minute)
        else {
            throw DeviceTools.ArgumentError(
                description:
                    "time must be a 24-hour time HH:MM, such as 07:30, not \(RemoteText.printable(text, limit: 20))"
            )
        }
        return (hour, minute)
    }

    /// The weekdays of a JSON array of names (`["mon", "friday"]`); nil or null is none.
    public static func days(_ value: JSONValue?) throws -> Set<Weekday> {
        switch value {
        case nil, .null?:
            return []
        case .array(let items)? where items.count <= 7:
            var days: Set<Weekday> = []
            for item in items {
                guard case .string(let name) = item, let day = Weekday(name: name) else {
                    throw DeviceTools.ArgumentError(
                        description: "days must name weekdays: mon, tue, wed, thu, fri, sat, sun"
                    )
                }
                days.insert(day)
            }
            return days
        default:
            throw DeviceTools.ArgumentError(description: "days must be a list of at most 7 weekdays (mon … sun)")
        }
    }
}
