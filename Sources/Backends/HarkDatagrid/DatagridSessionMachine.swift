import HarkBackendKit
import HarkCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The protocol logic of one Datagrid Voice conversation, as a value: it takes what the service sent
/// and what the device wants to send, and returns what the owner must do. No I/O and no clock.
///
/// Datagrid has no "turn complete" message: the agent's `transcript` (sent when its utterance is
/// done) ends its turn; a user `transcript` opens the thinking phase; `tool_call` statuses keep
/// the conversation in `thinking` while a tool runs.
public struct DatagridSessionMachine: Sendable {
    /// What the owner must do.
    public enum Action: Sendable, Hashable {
        /// Deliver an event to the session's consumer.
        case emit(SessionEvent)
        /// The service reported an error: treat the connection as failed with this failure (close it).
        case fail(SessionFailure)
        /// The service ended the conversation (`ended`): close the connection, the session is over.
        case conversationEnded
        /// Persist the conversation id, so a restarted device continues the conversation.
        case saveConversation(String)
        /// The conversation is over: forget the persisted id.
        case forgetConversation
        /// Log at debug level.
        case debug(String)
    }

    /// Where the connection is.
    public enum Phase: Sendable, Hashable {
        /// `start` sent, waiting for `started`/`ready`.
        case starting
        /// `ready` came: audio flows.
        case ready
        /// `stop` sent (or `ended` came): nothing more is sent.
        case stopping
    }

    public private(set) var phase: Phase = .starting
    /// The conversation to continue after a reconnect, from `started`.
    public private(set) var conversationId: String?
    /// The service's id of the current connection's session.
    public private(set) var sessionId: String?
    public private(set) var conversation: ConversationState = .idle
    /// True from the first answer audio of a turn until the agent's transcript (or an interruption).
    public private(set) var turnInFlight = false
    /// True after a local interrupt: the rest of the agent's current answer is dropped.
    public private(set) var discardingTurn = false
    /// Service-side tools running, by name (a count per name).
    public private(set) var runningTools: [String: Int] = [:]
    /// Final transcript lines already delivered, so `ended`'s transcript repeats none of them.
    private var delivered: [DatagridTranscriptLine] = []
    /// Numbers the utterances as transcript segments (and bounds each).
    private var segments = TranscriptSegments()
    /// Answer audio messages skipped because their MIME type states a rate outside ``SampleRates/serverAudio``.
    public private(set) var unsupportedRateAudio = 0
    /// Answer audio rate when the MIME type states none.
    public let defaultOutputRate = 24_000

    public init(conversationId: String? = nil) {
        self.conversationId = conversationId
    }

    /// A new connection opened and its `start` went out.
    public mutating func connectionOpened() {
        phase = .starting
        turnInFlight = false
        discardingTurn = false
        runningTools = [:]
    }

    /// The connection ended. A turn in flight cannot finish on it: report it ended.
    public mutating func connectionClosed() -> [Action] {
        var actions: [Action] = []
        if turnInFlight {
            turnInFlight = false
            discardingTurn = false
            actions += [.debug("the turn in flight ended with its connection"), .emit(.turnComplete)]
        }
        for (name, count) in runningTools {
            actions.append(.debug("tool \(Self.printable(name)) was running when the connection ended"))
            for _ in 0..<count { actions.append(.emit(.tool(.cancelled(id: "")))) }
        }
        runningTools = [:]
        if conversation != .idle { actions += setConversation(.listening) }
        return actions
    }

