import HarkBackendKit
import HarkCore

/// The protocol logic of one Gemini Live session, as a value: it takes what the server sent and what
/// the device wants to send, and returns what the owner must do. No I/O, no clock of its own: the
/// owner passes `now` (any monotonic offset) so tests drive it exactly.
public struct LiveSessionMachine: Sendable {
    /// What the owner must do.
    public enum Action: Sendable, Hashable {
        /// Deliver an event to the session's consumer.
        case emit(SessionEvent)
        /// Persist a new resumable handle.
        case saveHandle(String)
        /// Run a local tool call and send its response.
        case runTool(FunctionCall)
        /// Cancel running tool calls.
        case cancelTools([String])
        /// Send this message now (the answer to calls that were not run: past the turn's rounds of tools).
        case send(ClientMessage)
        /// Switch to a new connection now (resume with the handle), closing this one first.
        case switchConnection(reason: String)
        /// Switch at the latest after `delay` from now (goAway while a turn is in flight).
        case scheduleSwitch(after: Duration)
        /// Log a message at debug level (unknown fields, ignored content).
        case debug(String)
        /// Log a message at info level (the model chose not to answer).
        case info(String)
        /// Log a warning (a turn ended for a reason a person should see).
        case warning(String)
    }

    /// Where the connection is.
    public enum Phase: Sendable, Hashable {
        /// Setup sent, waiting for `setupComplete`.
        case awaitingSetup
        /// Exchanging messages.
        case ready
        /// goAway received; waiting for the turn in flight to end before switching.
        case draining
        /// The switch was ordered; nothing more is sent on this connection.
        case switching
    }

    /// The last resumable handle; empty and non-resumable updates never erase it.
    public private(set) var handle: String?
    public private(set) var phase: Phase = .awaitingSetup
    /// The conversation state this session last reported.
    public private(set) var conversation: ConversationState = .idle
    /// True from the first model content of a turn until its `turnComplete`.
    public private(set) var turnInFlight = false
    /// True from a transcript of the user's speech until the `turnComplete` of the answer: the service
    /// heard a question and owes a reply.
    public private(set) var userHeard = false
    /// True between a sent `activityStart` and `activityEnd` (re-sent after a switch).
    public private(set) var activityOpen = false
    /// True after a local interrupt: the rest of the model's current turn is dropped.
    public private(set) var discardingTurn = false
    /// True from a `turnComplete` with `interactionStatus: IN_PROGRESS` until the exchange ends (a later
    /// `turnComplete` that is `IDLE` or has no status, an interruption, the connection's end): the service is still
    /// working (a tool runs, it reasons in the background) and more output follows.
    public private(set) var exchangeInProgress = false
    /// Exchanges ended (turns completed that were not `IN_PROGRESS`), for logs.
    public private(set) var exchanges = 0
    /// The last thing the user was heard saying (a final transcript), for logs about the turn.
    public private(set) var lastUserText: String?
    /// Calls whose tool reported progress (their final response says `willContinue: false`).
    private var progressedCalls: Set<String> = []
    /// `toolCall` messages since the user last spoke (or typed), and the calls of this user turn left unanswered
    /// because the model went on calling after it was told it may not (``maximumToolRounds``).
    public private(set) var toolRounds = 0
    public private(set) var ignoredToolCalls = 0
    /// Signs of the service working on what it owes, counted: model output, a transcript of either side, a turn's
    /// end, an interruption, tool calls and cancellations, goAway. Frames that are only alive (`usageMetadata`
    /// alone, resumption updates, messages it does not know) do not count: the stall check compares this, not
    /// frames.
    public private(set) var progress = 0
    /// Cancellations of calls that were never pending, counted (not told one by one).
    public private(set) var unknownCancellations = 0

    /// The most rounds of tool calls (`toolCall` messages) one user turn may take. The round past it is answered
    /// with an error that tells the model so, the turn ends in error (the error earcon), and calls after that in
    /// the same user turn are not answered at all.
    public static let maximumToolRounds = 5
    /// The most calls one `toolCall` message may run; the rest are answered with an error.
    public static let maximumCallsPerMessage = 16
    /// What the model accepts and how it behaves.
    public let profile: LiveModelProfile
    /// Whether the client marks activity itself.
    public let manualActivity: Bool
    /// Model audio sample rate when the MIME type does not state one.
    public let defaultOutputRate = 24_000
    /// The longest a turn in flight is waited for after a `goAway` (the time it states is bounded by this before
    /// any arithmetic: a connection lives about ten minutes, and its `goAway` comes seconds before the end).
    public static let longestGoAwayWait = Duration.seconds(120)

