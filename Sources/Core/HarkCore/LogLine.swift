/// A line for the log, chosen by a pure decision and written by its owner.
public struct LogLine: Sendable, Hashable {
    /// How loud.
    public enum Level: Sendable, Hashable { case info, notice, warning, error }
    public var level: Level
    public var message: String

    public init(_ level: Level, _ message: String) {
        self.level = level
        self.message = message
    }
}
