import HarkBackendKit
import HarkCore
import HarkGemini

/// The turn-taking of the cascade as a value: what the speech-to-text socket heard, what the text model wrote
/// and what the speech socket synthesized go in; what to send where comes out. No I/O and no clock: the owner
/// performs the actions, in order.
///
/// A user turn ends on END_SPEECH together with a non-empty final transcript (either may come first). The reply is
/// requested with the history; its text is cut into sentences as it streams, each sent to the speech socket at
/// once. The speech service gathers text until it holds ``speechBufferSize`` characters: a first sentence shorter
/// than that ("Hello!") is flushed at once, so its audio starts without waiting for the next one; `flush` at the
/// end of the reply synthesizes the rest, and the reply is over when every flush's `final` came. Speech heard while
/// the agent answers (the device's own detector, or the service's START_SPEECH) abandons the reply: the request is
/// closed, the speech socket is closed (there is no cancel message) and only what was played goes into the history.
public struct CascadeMachine: Sendable {
    /// What the owner must do.
    public enum Action: Sendable, Hashable {
        /// Deliver an event to the session's consumer.
        case emit(SessionEvent)
        /// Open the streamed text request for this conversation (it ends with the user's turn).
        case requestReply([Content])
        /// Close the text request now (abandoned).
        case cancelReply
        /// Send one sentence to the speech socket.
        case speak(String)
        /// Ask the speech socket for what it still holds (the end of a reply).
        case flushSpeech
        /// Close the speech socket (an abandoned reply); open a fresh one for the next reply.
        case replaceSpeech
        /// Run a device tool; its result comes back through ``toolFinished(_:name:result:)``.
        case runTool(FunctionCall)
        /// Start the deadline of the text request just asked for (``requestNumber``): past it, ``replyTimedOut(_:after:)``.
        case startReplyDeadline(Int)
        case debug(String)
        case warning(String)
    }

    /// Where the conversation is.
    public enum Phase: Sendable, Hashable {
        /// Waiting for the user.
        case listening
        /// The user's turn ended; the reply is requested and nothing has been heard of it yet.
        case thinking
        /// The reply streams (text to the speech socket, audio to the speaker).
        case answering
    }

    public private(set) var phase: Phase = .listening
    /// The conversation so far, as the text model sees it (bounded).
    public private(set) var history: [Content] = []
    /// The most turns ``history`` keeps, and the most characters of text.
    public let historyTurns: Int
    public let historyCharacters: Int

    private var userSpeechEnded = false
    private var transcript = ""
    /// When the user turn's first transcript came (the time the owner passes), and whether the rest of an utterance
    /// is dropped: its turn was cut at ``maximumUserTurnCharacters`` or ``maximumUserTurnDuration``.
    private var userTurnStartedAt: Duration?
    private var discardingUtterance = false
    /// Bytes of transcripts dropped since the turn was cut (for the log line when the utterance ends).
    private var discardedBytes = 0
    private var cutter: SentenceCutter
    private var transcripts = TranscriptSegments()
    /// The model's parts of the reply so far, as received (signatures included).
    private var replyParts: [Part] = []
    /// The sentences sent to the speech socket in this reply.
    private var spokenSentences: [String] = []
    private var replyTextDone = false
    /// Characters sent to the speech socket since the last flush, and flushes whose `final` is still to come.
    private var unflushed = 0
    private var flushesAwaited = 0
    /// Answer audio received and played in this reply (samples at the speech rate).
    private var audioReceived = 0
    private var pendingCalls: [String: FunctionCall] = [:]
    /// Results of this reply's calls, for the history once the reply and every call are done.
    private var toolResults: [Part] = []
    private var callCount = 0
    /// Requests made again with tools' results in this user turn, and the calls of this reply refused because the
    /// turn had used ``maximumToolRounds`` (each answered with an error that says why).
    private var toolRounds = 0
    private var refusedCalls: [FunctionCall] = []
    /// Characters sent to the speech socket for this user turn's replies, and the speech that came for them: the
    /// audio is bounded by the text (``audioPerTextAllowance``).
    private var turnCharacters = 0
    private var turnAudio = 0
    /// The text requests asked for so far (the deadline of each is told apart by it).
    public private(set) var requestNumber = 0