    /// Answer audio parts skipped because their MIME type states a rate outside ``SampleRates/serverAudio``.
    public private(set) var unsupportedRateAudio = 0

    /// Calls received and not yet answered or cancelled.
    public private(set) var pendingToolCalls: Set<String> = []
    /// The transcription fragments gathered into segments (bounded per segment).
    public private(set) var transcripts = TranscriptSegments()

    public init(manualActivity: Bool, handle: String? = nil, profile: LiveModelProfile = .gemini25) {
        self.manualActivity = manualActivity
        self.handle = handle
        self.profile = profile
    }

    /// The service owes the device output: a turn is in flight, or the exchange is in progress, or it heard the
    /// user or was handed a question, and no tool runs here (then the silence is the device's).
    public var owesReply: Bool {
        (turnInFlight || userHeard || exchangeInProgress || conversation == .thinking) && pendingToolCalls.isEmpty
    }

    /// A new connection opened and its setup was sent.
    public mutating func connectionOpened() {
        phase = .awaitingSetup
        turnInFlight = false
        userHeard = false  // owed on the old connection; the new one must hear the question itself
        discardingTurn = false
    }

    /// The connection ended. A turn still in flight will not finish on it: report it ended, so the
    /// player and the LEDs do not wait for a `turnComplete` that cannot come.
    public mutating func connectionClosed() -> [Action] {
        let closed = transcripts.closeAll().map { Action.emit(.transcript($0)) }
        // An exchange still in progress (a tool runs, the model reasons) goes on in the session that resumes
        // this one; it ends there, or when the conversation cannot be resumed (``forgetHandle()``).
        guard turnInFlight else { return closed }
        turnInFlight = false
        exchangeInProgress = false
        discardingTurn = false
        return closed + [.debug("the turn in flight ended with its connection"), .emit(.turnComplete)]
            + setConversation(manualActivity && !activityOpen ? .idle : .listening)
    }

    /// The handle was refused by the service: the next connection starts a fresh session, and an exchange that
    /// was in progress in the old one has ended with it.
    public mutating func forgetHandle() -> [Action] {
        handle = nil
        guard exchangeInProgress else { return [] }
        exchangeInProgress = false
        return [.debug("the exchange in progress ended with the session"), .emit(.turnComplete)]
            + setConversation(manualActivity && !activityOpen ? .idle : .listening)
    }

    /// Handles one message from the server.
    public mutating func receive(_ message: ServerMessage) -> [Action] {
        if Self.showsProgress(message) { progress &+= 1 }
        var actions: [Action] = []
        switch message.payload {
        case .setupComplete(let complete):
            if phase == .awaitingSetup {
                phase = .ready
                if let id = complete.sessionId, !id.isEmpty {
                    actions.append(.info("service session \(RemoteText.printable(id, limit: 120))"))
                }
                actions.append(.emit(.link(.connected)))
                actions += setConversation(manualActivity && !activityOpen ? .idle : .listening)
            }
        case .serverContent(let content):
            actions += receive(content)
        case .toolCall(let call):
            actions += toolCall(call)
        case .toolCallCancellation(let cancellation):
            // Only calls that are pending are cancelled (and told); the others are counted.
            let ids = cancellation.ids.filter { pendingToolCalls.contains($0) }
            for id in ids {
                pendingToolCalls.remove(id)
                progressedCalls.remove(id)
                actions.append(.emit(.tool(.cancelled(id: id))))
            }
            let unknown = cancellation.ids.count - ids.count
            if unknown > 0 {
                unknownCancellations += unknown
                actions.append(.debug("toolCallCancellation of \(unknown) call(s) that were not pending, ignored"))
            }
            if !ids.isEmpty { actions.append(.cancelTools(ids)) }
        case .goAway(let goAway):
            // What the service says is left, within what any connection is given: a turn in flight is waited
            // for at most ``longestGoAwayWait``, whatever it says.
            let stated = goAway.timeLeft?.duration ?? .zero
            let timeLeft = min(max(.zero, stated), Self.longestGoAwayWait)
            actions.append(.debug("goAway: \(ProtoDuration.format(stated)) left"))
            if phase == .ready || phase == .awaitingSetup {
                if turnInFlight || !pendingToolCalls.isEmpty {
                    phase = .draining
                    actions.append(.scheduleSwitch(after: max(.zero, timeLeft - .seconds(1))))
                } else {
                    phase = .switching
                    actions.append(.switchConnection(reason: "goAway"))
                }
            }
        case .sessionResumptionUpdate(let update):
            if let newHandle = update.resumableHandle, newHandle != handle {
                handle = newHandle
                actions.append(.saveHandle(newHandle))
            }
        case .voiceActivity(let activity):
            if let offset = activity.audioOffset?.duration {
                let type = activity.type.map { RemoteText.printable($0, limit: SessionRuntime.kindNameLimit) } ?? "nil"
                actions.append(.debug("voiceActivity \(type) at \(ProtoDuration.format(offset)) of input audio"))
            }
            switch activity.type {
            case "ACTIVITY_START"?:
                userTurnBegan()
                actions += setConversation(.listening)
            case "ACTIVITY_END"?: if !turnInFlight { actions += setConversation(.thinking) }
            default:
                let type = activity.type.map { RemoteText.printable($0, limit: SessionRuntime.kindNameLimit) } ?? "nil"
                actions.append(.debug("unknown voiceActivity type \(type)"))
            }
        case .none(let unknownKeys):
            if !unknownKeys.isEmpty {
                let keys = unknownKeys.prefix(16).map { RemoteText.printable($0, limit: SessionRuntime.kindNameLimit) }
                let more = unknownKeys.count > keys.count ? ",…" : ""
                actions.append(.debug("skipped unknown message \(keys.joined(separator: ","))\(more)"))
            }
        }
        if let usage = message.usageMetadata {
            actions.append(
                .emit(
                    .usage(
                        UsageReport(
                            promptTokens: usage.promptTokenCount ?? 0,
                            responseTokens: usage.responseTokenCount ?? 0,
                            totalTokens: usage.totalTokenCount ?? 0
                        )
                    )
                )
            )
        }
        return actions
    }

