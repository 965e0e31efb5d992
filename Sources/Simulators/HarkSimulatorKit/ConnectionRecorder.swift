import HarkCore

/// What a simulator's recorder holds: its WebSocket connections in accept order, and totals over them.
public protocol RecorderSnapshot: Sendable {
    /// One connection's record.
    associatedtype Connection: RecordedConnection

    /// Nothing recorded yet.
    init()
    /// WebSocket connections, in accept order.
    var connections: [Connection] { get set }
    /// Answers completed or interrupted, over all connections.
    var finishedTurns: Int { get }
    /// Input audio samples received over all connections.
    var audioSamples: Int64 { get }
}

/// Everything recorded about one WebSocket connection.
public protocol RecordedConnection: Sendable {
    /// How a connection ended.
    associatedtype Close: Sendable

    /// 1-based, in accept order.
    var number: Int { get }
    /// How it ended; nil while open.
    var close: Close? { get }
}

extension RecorderSnapshot {
    /// Connection `number` (1-based).
    public func connection(_ number: Int) -> Connection? {
        connections.first { $0.number == number }
    }
}

/// A wait on a recorder that reached its deadline.
public struct RecorderWaitTimeout<Snapshot: RecorderSnapshot>: Error, Sendable, CustomStringConvertible {
    /// What was awaited.
    public var what: String
    /// The snapshot at the deadline.
    public var snapshot: Snapshot
    public var description: String { "timed out waiting for \(what)" }
}

/// Records what a simulator receives and sends, per connection. Thread-safe; tests read it with
/// ``snapshot()`` or await a condition with a deadline (no sleeps).
public final class ConnectionRecorder<Snapshot: RecorderSnapshot>: Sendable {
    private let watched = WatchedState(Snapshot())

    public init() {}

    /// What has been recorded so far.
    public func snapshot() -> Snapshot {
        watched.value
    }

    /// Waits until `condition` holds for the recorded state, or throws ``RecorderWaitTimeout`` at `deadline`.
    public func waitFor(
        _ what: String = "a condition",
        until deadline: ContinuousClock.Instant,
        _ condition: @escaping @Sendable (Snapshot) -> Bool
    ) async throws -> Snapshot {
        do {
            return try await watched.wait(what, until: deadline, condition)
        } catch let timeout as WatchTimeout<Snapshot> {
            throw RecorderWaitTimeout(what: timeout.what, snapshot: timeout.value)
        }
    }

    /// Waits up to `timeout` for `condition`.
    public func waitFor(
        _ what: String = "a condition",
        within timeout: Duration = .seconds(10),
        _ condition: @escaping @Sendable (Snapshot) -> Bool
    ) async throws -> Snapshot {
        try await waitFor(what, until: .now + timeout, condition)
    }

    /// Waits until `count` connections have been accepted.
    public func waitForConnections(_ count: Int, within timeout: Duration = .seconds(10)) async throws -> Snapshot {
        try await waitFor("\(count) connections", within: timeout) { $0.connections.count >= count }
    }

    /// Waits until `count` answers have completed or been interrupted, over all connections.
    public func waitForFinishedTurns(_ count: Int, within timeout: Duration = .seconds(10)) async throws -> Snapshot {
        try await waitFor("\(count) finished turns", within: timeout) { $0.finishedTurns >= count }
    }

    /// Waits until `samples` input samples have been received over all connections.
    public func waitForAudio(samples: Int64, within timeout: Duration = .seconds(10)) async throws -> Snapshot {
        try await waitFor("\(samples) audio samples", within: timeout) { $0.audioSamples >= samples }
    }

    /// Waits until connection `number` has closed; returns how.
    public func waitForClose(
        connection number: Int,
        within timeout: Duration = .seconds(10)
    ) async throws -> Snapshot.Connection.Close {
        let snapshot = try await waitFor("connection \(number) to close", within: timeout) {
            $0.connection(number)?.close != nil
        }
        return snapshot.connection(number)!.close!
    }

    /// Applies `change` and wakes the waiters whose condition now holds.
    package func update(_ change: (inout Snapshot) -> Void) {
        watched.update(change)
    }

    /// Applies `change` to connection `number`.
    package func updateConnection(_ number: Int, _ change: (inout Snapshot.Connection) -> Void) {
        update { snapshot in
            // Connections are appended in number order, so the index is usually number - 1.
            let guess = number - 1
            if snapshot.connections.indices.contains(guess), snapshot.connections[guess].number == number {
                change(&snapshot.connections[guess])
            } else if let index = snapshot.connections.firstIndex(where: { $0.number == number }) {
                change(&snapshot.connections[index])
            }
        }
    }
}