    /// The most requests one user turn makes again with its tools' results: a model that calls a tool in every reply
    /// is stopped there (its last calls are answered with an error that says so) and the turn ends in error.
    public let maximumToolRounds: Int
    /// The most characters of one user turn, and the longest it lasts from its first transcript: past either, the turn
    /// ends as if the speech had (the rest of the utterance is dropped) and is answered.
    public let maximumUserTurnCharacters: Int
    public let maximumUserTurnDuration: Duration
    /// The speech a reply's text may bring, as a multiple of what ``samplesPerCharacter`` says it speaks (and a few
    /// seconds more): a service that sends more fails the reply.
    public static let audioPerTextAllowance = 4

    /// Samples of speech per character of text: how far into the reply the played audio reached (speech runs
    /// at about 15 characters a second at pace 1).
    public let samplesPerCharacter: Int
    /// The characters the speech service gathers before it synthesizes unasked (its `min_buffer_size`).
    public let speechBufferSize: Int

    public init(
        historyTurns: Int = 20,
        historyCharacters: Int = 8000,
        samplesPerCharacter: Int = 24_000 / 15,
        speechBufferSize: Int = 50,
        sentenceCutter: SentenceCutter = SentenceCutter(),
        maximumToolRounds: Int = 4,
        maximumUserTurnCharacters: Int = 2000,
        maximumUserTurnDuration: Duration = .seconds(60)
    ) {
        self.historyTurns = max(2, historyTurns)
        self.historyCharacters = max(1, historyCharacters)
        self.samplesPerCharacter = max(1, samplesPerCharacter)
        self.speechBufferSize = max(1, speechBufferSize)
        self.cutter = sentenceCutter
        self.maximumToolRounds = max(0, maximumToolRounds)
        self.maximumUserTurnCharacters = min(max(1, maximumUserTurnCharacters), self.historyCharacters)
        self.maximumUserTurnDuration = max(.seconds(1), maximumUserTurnDuration)
    }

    // MARK: The user's side

    /// The speech-to-text service heard speech start: while the agent answers, that is a barge-in. `played`: the
    /// samples of this reply's audio the speaker played.
    public mutating func speechStarted(played: Int = 0) -> [Action] {
        userSpeechEnded = false
        var actions = endDiscarding()
        if phase != .listening { actions += abandonReply(why: "the user spoke", played: played) }
        return actions + [.emit(.conversation(.listening))]
    }

    /// The service heard the speech end: the turn ends once its transcript is in too.
    public mutating func speechEnded() -> [Action] {
        let ended = endDiscarding()
        userSpeechEnded = true
        return ended + endUserTurnIfComplete()
    }

    /// One final transcript of an utterance (empty ones are ignored), `now` on the owner's clock (for the turn's
    /// longest time). A turn that reaches ``maximumUserTurnCharacters`` or ``maximumUserTurnDuration`` ends here, as
    /// if the speech had; the rest of that utterance is dropped.
    public mutating func transcribed(_ text: String, now: Duration? = nil) -> [Action] {
        // Only what the turn can still hold is read of it: a transcript of any size costs no more than the bound.
        let room = maximumUserTurnCharacters - transcript.count - (transcript.isEmpty ? 0 : 1)
        let head = text.prefix(max(0, room) + 64)
        let trimmed = head.trimmedWhitespace
        guard !trimmed.isEmpty else { return [.debug("an empty transcript, ignored")] }
        if discardingUtterance {
            discardedBytes += text.utf8.count
            return []
        }
        let kept = trimmed.count <= room ? trimmed : String(trimmed.prefix(max(0, room)))
        let cut = kept.count < trimmed.count || head.endIndex != text.endIndex
        var actions: [Action] = []
        if !kept.isEmpty {
            transcript = transcript.isEmpty ? kept : transcript + " " + kept
            if let piece = transcripts.append(.user, (transcripts.isOpen(.user) ? " " : "") + kept) {
                actions.append(.emit(.transcript(piece)))
            }
        }
        if let now, userTurnStartedAt == nil { userTurnStartedAt = now }
        let tooLong = now.map { $0 - (userTurnStartedAt ?? $0) >= maximumUserTurnDuration } ?? false
        if cut || tooLong, !transcript.isEmpty {
            // The turn is answered now; what the user still says of this utterance is not part of it.
            discardingUtterance = true
            discardedBytes = cut ? text.utf8.count - kept.utf8.count : 0
            userSpeechEnded = true
            let why =
                cut
                ? "the user's turn reached \(maximumUserTurnCharacters) characters"
                : "the user's turn lasted \(maximumUserTurnDuration.humanDescription)"
            actions.append(.warning("\(why) without an end of speech: answering it now, the rest is dropped"))
        }
        return actions + endUserTurnIfComplete()
    }