    /// Whether `message` shows the service working (see ``progress``).
    static func showsProgress(_ message: ServerMessage) -> Bool {
        switch message.payload {
        case .setupComplete, .toolCall, .toolCallCancellation, .goAway: return true
        case .serverContent(let content):
            return content.modelTurn.map { !$0.parts.isEmpty } == true || content.turnComplete == true
                || content.interrupted == true || content.generationComplete == true
                || content.outputTranscription?.text.map { !$0.isEmpty } == true
                || content.inputTranscription?.text.map { !$0.isEmpty } == true
                || content.interimInputTranscription?.text.map { !$0.isEmpty } == true
        default: return false
        }
    }

    /// One `toolCall`: its calls run, within the user turn's rounds (``maximumToolRounds``) and the message's
    /// bound (``maximumCallsPerMessage``).
    private mutating func toolCall(_ call: ToolCall) -> [Action] {
        var actions: [Action] = []
        toolRounds += 1
        guard toolRounds <= Self.maximumToolRounds else {
            return refuseToolCalls(call)
        }
        // A call that does not block lets the model go on speaking; otherwise it waits for the result.
        if conversation != .speaking || !profile.nonBlockingTools { actions += setConversation(.thinking) }
        var refused: [FunctionResponse] = []
        for (index, functionCall) in call.functionCalls.enumerated() {
            let id = functionCall.id ?? ""
            guard index < Self.maximumCallsPerMessage else {
                refused.append(
                    FunctionResponse(
                        id: id,
                        name: functionCall.name,
                        response: ["error": .string("not run: at most \(Self.maximumCallsPerMessage) calls at once")]
                    )
                )
                continue
            }
            pendingToolCalls.insert(id)
            actions.append(.emit(.tool(.started(id: id, name: functionCall.name))))
            actions.append(.runTool(functionCall))
        }
        if !refused.isEmpty {
            actions.append(
                .debug("\(refused.count) calls past the \(Self.maximumCallsPerMessage) of one message, refused")
            )
            actions.append(.send(.toolResponse(ToolResponse(functionResponses: refused))))
        }
        return actions
    }

