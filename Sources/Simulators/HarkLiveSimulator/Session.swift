import HarkBackendKit
import HarkCore
import HarkGemini
import HarkSimulatorKit

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What the owner of a connection learned from its upgrade request.
public struct LiveConnectionInfo: Sendable, Hashable {
    /// 1-based, in accept order (``SimulatorStore/nextConnectionNumber()``).
    public var number: Int
    /// The endpoint asked for.
    public var endpoint: LiveEndpoint
    /// The credentials presented.
    public var credentials: LiveCredentials

    public init(number: Int, endpoint: LiveEndpoint, credentials: LiveCredentials = LiveCredentials()) {
        self.number = number
        self.endpoint = endpoint
        self.credentials = credentials
    }
}

/// How the server's frames are shaped. Faults change it mid-connection.
public struct OutputStyle: Sendable, Hashable {
    /// Every message in a binary frame.
    public var binaryFrames: Bool = false
    /// `setupComplete` in a binary frame.
    public var binarySetupComplete: Bool = false
    /// Field names in snake_case.
    public var snakeCase: Bool = false
    /// Audio in URL-safe base64 without padding.
    public var base64URL: Bool = false
    /// Known messages carry an extra field the client does not know.
    public var unknownFields: Bool = false

    public init(binaryFrames: Bool = false, binarySetupComplete: Bool = false) {
        self.binaryFrames = binaryFrames
        self.binarySetupComplete = binarySetupComplete
    }
}

/// What the simulator did or decided, for the log and the recorder.
public enum SimulatorEvent: Sendable, Hashable {
    /// Setup accepted; `resumedFrom` is the handle when it resumed a session; `family` is how the model behaves.
    case setupAccepted(
        sessionID: Int,
        resumedFrom: String?,
        model: String,
        family: LiveModelFamily,
        manualActivity: Bool
    )
    /// The connection is being closed or dropped, and why.
    case closing(code: Int?, reason: String, why: String)
    /// The voice detector (or `activityStart`) opened a user turn.
    case speechStarted(atSeconds: Double)
    /// A user turn ended; its answer follows.
    case userTurnEnded(TurnRecord)
    /// The answer to turn `turn` was interrupted by the user after `audioSeconds` of its audio went out.
    case interrupted(turn: Int, audioSeconds: Double)
    /// The answer to turn `turn` called functions; `blocking` says, per call, whether the answer waits for it.
    case toolCallSent(turn: Int, ids: [String], names: [String], blocking: [Bool])
    /// A tool response arrived, one record per function response (`matched` is false when no call was waiting
    /// for its id: unknown, already answered or cancelled).
    case toolResponse([ToolResponseRecord])
    /// Calls still waiting for their responses were cancelled (`toolCallCancellation` went out).
    case toolCallsCancelled(ids: [String], why: String)
    /// 3.8: the result of a NON_BLOCKING call was dealt with per its scheduling (spoken, silent, or its turn
    /// interrupted).
    case toolResult(ToolResultRecord)
    /// An answer finished.
    case answerFinished(turn: Int, audioSeconds: Double)
    /// User turn `turn` got no answer: `turnComplete` with `turnCompleteReason: RESPONSE_REJECTED` (a fault).
    case answerRejected(turn: Int)
    /// 3.8 with `historyConfig`: a seeded `clientContent` turn was taken, without answering it;
    /// `beforeRealtimeInput` is false once any realtime input had arrived.
    case historySeeded(SeededTurn, beforeRealtimeInput: Bool)
    /// 3.8 with `historyConfig`: the seeding ended (`clientContent` with `turnComplete: true`).
    case historyComplete(turns: Int, beforeRealtimeInput: Bool)
    /// A resumable handle went out.
    case handleIssued(String)
    /// `goAway` went out.
    case goAwaySent(timeLeft: Duration)
    /// A fault fired.
    case faultFired(String)
    /// A client message carried fields the simulator does not know (logged once per connection).
    case unknownFields([String])
}

/// What the owner of the connection must do.
public enum SimulatorAction: Sendable, Hashable {
    /// Send this message (shaped by the current ``OutputStyle``).
    case send(ServerMessage)
    /// Send this text as one frame, verbatim.
    case sendRaw(String)
    /// Send this text `count` times, one frame each.
    case sendRepeated(String, count: Int)
    /// Send a close frame with this code and reason, then close.
    case close(code: Int, reason: String)
    /// Close the socket without a close frame.
    case drop
    /// Send nothing and answer no pings for this long (nil: for ever); what is produced meanwhile waits.
    case stall(Duration?)
    /// Delay every later outbound message by this much.
    case slowReplies(Duration)
    /// From now on send nothing but this text, one frame every this long (wall clock).
    case trickle(String, every: Duration)
    /// Shape later frames like this.
    case outputStyle(OutputStyle)
    /// Log and record this.
    case event(SimulatorEvent)
}

/// A client frame, decoded.
public enum DecodedClientFrame: Sendable, Hashable {
    /// A client message; `unknownFields` lists nested fields the decoder skipped.
    case message(ClientMessage, unknownFields: [String])
    /// Not a client message: invalid JSON, no known top-level field, or more than one top-level field.
    case invalid(String)
}

extension ClientMessage {
    /// The message's kind as the recorder names it: `setup`, `realtimeInput.audio`, `realtimeInput.activityStart`,
    /// `clientContent`, `toolResponse`, ...
    public var simulatorKind: String {
        switch self {
        case .setup: return "setup"
        case .clientContent: return "clientContent"
        case .toolResponse: return "toolResponse"
        case .contextUpdate: return "contextUpdate"
        case .realtimeInput(let input):
            if input.audio != nil { return "realtimeInput.audio" }
            if input.activityStart != nil { return "realtimeInput.activityStart" }
            if input.activityEnd != nil { return "realtimeInput.activityEnd" }
            if input.audioStreamEnd != nil { return "realtimeInput.audioStreamEnd" }
            if input.text != nil { return "realtimeInput.text" }
            if input.video != nil { return "realtimeInput.video" }
            if input.mediaChunks != nil { return "realtimeInput.mediaChunks" }
            return "realtimeInput"
        }
    }

    /// Input audio samples the message carries (16-bit, any rate).
    public var audioSampleCount: Int {
        guard case .realtimeInput(let input) = self else { return 0 }
        var bytes = input.audio?.data.data.count ?? 0
        for chunk in input.mediaChunks ?? [] where chunk.mimeType.hasPrefix("audio/") {
            bytes += chunk.data.data.count
        }
        return bytes / 2
    }
}

extension ServerMessage {
    /// The message's kind as the recorder names it: `setupComplete`, `serverContent.modelTurn`,
    /// `serverContent.turnComplete`, `toolCall`, `goAway`, `sessionResumptionUpdate`, ...
    public var simulatorKind: String {
        switch payload {
        case .setupComplete: return "setupComplete"
        case .toolCall: return "toolCall"
        case .toolCallCancellation: return "toolCallCancellation"
        case .goAway: return "goAway"
        case .sessionResumptionUpdate: return "sessionResumptionUpdate"
        case .voiceActivity: return "voiceActivity"
        case .none: return "usageMetadata"
        case .serverContent(let content):
            if content.modelTurn != nil { return "serverContent.modelTurn" }
            if content.interrupted == true { return "serverContent.interrupted" }
            if content.generationComplete == true { return "serverContent.generationComplete" }
            if content.turnComplete == true { return "serverContent.turnComplete" }
            if content.inputTranscription != nil { return "serverContent.inputTranscription" }
            if content.outputTranscription != nil { return "serverContent.outputTranscription" }
            if content.interimInputTranscription != nil { return "serverContent.interimInputTranscription" }
            return "serverContent"
        }
    }
}

