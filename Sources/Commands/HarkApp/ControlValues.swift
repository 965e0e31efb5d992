import HarkCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What a person types for the control commands, as values: durations (`10m`, `1h30m`, `90s`), times of day
/// (`07:30`), weekdays (`mon,tue`), labels. Each parser bounds what it takes and says what it expected.
enum ControlValues {
    /// The shortest and longest timer.
    static let timerRange = 1...86_400
    /// The longest label.
    static let labelLimit = 64
    /// The days, in the order `hark alarms` shows them.
    static let weekdays = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]

    /// Why a value was refused.
    struct Refusal: Error, CustomStringConvertible, Equatable {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// Seconds from `10m`, `1h30m`, `90s`, `1h 5m 3s` or a bare number of seconds (`90`), within 1 s and 24 h.
    static func duration(_ text: String) throws(Refusal) -> Int {
        let expected = "a duration like 90s, 10m or 1h30m, from 1 s to 24 h"
        let compact = text.lowercased().filter { $0 != " " }
        guard !compact.isEmpty, compact.utf8.count <= 32 else {
            throw Refusal("\"\(RemoteText.printable(text, limit: 48))\" is not \(expected)")
        }
        if let seconds = Int(compact) {
            guard timerRange.contains(seconds) else { throw Refusal("\(seconds) s is not \(expected)") }
            return seconds
        }
        var total = 0
        var digits = ""
        var seen: Set<Character> = []
        for character in compact {
            if character.isASCII, character.isNumber {
                digits.append(character)
                continue
            }
            let scale: Int
            switch character {
            case "h": scale = 3600
            case "m": scale = 60
            case "s": scale = 1
            default: throw Refusal("\"\(RemoteText.printable(text, limit: 48))\" is not \(expected)")
            }
            // Each unit once, in the order h, m, s, each with a number of at most 5 digits.
            guard let number = Int(digits), digits.count <= 5, !seen.contains(character),
                seen.allSatisfy({ order($0) < order(character) })
            else { throw Refusal("\"\(RemoteText.printable(text, limit: 48))\" is not \(expected)") }
            seen.insert(character)
            total += number * scale
            digits = ""
        }
        guard digits.isEmpty, !seen.isEmpty else {
            throw Refusal("\"\(RemoteText.printable(text, limit: 48))\" is not \(expected) (give each number its unit)")
        }
        guard timerRange.contains(total) else {
            throw Refusal("\(RemoteText.printable(text, limit: 48)) is not \(expected)")
        }
        return total
    }

    private static func order(_ unit: Character) -> Int { unit == "h" ? 0 : unit == "m" ? 1 : 2 }

    /// `HH:MM` on the 24-hour clock (`7:05` too), normalised to two digits each.
    static func time(_ text: String) throws(Refusal) -> String {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, (1...2).contains(parts[0].count), parts[1].count == 2,
            parts.allSatisfy({ $0.allSatisfy { $0.isASCII && $0.isNumber } }),
            let hour = Int(parts[0]), let minute = Int(parts[1]), (0...23).contains(hour), (0...59).contains(minute)
        else {
            throw Refusal("\"\(RemoteText.printable(text, limit: 48))\" is not a time like 07:30 (00:00 to 23:59)")
        }
        return (hour < 10 ? "0" : "") + "\(hour):" + (minute < 10 ? "0" : "") + "\(minute)"
    }

    /// Weekdays from `mon,tue`, `weekdays`, `weekend` or `daily`, each once, in the week's order.
    static func days(_ text: String) throws(Refusal) -> [String] {
        var chosen: Set<String> = []
        let items = text.lowercased().split(separator: ",").map { trimmed($0) }
        guard !items.isEmpty, items.count <= 10 else {
            throw Refusal("--days takes days like mon,tue,fri (or weekdays, weekend, daily)")
        }
        for item in items {
            switch item {
            case "weekdays": chosen.formUnion(weekdays.prefix(5))
            case "weekend": chosen.formUnion(["sat", "sun"])
            case "daily", "every": chosen.formUnion(weekdays)
            default:
                let short = String(item.prefix(3))
                guard item.count >= 3, weekdays.contains(short),
                    fullNames[short].map({ $0.hasPrefix(item) }) ?? false
                else {
                    throw Refusal(
                        "\"\(RemoteText.printable(item, limit: 32))\" is not a day: use mon, tue, wed, thu, fri, "
                            + "sat, sun (or weekdays, weekend, daily)"
                    )
                }
                chosen.insert(short)
            }
        }
        return weekdays.filter(chosen.contains)
    }

    private static let fullNames = [
        "mon": "monday", "tue": "tuesday", "wed": "wednesday", "thu": "thursday", "fri": "friday",
        "sat": "saturday", "sun": "sunday",
    ]

    /// A label: 1 to ``labelLimit`` characters, no control characters.
    static func label(_ text: String) throws(Refusal) -> String {
        let trimmed = trimmed(text)
        guard !trimmed.isEmpty, trimmed.count <= labelLimit else {
            throw Refusal("a label is 1 to \(labelLimit) characters")
        }
        guard !trimmed.unicodeScalars.contains(where: RemoteText.needsEscaping) else {
            throw Refusal("a label may not hold control characters")
        }
        return trimmed
    }

    /// `text` without the spaces and tabs around it.
    static func trimmed(_ text: some StringProtocol) -> String {
        let blank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = text.firstIndex(where: { !blank($0) }), let last = text.lastIndex(where: { !blank($0) })
        else { return "" }
        return String(text[first...last])
    }

    /// `5400` as `1h30m`, `59` as `59s`.
    static func spoken(seconds: Int) -> String {
        let seconds = max(0, seconds)
        let hours = seconds / 3600
        let minutes = seconds % 3600 / 60
        let rest = seconds % 60
        var text = ""
        if hours > 0 { text += "\(hours)h" }
        if minutes > 0 { text += "\(minutes)m" }
        if rest > 0 || text.isEmpty { text += "\(rest)s" }
        return text
    }
}