    /// The user turn used its rounds of tools: the first round past them is answered with an error that says so
    /// and the turn ends in error; later ones in the same turn get no answer (a model that calls on regardless would
    /// otherwise loop at the network's pace), only a count.
    private mutating func refuseToolCalls(_ call: ToolCall) -> [Action] {
        guard toolRounds == Self.maximumToolRounds + 1 else {
            ignoredToolCalls += call.functionCalls.count
            return [.debug("\(call.functionCalls.count) more tool call(s) in a turn past its rounds, not answered")]
        }
        let why =
            "not run: the device allows \(Self.maximumToolRounds) rounds of tool calls for one user turn, and this "
            + "turn used them; answer the user without calling a tool"
        let responses = call.functionCalls.prefix(Self.maximumCallsPerMessage).map {
            FunctionResponse(id: $0.id ?? "", name: $0.name, response: ["error": .string(why)])
        }
        let names = Set(call.functionCalls.map(\.name)).sorted().prefix(4)
            .map { RemoteText.printable($0, limit: 64) }.joined(separator: ", ")
        var actions: [Action] = [
            .warning(
                "the model kept calling tools (\(names)) after \(Self.maximumToolRounds) rounds in one turn: "
                    + "refused, the turn ends"
            ),
            .send(.toolResponse(ToolResponse(functionResponses: Array(responses)))),
            .emit(.answerFailed("the model kept calling tools and never answered")),
        ]
        // The exchange is over here; what the model does next is not waited for.
        if turnInFlight || exchangeInProgress {
            turnInFlight = false
            exchangeInProgress = false
            discardingTurn = false
            actions += closeTranscripts()
            actions.append(.emit(.turnComplete))
        }
        userHeard = false
        actions += setConversation(manualActivity && !activityOpen ? .idle : .listening)
        return actions
    }

    /// The user spoke or typed: a new user turn, with rounds of tools of its own.
    private mutating func userTurnBegan() {
        toolRounds = 0
        ignoredToolCalls = 0
    }

    private mutating func receive(_ content: ServerContent) -> [Action] {
        var actions: [Action] = []
        if let interim = content.interimInputTranscription, let text = interim.text {
            if !text.isEmpty {
                userHeard = true
                userTurnBegan()
            }
            if let piece = transcripts.interim(.user, text) { actions.append(.emit(.transcript(piece))) }
        }
        if let input = content.inputTranscription {
            if let text = input.text, !text.isEmpty {
                userHeard = true
                userTurnBegan()
            }
            if let piece = transcripts.append(.user, input.text ?? "", finished: input.finished ?? false) {
                actions += userSaid(piece)
            }
        }
        if content.interrupted == true {
            // The user spoke over the model: a new user turn.
            userTurnBegan()
            turnInFlight = false
            discardingTurn = false
            exchangeInProgress = false
            actions += transcripts.closeAll().map { .emit(.transcript($0)) }
            actions.append(.emit(.interrupted))
            actions += setConversation(.listening)
        }
        if let turn = content.modelTurn {
            if !discardingTurn {
                for part in turn.parts {
                    if let blob = part.inlineData, blob.mimeType.hasPrefix("audio/") {
                        turnInFlight = true
                        guard let rate = blob.audioRate.rate(default: defaultOutputRate) else {
                            actions += skipAudio(blob.audioRate)
                            continue
                        }
                        let samples = PCM16.samples(blob.data.data)
                        if !samples.isEmpty {
                            actions += setConversation(.speaking)
                            actions.append(.emit(.audio(AudioChunk(samples: samples, sampleRate: rate))))
                        }
                    } else if let text = part.text, part.thought != true {
                        turnInFlight = true
                        actions += agentSaid(text, finished: false)
                    }
                }
            } else {
                turnInFlight = true
            }
        }
        if let output = content.outputTranscription, !discardingTurn {
            actions += agentSaid(output.text ?? "", finished: output.finished ?? false)
        }
        if content.waitingForInput == true, content.turnComplete != true {
            actions += waitingForUser()
        }
        if content.turnComplete == true {
            turnInFlight = false
            discardingTurn = false
            actions += closeTranscripts()
            if content.interactionStatus == "IN_PROGRESS" {
                // Not the end: a tool runs or the model reasons, and more output follows.
                exchangeInProgress = true
                actions.append(.debug("turn complete, interaction in progress: more output follows"))
                if conversation != .speaking { actions += setConversation(.thinking) }
                return actions
            }
            exchangeInProgress = false
            userHeard = false
            exchanges += 1
            actions += turnEnded(reason: content.turnCompleteReason, waitingForInput: content.waitingForInput == true)
            actions.append(.emit(.turnComplete))
            actions += setConversation(manualActivity && !activityOpen ? .idle : .listening)
            if phase == .draining, pendingToolCalls.isEmpty {
                phase = .switching
                actions.append(.switchConnection(reason: "goAway after the turn"))
            }
        }
        return actions
    }