    /// How an `error` code is handled: transient codes reconnect with backoff, the rest are an error state.
    /// The service's code and message are quoted printable and bounded.
    public static func classify(_ error: DatagridError) -> SessionFailure {
        let code = error.code ?? ""
        let shownCode = RemoteText.printable(code, limit: nameLimit)
        let text = error.message.isEmpty ? shownCode : RemoteText.printable(error.message)
        let line = "Datagrid error\(code.isEmpty ? "" : " \(shownCode)"): \(text)"
        switch code.lowercased() {
        case "unauthorized", "unauthenticated", "authentication_failed", "invalid_api_key", "invalid_token",
            "token_expired", "forbidden", "permission_denied", "insufficient_credits":
            return SessionFailure(.authentication, line)
        case "invalid_request", "invalid_message", "invalid_start", "invalid_config", "bad_request",
            "agent_not_found", "not_found", "validation_error":
            return SessionFailure(.configuration, line)
        default:
            // client_silence_timeout, internal_error, rate_limited, timeouts, unknown codes: try again.
            return SessionFailure(.transient, line)
        }
    }

    /// Handles one message from the service.
    public mutating func receive(_ message: DatagridServerMessage) -> [Action] {
        var actions: [Action] = []
        switch message {
        case .started(let started):
            sessionId = started.sessionId
            if let id = started.conversationId, !id.isEmpty {
                if let old = conversationId, old != id {
                    actions.append(.emit(.notice("the service started a new conversation")))
                }
                if conversationId != id { actions.append(.saveConversation(id)) }
                conversationId = id
            }
            actions.append(.debug("started: session \(started.sessionId.map(Self.printable) ?? "?")"))
        case .ready:
            if phase == .starting {
                phase = .ready
                actions.append(.emit(.link(.connected)))
                actions += setConversation(.listening)
            }
        case .audio(let audio):
            guard !discardingTurn else { break }
            guard let rate = audio.audioRate.rate(default: defaultOutputRate) else {
                actions += skipAudio(audio.audioRate)
                break
            }
            let samples = PCM16.samples(audio.data.data)
            guard !samples.isEmpty else { break }
            turnInFlight = true
            actions += setConversation(.speaking)
            actions.append(.emit(.audio(AudioChunk(samples: samples, sampleRate: rate))))
        case .transcript(let line):
            let text = line.text.trimmedWhitespace
            switch line.role.lowercased() {
            case "user":
                // A new user turn: whatever was being discarded is over.
                discardingTurn = false
                if !text.isEmpty { actions += deliver(line, role: .user) }
                if !turnInFlight { actions += setConversation(.thinking) }
            case "agent", "assistant":
                let dropped = discardingTurn
                discardingTurn = false
                if !text.isEmpty, !dropped { actions += deliver(line, role: .agent) }
                if turnInFlight || !dropped {
                    turnInFlight = false
                    actions.append(.emit(.turnComplete))
                }
                actions += setConversation(runningTools.isEmpty ? .listening : .thinking)
            default:
                actions.append(.debug("transcript with unknown role \(Self.printable(line.role)) skipped"))
            }
        case .toolCall(let call):
            switch call.status.lowercased() {
            case "started":
                runningTools[call.toolName, default: 0] += 1
                actions.append(.emit(.tool(.started(id: "", name: call.toolName))))
                actions += setConversation(.thinking)
            case "completed", "failed":
                if let count = runningTools[call.toolName] {
                    runningTools[call.toolName] = count > 1 ? count - 1 : nil
                }
                let succeeded = call.status.lowercased() == "completed"
                actions.append(.emit(.tool(.finished(id: "", name: call.toolName, succeeded: succeeded))))
            default:
                actions.append(
                    .debug(
                        "tool_call \(Self.printable(call.toolName)) with unknown status \(Self.printable(call.status))"
                    )
                )
            }
        case .interrupted:
            turnInFlight = false
            discardingTurn = false
            actions.append(.emit(.interrupted))
            actions += setConversation(.listening)
        case .citation(let citation):
            actions.append(.debug("citation: \(citation.citations.count) source(s)"))
        case .error(let error):
            let failure = Self.classify(error)
            actions.append(.fail(failure))
        case .ended(let ended):
            phase = .stopping
            var remaining = delivered
            for line in ended.transcript {
                if let index = remaining.firstIndex(of: line) {
                    remaining.remove(at: index)
                    continue
                }
                let role: Transcript.Role
                switch line.role.lowercased() {
                case "user": role = .user
                case "agent", "assistant": role = .agent
                default: continue
                }
                guard !line.text.trimmedWhitespace.isEmpty else { continue }
                actions += segments.utterance(role, line.text).map { .emit(.transcript($0)) }
            }
            if turnInFlight {
                turnInFlight = false
                actions.append(.emit(.turnComplete))
            }
            let credits = ended.creditsConsumed.map { ", \($0) credits" } ?? ""
            actions.append(.emit(.notice("conversation ended (\(ended.transcript.count) transcript lines\(credits))")))
            actions += setConversation(.idle)
            actions.append(.forgetConversation)
            actions.append(.conversationEnded)
        case .unknown(let type):
            actions.append(.debug("skipped a message of unknown type \(Self.printable(type))"))
        }
        return actions
    }