    /// Time passed, `now` on the owner's clock: a user turn whose first transcript came ``maximumUserTurnDuration``
    /// ago and whose speech has not ended (no END_SPEECH, and no more transcripts either) is answered now, the rest
    /// of its utterance dropped.
    public mutating func tick(now: Duration) -> [Action] {
        guard !transcript.isEmpty, !discardingUtterance, let start = userTurnStartedAt,
            now - start >= maximumUserTurnDuration
        else { return [] }
        discardingUtterance = true
        discardedBytes = 0
        userSpeechEnded = true
        let why = "the user's turn lasted \(maximumUserTurnDuration.humanDescription) without an end of speech"
        return [.warning("\(why): answering it now, the rest is dropped")] + endUserTurnIfComplete()
    }

    /// A new utterance (or the end of the one being dropped): transcripts count again.
    private mutating func endDiscarding() -> [Action] {
        guard discardingUtterance else { return [] }
        discardingUtterance = false
        defer { discardedBytes = 0 }
        guard discardedBytes > 0 else { return [] }
        return [.debug("dropped \(discardedBytes) bytes of transcript after the turn was cut")]
    }

    /// The device's own voice detector heard speech while the agent answers (faster than the service's
    /// START_SPEECH): stop now.
    public mutating func localSpeechStarted(played: Int) -> [Action] {
        guard phase != .listening else { return [] }
        return abandonReply(why: "the user spoke over the answer", played: played) + [.emit(.conversation(.listening))]
    }

    /// A typed or synthetic user turn (the kiosk's greeting): answered at once.
    public mutating func userText(_ text: String) -> [Action] {
        var actions: [Action] = []
        if phase != .listening { actions += abandonReply(why: "a new user turn", played: audioReceived) }
        return actions + startReply(to: text)
    }

    private mutating func endUserTurnIfComplete() -> [Action] {
        guard userSpeechEnded, !transcript.isEmpty else { return [] }
        let text = transcript
        transcript = ""
        userSpeechEnded = false
        userTurnStartedAt = nil
        var actions = transcripts.close(.user).map { [Action.emit(.transcript($0))] } ?? []
        if phase != .listening { actions += abandonReply(why: "a new user turn", played: audioReceived) }
        return actions + startReply(to: text)
    }

    private mutating func startReply(to text: String) -> [Action] {
        append(Content.text(text, role: "user"))
        toolRounds = 0
        turnCharacters = 0
        turnAudio = 0
        return beginRequest()
    }

    private mutating func beginRequest() -> [Action] {
        phase = .thinking
        replyParts = []
        spokenSentences = []
        replyTextDone = false
        audioReceived = 0
        refusedCalls = []
        requestNumber += 1
        cutter.reset()
        return [.emit(.conversation(.thinking)), .requestReply(history), .startReplyDeadline(requestNumber)]
    }

    // MARK: The text model