    /// The model expects the user to go on (`waitingForInput` outside a turn's end): nothing is owed.
    private mutating func waitingForUser() -> [Action] {
        guard !turnInFlight, !exchangeInProgress else { return [] }
        userHeard = false
        return [.info("the model waits for the user to go on")]
            + setConversation(manualActivity && !activityOpen ? .idle : .listening)
    }

    /// What a person should know about how an exchange ended: the model chose not to answer (info), or the
    /// service refused the input or the model's call (a warning naming the exchange and what was heard).
    private func turnEnded(reason: String?, waitingForInput: Bool) -> [Action] {
        let heard = lastUserText.map { " after \"\(RemoteText.printable($0, limit: 80))\"" } ?? ""
        switch reason {
        case nil, "", "TURN_COMPLETE_REASON_UNSPECIFIED"?:
            return waitingForInput ? [.info("the model waits for the user to go on\(heard)")] : []
        case "RESPONSE_REJECTED"?, "NEED_MORE_INPUT"?:
            return [.info("the model chose not to answer (\(reason ?? ""))\(heard); listening")]
        case let reason?:
            let shown = RemoteText.printable(reason, limit: SessionRuntime.kindNameLimit)
            return [.warning("exchange \(exchanges) ended without an answer: \(shown)\(heard)")]
        }
    }

    /// Closes every open transcript segment, remembering what the user said.
    private mutating func closeTranscripts() -> [Action] {
        transcripts.closeAll().flatMap { piece -> [Action] in
            if piece.role == .user { lastUserText = piece.text }
            return [.emit(.transcript(piece))]
        }
    }

    /// A piece of the user's transcript, remembered when final.
    private mutating func userSaid(_ piece: Transcript) -> [Action] {
        if piece.isFinal { lastUserText = piece.text }
        return [.emit(.transcript(piece))]
    }

    /// The device interrupted the agent: what it had said so far is its final word on the turn.
    private mutating func interruptedHere() -> [Action] {
        transcripts.closeAll().map { .emit(.transcript($0)) } + [.emit(.interrupted)]
    }

    /// The agent said `text` (a fragment): the user's utterance is over once the agent answers.
    private mutating func agentSaid(_ text: String, finished: Bool) -> [Action] {
        var actions: [Action] = []
        if !text.isEmpty, let user = transcripts.close(.user) { actions += userSaid(user) }
        if let piece = transcripts.append(.agent, text, finished: finished) {
            actions.append(.emit(.transcript(piece)))
        }
        return actions
    }

    /// The stall check left the connection while an exchange was in progress (`turnComplete` with `IN_PROGRESS`,
    /// then no progress): the exchange is over here, so the device does not stay thinking for ever; the resumed
    /// session may still speak about it.
    public mutating func exchangeAbandoned() -> [Action] {
        guard exchangeInProgress, !turnInFlight else { return [] }
        exchangeInProgress = false
        return [.debug("the exchange in progress made no progress: ended here"), .emit(.turnComplete)]
            + setConversation(manualActivity && !activityOpen ? .idle : .listening)
    }

    /// The scheduled goAway deadline came: switch now, turn or no turn.
    public mutating func switchDeadlineReached() -> [Action] {
        guard phase == .draining else { return [] }
        phase = .switching
        return [.switchConnection(reason: "goAway deadline")]
    }

    /// A tool reported progress on a call still running: the partial result to send (`willContinue: true`), on
    /// models that take them (nil elsewhere, and for a call no longer pending).
    public mutating func toolProgress(id: String, name: String, partial: JSONValue, behavior: ToolBehavior)
        -> ClientMessage?
    {
        guard pendingToolCalls.contains(id), profile.nonBlockingTools, case .nonBlocking(let scheduling) = behavior
        else { return nil }
        progressedCalls.insert(id)
        return .toolResponse(
            ToolResponse(functionResponses: [
                FunctionResponse(
                    id: id,
                    name: name,
                    response: partial,
                    scheduling: Self.wireName(scheduling),
                    willContinue: true
                )
            ])
        )
    }

