import HarkBackendKit
import HarkCore
import HarkGemini
import HarkSimulatorKit

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A run of equal consecutive message kinds (`realtimeInput.audio` × 250).
public struct KindRun: Sendable, Hashable, Codable {
    public var kind: String
    public var count: Int
}

/// One user turn and its answer, as the simulator saw them.
public struct TurnRecord: Sendable, Hashable, Codable {
    /// The turn's number in its session (numbering continues across resumptions).
    public var number: Int
    /// `audio` or `text`.
    public var kind: String
    /// Input samples from the start of the user's speech (or `activityStart`) to the end of the turn.
    public var audioSamples: Int64
    /// Speech duration, seconds (0 for text turns).
    public var speechSeconds: Double
    /// The text of a text turn.
    public var text: String?
    /// Names of the functions the answer called.
    public var toolCalls: [String]
    /// `pending`, `completed`, `interrupted` or `rejected` (no answer: `RESPONSE_REJECTED`).
    public var outcome: String
    /// Seconds of answer audio sent.
    public var answerAudioSeconds: Double
}

/// A turn of history a 3.8 session was seeded with (`historyConfig`), as it arrived.
public struct SeededTurn: Sendable, Hashable, Codable {
    /// `user` or `model` (a turn without a role counts as `user`).
    public var role: String
    /// Its text parts, joined by spaces.
    public var text: String

    public init(role: String, text: String) {
        self.role = role
        self.text = text
    }
}

/// One function response as it arrived.
public struct ToolResponseRecord: Sendable, Hashable, Codable {
    public var id: String
    public var name: String?
    /// `SILENT`, `WHEN_IDLE`, `INTERRUPT` (3.8), as sent.
    public var scheduling: String?
    /// True on a progress report (more responses for the call follow).
    public var willContinue: Bool?
    /// False when no call was waiting for this id (unknown, already answered, or cancelled): ignored.
    public var matched: Bool

    public init(id: String, name: String?, scheduling: String?, willContinue: Bool?, matched: Bool) {
        self.id = id
        self.name = name
        self.scheduling = scheduling
        self.willContinue = willContinue
        self.matched = matched
    }
}

/// 3.8: what became of the result of a NON_BLOCKING call.
public struct ToolResultRecord: Sendable, Hashable, Codable {
    /// The call's id and function.
    public var id: String
    public var name: String
    /// The user turn whose answer made the call.
    public var turn: Int
    /// `SILENT`, `WHEN_IDLE` or `INTERRUPT`.
    public var scheduling: String
    /// `silent` (no turn), `spoken` (a model turn about it, finished) or `interrupted` (that turn was cut off).
    public var outcome: String
    /// Seconds of audio of the turn about it.
    public var audioSeconds: Double
}

/// One `turnComplete` sent.
public struct TurnCompleteRecord: Sendable, Hashable, Codable {
    /// `IDLE` or `IN_PROGRESS` (3.8); nil when none was sent (2.5).
    public var interactionStatus: String?
    /// `RESPONSE_REJECTED` and the like; nil for a normal end.
    public var reason: String?
    /// True when it carried no other content (no answer before it in its turn: a rejection, the end of an
    /// interaction whose results were silent or cancelled).
    public var bare: Bool
}

/// How a connection ended.
public struct CloseRecord: Sendable, Hashable, Codable {
    /// The close code, if a close frame carried one.
    public var code: Int?
    public var reason: String?
    /// `server` (the simulator sent a close frame), `client`, `drop` (the simulator dropped TCP),
    /// or `network` (the socket went away without a close frame from either side).
    public var initiator: String
}