/// The Live API's behaviour for one connection, as a value: events in (client messages, time), actions out
/// (messages to send, closes, faults). It performs no I/O; the owner (``LiveSimulator``'s channel handler, or a
/// test) performs the actions.
///
/// ## Time
/// The session clock starts at 0 when the connection opens and advances by the duration of the input audio
/// received (`samples / rate`), so a client that sends audio as fast as it can sees exactly what a real-time
/// client sees. When no audio has arrived for ``LiveSimulatorConfiguration/idleGrace`` of wall-clock time, the
/// wall clock drives the session clock instead (from the last audio on, less the grace), so a silent or
/// text-only client still gets its answers, its `goAway` and its close. Wall time is passed in as the time
/// since a shared epoch (``SimulatorStore/wallNow()``). The `goAway` goes out when the session clock reaches
/// the connection lifetime less the grace; the close follows `timeLeft` later on the wall clock, as at the
/// real service.
///
/// ## Answers
/// A user turn ends when the voice detector commits the end of speech (automatic activity detection),
/// at `activityEnd` (manual), at `audioStreamEnd` during speech, or with a text turn (`clientContent` with
/// `turnComplete`, or `realtimeInput.text`). Its answer starts ``LiveSimulatorConfiguration/responseLatency``
/// later (after the tool response, when a tool call is scripted for the turn), and its ``ModelAudio`` chunk
/// `i` goes out once the session clock reaches
/// `start + max(0, i × 125 ms − modelAudioLead) / modelAudioPace`.
///
/// ## Models
/// The setup's model name chooses the behaviour (``LiveModelFamily``): names starting with `gemini-3.8-live` get
/// 3.8's, every other name 2.5's (above). A model that was shut down is refused with 1008, as an unknown model.
/// 3.8 (``LiveModelRules``) refuses with 1007 a setup holding `thinkingConfig` (but `thinkingLevel` on
/// `gemini-3.8-live-extended-thinking`), `proactivity {proactiveAudio: false}` or `enableAffectiveDialog`; its
/// `setupComplete` carries a `sessionId`, and every `turnComplete` an `interactionStatus`. Function calls are
/// NON_BLOCKING unless declared `BLOCKING`: the model answers at once, its `turnComplete` says `IN_PROGRESS` while a
/// call runs, and the call's last response (`willContinue` not true) is heard per its `scheduling` — `WHEN_IDLE` in
/// a turn of its own once the model is idle, `INTERRUPT` at once (cutting off what it says), `SILENT` in no turn
/// (a bare `turnComplete` with `IDLE` ends the interaction). A barge-in cancels the calls still running
/// (`toolCallCancellation`); calls still running when the socket closes go on in the session that resumes it
/// (``SimulatorStore/HeldCall``). An answer never starts while the user speaks (polite barge-in). With `historyConfig`
/// the first `clientContent` turns are history, taken without an answer until one with `turnComplete: true`. While
/// the user speaks, `interimInputTranscription` and `voiceActivity` (with its `audioOffset`) go out.
public struct LiveSimulatorSession: Sendable {
    /// Where the session is in its life.
    public enum Phase: Sendable, Hashable {
        case awaitingSetup
        case active
        case closed
    }

    enum Input: Sendable, Hashable {
        case audio(speech: Duration, samples: Int64)
        case text(String)
        /// 3.8: the result of the NON_BLOCKING call `id`, spoken about in a turn of its own.
        case toolResult(id: String, name: String, response: JSONValue, scheduling: String)
    }

    /// 3.8: a NON_BLOCKING call sent and not yet finished (its last response has not arrived).
    struct PendingCall: Sendable, Hashable {
        var call: FunctionCall
        /// The user turn whose answer made the call.
        var turn: Int
        /// Responses with `willContinue: true` so far.
        var progress = 0
    }

    struct ModelTurn: Sendable {
        enum Stage: Sendable, Hashable {
            case thinking(until: Int64)
            case awaitingTools
            case speaking
        }

        var number: Int
        var input: Input
        var beeps: Int
        var stage: Stage
        var calls: [FunctionCall]
        /// The ids of the calls the answer waits for (every call on 2.5; the BLOCKING ones on 3.8).
        var awaited: [String] = []
        var responses: [FunctionResponse] = []
        var toolsDone: Bool
        /// The `toolCall` went out.
        var callsSent = false
        /// 3.8: the answer was ready while the user spoke, and waited (polite barge-in).
        var held = false
        var pieces: [(chunk: Int, text: String)] = []
        var nextPiece = 0
        var nextChunk = 0
        var speakStart: Int64 = 0

        var chunkCount: Int { beeps * 2 }
    }

    /// Default close reasons, as the service words them.
    public static func defaultReason(code: Int) -> String {
        switch code {
        case 1000: "The operation was cancelled."
        case 1007: "Request contains an invalid argument."
        case 1008: "The operation was aborted."
        case 1011: "Internal error encountered."
        default: "Simulated fault."
        }
    }

    static let invalidArgument = "Request contains an invalid argument."
    static let invalidKey = "API key not valid. Please pass a valid API key."
    static let invalidToken = "Auth token is invalid, expired or used up."
    static let invalidHandle =
        "Request contains an invalid argument: the session resumption handle is invalid or expired."
    static let internalError = "Internal error encountered."

    public let configuration: LiveSimulatorConfiguration
    public let connection: LiveConnectionInfo
    private let store: SimulatorStore

    /// Where the session is in its life.
    public private(set) var phase: Phase = .awaitingSetup
    /// The session served, once setup succeeded.
    public private(set) var sessionID: Int?
    /// User turns so far in the session (continues across resumptions).
    public private(set) var turnCount = 0
    /// How frames are currently shaped.
    public private(set) var style: OutputStyle
    /// The last resumable handle sent.
    public private(set) var lastHandle: String?

    private var clock: Int64 = 0
    private var clockAtLastAudio: Int64 = 0
    private var lastAudioWall: Int64
    private var lastWall: Int64
    private let openedWall: Int64
    private var audioReceived: Int64 = 0
    private var nanosRemainder: Int64 = 0

    private var inputRate = 16_000
    private var inputPosition: Int64 = 0
    private var vad: SimulatorVoiceDetector?
    private var vadEvents: [SimulatorVoiceDetector.Event] = []
    private var manualTurnSamples: Int64?

    private var manualActivity = false
    private var interrupts = true
    private var textModality = false
    private var inputTranscripts = false
    private var outputTranscripts = false
    private var resumptionEnabled = false
    /// `sessionResumption.transparent`: updates then carry `lastConsumedClientMessageIndex` (Google's
    /// SDK sends the option only outside the Developer API).
    private var transparentResumption = false
    private var model = ""
    /// How the model behaves (chosen by the setup's model name).
    public private(set) var family: LiveModelFamily = .gemini25
    private var live38: Bool { family == .gemini38 }
    /// 3.8: functions declared `behavior: BLOCKING` (every other one is NON_BLOCKING).
    private var blockingFunctions: Set<String> = []
    /// 3.8: NON_BLOCKING calls sent and not yet finished, oldest first.
    private var pendingCalls: [PendingCall] = []
    /// 3.8: results of NON_BLOCKING calls waiting to be spoken about (WHEN_IDLE: once the model is idle).
    private var resultTurns: [(number: Int, input: Input)] = []
    /// 3.8: a `turnComplete` with `IN_PROGRESS` went out and no `IDLE` since.
    private var interactionOpen = false
    /// Between the start of the user's speech (detector or `activityStart`) and its end.
    private var userSpeaking = false
    /// Where the current speech started (input samples), for interim transcripts.
    private var speechStart: Int64 = 0
    /// The speech length (input samples) at which the next interim transcript goes out.
    private var nextInterim: Int64 = 0
    /// The next user turn to end gets no answer (fault `reject`).
    private var rejectNextTurn = false
    /// User turns whose answers are rejected.
    private var rejectedTurns: Set<Int> = []
    /// 3.8 with `historyConfig`: `clientContent` turns are history until one with `turnComplete: true`.
    private var seeding = false
    private var seededTurns = 0
    /// Realtime input has arrived on this connection.
    private var realtimeInputSeen = false

