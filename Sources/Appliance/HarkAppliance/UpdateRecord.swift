import HarkCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What `hark-update` recorded of the updates in the state directory (`update.json`): the version installed, the
/// last update, the last rollback and why, the versions held back. `hark status`, its `--json` and the metrics show
/// it. Written by the updater (a root process), read here as untrusted: bounded, every text printable.
public struct UpdateRecord: Codable, Sendable, Hashable {
    /// One update or rollback: when (seconds since 1970), from which version to which, and why (a rollback's cause).
    public struct Event: Codable, Sendable, Hashable {
        /// When it ended (seconds since 1970).
        public var at: Double
        /// The version before.
        public var from: String?
        /// The version after (a rollback: the version that failed).
        public var to: String?
        /// `installed`, `healthy`, `rolled_back`, `failed`; free text from the updater.
        public var outcome: String?
        /// Why, in a line (a rollback's cause).
        public var reason: String?

        /// An event at `at`.
        public init(at: Double, from: String? = nil, to: String? = nil, outcome: String? = nil, reason: String? = nil) {
            self.at = at
            self.from = from
            self.to = to
            self.outcome = outcome
            self.reason = reason
        }
    }

    /// The version of `hark` installed now, as the updater last saw it.
    public var installed: String?
    /// The last update tried.
    public var lastUpdate: Event?
    /// The last rollback.
    public var lastRollback: Event?
    /// Versions held back after failing the health gate (until a newer one appears).
    public var held: [String]?
    /// Rollbacks since the record began.
    public var rollbacks: Int?
    /// `idle`, `waiting` (busy: a conversation, a ring), `installing`, `gating`; what the updater does now.
    public var phase: String?

    /// An empty record.
    public init(
        installed: String? = nil,
        lastUpdate: Event? = nil,
        lastRollback: Event? = nil,
        held: [String]? = nil,
        rollbacks: Int? = nil,
        phase: String? = nil
    ) {
        self.installed = installed
        self.lastUpdate = lastUpdate
        self.lastRollback = lastRollback
        self.held = held
        self.rollbacks = rollbacks
        self.phase = phase
    }

    /// The largest record read.
    public static let fileLimit = 16 * 1024
    /// The file's name in the state directory.
    public static let fileName = "update.json"

    /// The record in `stateDirectory`, or nil when there is none or it cannot be read as one (an unreadable
    /// record never stops the daemon or `hark status`); its texts made printable and bounded.
    public static func read(stateDirectory: String) -> UpdateRecord? {
        let path = stateDirectory.hasSuffix("/") ? stateDirectory + fileName : stateDirectory + "/" + fileName
        // A regular file only (never a FIFO or a device that would hang); its size checked before it is read where
        // the attributes give it as a number this build knows, and after in any case.
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
            (attributes[.type] as? FileAttributeType) == .typeRegular,
            Self.size(attributes[.size]).map({ $0 <= fileLimit }) ?? true,
            let data = try? Data(contentsOf: URL(fileURLWithPath: path)), data.count <= fileLimit,
            let record = try? JSONDecoder().decode(UpdateRecord.self, from: data)
        else { return nil }
        return record.bounded
    }

    /// A size attribute as a number: `Int` or `UInt64` (FoundationEssentials), or an `NSNumber` bridged to `Int`.
    private static func size(_ value: Any?) -> Int? {
        if let value = value as? Int { return value }
        if let value = value as? UInt64 { return Int(clamping: value) }
        if let value = value as? Int64 { return Int(clamping: value) }
        return (value as? any BinaryInteger).map { Int(clamping: $0) }
    }

    /// Every text printable and bounded, every time finite, at most 8 held versions.
    public var bounded: UpdateRecord {
        let text = { (value: String?) in value.map { RemoteText.printable($0, limit: 200) } }
        let event = { (event: Event?) -> Event? in
            event.map {
                Event(
                    at: $0.at.isFinite ? min(max($0.at, 0), 1e11) : 0,
                    from: text($0.from),
                    to: text($0.to),
                    outcome: text($0.outcome),
                    reason: text($0.reason)
                )
            }
        }
        return UpdateRecord(
            installed: text(installed),
            lastUpdate: event(lastUpdate),
            lastRollback: event(lastRollback),
            held: held.map { $0.prefix(8).map { RemoteText.printable($0, limit: 200) } },
            rollbacks: rollbacks.map { min(max($0, 0), 1_000_000) },
            phase: text(phase)
        )
    }

    /// The lines `hark status` adds (`update:` ...), times shown in UTC.
    public func rendered() -> [String] {
        var lines = ["installed:   \(installed ?? "unknown")" + (phase.map { " (updater: \($0))" } ?? "")]
        if let last = lastUpdate {
            lines.append(
                "last update: \(Self.time(last.at)) \(last.from ?? "?") -> \(last.to ?? "?")"
                    + (last.outcome.map { ": \($0)" } ?? "") + (last.reason.map { " (\($0))" } ?? "")
            )
        }
        if let rollback = lastRollback {
            lines.append(
                "rollback:    \(Self.time(rollback.at)) from \(rollback.to ?? "?") to \(rollback.from ?? "?")"
                    + (rollback.reason.map { ": \($0)" } ?? "")
            )
        }
        if let held, !held.isEmpty { lines.append("held back:   \(held.joined(separator: ", "))") }
        return lines
    }

    /// `2026-11-29 02:41:07 UTC`.
    static func time(_ seconds: Double) -> String {
        let total = Int64(seconds.isFinite ? min(max(seconds, 0), 1e11) : 0)
        let days = total / 86_400
        let rest = total % 86_400
        // Civil from days (Howard Hinnant's algorithm).
        let z = days + 719_468
        let era = z / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        let two = { (value: Int64) in value < 10 ? "0\(value)" : "\(value)" }
        return "\(year)-\(two(month))-\(two(day)) \(two(rest / 3600)):\(two(rest / 60 % 60)):\(two(rest % 60)) UTC"
    }
}