    /// A tool call finished (or was answered): returns the message to send. On models whose calls need not
    /// block, the response carries the tool's scheduling (and ends a call that reported progress).
    public mutating func toolFinished(
        id: String,
        name: String,
        result: JSONValue,
        succeeded: Bool,
        behavior: ToolBehavior = .blocking
    ) -> (message: ClientMessage?, actions: [Action]) {
        guard pendingToolCalls.remove(id) != nil else { return (nil, []) }
        var actions: [Action] = [.emit(.tool(.finished(id: id, name: name, succeeded: succeeded)))]
        var response = FunctionResponse(id: id, name: name, response: result)
        if profile.nonBlockingTools, case .nonBlocking(let scheduling) = behavior {
            response.scheduling = Self.wireName(scheduling)
            if progressedCalls.remove(id) != nil { response.willContinue = false }
        }
        let message = ClientMessage.toolResponse(ToolResponse(functionResponses: [response]))
        if phase == .draining, !turnInFlight, pendingToolCalls.isEmpty {
            phase = .switching
            actions.append(.switchConnection(reason: "goAway after the tool call"))
        }
        return (message, actions)
    }

    /// The service's name of a scheduling.
    public static func wireName(_ scheduling: ToolScheduling) -> String {
        switch scheduling {
        case .silent: "SILENT"
        case .whenIdle: "WHEN_IDLE"
        case .interrupt: "INTERRUPT"
        }
    }

    /// The declaration of `tool` for this model: its behaviour stated where the model runs calls without blocking.
    public func declaration(of tool: LocalTool) -> FunctionDeclaration {
        // A schema from elsewhere (an MCP server's) goes as JSON Schema, untranslated.
        var declaration = FunctionDeclaration(
            name: tool.name,
            description: tool.description,
            parameters: tool.parametersJSONSchema == nil ? tool.parameters : nil,
            parametersJsonSchema: tool.parametersJSONSchema
        )
        if profile.nonBlockingTools {
            declaration.behavior = tool.behavior == .blocking ? "BLOCKING" : "NON_BLOCKING"
        }
        return declaration
    }

    /// What to send for one input, and what to do locally. Nil message: nothing goes on the wire.
    public mutating func send(_ input: SessionInput) -> (message: ClientMessage?, actions: [Action]) {
        switch input {
        case .audio(let chunk):
            let blob = Blob(mimeType: "audio/pcm;rate=\(chunk.sampleRate)", data: chunk.littleEndianBytes)
            return (.realtimeInput(RealtimeInput(audio: blob)), [])
        case .audioStreamEnd:
            guard !manualActivity else { return (nil, [.debug("audioStreamEnd ignored: manual activity mode")]) }
            return (.realtimeInput(RealtimeInput(audioStreamEnd: true)), [])
        case .activityStart:
            guard manualActivity else { return (nil, [.debug("activityStart ignored: automatic activity detection")]) }
            activityOpen = true
            userTurnBegan()
            var actions: [Action] = []
            if turnInFlight {
                // Starting to talk over the agent interrupts it (START_OF_ACTIVITY_INTERRUPTS).
                discardingTurn = true
                actions += interruptedHere()
            }
            actions += setConversation(.listening)
            return (.realtimeInput(RealtimeInput(activityStart: Empty())), actions)
        case .activityEnd:
            guard manualActivity else { return (nil, [.debug("activityEnd ignored: automatic activity detection")]) }
            guard activityOpen else { return (nil, []) }
            activityOpen = false
            return (.realtimeInput(RealtimeInput(activityEnd: Empty())), setConversation(.thinking))
        case .text(let text):
            userTurnBegan()
            var actions = setConversation(.thinking)
            if turnInFlight {
                discardingTurn = true
                actions.insert(contentsOf: interruptedHere(), at: 0)
            }
            return (.clientContent(ClientContent(turns: [.text(text, role: "user")], turnComplete: true)), actions)
        case .interrupt:
            guard turnInFlight else { return (nil, []) }
            discardingTurn = true
            return (nil, interruptedHere() + setConversation(manualActivity && !activityOpen ? .idle : .listening))
        }
    }

    /// Inputs to send first on a fresh connection so the service's view matches the device's
    /// (an open push-to-talk activity is reopened).
    public func replayAfterSetup() -> [ClientMessage] {
        activityOpen ? [.realtimeInput(RealtimeInput(activityStart: Empty()))] : []
    }

    private mutating func setConversation(_ state: ConversationState) -> [Action] {
        guard state != conversation else { return [] }
        conversation = state
        return [.emit(.conversation(state))]
    }

    /// Counts answer audio not played for its rate; says so the first time only.
    private mutating func skipAudio(_ rate: MIMEAudioRate) -> [Action] {
        unsupportedRateAudio += 1
        guard unsupportedRateAudio == 1 else { return [] }
        let range = SampleRates.serverAudio
        return [
            .debug(
                "skipped answer audio with an \(rate) (not \(range.lowerBound)–\(range.upperBound) Hz); further ones are only counted"
            )
        ]
    }
}