    /// One chunk of the streamed reply.
    public mutating func replyChunk(_ chunk: GenerateContentChunk) -> [Action] {
        guard phase != .listening else { return [.debug("a reply chunk after the reply was abandoned, ignored")] }
        if let error = chunk.error { return replyFailed(error) }
        replyParts += chunk.parts
        var actions: [Action] = []
        for call in chunk.functionCalls {
            callCount += 1
            var call = call
            if call.id == nil || call.id == "" { call.id = "call-\(callCount)" }
            guard toolRounds < maximumToolRounds, pendingCalls.count + refusedCalls.count < Self.maximumCallsPerReply
            else {
                // Not run: answered with an error once the reply's text is in, and the turn ends there.
                refusedCalls.append(call)
                continue
            }
            pendingCalls[call.id ?? ""] = call
            actions.append(.emit(.tool(.started(id: call.id ?? "", name: call.name))))
            actions.append(.runTool(call))
        }
        let text = chunk.spokenText
        if !text.isEmpty {
            for sentence in cutter.add(text) + cutter.pieceEnded() { actions += speak(sentence) }
            if let piece = transcripts.append(.agent, text) { actions.append(.emit(.transcript(piece))) }
        }
        return actions
    }

    /// The reply's stream ended.
    public mutating func replyFinished() -> [Action] {
        guard phase != .listening else { return [] }
        replyTextDone = true
        append(Content(role: "model", parts: replyParts))
        var actions: [Action] = []
        for sentence in cutter.finish() { actions += speak(sentence) }
        if !pendingCalls.isEmpty { return actions }  // the model answers again once the tools did
        if !refusedCalls.isEmpty { return actions + refuseCalls() }
        if !toolResults.isEmpty { return actions + continueAfterTools() }
        if spokenSentences.isEmpty {
            // Nothing to say (only thoughts or an empty reply): the turn is over.
            return actions + [.debug("the reply held nothing to speak")] + endReply()
        }
        actions += flush()
        // Everything was flushed before and its audio is all in: the reply is over.
        if flushesAwaited == 0 { return actions + endReply() }
        return actions
    }

    /// The text request failed (a status, a drop, an error in the stream): said, not left silent.
    public mutating func replyFailed(_ why: String) -> [Action] {
        stopFailedReply(why, endsTurn: true)
    }

    /// The text service refused the key: the reply stops and says so like a failed one, but the turn is not
    /// complete — the session itself failed (its owner is told by the connection's end).
    public mutating func replyRefused(_ why: String) -> [Action] {
        stopFailedReply(why, endsTurn: false)
    }

    private mutating func stopFailedReply(_ why: String, endsTurn: Bool) -> [Action] {
        guard phase != .listening else { return [] }
        let printable = RemoteText.printable(why, limit: 300)
        // The consumer says it (the appliance with an earcon and a warning): here only a debug line.
        var actions: [Action] = [.debug("the reply failed: \(printable)"), .cancelReply]
        // Sentences already sent must not be spoken with the next reply: the speech socket goes too.
        if !spokenSentences.isEmpty || audioReceived > 0 { actions.append(.replaceSpeech) }
        if phase == .answering { actions.append(.emit(.interrupted)) }
        cutter.reset()
        pendingCalls.removeAll()
        toolResults.removeAll()
        refusedCalls.removeAll()
        actions.append(.emit(.answerFailed(printable)))
        guard endsTurn else {
            phase = .listening
            unflushed = 0
            flushesAwaited = 0
            actions += transcripts.close(.agent).map { [Action.emit(.transcript($0))] } ?? []
            return actions + [.emit(.conversation(.listening))]
        }
        return actions + endReply()
    }

    /// A device tool finished: its result goes into the history and the model answers again.
    public mutating func toolFinished(_ id: String, name: String, result: JSONValue) -> [Action] {
        guard pendingCalls.removeValue(forKey: id) != nil, phase != .listening else { return [] }
        let actions: [Action] = [.emit(.tool(.finished(id: id, name: name, succeeded: result["error"] == nil)))]
        toolResults.append(Part(functionResponse: FunctionResponse(id: id, name: name, response: result)))
        guard pendingCalls.isEmpty, replyTextDone else { return actions }
        if !refusedCalls.isEmpty { return actions + refuseCalls() }
        return actions + continueAfterTools()
    }

    /// The most calls one reply may make (more are not run, and end the turn like too many rounds).
    public static let maximumCallsPerReply = 16

    /// Every call of the reply is answered and its text is in: the results go into the history after the model's
    /// turn, what was said before the calls is flushed, and the model answers again.
    private mutating func continueAfterTools() -> [Action] {
        append(Content(role: "user", parts: toolResults))
        toolResults = []
        toolRounds += 1
        return flush() + beginRequest()
    }