    /// No answer audio has arrived for a while and no agent transcript ended the turn (the service sends none
    /// with `output_transcription` off): the answer is over.
    public mutating func answerQuiet() -> [Action] {
        guard turnInFlight else { return [] }
        turnInFlight = false
        discardingTurn = false
        return [.debug("answer audio went quiet: turn over"), .emit(.turnComplete)]
            + setConversation(runningTools.isEmpty ? .listening : .thinking)
    }

    /// What to send for one input, and what to do locally. Nil message: nothing goes on the wire.
    public mutating func send(_ input: SessionInput) -> (message: DatagridClientMessage?, actions: [Action]) {
        switch input {
        case .audio(let chunk):
            return (
                .audio(DatagridAudio(data: chunk.littleEndianBytes, mimeType: "audio/pcm;rate=\(chunk.sampleRate)")), []
            )
        case .audioStreamEnd:
            return (nil, [.debug("audioStreamEnd: Datagrid needs no marker (a paused microphone pauses its timer)")])
        case .activityStart:
            // Push-to-talk pressed over the agent: that is a barge-in.
            guard turnInFlight else { return (nil, setConversation(.listening)) }
            return interrupt()
        case .activityEnd:
            return (nil, [])
        case .text(let text):
            var actions: [Action] = []
            if turnInFlight {
                discardingTurn = true
                turnInFlight = false
                actions.append(.emit(.interrupted))
            }
            actions += setConversation(.thinking)
            return (.text(text), actions)
        case .interrupt:
            return interrupt()
        }
    }

    /// A local barge-in: tell the service, and drop the rest of the answer already on its way.
    private mutating func interrupt() -> (message: DatagridClientMessage?, actions: [Action]) {
        var actions: [Action] = []
        if turnInFlight {
            discardingTurn = true
            turnInFlight = false
            actions.append(.emit(.interrupted))
        }
        actions += setConversation(.listening)
        return (.interrupt, actions)
    }

    /// `stop` is going out: nothing else follows it on this connection.
    public mutating func stopping() {
        phase = .stopping
    }

    /// The `start` payload for the next connection: the template with the conversation id kept.
    public func startPayload(template: DatagridStart) -> DatagridStart {
        var start = template
        if let conversationId { start.conversationId = conversationId }
        return start
    }

    private mutating func deliver(_ line: DatagridTranscriptLine, role: Transcript.Role) -> [Action] {
        // Remembered to keep `ended` from repeating it, within bounds: a hostile service cannot grow memory.
        if line.text.utf8.count <= 8192 { delivered.append(line) }
        if delivered.count > 512 { delivered.removeFirst(delivered.count - 512) }
        return segments.utterance(role, line.text).map { .emit(.transcript($0)) }
    }

    private mutating func setConversation(_ state: ConversationState) -> [Action] {
        guard state != conversation else { return [] }
        conversation = state
        return [.emit(.conversation(state))]
    }

    /// The longest name from the service (a code, a tool, a role) quoted in a log line.
    static let nameLimit = 80

    /// A name the service sent, as a log line may quote it: printable and at most ``nameLimit`` scalars.
    static func printable(_ name: String) -> String { RemoteText.printable(name, limit: nameLimit) }

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