/// Everything recorded about one WebSocket connection.
public struct ConnectionRecord: RecordedConnection, Hashable, Codable {
    /// 1-based, in accept order.
    public var number: Int
    /// The request path (without its query, which may hold a credential).
    public var path: String
    /// `v1`, `v1beta` or `v1alpha`.
    public var apiVersion: String
    /// True on `BidiGenerateContentConstrained`.
    public var constrained: Bool
    /// How the client authenticated: `api key (header)`, `api key (query)`, `token (header)`, `token (query)`
    /// or `none`. Never the value.
    public var credential: String
    /// Data frames received.
    public var frames: Int = 0
    public var textFrames: Int = 0
    public var binaryFrames: Int = 0
    /// Frames that were not a valid client message.
    public var invalidFrames: Int = 0
    /// Kinds of the messages received, in order, run-length encoded.
    public var receivedKinds: [KindRun] = []
    /// Input audio samples received.
    public var audioSamples: Int64 = 0
    /// The first input audio received (16-bit samples as sent, at most ``firstAudioLimit``): what the client
    /// sent first, for tests of where its audio begins.
    public var firstAudio: [Int16] = []
    /// The most of ``firstAudio`` kept.
    public static let firstAudioLimit = 32_000
    /// Input audio received, seconds.
    public var audioSeconds: Double = 0
    /// The setup message.
    public var setup: Setup?
    /// The setup's `inputAudioTranscription.languageCodes` (languages the user speaks).
    public var transcriptionLanguages: [String]?
    /// The setup's `inputAudioTranscription.customVocabulary` (words the transcripts should expect).
    public var customVocabulary: [String]?
    /// How the model behaves (`2.5` or `3.8`, chosen by the setup's model name), once setup succeeded.
    public var family: LiveModelFamily?
    /// The handle the setup asked to resume, if any.
    public var resumptionHandle: String?
    /// The session served, once setup succeeded.
    public var sessionID: Int?
    /// True when the setup resumed a session.
    public var resumed: Bool = false
    /// The last resumable handle sent.
    public var lastHandleIssued: String?
    /// ``audioSamples`` when the last resumable handle was sent: what came after it is not part of the
    /// state a resume restores, so a client sends it again.
    public var audioSamplesAtLastHandle: Int64 = 0
    /// User turns and answers.
    public var turns: [TurnRecord] = []
    /// Tool response ids received, in order.
    public var toolResponseIDs: [String] = []
    /// Function responses received, in order, with their scheduling and whether a call was waiting for them.
    public var toolResponses: [ToolResponseRecord] = []
    /// Ids of the calls cancelled (`toolCallCancellation` sent), in order.
    public var cancelledToolCalls: [String] = []
    /// The function names each `contextUpdate` with `tools` declared, in order.
    public var contextUpdates: [[String]] = []
    /// 3.8: what became of the results of NON_BLOCKING calls, in order.
    public var toolResults: [ToolResultRecord] = []
    /// Every `turnComplete` sent, in order, with its interaction status and reason.
    public var turnCompletes: [TurnCompleteRecord] = []
    /// 3.8 with `historyConfig`: the seeded turns, in order.
    public var seededTurns: [SeededTurn] = []
    /// 3.8 with `historyConfig`: true once the seeding ended (`clientContent` with `turnComplete: true`).
    public var historyComplete: Bool = false
    /// 3.8 with `historyConfig`: true while every seeded turn, and the end of the seeding, came before any realtime
    /// input; nil when nothing was seeded.
    public var seededBeforeRealtimeInput: Bool?
    /// Kinds of the messages sent, in order, run-length encoded.
    public var sentKinds: [KindRun] = []
    /// Faults fired, as their specs.
    public var faults: [String] = []
    /// How it ended; nil while open.
    public var close: CloseRecord?

    /// Kinds of the messages received, in order (`setup`, `realtimeInput.audio`, `clientContent`, ...).
    public var messageKinds: [String] { KindRun.expand(receivedKinds) }
    /// Kinds of the messages sent, in order (`setupComplete`, `serverContent.modelTurn`, ...).
    public var sentMessageKinds: [String] { KindRun.expand(sentKinds) }
    /// True while the socket is open.
    public var isOpen: Bool { close == nil }
}

extension KindRun {
    static func expand(_ runs: [KindRun]) -> [String] {
        runs.flatMap { repeatElement($0.kind, count: $0.count) }
    }

    static func append(_ kind: String, to runs: inout [KindRun]) {
        if let last = runs.indices.last, runs[last].kind == kind {
            runs[last].count += 1
        } else {
            runs.append(KindRun(kind: kind, count: 1))
        }
    }
}

/// One HTTP request the simulator answered without upgrading.
public struct HTTPRequestRecord: Sendable, Hashable, Codable {
    public var method: String
    public var path: String
    public var status: Int
}

/// What the simulator has seen so far.
public struct SimulatorSnapshot: RecorderSnapshot, Hashable, Codable {
    /// WebSocket connections, in accept order.
    public var connections: [ConnectionRecord] = []
    /// Plain HTTP requests (token minting, 404s).
    public var httpRequests: [HTTPRequestRecord] = []
    /// Ephemeral tokens minted.
    public var tokensMinted: Int = 0

    public init() {}

    /// Answers completed or interrupted, over all connections.
    public var finishedTurns: Int {
        connections.reduce(0) { $0 + $1.turns.filter { $0.outcome != "pending" }.count }
    }

    /// Input audio samples received over all connections.
    public var audioSamples: Int64 {
        connections.reduce(0) { $0 + $1.audioSamples }
    }

    /// Input samples received counting once what a client sent again: for every connection but the
    /// last, what came after its last handle is subtracted (the next connection carries it again).
    public var distinctAudioSamples: Int64 {
        audioSamples - connections.dropLast().reduce(0) { $0 + $1.audioSamples - $1.audioSamplesAtLastHandle }
    }
}

/// Records what the Live simulator receives and sends, per connection.
public typealias SimulatorRecorder = ConnectionRecorder<SimulatorSnapshot>

/// A wait on the Live simulator's recorder that reached its deadline.
public typealias SimulatorWaitTimeout = RecorderWaitTimeout<SimulatorSnapshot>
