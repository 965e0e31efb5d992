import HarkCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Keeps the ``TimerBook`` in a file of the state directory, written atomically (a temporary file, then a rename),
/// so a restart, a crash or a power cut loses no timer and no alarm. A file that cannot be read back is moved aside
/// (`NAME.damaged`) and the book starts empty, with one line saying so.
public struct TimerStore: Sendable {
    /// The file's format.
    private struct Stored: Codable {
        var version: Int
        var book: TimerBook
    }

    /// The file's format version.
    static let version = 1
    /// A larger file is damaged (32 timers and 32 alarms with the longest labels take about 25 KB).
    public static let sizeLimit = 256 * 1024

    /// Where the book lives (`/var/lib/hark/timers.json`).
    public var path: String

    public init(path: String) {
        self.path = path
    }

    /// What loading found: the book, and a line for the log when the file was damaged.
    public struct Loaded: Sendable {
        /// The stored book, or an empty one.
        public var book: TimerBook
        /// Why the stored file was set aside, when it was.
        public var problem: String?
    }

    /// The stored book with rings of `ringFor`; an empty one when there is no file, and when the file is damaged
    /// (it is moved to `PATH.damaged` and ``Loaded/problem`` says so).
    public func load(ringFor: Duration) -> Loaded {
        let empty = TimerBook(ringFor: ringFor)
        guard FileManager.default.fileExists(atPath: path) else { return Loaded(book: empty) }
        let problem: String
        do {
            let data = try Data(contentsOf: URL(filePath: path))
            if data.count > Self.sizeLimit {
                problem = "it is \(data.count) bytes, more than \(Self.sizeLimit)"
            } else {
                let stored = try JSONDecoder().decode(Stored.self, from: data)
                if stored.version != Self.version {
                    problem = "its format version is \(stored.version), not \(Self.version)"
                } else if let invalid = Self.invalid(stored.book) {
                    problem = invalid
                } else {
                    var book = stored.book
                    book.ringFor = empty.ringFor
                    book.normalize()
                    return Loaded(book: book)
                }
            }
        } catch {
            problem = "it cannot be read (\(FileFailure.reason(error)))"
        }
        let aside = path + ".damaged"
        try? FileManager.default.removeItem(atPath: aside)
        let moved = (try? FileManager.default.moveItem(atPath: path, toPath: aside)) != nil
        let line =
            "the timers and alarms in \(path) are lost: \(problem); "
            + (moved ? "the file was kept as \(aside)" : "the file could not be moved aside")
        return Loaded(book: empty, problem: RemoteText.printable(line, limit: 1000))
    }

    /// Saves `book` atomically; a failure is one line for a person.
    public func save(_ book: TimerBook) throws(SaveError) {
        do {
            let data = try JSONEncoder().encode(Stored(version: Self.version, book: book))
            try data.write(to: URL(filePath: path), options: .atomic)
        } catch {
            throw SaveError(path: path, reason: FileFailure.reason(error))
        }
    }

    /// The book could not be saved: where, and why in a few words.
    public struct SaveError: Error, CustomStringConvertible, Sendable, Hashable {
        /// The file.
        public var path: String
        /// Why.
        public var reason: String

        /// `cannot save the timers to PATH: REASON`.
        public var description: String {
            RemoteText.printable("cannot save the timers and alarms to \(path): \(reason)", limit: 1000)
        }
    }

    /// What is wrong with a decoded book that no ``TimerBook`` operation makes (a file edited or damaged), or nil.
    static func invalid(_ book: TimerBook) -> String? {
        if book.timers.count > TimerBook.limit || book.alarms.count > TimerBook.limit
            || book.ringing.count > 2 * TimerBook.limit
        {
            return "it holds more timers or alarms than a device keeps"
        }
        let labels = book.timers.map(\.label) + book.alarms.map(\.label) + book.ringing.map(\.label)
        if labels.contains(where: { $0.isEmpty || $0.count > TimerBook.labelLimit || RemoteText.printable($0) != $0 }) {
            return "a label is empty, too long or not printable"
        }
        let instants =
            book.timers.map(\.deadline) + book.alarms.map(\.next) + book.ringing.flatMap { [$0.since, $0.due] }
        if instants.contains(where: { !$0.isFinite || abs($0) > 1e11 }) { return "a time is out of range" }
        if book.timers.contains(where: { !TimerBook.durations.contains($0.seconds) }) {
            return "a timer's length is out of range"
        }
        if book.alarms.contains(where: { !(0...23).contains($0.hour) || !(0...59).contains($0.minute) }) {
            return "an alarm's time is out of range"
        }
        return nil
    }
}
