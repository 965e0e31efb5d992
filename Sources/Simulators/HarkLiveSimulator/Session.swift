import HarkCore
import HarkGemini

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
    /// Setup accepted; `resumedFrom` is the handle when it resumed a session.
    case setupAccepted(sessionID: Int, resumedFrom: String?, model: String, manualActivity: Bool)
    /// The connection is being closed or dropped, and why.
    case closing(code: Int?, reason: String, why: String)
    /// The voice detector (or `activityStart`) opened a user turn.
    case speechStarted(atSeconds: Double)
    /// A user turn ended; its answer follows.
    case userTurnEnded(TurnRecord)
    /// The answer to turn `turn` was interrupted by the user after `audioSeconds` of its audio went out.
    case interrupted(turn: Int, audioSeconds: Double)
    /// The answer to turn `turn` called functions.
    case toolCallSent(turn: Int, ids: [String], names: [String])
    /// A tool response arrived; `matched` is false when no call was waiting for these ids.
    case toolResponse(ids: [String], matched: Bool)
    /// An answer finished.
    case answerFinished(turn: Int, audioSeconds: Double)
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
        var responses: [FunctionResponse] = []
        var toolsDone: Bool
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

    /// True while an answer is being prepared or sent (from the end of the user turn to its `turnComplete`).
    public var isAnswering: Bool { modelTurn != nil }

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
        close(code: 1007, reason: Self.invalidArgument, why: "invalid message: \(why)", wall: wallNow, &out)
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
            close(code: 1007, reason: Self.invalidArgument, why: "first message was not setup", wall: wallNow, &out)
        case (.active, .setup):
            close(code: 1007, reason: Self.invalidArgument, why: "second setup message", wall: wallNow, &out)
        case (.active, .realtimeInput(let input)):
            handleRealtimeInput(input, wall: wall, &out)
        case (.active, .clientContent(let content)):
            handleClientContent(content, &out)
        case (.active, .toolResponse(let response)):
            handleToolResponse(response, &out)
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
        if let sessionID { store.detach(sessionID: sessionID, wall: wallNow) }
    }

    // MARK: Setup

    private mutating func handleSetup(_ setup: Setup, wall: Duration, _ out: inout [SimulatorAction]) {
        let handle = setup.sessionResumption?.handle.flatMap { $0.isEmpty ? nil : $0 }
        if setup.model.isEmpty {
            close(code: 1007, reason: Self.invalidArgument, why: "setup without a model", wall: wall, &out)
            return
        }
        if (setup.generationConfig?.responseModalities?.count ?? 0) > 1 {
            close(code: 1007, reason: Self.invalidArgument, why: "more than one response modality", wall: wall, &out)
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
                    manualActivity: manualActivity
                )
            )
        )
        fireFaults(wall: wall.nanoseconds, &out) { $0 == .presetup }
        out.append(.send(ServerMessage(.setupComplete(SetupComplete()))))
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
            close(
                code: 1007,
                reason: Self.invalidArgument,
                why: "realtimeInput with more than one field",
                wall: .nanoseconds(wall),
                &out
            )
            return
        }
        if let audio = input.audio {
            handleAudio(audio, wall: wall, &out)
        }
        for chunk in input.mediaChunks ?? [] where chunk.mimeType.hasPrefix("audio/") {
            handleAudio(chunk, wall: wall, &out)
        }
        guard phase == .active else { return }
        if input.activityStart != nil {
            guard manualActivity else {
                close(
                    code: 1007,
                    reason: Self.invalidArgument,
                    why: "activityStart with automatic activity detection on",
                    wall: .nanoseconds(wall),
                    &out
                )
                return
            }
            if manualTurnSamples == nil {
                manualTurnSamples = 0
                out.append(.event(.speechStarted(atSeconds: Double(clock) / 1e9)))
                userActivityStarted(&out)
            }
        }
        if input.activityEnd != nil {
            guard manualActivity else {
                close(
                    code: 1007,
                    reason: Self.invalidArgument,
                    why: "activityEnd with automatic activity detection on",
                    wall: .nanoseconds(wall),
                    &out
                )
                return
            }
            if let samples = manualTurnSamples {
                manualTurnSamples = nil
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
            userActivityStarted(&out)
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
            if let open = manualTurnSamples { manualTurnSamples = open + samples }
            return
        }
        guard var detector = vad else { return }
        vadEvents.removeAll(keepingCapacity: true)
        blob.data.data.withUnsafeBytes { raw in
            detector.process(littleEndianBytes: raw, into: &vadEvents)
        }
        vad = detector
        guard !vadEvents.isEmpty else { return }
        let events = vadEvents
        for event in events where phase == .active {
            switch event {
            case .speechStarted(_, let commit):
                let at = startClock + (commit - startPosition) * 1_000_000_000 / Int64(rate)
                out.append(.event(.speechStarted(atSeconds: Double(at) / 1e9)))
                userActivityStarted(&out)
            case .speechEnded(let start, let end, let commit):
                let at = startClock + (commit - startPosition) * 1_000_000_000 / Int64(rate)
                endAutomaticTurn(start: start, end: end, commit: commit, at: at, &out)
            }
        }
    }

    private mutating func endAutomaticTurn(
        start: Int64,
        end: Int64,
        commit: Int64,
        at: Int64,
        _ out: inout [SimulatorAction]
    ) {
        let speech = Duration.nanoseconds((end - start) * 1_000_000_000 / Int64(inputRate))
        userTurnEnded(.audio(speech: speech, samples: commit - start), at: at, &out)
    }

    private mutating func handleClientContent(_ content: ClientContent, _ out: inout [SimulatorAction]) {
        let text = (content.turns ?? []).flatMap(\.parts).compactMap(\.text).joined(separator: " ")
        if !text.isEmpty {
            pendingText = pendingText.isEmpty ? text : pendingText + " " + text
        }
        guard content.turnComplete == true else { return }
        let turnText = pendingText
        pendingText = ""
        userActivityStarted(&out)
        userTurnEnded(.text(turnText), at: clock, &out)
    }

    private mutating func handleToolResponse(_ response: ToolResponse, _ out: inout [SimulatorAction]) {
        let ids = response.functionResponses.map(\.id)
        guard var turn = modelTurn, turn.stage == .awaitingTools else {
            out.append(.event(.toolResponse(ids: ids, matched: false)))
            return
        }
        var matched = false
        for functionResponse in response.functionResponses
        where turn.calls.contains(where: { $0.id == functionResponse.id })
            && !turn.responses.contains(where: { $0.id == functionResponse.id })
        {
            turn.responses.append(functionResponse)
            matched = true
        }
        out.append(.event(.toolResponse(ids: ids, matched: matched)))
        if turn.responses.count == turn.calls.count {
            turn.toolsDone = true
            turn.stage = .thinking(until: clock + configuration.responseLatency.nanoseconds)
        }
        modelTurn = turn
    }

    // MARK: Turns

    /// The user started speaking (or typing): interrupts the answer in flight, unless `NO_INTERRUPTION`.
    private mutating func userActivityStarted(_ out: inout [SimulatorAction]) {
        guard interrupts, let turn = modelTurn else { return }
        modelTurn = nil
        if turn.stage == .awaitingTools {
            out.append(
                .send(ServerMessage(.toolCallCancellation(ToolCallCancellation(ids: turn.calls.compactMap(\.id)))))
            )
        }
        out.append(.send(ServerMessage(.serverContent(ServerContent(interrupted: true)))))
        out.append(
            .send(ServerMessage(.serverContent(ServerContent(turnComplete: true)), usageMetadata: usage(for: turn)))
        )
        out.append(.event(.interrupted(turn: turn.number, audioSeconds: Double(turn.nextChunk) * 0.125)))
        issueHandle(&out)
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
        }
        out.append(.event(.userTurnEnded(record)))
        fireFaults(wall: lastWall, &out) { $0 == .turn(number) }
        guard phase == .active else { return }
        if modelTurn == nil {
            startAnswer(number: number, input: input, at: at)
        } else {
            queued.append((number, input))
        }
    }

    private mutating func startAnswer(number: Int, input: Input, at: Int64) {
        let beeps: Int
        switch input {
        case .audio(let speech, _): beeps = ModelAudio.beepCount(speech: speech)
        case .text: beeps = ModelAudio.textTurnBeeps
        }
        let calls = configuration.scenario.toolCalls(forTurn: number).enumerated().map { index, call in
            FunctionCall(id: "call-\(sessionID ?? 0)-\(number)-\(index + 1)", name: call.name, args: call.args)
        }
        modelTurn = ModelTurn(
            number: number,
            input: input,
            beeps: beeps,
            stage: .thinking(until: at + configuration.responseLatency.nanoseconds),
            calls: calls,
            toolsDone: calls.isEmpty
        )
    }

    private func transcript(for turn: ModelTurn) -> String {
        let base: String
        switch turn.input {
        case .audio: base = "answering turn \(turn.number)"
        case .text(let text): base = "answering: " + String(text.prefix(40))
        }
        guard !turn.responses.isEmpty else { return base }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let tools = turn.responses.map { response in
            let json = (try? encoder.encode(response.response)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
            let name = turn.calls.first(where: { $0.id == response.id })?.name ?? response.name
            return "tool \(name) said \(json)"
        }
        return base + "; " + tools.joined(separator: "; ")
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
                if !turn.toolsDone {
                    turn.stage = .awaitingTools
                    modelTurn = turn
                    out.append(.send(ServerMessage(.toolCall(ToolCall(functionCalls: turn.calls)))))
                    out.append(
                        .event(
                            .toolCallSent(
                                turn: turn.number,
                                ids: turn.calls.compactMap(\.id),
                                names: turn.calls.map(\.name)
                            )
                        )
                    )
                    return
                }
                turn.stage = .speaking
                turn.speakStart = until
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
        out.append(
            .send(ServerMessage(.serverContent(ServerContent(turnComplete: true)), usageMetadata: usage(for: turn)))
        )
        out.append(
            .event(.answerFinished(turn: turn.number, audioSeconds: Double(turn.nextChunk) * 0.125))
        )
        issueHandle(&out)
        if !queued.isEmpty {
            let next = queued.removeFirst()
            startAnswer(number: next.number, input: next.input, at: clock)
        }
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
        }
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
        if let sessionID { store.detach(sessionID: sessionID, wall: wall) }
    }

    static func oneDecimal(_ value: Double) -> String {
        let tenths = Int((value * 10).rounded())
        return "\(tenths / 10).\(tenths % 10)"
    }
}