    private var modelTurn: ModelTurn?
    private var queued: [(number: Int, input: Input)] = []
    private var pendingText = ""
    private var clientMessageIndex: Int64 = -1
    private var goAwayAt: Int64?
    /// Wall time of the setup (the start of a wall-clock lifetime).
    private var setupWall: Int64 = 0
    private var closeAt: Int64?
    /// Wall-clock time of the lifetime close, fixed when `goAway` goes out.
    private var closeAtWall: Int64?
    private var goAwaySent = false
    private var firedHere: Set<Int> = []
    private var reportedUnknownFields = false

    /// A session for a connection that opened at wall-clock time `wallNow`.
    public init(
        configuration: LiveSimulatorConfiguration,
        connection: LiveConnectionInfo,
        store: SimulatorStore,
        wallNow: Duration
    ) {
        self.configuration = configuration
        self.connection = connection
        self.store = store
        self.openedWall = wallNow.nanoseconds
        self.lastAudioWall = wallNow.nanoseconds
        self.lastWall = wallNow.nanoseconds
        self.style = OutputStyle(
            binaryFrames: configuration.binaryFrames,
            binarySetupComplete: configuration.binarySetupComplete
        )
    }

    /// The session clock: time since the connection opened, driven by input audio (see the type's docs).
    public var now: Duration { .nanoseconds(clock) }

    // MARK: Decoding

    /// Decodes a client frame with ``LiveCodec``: either casing, either base64 alphabet. A frame with an
    /// unknown top-level field (alone, or next to a known one) is invalid.
    public static func decode(_ bytes: Data) -> DecodedClientFrame {
        do {
            let (message, unknown) = try LiveCodec().decodeClient(bytes)
            if let topLevel = unknown.first(where: { !$0.contains(".") }) {
                return .invalid("unknown top-level field \"\(topLevel)\"")
            }
            return .message(message, unknownFields: unknown)
        } catch {
            return .invalid(describe(error))
        }
    }