    /// The reply called tools past the turn's bound: each call it was refused is answered with an error that tells the
    /// model why (in the history, with the other results), no request is made again, and the turn ends in error.
    private mutating func refuseCalls() -> [Action] {
        let why =
            "not run: the device allows \(maximumToolRounds) rounds of tool calls (and \(Self.maximumCallsPerReply) "
            + "calls a reply) for one user turn, and this turn used them; answer the user without calling a tool"
        for call in refusedCalls {
            toolResults.append(
                Part(
                    functionResponse: FunctionResponse(
                        id: call.id ?? "",
                        name: call.name,
                        response: ["error": .string(why)]
                    )
                )
            )
        }
        append(Content(role: "user", parts: toolResults))
        let refused = refusedCalls.count
        toolResults = []
        refusedCalls = []
        let names = Set(replyParts.compactMap { $0.functionCall?.name }).sorted().prefix(4)
            .map { RemoteText.printable($0, limit: 64) }.joined(separator: ", ")
        return [
            .warning(
                "the text model kept calling tools (\(names)) after \(maximumToolRounds) rounds in one turn: "
                    + "\(refused) call(s) refused, the turn ends"
            )
        ] + stopFailedReply("the text model kept calling tools and never answered", endsTurn: true)
    }

    // MARK: The speech socket

    /// Synthesized audio: to the speaker. Audio far beyond what the reply's text speaks
    /// (``audioPerTextAllowance``) fails the reply instead.
    public mutating func speechAudio(_ samples: [Int16], sampleRate: Int) -> [Action] {
        guard phase != .listening, !samples.isEmpty else { return [] }
        let allowed = (turnCharacters * Self.audioPerTextAllowance + 30) * samplesPerCharacter
        guard turnAudio + samples.count <= allowed else {
            return replyFailed(
                "the speech service sent more audio than the reply's \(turnCharacters) characters speak "
                    + "(\(turnAudio + samples.count) samples)"
            )
        }
        turnAudio += samples.count
        audioReceived += samples.count
        var actions: [Action] = []
        if phase == .thinking {
            phase = .answering
            actions.append(.emit(.conversation(.speaking)))
        }
        return actions + [.emit(.audio(AudioChunk(samples: samples, sampleRate: sampleRate)))]
    }

    /// The speech socket closed, not by this side (any code, or none): what it held of the reply will not be spoken,
    /// so a reply that still waits for speech fails (with the error earcon), rather than wait for a `final` that
    /// cannot come. A reply that sent it nothing yet goes on: its sentences go to the next socket.
    public mutating func speechSocketClosed(_ why: String) -> [Action] {
        guard phase != .listening, !spokenSentences.isEmpty || flushesAwaited > 0 || unflushed > 0 else { return [] }
        // The socket is gone already: nothing of it to replace, and the next one starts clean.
        var actions = stopFailedReply("the speech service closed its socket mid-reply (\(why))", endsTurn: true)
        actions.removeAll { $0 == .replaceSpeech }
        return actions
    }

    /// The deadline of text request `number` passed (``Action/startReplyDeadline(_:)``): a reply that is still that
    /// request's has taken too long from its first byte to its last (a stream of keep-alives, a speech socket that
    /// never answers), and fails.
    public mutating func replyTimedOut(_ number: Int, after deadline: Duration) -> [Action] {
        guard number == requestNumber, phase != .listening else { return [] }
        return replyFailed("no end to the reply within \(deadline.humanDescription)")
    }

    /// The speech socket synthesized all of one flush (one `final` per flush).
    public mutating func speechFinished() -> [Action] {
        guard phase != .listening else { return [] }
        flushesAwaited = max(0, flushesAwaited - 1)
        guard flushesAwaited == 0, replyTextDone, pendingCalls.isEmpty else { return [] }
        return endReply()
    }

    // MARK: Helpers

