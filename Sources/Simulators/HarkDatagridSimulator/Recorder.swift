import HarkCore
import HarkDatagrid
import HarkSimulatorKit

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
public struct DatagridConnectionRecord: RecordedConnection, Hashable {
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
public struct DatagridSnapshot: RecorderSnapshot, Hashable {
    public var connections: [DatagridConnectionRecord] = []
    public var httpRequests: [DatagridHTTPRecord] = []

    public init() {}

    /// Answers completed or interrupted, over all connections.
    public var finishedTurns: Int {
        connections.reduce(0) { $0 + $1.turns.filter { $0.outcome != "pending" && $0.kind != "greeting" }.count }
    }

    public var audioSamples: Int64 { connections.reduce(0) { $0 + $1.audioSamples } }
}

/// Records what the Datagrid simulator receives and sends, per connection.
public typealias DatagridRecorder = ConnectionRecorder<DatagridSnapshot>

/// A wait on the Datagrid simulator's recorder that reached its deadline.
public typealias DatagridWaitTimeout = RecorderWaitTimeout<DatagridSnapshot>

extension Array where Element == String {
    /// Appends `kind`, collapsing consecutive audio into one entry.
    mutating func appendKind(_ kind: String) {
        if kind == "audio", last == "audio" { return }
        append(kind)
    }
}