    private static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.dataCorrupted(let context):
            return context.debugDescription
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context),
            DecodingError.keyNotFound(_, let context):
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            return "\(path): \(context.debugDescription)"
        default:
            return "not JSON"
        }
    }

    // MARK: Events in

    /// A data frame arrived (text or binary): decodes it and handles the message.
    public mutating func receivedFrame(_ bytes: Data, wallNow: Duration) -> [SimulatorAction] {
        received(Self.decode(bytes), wallNow: wallNow)
    }

    /// A decoded frame arrived (see ``decode(_:)``).
    public mutating func received(_ frame: DecodedClientFrame, wallNow: Duration) -> [SimulatorAction] {
        switch frame {
        case .message(let message, let unknown):
            guard !unknown.isEmpty, !reportedUnknownFields else { return received(message, wallNow: wallNow) }
            reportedUnknownFields = true
            return [.event(.unknownFields(unknown))] + received(message, wallNow: wallNow)
        case .invalid(let why):
            return receivedInvalid(why, wallNow: wallNow)
        }
    }

    /// A frame that is not a client message arrived: the service closes with 1007.
    public mutating func receivedInvalid(_ why: String, wallNow: Duration) -> [SimulatorAction] {
        guard phase != .closed else { return [] }
        lastWall = max(lastWall, wallNow.nanoseconds)
        var out: [SimulatorAction] = []
        closeInvalid("invalid message: \(why)", wall: wallNow, &out)
        return out
    }

    /// A client message arrived.
    public mutating func received(_ message: ClientMessage, wallNow: Duration) -> [SimulatorAction] {
        guard phase != .closed else { return [] }
        clientMessageIndex += 1
        var out: [SimulatorAction] = []
        let wall = wallNow.nanoseconds
        lastWall = max(lastWall, wall)
        switch (phase, message) {
        case (.awaitingSetup, .setup(let setup)):
            handleSetup(setup, wall: wallNow, &out)
        case (.awaitingSetup, _):
            closeInvalid("first message was not setup", wall: wallNow, &out)
        case (.active, .setup):
            closeInvalid("second setup message", wall: wallNow, &out)
        case (.active, .realtimeInput(let input)):
            handleRealtimeInput(input, wall: wall, &out)
        case (.active, .clientContent(let content)):
            handleClientContent(content, &out)
        case (.active, .toolResponse(let response)):
            handleToolResponse(response, &out)
        case (.active, .contextUpdate(let update)):
            // 3.8 takes new tools mid-session; older models refuse the message as an invalid argument.
            guard live38 else {
                closeInvalid("contextUpdate on a model that takes none", wall: wallNow, &out)
                return out
            }
            if let tools = update.tools { blockingFunctions = LiveModelRules.blockingFunctions(tools) }
        case (.closed, _):
            return []
        }
        advance(wall: wall, &out)
        return out
    }

    /// Time passed (call it every few milliseconds of wall-clock time): releases due audio, `goAway`,
    /// closes and wall-clock faults.
    public mutating func tick(wallNow: Duration) -> [SimulatorAction] {
        guard phase == .active else { return [] }
        lastWall = max(lastWall, wallNow.nanoseconds)
        var out: [SimulatorAction] = []
        advance(wall: wallNow.nanoseconds, &out)
        return out
    }

    /// The socket closed (or the client sent a close frame): the session may now be resumed elsewhere.
    public mutating func socketClosed(wallNow: Duration) {
        phase = .closed
        if let sessionID { store.detach(sessionID: sessionID, wall: wallNow, heldCalls: heldCalls) }
    }

    /// The NON_BLOCKING calls still running, for the session that resumes this one.
    private var heldCalls: [SimulatorStore.HeldCall] {
        pendingCalls.map { SimulatorStore.HeldCall(id: $0.call.id ?? "", name: $0.call.name, turn: $0.turn) }
    }

    // MARK: Setup

    private mutating func handleSetup(_ setup: Setup, wall: Duration, _ out: inout [SimulatorAction]) {
        let handle = setup.sessionResumption?.handle.flatMap { $0.isEmpty ? nil : $0 }
        if setup.model.isEmpty {
            closeInvalid("setup without a model", wall: wall, &out)
            return
        }
        if (setup.generationConfig?.responseModalities?.count ?? 0) > 1 {
            closeInvalid("more than one response modality", wall: wall, &out)
            return
        }
        // Authentication, checked after the setup message as the service does.
        let credentials = connection.credentials
        if connection.endpoint.constrained {
            guard let token = credentials.token else {
                close(code: 1008, reason: Self.invalidToken, why: "no ephemeral token", wall: wall, &out)
                return
            }
            let check = store.useToken(token.reveal(), newSession: handle == nil, wall: wall)
            guard check == .accepted else {
                close(code: 1008, reason: Self.invalidToken, why: "ephemeral token \(check)", wall: wall, &out)
                return
            }
        } else if let required = configuration.requiredKey {
            guard let key = credentials.apiKey, key.reveal() == required.reveal() else {
                let why = credentials.apiKey == nil ? "no API key" : "wrong API key"
                close(code: 1008, reason: Self.invalidKey, why: why, wall: wall, &out)
                return
            }
        }
        // The model: one that was shut down is answered as one the service does not know; a 3.8 model refuses
        // what it no longer takes.
        if LiveModelRules.shutDownModels.contains(LiveModelRules.bareName(setup.model)) {
            let reason = LiveModelRules.notFound(model: setup.model, version: connection.endpoint.version)
            close(
                code: 1008,
                reason: LiveModelRules.closeReason(reason),
                why: "model \(setup.model) was shut down",
                wall: wall,
                &out
            )
            return
        }
        if let field = LiveModelRules.rejectedField(setup) {
            close(
                code: 1007,
                reason: LiveModelRules.closeReason(LiveModelRules.invalidArgument(field: field)),
                why: "\(field) is rejected by \(setup.model)",
                wall: wall,
                &out
            )
            return
        }
        // Resumption.
        if let handle {
            if let code = configuration.scenario.refuseResumption {
                let reason = code == 1007 ? Self.invalidHandle : Self.defaultReason(code: code)
                close(code: code, reason: reason, why: "refusing resumption (scenario)", wall: wall, &out)
                return
            }
            switch store.resume(handle: handle, wall: wall) {
            case .resumed(let id, let turns):
                sessionID = id
                turnCount = turns
            case .unknown:
                close(code: 1007, reason: Self.invalidHandle, why: "unknown resumption handle", wall: wall, &out)
                return
            case .expired:
                close(code: 1007, reason: Self.invalidHandle, why: "expired resumption handle", wall: wall, &out)
                return
            case .busy:
                close(
                    code: 1011,
                    reason: Self.internalError,
                    why: "resumption while the session's old socket is still open",
                    wall: wall,
                    &out
                )
                return
            }
        } else {
            sessionID = store.newSession()
        }

        phase = .active
        model = setup.model
        family = LiveModelFamily(model: setup.model)
        if live38 {
            blockingFunctions = LiveModelRules.blockingFunctions(setup)
            seeding = setup.historyConfig?.initialHistoryInClientContent == true
        }
        if handle != nil, let sessionID {
            // The calls the session was running go on: their results are still heard.
            let held = store.takeHeldCalls(sessionID: sessionID)
            if live38 {
                pendingCalls = held.map {
                    PendingCall(call: FunctionCall(id: $0.id, name: $0.name, args: nil), turn: $0.turn)
                }
                interactionOpen = !pendingCalls.isEmpty
            }
        }
        let realtime = setup.realtimeInputConfig
        manualActivity = realtime?.isManualActivity ?? false
        interrupts = realtime?.activityHandling != .noInterruption
        vad = manualActivity ? nil : SimulatorVoiceDetector(parameters: .init(realtime?.automaticActivityDetection))
        textModality = setup.generationConfig?.responseModalities?.first == .text
        inputTranscripts = setup.inputAudioTranscription != nil
        outputTranscripts = setup.outputAudioTranscription != nil && !textModality
        resumptionEnabled = setup.sessionResumption != nil
        transparentResumption = setup.sessionResumption?.transparent == true
        setupWall = wall.nanoseconds
        if let lifetime = configuration.connectionLifetime {
            let end = configuration.scaled(lifetime)
            closeAt = end
            goAwayAt = max(0, end - configuration.scaled(configuration.goAwayGrace))
        }
        out.append(
            .event(
                .setupAccepted(
                    sessionID: sessionID ?? 0,
                    resumedFrom: handle,
                    model: setup.model,
                    family: family,
                    manualActivity: manualActivity
                )
            )
        )
        fireFaults(wall: wall.nanoseconds, &out) { $0 == .presetup }
        // 3.8 names the service's session (the same across resumptions).
        let complete = live38 ? SetupComplete(sessionId: "sim-session-\(sessionID ?? 0)") : SetupComplete()
        out.append(.send(ServerMessage(.setupComplete(complete))))
        fireFaults(wall: wall.nanoseconds, &out) { $0 == .setup }
    }

    // MARK: Input

    private mutating func handleRealtimeInput(_ input: RealtimeInput, wall: Int64, _ out: inout [SimulatorAction]) {
        var fields = 0
        if input.audio != nil { fields += 1 }
        if input.video != nil { fields += 1 }
        if input.text != nil { fields += 1 }
        if input.activityStart != nil { fields += 1 }
        if input.activityEnd != nil { fields += 1 }
        if input.audioStreamEnd != nil { fields += 1 }
        if input.mediaChunks != nil { fields += 1 }
        if fields > 1 {
            closeInvalid("realtimeInput with more than one field", wall: .nanoseconds(wall), &out)
            return
        }
        realtimeInputSeen = true
        if let audio = input.audio {
            handleAudio(audio, wall: wall, &out)
        }
        for chunk in input.mediaChunks ?? [] where chunk.mimeType.hasPrefix("audio/") {
            handleAudio(chunk, wall: wall, &out)
        }
        guard phase == .active else { return }
        if input.activityStart != nil {
            guard manualActivity else {
                closeInvalid("activityStart with automatic activity detection on", wall: .nanoseconds(wall), &out)
                return
            }
            if manualTurnSamples == nil {
                manualTurnSamples = 0
                out.append(.event(.speechStarted(atSeconds: Double(clock) / 1e9)))
                speechBegan(at: 0, detected: false, &out)
                userActivityStarted(&out)
            }
        }
        if input.activityEnd != nil {
            guard manualActivity else {
                closeInvalid("activityEnd with automatic activity detection on", wall: .nanoseconds(wall), &out)
                return
            }
            if let samples = manualTurnSamples {
                manualTurnSamples = nil
                userSpeaking = false
                let speech = Duration.nanoseconds(samples * 1_000_000_000 / Int64(inputRate))
                userTurnEnded(.audio(speech: speech, samples: samples), at: clock, &out)
            }
        }
        if input.audioStreamEnd == true, !manualActivity, var detector = vad {
            let event = detector.flush()
            vad = detector
            if case .speechEnded(let start, let end, let commit) = event {
                endAutomaticTurn(start: start, end: end, commit: commit, at: clock, &out)
            }
        }
        if let text = input.text {
            userActivityStarted(&out, typed: true)
            userTurnEnded(.text(text), at: clock, &out)
        }
    }

    private mutating func handleAudio(_ blob: Blob, wall: Int64, _ out: inout [SimulatorAction]) {
        let rate = blob.pcmRate ?? 16_000
        guard rate > 0 else { return }
        if rate != inputRate {
            inputRate = rate
            inputPosition = 0
            nanosRemainder = 0
            if !manualActivity {
                vad = SimulatorVoiceDetector(parameters: vad?.parameters ?? .init(nil), sampleRate: rate)
            }
        }
        let samples = Int64(blob.data.data.count / 2)
        let startClock = clock
        let startPosition = inputPosition
        let total = samples * 1_000_000_000 + nanosRemainder
        let advance = total / Int64(rate)
        nanosRemainder = total % Int64(rate)
        clock += advance
        audioReceived += advance
        inputPosition += samples
        clockAtLastAudio = clock
        lastAudioWall = wall
        if manualActivity {
            if let open = manualTurnSamples {
                manualTurnSamples = open + samples
                interimTranscript(spoken: open + samples, &out)
            }
            return
        }
        guard var detector = vad else { return }
        vadEvents.removeAll(keepingCapacity: true)
        blob.data.data.withUnsafeBytes { raw in
            detector.process(littleEndianBytes: raw, into: &vadEvents)
        }
        vad = detector
        let events = vadEvents
        for event in events where phase == .active {
            switch event {
            case .speechStarted(let start, let commit):
                let at = startClock + (commit - startPosition) * 1_000_000_000 / Int64(rate)
                out.append(.event(.speechStarted(atSeconds: Double(at) / 1e9)))
                speechBegan(at: start, detected: true, &out)
                userActivityStarted(&out)
            case .speechEnded(let start, let end, let commit):
                let at = startClock + (commit - startPosition) * 1_000_000_000 / Int64(rate)
                endAutomaticTurn(start: start, end: end, commit: commit, at: at, &out)
            }
        }
        if userSpeaking, phase == .active, detector.isSpeaking {
            interimTranscript(spoken: detector.lastSpeechEnd - speechStart, &out)
        }
    }

    /// The user started speaking at input sample `start`: 3.8 says so (`voiceActivity`, for the detector's
    /// speech only) and transcribes as the user goes on.
    private mutating func speechBegan(at start: Int64, detected: Bool, _ out: inout [SimulatorAction]) {
        userSpeaking = true
        speechStart = start
        nextInterim = max(Int64(inputRate) / 2, 1)
        if live38, detected { out.append(voiceActivity("ACTIVITY_START", at: start)) }
    }

    /// 3.8, with input transcription: every 500 ms of speech an `interimInputTranscription` with the whole guess so
    /// far (the final `inputTranscription` follows at the end of the turn).
    private mutating func interimTranscript(spoken: Int64, _ out: inout [SimulatorAction]) {
        guard live38, inputTranscripts, spoken >= nextInterim else { return }
        let step = max(Int64(inputRate) / 2, 1)
        nextInterim = (spoken / step + 1) * step
        let text = "heard \(Self.oneDecimal(Double(spoken) / Double(inputRate))) s"
        let content = ServerContent(interimInputTranscription: Transcription(text: text))
        out.append(.send(ServerMessage(.serverContent(content))))
    }

    /// `voiceActivity` of `type` at input sample `sample` (its `audioOffset` counts from the start of the input).
    private func voiceActivity(_ type: String, at sample: Int64) -> SimulatorAction {
        let offset = Duration.nanoseconds(sample * 1_000_000_000 / Int64(max(inputRate, 1)))
        return .send(ServerMessage(.voiceActivity(VoiceActivity(type: type, audioOffset: offset))))
    }

    private mutating func endAutomaticTurn(
        start: Int64,
        end: Int64,
        commit: Int64,
        at: Int64,
        _ out: inout [SimulatorAction]
    ) {
        userSpeaking = false
        if live38 { out.append(voiceActivity("ACTIVITY_END", at: end)) }
        let speech = Duration.nanoseconds((end - start) * 1_000_000_000 / Int64(inputRate))
        userTurnEnded(.audio(speech: speech, samples: commit - start), at: at, &out)
    }

    private mutating func handleClientContent(_ content: ClientContent, _ out: inout [SimulatorAction]) {
        if live38 {
            // Explicit roles: `user` or `model`.
            for (index, turn) in (content.turns ?? []).enumerated() {
                if let role = turn.role, role != "user", role != "model" {
                    close(
                        code: 1007,
                        reason: LiveModelRules.closeReason(
                            "Request contains an invalid argument: clientContent.turns[\(index)].role must be user or model."
                        ),
                        why: "clientContent turn with role \(role)",
                        wall: .nanoseconds(lastWall),
                        &out
                    )
                    return
                }
            }
        }
        if seeding {
            // History: taken in order, never answered, until the turn that completes it.
            for turn in content.turns ?? [] {
                let text = turn.parts.compactMap(\.text).joined(separator: " ")
                seededTurns += 1
                out.append(
                    .event(
                        .historySeeded(
                            SeededTurn(role: turn.role ?? "user", text: text),
                            beforeRealtimeInput: !realtimeInputSeen
                        )
                    )
                )
            }
            if content.turnComplete == true {
                seeding = false
                out.append(.event(.historyComplete(turns: seededTurns, beforeRealtimeInput: !realtimeInputSeen)))
            }
            return
        }
        let text = (content.turns ?? []).flatMap(\.parts).compactMap(\.text).joined(separator: " ")
        if !text.isEmpty {
            pendingText = pendingText.isEmpty ? text : pendingText + " " + text
        }
        guard content.turnComplete == true else { return }
        let turnText = pendingText
        pendingText = ""
        userActivityStarted(&out, typed: true)
        userTurnEnded(.text(turnText), at: clock, &out)
    }

    private mutating func handleToolResponse(_ response: ToolResponse, _ out: inout [SimulatorAction]) {
        if live38 {
            for (index, functionResponse) in response.functionResponses.enumerated() {
                if let scheduling = functionResponse.scheduling,
                    !LiveModelRules.schedulings.contains(scheduling.uppercased())
                {
                    close(
                        code: 1007,
                        reason: LiveModelRules.closeReason(
                            "Request contains an invalid argument: toolResponse.functionResponses[\(index)].scheduling."
                        ),
                        why: "tool response with scheduling \(scheduling)",
                        wall: .nanoseconds(lastWall),
                        &out
                    )
                    return
                }
            }
        }
        var records: [ToolResponseRecord] = []
        var finished: [(PendingCall, FunctionResponse)] = []
        var turn = modelTurn
        for functionResponse in response.functionResponses {
            var record = ToolResponseRecord(
                id: functionResponse.id,
                name: functionResponse.name,
                scheduling: functionResponse.scheduling,
                willContinue: functionResponse.willContinue,
                matched: false
            )
            if live38, let index = pendingCalls.firstIndex(where: { $0.call.id == functionResponse.id }) {
                // A NON_BLOCKING call: progress is recorded; the last response ends the call.
                record.matched = true
                if functionResponse.willContinue == true {
                    pendingCalls[index].progress += 1
                } else {
                    finished.append((pendingCalls.remove(at: index), functionResponse))
                }
            } else if var waiting = turn, waiting.stage == .awaitingTools,
                waiting.awaited.contains(functionResponse.id),
                !waiting.responses.contains(where: { $0.id == functionResponse.id }),
                !(live38 && functionResponse.willContinue == true)
            {
                waiting.responses.append(functionResponse)
                record.matched = true
                turn = waiting
            } else if live38, functionResponse.willContinue == true, turn?.awaited.contains(functionResponse.id) == true
            {
                record.matched = true  // progress of a BLOCKING call: the answer still waits for its last response
            }
            records.append(record)
        }
        out.append(.event(.toolResponse(records)))
        if var waiting = turn, waiting.stage == .awaitingTools, waiting.responses.count == waiting.awaited.count {
            waiting.toolsDone = true
            waiting.stage = .thinking(until: clock + configuration.responseLatency.nanoseconds)
            turn = waiting
        }
        modelTurn = turn
        for (pending, functionResponse) in finished {
            callFinished(pending, functionResponse, &out)
        }
    }

    /// 3.8: the last response to a NON_BLOCKING call arrived: its result is heard per its scheduling.
    private mutating func callFinished(
        _ pending: PendingCall,
        _ response: FunctionResponse,
        _ out: inout [SimulatorAction]
    ) {
        let id = pending.call.id ?? response.id
        var scheduling = (response.scheduling ?? "WHEN_IDLE").uppercased()
        if scheduling == "SCHEDULING_UNSPECIFIED" { scheduling = "WHEN_IDLE" }
        let input = Input.toolResult(
            id: id,
            name: pending.call.name,
            response: response.response,
            scheduling: scheduling
        )
        switch scheduling {
        case "SILENT":
            // Only added to what the model knows: no new turn; the interaction ends if nothing else runs.
            out.append(
                .event(
                    .toolResult(
                        ToolResultRecord(
                            id: id,
                            name: pending.call.name,
                            turn: pending.turn,
                            scheduling: scheduling,
                            outcome: "silent",
                            audioSeconds: 0
                        )
                    )
                )
            )
            endInteractionIfIdle(&out)
        case "INTERRUPT":
            // Spoken about at once: whatever the model is saying is cut off.
            resultTurns.insert((pending.turn, input), at: 0)
            if let turn = modelTurn {
                switch turn.stage {
                case .speaking:
                    modelTurn = nil
                    out.append(.send(ServerMessage(.serverContent(ServerContent(interrupted: true)))))
                    sendTurnComplete(usage: usage(for: turn), &out)
                    out.append(turnEndedEvent(turn, interrupted: true))
                    issueHandle(&out)
                case .thinking where !turn.callsSent:
                    // Not begun: it goes after the result.
                    modelTurn = nil
                    queued.insert((turn.number, turn.input), at: 0)
                default:
                    break  // waiting for a BLOCKING call: the result follows its answer
                }
            }
            startNext(at: clock - configuration.responseLatency.nanoseconds, &out)
        default:
            // WHEN_IDLE: once the model has finished what it is saying.
            resultTurns.append((pending.turn, input))
            startNext(at: clock, &out)
        }
    }

    // MARK: Turns

    /// The user started speaking (or typing): interrupts the answer in flight, unless `NO_INTERRUPTION`. On 3.8
    /// a barge-in cancels the NON_BLOCKING calls still running, and an answer that has not begun waits for the
    /// end of the speech instead (polite barge-in); typed text interrupts whatever is in flight.
    private mutating func userActivityStarted(_ out: inout [SimulatorAction], typed: Bool = false) {
        guard interrupts else { return }
        if live38, !pendingCalls.isEmpty {
            cancel(pendingCalls.compactMap(\.call.id), why: "barge-in", &out)
            pendingCalls.removeAll()
        }
        guard let turn = modelTurn else {
            endInteractionIfIdle(&out)
            return
        }
        if live38, !typed, case .thinking = turn.stage { return }
        modelTurn = nil
        if turn.stage == .awaitingTools {
            let ids = turn.calls.filter { blocks($0.name) }.compactMap(\.id)
            out.append(.send(ServerMessage(.toolCallCancellation(ToolCallCancellation(ids: ids)))))
            if live38 { out.append(.event(.toolCallsCancelled(ids: ids, why: "barge-in"))) }
        }
        out.append(.send(ServerMessage(.serverContent(ServerContent(interrupted: true)))))
        sendTurnComplete(usage: usage(for: turn), &out)
        out.append(turnEndedEvent(turn, interrupted: true))
        issueHandle(&out)
    }

    /// Sends `toolCallCancellation` for `ids` (the callers forget the calls: later responses to them match nothing
    /// and are ignored).
    private mutating func cancel(_ ids: [String], why: String, _ out: inout [SimulatorAction]) {
        guard !ids.isEmpty else { return }
        out.append(.send(ServerMessage(.toolCallCancellation(ToolCallCancellation(ids: ids)))))
        out.append(.event(.toolCallsCancelled(ids: ids, why: why)))
    }

    /// Whether the answer waits for a call of function `name`: always on 2.5; on 3.8 only when it was declared
    /// BLOCKING.
    private func blocks(_ name: String) -> Bool {
        !live38 || blockingFunctions.contains(name)
    }

    /// 3.8: `IN_PROGRESS` while more output is to come without new input (a NON_BLOCKING call runs, or a result
    /// waits to be spoken about), else `IDLE`. Nil on 2.5, which sends no status.
    private var interactionStatus: String? {
        guard live38 else { return nil }
        return pendingCalls.isEmpty && resultTurns.isEmpty ? "IDLE" : "IN_PROGRESS"
    }

    /// Sends `turnComplete` (with the interaction status on 3.8, and `reason` if any).
    private mutating func sendTurnComplete(
        reason: String? = nil,
        usage: UsageMetadata? = nil,
        _ out: inout [SimulatorAction]
    ) {
        let status = interactionStatus
        if let status { interactionOpen = status == "IN_PROGRESS" }
        let content = ServerContent(turnComplete: true, turnCompleteReason: reason, interactionStatus: status)
        out.append(.send(ServerMessage(.serverContent(content), usageMetadata: usage)))
    }

    /// 3.8: an interaction left `IN_PROGRESS` that has nothing more to come (its calls answered silently or
    /// cancelled) is ended by a `turnComplete` with `IDLE` and no content.
    private mutating func endInteractionIfIdle(_ out: inout [SimulatorAction]) {
        guard live38, interactionOpen, modelTurn == nil, pendingCalls.isEmpty, resultTurns.isEmpty else { return }
        sendTurnComplete(&out)
        issueHandle(&out)
    }

    /// The event for a model turn that ended: an answer to a user turn, or a result spoken about.
    private func turnEndedEvent(_ turn: ModelTurn, interrupted: Bool) -> SimulatorAction {
        let seconds = Double(turn.nextChunk) * 0.125
        if case .toolResult(let id, let name, _, let scheduling) = turn.input {
            return .event(
                .toolResult(
                    ToolResultRecord(
                        id: id,
                        name: name,
                        turn: turn.number,
                        scheduling: scheduling,
                        outcome: interrupted ? "interrupted" : "spoken",
                        audioSeconds: seconds
                    )
                )
            )
        }
        return .event(
            interrupted
                ? .interrupted(turn: turn.number, audioSeconds: seconds)
                : .answerFinished(turn: turn.number, audioSeconds: seconds)
        )
    }

    private mutating func userTurnEnded(_ input: Input, at: Int64, _ out: inout [SimulatorAction]) {
        turnCount += 1
        let number = turnCount
        let record: TurnRecord
        switch input {
        case .audio(let speech, let samples):
            let seconds = Double(speech.nanoseconds) / 1e9
            record = TurnRecord(
                number: number,
                kind: "audio",
                audioSamples: samples,
                speechSeconds: seconds,
                text: nil,
                toolCalls: configuration.scenario.toolCalls(forTurn: number).map(\.name),
                outcome: "pending",
                answerAudioSeconds: 0
            )
            if inputTranscripts {
                let text = "heard \(Self.oneDecimal(seconds)) s of speech"
                out.append(
                    .send(ServerMessage(.serverContent(ServerContent(inputTranscription: Transcription(text: text)))))
                )
            }
        case .text(let text):
            record = TurnRecord(
                number: number,
                kind: "text",
                audioSamples: 0,
                speechSeconds: 0,
                text: text,
                toolCalls: configuration.scenario.toolCalls(forTurn: number).map(\.name),
                outcome: "pending",
                answerAudioSeconds: 0
            )
        case .toolResult:
            return  // not the user's: never ends a user turn
        }
        out.append(.event(.userTurnEnded(record)))
        fireFaults(wall: lastWall, &out) { $0 == .turn(number) }
        guard phase == .active else { return }
        if rejectNextTurn {
            rejectNextTurn = false
            rejectedTurns.insert(number)
        }
        if modelTurn == nil {
            startAnswer(number: number, input: input, at: at, &out)
        } else {
            queued.append((number, input))
        }
    }

    /// Starts the answer to user turn `number` (or a result's turn), `responseLatency` after `at`. A rejected
    /// turn gets only a `turnComplete` saying so, and the next waiting turn starts.
    private mutating func startAnswer(number: Int, input: Input, at: Int64, _ out: inout [SimulatorAction]) {
        var isResult = false
        if case .toolResult = input { isResult = true }
        if !isResult, rejectedTurns.remove(number) != nil {
            sendTurnComplete(reason: "RESPONSE_REJECTED", &out)
            out.append(.event(.answerRejected(turn: number)))
            issueHandle(&out)
            startNext(at: at, &out)
            return
        }
        let beeps: Int
        var calls: [FunctionCall] = []
        switch input {
        case .audio(let speech, _): beeps = ModelAudio.beepCount(speech: speech)
        case .text: beeps = ModelAudio.textTurnBeeps
        case .toolResult: beeps = ModelAudio.textTurnBeeps
        }
        if !isResult {
            calls = configuration.scenario.toolCalls(forTurn: number).enumerated().map { index, call in
                FunctionCall(id: "call-\(sessionID ?? 0)-\(number)-\(index + 1)", name: call.name, args: call.args)
            }
        }
        let awaited = calls.filter { blocks($0.name) }.compactMap(\.id)
        var turn = ModelTurn(
            number: number,
            input: input,
            beeps: beeps,
            stage: .thinking(until: at + configuration.responseLatency.nanoseconds),
            calls: calls,
            toolsDone: awaited.isEmpty
        )
        turn.awaited = awaited
        modelTurn = turn
    }

    /// When the model is idle: the next result to speak about (3.8), else the next user turn waiting.
    private mutating func startNext(at: Int64, _ out: inout [SimulatorAction]) {
        guard modelTurn == nil, phase == .active else { return }
        if !resultTurns.isEmpty {
            let next = resultTurns.removeFirst()
            startAnswer(number: next.number, input: next.input, at: at, &out)
        } else if !queued.isEmpty {
            let next = queued.removeFirst()
            startAnswer(number: next.number, input: next.input, at: at, &out)
        }
    }

    private func transcript(for turn: ModelTurn) -> String {
        let base: String
        switch turn.input {
        case .audio: base = "answering turn \(turn.number)"
        case .text(let text): base = "answering: " + String(text.prefix(40))
        case .toolResult(_, let name, let response, _): return "tool \(name) said \(Self.json(response))"
        }
        guard !turn.responses.isEmpty else { return base }
        let tools = turn.responses.map { response in
            let name = turn.calls.first(where: { $0.id == response.id })?.name ?? response.name
            return "tool \(name) said \(Self.json(response.response))"
        }
        return base + "; " + tools.joined(separator: "; ")
    }

    /// Compact JSON with sorted keys.
    private static func json(_ value: JSONValue) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    private func usage(for turn: ModelTurn) -> UsageMetadata {
        let prompt: Int64
        let promptModality: String
        switch turn.input {
        case .audio(let speech, _):
            prompt = max(1, Int64((Double(speech.nanoseconds) / 1e9 * 32).rounded(.up)))
            promptModality = "AUDIO"
        case .text(let text):
            prompt = max(1, Int64(text.utf8.count / 4))
            promptModality = "TEXT"
        case .toolResult(_, _, let response, _):
            prompt = max(1, Int64(Self.json(response).utf8.count / 4))
            promptModality = "TEXT"
        }
        let response = Int64(turn.nextChunk * 4)
        var usage = UsageMetadata(
            promptTokenCount: prompt,
            responseTokenCount: response,
            totalTokenCount: prompt + response
        )
        usage.promptTokensDetails = [ModalityTokenCount(modality: promptModality, tokenCount: prompt)]
        usage.responseTokensDetails = [
            ModalityTokenCount(modality: textModality ? "TEXT" : "AUDIO", tokenCount: response)
        ]
        return usage
    }

    private mutating func issueHandle(_ out: inout [SimulatorAction]) {
        guard resumptionEnabled, let sessionID else { return }
        let handle = store.issueHandle(sessionID: sessionID, turnCount: turnCount, wall: .nanoseconds(lastWall))
        lastHandle = handle
        out.append(
            .send(
                ServerMessage(
                    .sessionResumptionUpdate(
                        SessionResumptionUpdate(
                            newHandle: handle,
                            resumable: true,
                            lastConsumedClientMessageIndex: transparentResumption ? clientMessageIndex : nil
                        )
                    )
                )
            )
        )
        out.append(.event(.handleIssued(handle)))
    }

    // MARK: Time

    private mutating func advance(wall: Int64, _ out: inout [SimulatorAction]) {
        guard phase == .active else { return }
        let idle = wall - lastAudioWall - configuration.idleGrace.nanoseconds
        if idle > 0 { clock = max(clock, clockAtLastAudio + idle) }

        advanceAnswer(wall: wall, &out)
        guard phase == .active else { return }

        let lifetimeClock = configuration.lifetimeOnWallClock ? wall - setupWall : clock
        if let goAwayAt, !goAwaySent, lifetimeClock >= goAwayAt, let closeAt {
            goAwaySent = true
            let left = Duration.nanoseconds(max(0, closeAt - lifetimeClock))
            out.append(.send(ServerMessage(.goAway(GoAway(timeLeft: left)))))
            out.append(.event(.goAwaySent(timeLeft: left)))
            // `timeLeft` is wall-clock time, as at the real service: a client that sends faster than real
            // time cannot make it run out sooner, and whatever it sent before it heard the goAway is read.
            closeAtWall = wall + left.nanoseconds
        }
        if let closeAtWall, wall >= closeAtWall {
            close(
                code: 1000,
                reason: Self.defaultReason(code: 1000),
                why: "connection lifetime reached",
                wall: .nanoseconds(wall),
                &out
            )
            return
        }
        if !configuration.scenario.faults.isEmpty {
            let audio = audioReceived
            let sinceOpen = wall - openedWall
            fireFaults(wall: wall, &out) { trigger in
                switch trigger {
                case .audio(let threshold): audio >= threshold.nanoseconds
                case .wall(let threshold): sinceOpen >= threshold.nanoseconds
                default: false
                }
            }
        }
    }

    private mutating func advanceAnswer(wall: Int64, _ out: inout [SimulatorAction]) {
        while phase == .active, var turn = modelTurn {
            switch turn.stage {
            case .thinking(let until):
                guard clock >= until else { return }
                if live38, userSpeaking {
                    // Polite barge-in: the model does not talk over the user; it answers when the speech ends.
                    if !turn.held {
                        turn.held = true
                        modelTurn = turn
                    }
                    return
                }
                if !turn.callsSent, !turn.calls.isEmpty {
                    turn.callsSent = true
                    out.append(.send(ServerMessage(.toolCall(ToolCall(functionCalls: turn.calls)))))
                    out.append(
                        .event(
                            .toolCallSent(
                                turn: turn.number,
                                ids: turn.calls.compactMap(\.id),
                                names: turn.calls.map(\.name),
                                blocking: turn.calls.map { blocks($0.name) }
                            )
                        )
                    )
                    // NON_BLOCKING calls run while the model goes on with its answer.
                    for call in turn.calls where !blocks(call.name) {
                        pendingCalls.append(PendingCall(call: call, turn: turn.number))
                    }
                    if !turn.toolsDone {
                        turn.stage = .awaitingTools
                        modelTurn = turn
                        return
                    }
                }
                turn.stage = .speaking
                // A held answer starts when it may, not in the past.
                turn.speakStart = turn.held ? max(until, clock) : until
                let words = transcript(for: turn).split(separator: " ", omittingEmptySubsequences: false)
                turn.pieces = words.enumerated().map { index, word in
                    (chunk: index * turn.chunkCount / max(words.count, 1), text: (index == 0 ? "" : " ") + word)
                }
                modelTurn = turn
            case .awaitingTools:
                return
            case .speaking:
                guard turn.nextChunk < turn.chunkCount else {
                    finishAnswer(turn, &out)
                    continue
                }
                guard clock >= releaseTime(of: turn.nextChunk, start: turn.speakStart) else { return }
                let index = turn.nextChunk
                turn.nextChunk += 1
                if !textModality {
                    let blob = Blob(
                        mimeType: ModelAudio.mimeType,
                        data: ModelAudio.chunk(turn: turn.number, index: index)
                    )
                    let content = ServerContent(modelTurn: Content(parts: [Part(inlineData: blob)]))
                    out.append(.send(ServerMessage(.serverContent(content))))
                }
                if index == 0, resumptionEnabled {
                    out.append(
                        .send(
                            ServerMessage(
                                .sessionResumptionUpdate(SessionResumptionUpdate(newHandle: nil, resumable: false))
                            )
                        )
                    )
                }
                while turn.nextPiece < turn.pieces.count, turn.pieces[turn.nextPiece].chunk <= index {
                    let text = turn.pieces[turn.nextPiece].text
                    turn.nextPiece += 1
                    if textModality {
                        let content = ServerContent(modelTurn: Content(parts: [Part(text: text)]))
                        out.append(.send(ServerMessage(.serverContent(content))))
                    } else if outputTranscripts {
                        let content = ServerContent(outputTranscription: Transcription(text: text))
                        out.append(.send(ServerMessage(.serverContent(content))))
                    }
                }
                modelTurn = turn
                if index == 0 {
                    let number = turn.number
                    fireFaults(wall: wall, &out) { $0 == .answer(number) }
                }
            }
        }
    }

    private func releaseTime(of chunk: Int, start: Int64) -> Int64 {
        let offset = Int64(chunk) * ModelAudio.chunkDuration.nanoseconds - configuration.modelAudioLead.nanoseconds
        guard offset > 0 else { return start }
        return start + Int64(Double(offset) / max(configuration.modelAudioPace, 0.001))
    }

    private mutating func finishAnswer(_ turn: ModelTurn, _ out: inout [SimulatorAction]) {
        modelTurn = nil
        out.append(.send(ServerMessage(.serverContent(ServerContent(generationComplete: true)))))
        sendTurnComplete(usage: usage(for: turn), &out)
        out.append(turnEndedEvent(turn, interrupted: false))
        issueHandle(&out)
        startNext(at: clock, &out)
    }

    // MARK: Faults and closing

    private mutating func fireFaults(
        wall: Int64,
        _ out: inout [SimulatorAction],
        matching: (SimulatorFault.Trigger) -> Bool
    ) {
        let faults = configuration.scenario.faults
        for index in faults.indices where phase == .active && !firedHere.contains(index) {
            let fault = faults[index]
            guard matching(fault.trigger) else { continue }
            guard fault.connection == nil || fault.connection == connection.number else { continue }
            firedHere.insert(index)
            if !fault.repeats, !store.claimFault(index) { continue }
            out.append(.event(.faultFired(fault.description)))
            perform(fault.action, description: fault.description, wall: wall, &out)
        }
    }

    private mutating func perform(
        _ action: SimulatorFault.Action,
        description: String,
        wall: Int64,
        _ out: inout [SimulatorAction]
    ) {
        switch action {
        case .close(let code, let reason):
            close(
                code: code == 1006 ? nil : code,
                reason: reason ?? Self.defaultReason(code: code),
                why: "fault \(description)",
                wall: .nanoseconds(wall),
                &out
            )
        case .drop:
            close(code: nil, reason: "", why: "fault \(description)", wall: .nanoseconds(wall), &out)
        case .stall(let duration):
            out.append(.stall(duration.map { .nanoseconds(configuration.scaled($0)) }))
        case .malformedJSON:
            out.append(.sendRaw(#"{"serverContent": {"modelTurn": nope}}"#))
        case .truncatedJSON:
            let blob = Blob(mimeType: ModelAudio.mimeType, data: ModelAudio.chunk(turn: 1, index: 0))
            let message = ServerMessage(
                .serverContent(ServerContent(modelTurn: Content(parts: [Part(inlineData: blob)])))
            )
            let text = (try? LiveCodec().encode(message)) ?? #"{"serverContent":{"turnComplete":true}}"#
            out.append(.sendRaw(String(text.utf8.prefix(text.utf8.count * 3 / 5)) ?? "{"))
        case .oversizedFrame(let bytes):
            let head =
                #"{"serverContent":{"modelTurn":{"parts":[{"inlineData":{"mimeType":"audio/pcm;rate=24000","data":""#
            let tail = #""}}]}}}"#
            let payload = max(4, (bytes - head.utf8.count - tail.utf8.count) / 4 * 4)
            out.append(.sendRaw(head + String(repeating: "A", count: payload) + tail))
        case .flood(let count):
            out.append(.sendRepeated(#"{"usageMetadata":{"totalTokenCount":0}}"#, count: count))
        case .slowReplies(let delay):
            out.append(.slowReplies(delay))
        case .unknownMessage:
            out.append(.sendRaw(#"{"someFutureMessage":{}}"#))
        case .unknownFields:
            style.unknownFields = true
            out.append(.outputStyle(style))
        case .snakeCase:
            style.snakeCase = true
            out.append(.outputStyle(style))
        case .base64URL:
            style.base64URL = true
            out.append(.outputStyle(style))
        case .reject:
            rejectNextTurn = true
        case .cancelTools:
            cancelWaitingCalls(why: "fault \(description)", &out)
        case .goAway(let timeLeft):
            out.append(.sendRaw(#"{"goAway":{"timeLeft":"\#(timeLeft)"}}"#))
        case .keepAlive(let every):
            out.append(.trickle(#"{"usageMetadata":{"totalTokenCount":0}}"#, every: every))
        }
    }

    /// Cancels every call waiting for its response: the NON_BLOCKING ones running (3.8), and those the answer in
    /// flight waits for, which then goes on without them.
    private mutating func cancelWaitingCalls(why: String, _ out: inout [SimulatorAction]) {
        var ids = pendingCalls.compactMap(\.call.id)
        pendingCalls.removeAll()
        if var turn = modelTurn, turn.stage == .awaitingTools {
            let answered = Set(turn.responses.map(\.id))
            ids += turn.awaited.filter { !answered.contains($0) }
            turn.awaited = turn.awaited.filter { answered.contains($0) }
            turn.toolsDone = true
            turn.stage = .thinking(until: clock + configuration.responseLatency.nanoseconds)
            modelTurn = turn
        }
        cancel(ids, why: why, &out)
        endInteractionIfIdle(&out)
    }

    /// Closes with 1007 and the service's "invalid argument" reason; `why` goes to the log.
    private mutating func closeInvalid(_ why: String, wall: Duration, _ out: inout [SimulatorAction]) {
        close(code: 1007, reason: Self.invalidArgument, why: why, wall: wall, &out)
    }

    /// Closes with `code` and `reason` (nil code: drop the TCP connection without a close frame).
    private mutating func close(
        code: Int?,
        reason: String,
        why: String,
        wall: Duration,
        _ out: inout [SimulatorAction]
    ) {
        guard phase != .closed else { return }
        phase = .closed
        modelTurn = nil
        out.append(.event(.closing(code: code, reason: reason, why: why)))
        if let code {
            out.append(.close(code: code, reason: reason))
        } else {
            out.append(.drop)
        }
        if let sessionID { store.detach(sessionID: sessionID, wall: wall, heldCalls: heldCalls) }
    }

    static func oneDecimal(_ value: Double) -> String {
        let tenths = Int((value * 10).rounded())
        return "\(tenths / 10).\(tenths % 10)"
    }
}