    /// Sends a sentence. The first of a reply, when it starts the speech service's buffer and would sit in it
    /// (shorter than ``speechBufferSize``), is flushed at once: the reply's first audio need not wait for the
    /// model's next sentence. The rest gather in the buffer as the service means them to.
    private mutating func speak(_ sentence: String) -> [Action] {
        let starts = spokenSentences.isEmpty && unflushed == 0
        spokenSentences.append(sentence)
        unflushed += sentence.count
        turnCharacters += sentence.count
        guard starts, sentence.count < speechBufferSize else { return [.speak(sentence)] }
        return [.speak(sentence)] + flush()
    }

    /// Asks the speech service for what it holds, when anything was sent since the last flush.
    private mutating func flush() -> [Action] {
        guard unflushed > 0 else { return [] }
        unflushed = 0
        flushesAwaited += 1
        return [.flushSpeech]
    }

    private mutating func endReply() -> [Action] {
        phase = .listening
        unflushed = 0
        flushesAwaited = 0
        var actions = transcripts.close(.agent).map { [Action.emit(.transcript($0))] } ?? []
        actions.append(.emit(.turnComplete))
        actions.append(.emit(.conversation(.listening)))
        return actions
    }

    /// Stops the reply in flight. The history keeps about what the user heard: as much of the sentences sent as
    /// the `played` samples speak (``samplesPerCharacter``), never more than the audio that came.
    private mutating func abandonReply(why: String, played: Int) -> [Action] {
        var actions: [Action] = [.debug("reply abandoned: \(why)")]
        if !replyTextDone { actions.append(.cancelReply) }
        if !spokenSentences.isEmpty || audioReceived > 0 { actions.append(.replaceSpeech) }
        let text = spokenSentences.joined(separator: " ")
        let heardSamples = min(max(0, played), audioReceived)
        let fraction = text.isEmpty ? 0 : Double(heardSamples / samplesPerCharacter) / Double(text.count)
        let heard = Self.heardPart(of: text, fraction: fraction)
        if replyTextDone {
            // The model turn went into the history whole: replace it with what was heard.
            if let last = history.last, last.role == "model" { history.removeLast() }
        }
        if !heard.isEmpty { append(Content.text(heard, role: "model")) }
        cutter.reset()
        pendingCalls.removeAll()
        toolResults.removeAll()
        refusedCalls.removeAll()
        phase = .listening
        unflushed = 0
        flushesAwaited = 0
        actions += transcripts.close(.agent).map { [Action.emit(.transcript($0))] } ?? []
        actions.append(.emit(.interrupted))
        return actions
    }

    /// The start of `text` that `fraction` of it covers, cut at a word, with `…` when cut.
    static func heardPart(of text: String, fraction: Double) -> String {
        guard fraction < 1 else { return text }
        guard fraction > 0 else { return "" }
        let keep = Int(Double(text.count) * fraction)
        var cut = text.prefix(keep)
        if let space = cut.lastIndex(where: \.isWhitespace), keep < text.count { cut = cut[..<space] }
        return cut.isEmpty ? "" : String(cut) + "…"
    }

    /// Adds a turn to the history, keeping it within its bounds (oldest turns first; a conversation always
    /// starts with a user turn). A turn larger than the whole bound keeps only its start.
    private mutating func append(_ content: Content) {
        history.append(Self.cut(content, to: historyCharacters))
        func characters(_ content: Content) -> Int { content.parts.reduce(0) { $0 + ($1.text?.count ?? 0) } }
        var total = history.reduce(0) { $0 + characters($1) }
        while history.count > 1, history.count > historyTurns || total > historyCharacters {
            total -= characters(history.removeFirst())
            while history.count > 1, history.first?.role != "user" { total -= characters(history.removeFirst()) }
        }
    }

    /// `content` with its text parts cut so that they hold at most `limit` characters in all (a cut part ends in
    /// `…`).
    static func cut(_ content: Content, to limit: Int) -> Content {
        var room = limit
        var cut = content
        for index in cut.parts.indices {
            guard let text = cut.parts[index].text else { continue }
            if text.count <= room {
                room -= text.count
            } else {
                cut.parts[index].text = room > 1 ? String(text.prefix(room - 1)) + "…" : ""
                room = 0
            }
        }
        return cut
    }
}
