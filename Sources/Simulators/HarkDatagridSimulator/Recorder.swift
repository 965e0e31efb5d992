import HarkCore
import HarkDatagrid
import Synchronization

/// One user turn and its answer.
public struct DatagridTurnRecord: Sendable, Hashable {
    /// 1-based over the conversation (0 is the greeting).
    public var number: Int
    /// `speech`, `text` or `greeting`.
    public var kind: String
    public var speechSeconds: Double
    /// `pending`, `completed` or `interrupted`.
    public var outcome: String = "pending"
    public var answerChunks: Int = 0
}

/// How a connection ended.
public struct DatagridCloseRecord: Sendable, Hashable {
    public var code: Int?
    public var reason: String?
    /// `client`, `server`, `drop` or `network`.
    public var initiator: String
}

/// What one WebSocket connection received and sent.
public struct DatagridConnectionRecord: Sendable, Hashable {
    public var number: Int
    /// `handoff` (a minted token), `key` (the API key as token), `any` (no key required), `invalid`.
    public var credential: String
    /// True when the URL's query carried the API key itself.
    public var keyInURL: Bool
    /// The `start` payload as received.
    public var start: DatagridStart?
    /// The conversation this connection joined, and whether it continued an earlier one.
    public var conversationId: String?
    public var continued = false
    /// Types received in order, audio runs collapsed to one entry.
    public var receivedKinds: [String] = []
    public var audioSamples: Int64 = 0
    /// Audio that arrived before `ready` was sent.
    public var audioBeforeReady = 0
    public var interrupts = 0
    public var texts: [String] = []
    public var stops = 0
    public var invalidFrames = 0
    /// Types sent in order, audio runs collapsed to one entry.
    public var sentKinds: [String] = []
    public var audioChunksSent = 0
    public var errorsSent: [String] = []
    public var turns: [DatagridTurnRecord] = []
    public var faults: [String] = []
    public var close: DatagridCloseRecord?
}

/// One `POST /v1/voice` (or any other HTTP request).
public struct DatagridHTTPRecord: Sendable, Hashable {
    public var method: String
    public var path: String
    public var status: Int
    /// `bearer` (right key, or any when none is required), `wrong`, `missing`.
    public var authorization: String
    public var teamspace: String?
    /// True when the query string carried anything (it never should).
    public var hadQuery: Bool
    public var start: DatagridStart?
}

/// Everything recorded so far.
public struct DatagridSnapshot: Sendable, Hashable {
    public var connections: [DatagridConnectionRecord] = []
    public var httpRequests: [DatagridHTTPRecord] = []

    public func connection(_ number: Int) -> DatagridConnectionRecord? {
        connections.first { $0.number == number }
    }

    /// Answers completed or interrupted, over all connections.
    public var finishedTurns: Int {
        connections.reduce(0) { $0 + $1.turns.filter { $0.outcome != "pending" && $0.kind != "greeting" }.count }
    }

    public var audioSamples: Int64 { connections.reduce(0) { $0 + $1.audioSamples } }
}

/// Timed out waiting for a recorded condition.
public struct DatagridWaitTimeout: Error, Sendable, CustomStringConvertible {
    public var what: String
    public var snapshot: DatagridSnapshot
    public var description: String { "timed out waiting for \(what)" }
}

/// Records what the simulator receives and sends. Tests await conditions with a deadline (no sleeps).
public final class DatagridRecorder: Sendable {
    private let watched = WatchedState(DatagridSnapshot())

    public init() {}

    public func snapshot() -> DatagridSnapshot { watched.value }

    /// Waits until `condition` holds, or throws ``DatagridWaitTimeout`` after `timeout`.
    public func waitFor(
        _ what: String = "a condition",
        within timeout: Duration = .seconds(10),
        _ condition: @escaping @Sendable (DatagridSnapshot) -> Bool
    ) async throws -> DatagridSnapshot {
        let deadline = ContinuousClock.now + timeout
        do {
            return try await watched.wait(what, until: deadline, condition)
        } catch let timeout as WatchTimeout<DatagridSnapshot> {
            throw DatagridWaitTimeout(what: timeout.what, snapshot: timeout.value)
        }
    }

    /// Waits until `count` connections have been accepted.
    public func waitForConnections(_ count: Int, within timeout: Duration = .seconds(10)) async throws
        -> DatagridSnapshot
    {
        try await waitFor("\(count) connections", within: timeout) { $0.connections.count >= count }
    }

    /// Waits until `count` answers finished (completed or interrupted).
    public func waitForFinishedTurns(_ count: Int, within timeout: Duration = .seconds(10)) async throws
        -> DatagridSnapshot
    {
        try await waitFor("\(count) finished turns", within: timeout) { $0.finishedTurns >= count }
    }

    /// Waits until connection `number` has closed.
    public func waitForClose(connection number: Int, within timeout: Duration = .seconds(10)) async throws
        -> DatagridCloseRecord
    {
        let snapshot = try await waitFor("connection \(number) to close", within: timeout) {
            $0.connection(number)?.close != nil
        }
        return snapshot.connection(number)!.close!
    }

    /// Applies `change` and wakes the waiters whose condition now holds.
    func update(_ change: (inout DatagridSnapshot) -> Void) {
        watched.update(change)
    }

    func updateConnection(_ number: Int, _ change: (inout DatagridConnectionRecord) -> Void) {
        update { snapshot in
            if let index = snapshot.connections.firstIndex(where: { $0.number == number }) {
                change(&snapshot.connections[index])
            }
        }
    }
}

extension Array where Element == String {
    /// Appends `kind`, collapsing consecutive audio into one entry.
    mutating func appendKind(_ kind: String) {
        if kind == "audio", last == "audio" { return }
        append(kind)
    }
}
