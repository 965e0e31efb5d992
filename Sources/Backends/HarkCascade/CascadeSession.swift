import HarkBackendKit
import HarkCore
import HarkGemini
import Logging
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A conversation through the cascade: microphone audio streams to Sarvam's speech-to-text socket for the whole
/// session; each finished user turn asks Gemini for a reply over a streamed HTTP request; each sentence of it goes
/// to Sarvam's speech socket as it comes. The decisions live in ``CascadeMachine``; this class holds the three
/// links and performs them. The speech-to-text socket is the session's connection: when it drops, the session
/// reconnects with backoff (the conversation's history stays).
public final class CascadeSession: RuntimeSession {
    public let runtime: SessionRuntime
    private let configuration: CascadeConfiguration
    private let transport: any WebSocketTransport
    private let http: any HTTPClient
    private let tools: ToolRegistry
    private let state: Mutex<State>
    private var logger: Logger { runtime.logger }

    private enum SpeechCommand: Sendable {
        case speak(String)
        case flush
        case replace
    }

    private struct State {
        var machine: CascadeMachine
        var reply: Task<Void, Never>?
        var toolTasks: [String: Task<Void, Never>] = [:]
        /// The speech socket in use counts up on each replacement; audio of an older one is dropped.
        var speechGeneration = 0
        var lastAudioSent: Duration = .zero
        /// When the reply's first audio went to the speaker: what has played since is estimated from the time.
        var firstAudioAt: Duration?
        /// A connection for the next text request, opened when the user began to speak, and when.
        var ahead: (any HTTPOpenedAhead)?
        var aheadOpenedAt: Duration = .zero
        /// The text service refused the Gemini key: the next connection asks it again before it is ready.
        var geminiKeyRefused = false
        /// The deadline of the text request in flight (``CascadeConfiguration/replyDeadline``).
        var deadline: Task<Void, Never>?
        /// When the last text requests went out: at most ``CascadeConfiguration/requestsPerMinute`` a minute.
        var requestRate: RequestRate
    }

    /// About how much of the reply's audio the speaker has played: real time since its first audio (the speaker
    /// plays as it comes); the machine caps it at what was received.
    private func played(_ state: State) -> Int {
        guard let first = state.firstAudioAt else { return 0 }
        return Int(max(0, (elapsed() - first).seconds) * Double(configuration.voice.sampleRate))
    }

    /// What the speech socket says next, read by one socket at a time (each takes over from the one before): at
    /// most a megabyte of text waits (beyond it a sentence is refused: far more than any reply), never a flush or
    /// a replacement.
    private let speechCommands = BoundedQueue<SpeechCommand>(bound: 1 << 20, overflow: .reject) { command in
        if case .speak(let text) = command { text.utf8.count } else { 0 }
    }
    /// The text requests' bodies, from parts encoded once (made at the first request, and again when the tool
    /// catalog changed: the next request declares the new tools), with the catalog's generation they declare.
    private let bodies = Mutex<(bodies: GenerateContentBodies, generation: Int)?>(nil)
    /// A refusal of the Gemini key by a text request: it ends the connection as an authentication error.
    private let keyRefusals = BoundedQueue<SessionFailure>(bound: 4, overflow: .dropOldest)
    private let elapsed: @Sendable () -> Duration

    public init(
        configuration: CascadeConfiguration,
        transport: any WebSocketTransport,
        http: any HTTPClient,
        tools: ToolRegistry = ToolRegistry(),
        clock: any Clock<Duration> = ContinuousClock(),
        logger: Logger,
        audioSent: (@Sendable (AudioChunk) -> Void)? = nil
    ) {
        self.configuration = configuration
        self.transport = transport
        self.http = http
        self.tools = tools
        self.runtime = SessionRuntime(
            inputBound: configuration.inputBound,
            clock: clock,
            logger: logger,
            audioSent: audioSent
        )
        self.state = Mutex(
            State(
                machine: CascadeMachine(
                    historyTurns: configuration.historyTurns,
                    historyCharacters: configuration.historyCharacters,
                    samplesPerCharacter: Int(Double(configuration.voice.sampleRate) / (15 * configuration.voice.pace)),
                    speechBufferSize: configuration.voice.minBufferSize,
                    maximumToolRounds: configuration.maximumToolRounds
                ),
                requestRate: RequestRate(perMinute: configuration.requestsPerMinute)
            )
        )
        elapsed = Self.stopwatch(clock)
    }

    private static func stopwatch<C: Clock<Duration>>(_ clock: C) -> @Sendable () -> Duration {
        let start = clock.now
        return { start.duration(to: clock.now) }
    }

    public func finish() {
        runtime.finish(connected: false)
    }

    public func run() async throws {
        defer {
            let tasks = state.withLock { state in
                defer {
                    state.reply = nil
                    state.deadline = nil
                    state.toolTasks = [:]
                    state.ahead?.close()
                    state.ahead = nil
                }
                return [state.reply, state.deadline].compactMap { $0 } + Array(state.toolTasks.values)
            }
            for task in tasks { task.cancel() }
            speechCommands.close()
            keyRefusals.close()
        }
        // The speech socket lives beside the speech-to-text connections, not inside one: an answer being spoken
        // goes on while a dropped speech-to-text socket is opened again.
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await self.speechLoop() }
            defer { group.cancelAll() }
            try await runtime.runConnections(machine: configuration.link.reconnectMachine()) { [self] _ in
                await connectOnce()
            }
        }
    }

    // MARK: - The speech-to-text socket: the session's connection

    private func connectOnce() async -> ConnectionEnd {
        if state.withLock({ $0.geminiKeyRefused }) {
            keyRefusals.removeAll()  // told already, by the connection it ended or by this check
            if let failure = await checkGeminiKey() { return .failed(failure, healthy: false) }
            if runtime.isFinishing { return .finished }
        }
        let result = ConnectionRecord()
        let request = WebSocketRequest(
            url: configuration.speechToTextURL,
            headers: [("api-subscription-key", configuration.sarvamKey.reveal())]
        )
        logger.info("connecting to \(request.loggableURL)")
        runtime.count { $0.connections += 1 }
        let outcome = await transport.exchange(request) { [self] inbound, outbound in
            try await serve(inbound: inbound, outbound: outbound, result: result)
        }
        if runtime.isFinishing { return .finished }
        switch outcome {
        case .failure(let failure):
            // A refused Gemini key is no sign of a working connection, any more than a refused Sarvam key.
            return .failed(failure, healthy: result.ready && !state.withLock { $0.geminiKeyRefused })
        case .success(let close):
            if close?.code == 4003 {
                return .failed(
                    SessionFailure(.authentication, "Sarvam refused the key (close 4003)", closeCode: 4003),
                    healthy: false
                )
            }
            return .failed(SessionFailure.fromClose(code: close?.code, reason: close?.reason), healthy: result.ready)
        }
    }

    private func serve(inbound: WebSocketInbound, outbound: any WebSocketOutbound, result: ConnectionRecord)
        async throws
    {
        result.ready = true
        // The fixed parts of the text requests are encoded now, and a turn's decoders and text paths run once on
        // made-up messages, while the user has not spoken yet: not in the first answer's time.
        _ = try? requestBody([])
        CascadeWarmUp.once
        runtime.count { $0.readies += 1 }
        runtime.emit(.link(.connected))
        runtime.emit(.conversation(.listening))
        try await ConnectionPhases.serve(
            inbound,
            alongside: [
                { [self] in try await sendLoop(outbound) },
                { [self] in try await keepAlive(outbound) },
                { [self] in if let failure = await keyRefusals.next() { throw failure } },
            ]
        ) { [self] frame in
            guard let event = runtime.decode(frame, with: { (try SpeechToTextEvent.decode($0), []) }) else {
                return .keepReading
            }
            if event == .speechStarted { openTextAhead() }
            let actions = state.withLock { state -> [CascadeMachine.Action] in
                switch event {
                case .speechStarted: return state.machine.speechStarted(played: played(state))
                case .speechEnded: return state.machine.speechEnded()
                case .transcript(let text, _): return state.machine.transcribed(text, now: elapsed())
                case .error(let message):
                    return [.warning("speech-to-text: \(message)")]
                case .unknown(let type): return [.debug("speech-to-text: skipped \(type)")]
                }
            }
            perform(actions)
            return .keepReading
        }
    }

    private func sendLoop(_ outbound: any WebSocketOutbound) async throws {
        // Each frame goes as soon as it is there, not gathered: the service ends a turn on the audio that completes
        // its endpointing silence, so every millisecond that audio waits here is a millisecond more before the
        // answer. A backlog (after a reconnect) still goes in messages of up to 100 ms.
        let chunk = AudioFormat.microphone.samples(in: .milliseconds(100))
        while let item = await runtime.input.next(maxAudio: chunk) {
            switch item {
            case .audio(let audio):
                do {
                    try await outbound.send(
                        text: SpeechToTextRequest.audio(
                            samples: audio.samples,
                            sampleRate: AudioFormat.microphone.sampleRate
                        ).text
                    )
                } catch {
                    runtime.input.pushFront([item])
                    throw error
                }
                state.withLock { $0.lastAudioSent = elapsed() }
                runtime.sentAudio(audio)
            case .audioStreamEnd, .activityEnd:
                try await outbound.send(text: SpeechToTextRequest.flush.text)
            case .activityStart, .interrupt:
                openTextAhead()
                perform(state.withLock { $0.machine.localSpeechStarted(played: played($0)) })
            case .text(let text):
                perform(state.withLock { $0.machine.userText(text) })
            }
        }
        if runtime.isFinishing {
            try? await outbound.send(text: SpeechToTextRequest.flush.text)
            try? await outbound.close(code: 1000, reason: "session finished")
        }
    }

    /// The service cuts a socket that gets no audio for about a minute: silence keeps it open. Each second also tells
    /// the machine the time (a user turn's time bound).
    private func keepAlive(_ outbound: any WebSocketOutbound) async throws {
        let microphone = AudioFormat.microphone
        let silence = [Int16](repeating: 0, count: microphone.samples(in: .milliseconds(100)))
        let quietMessage = SpeechToTextRequest.audio(samples: silence, sampleRate: microphone.sampleRate).text
        while true {
            try await runtime.clock.sleep(for: .seconds(1))
            // A user turn that never ends is answered at its time bound, even when nothing more comes.
            perform(state.withLock { $0.machine.tick(now: elapsed()) })
            let quiet = elapsed() - state.withLock { $0.lastAudioSent }
            guard quiet >= configuration.keepAliveAfter else { continue }
            try await outbound.send(text: quietMessage)
            state.withLock { $0.lastAudioSent = elapsed() }
        }
    }

    // MARK: - The speech socket

    /// Keeps a speech socket open while the session lives: sentences and flushes go to the current one; a
    /// replacement closes it (its audio no longer counts) and opens the next.
    private func speechLoop() async {
        let commands = speechCommands
        await runtime.keepLink("speech socket", link: configuration.link) { _ in
            let opened = Mutex(false)
            let generation = state.withLock { $0.speechGeneration }
            let request = WebSocketRequest(
                url: configuration.textToSpeechURL,
                headers: [("api-subscription-key", configuration.sarvamKey.reveal())]
            )
            let outcome = await transport.exchange(request) { [self] inbound, outbound in
                try await outbound.send(text: try TextToSpeechRequest.config(configuration.voice).encoded())
                opened.withLock { $0 = true }
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await self.readSpeech(inbound, generation: generation) }
                    group.addTask {
                        // What came together goes together (a sentence and its flush: one write, not two).
                        while var batch = await commands.nextAll() {
                            var messages: [String] = []
                            while !batch.isEmpty {
                                switch batch.removeFirst() {
                                case .speak(let text): messages.append(try TextToSpeechRequest.text(text).encoded())
                                case .flush: messages.append(try TextToSpeechRequest.flush.encoded())
                                case .replace:
                                    // What follows is the next reply's, for the next socket.
                                    commands.pushFront(batch)
                                    try? await outbound.close(code: 1000, reason: "reply abandoned")
                                    return
                                }
                            }
                            try await outbound.send(texts: messages)
                        }
                    }
                    group.addTask {
                        while true {
                            try await self.runtime.clock.sleep(for: self.configuration.pingInterval)
                            try await outbound.send(text: try TextToSpeechRequest.ping.encoded())
                        }
                    }
                    _ = try await group.next()
                    group.cancelAll()
                }
            }
            // Closed by the service (not replaced from here, which moved the generation on first): what it held of a
            // reply will not be spoken.
            let closedByPeer = state.withLock { state -> Bool in
                defer { if state.speechGeneration == generation { state.speechGeneration += 1 } }
                return state.speechGeneration == generation
            }
            if Task.isCancelled || runtime.isFinishing { return .finished }
            switch outcome {
            case .success(let close):
                guard closedByPeer else { return .switched }  // replaced from here: the next reply's socket, at once
                let how = close.map { "close \($0.code.map(String.init) ?? "without a code")" } ?? "closed"
                let actions = state.withLock { $0.machine.speechSocketClosed(how) }
                // What the failed reply still had queued for the socket is not for the next one.
                if !actions.isEmpty { commands.removeAll() }
                perform(actions)
                // A polite close of a socket that worked: the next one at once; anything else backs off.
                if close?.code == 1000 || close?.code == nil, opened.withLock({ $0 }) { return .switched }
                return .failed(
                    SessionFailure(.transient, "the service closed it (\(how))"),
                    healthy: opened.withLock { $0 }
                )
            case .failure(let failure):
                perform(state.withLock { $0.machine.replyFailed("the speech service: \(failure.message)") })
                return .failed(failure, healthy: opened.withLock { $0 })
            }
        }
    }

    private func readSpeech(_ inbound: WebSocketInbound, generation: Int) async throws {
        while let frame = try await inbound.next() {
            guard state.withLock({ $0.speechGeneration == generation }) else { continue }
            guard let event = runtime.decode(frame, with: { (try TextToSpeechEvent.decode($0), []) }) else { continue }
            let actions = state.withLock { state -> [CascadeMachine.Action] in
                guard state.speechGeneration == generation else { return [] }
                switch event {
                case .audio(let samples):
                    if state.firstAudioAt == nil { state.firstAudioAt = elapsed() }
                    return state.machine.speechAudio(samples, sampleRate: configuration.voice.sampleRate)
                case .final: return state.machine.speechFinished()
                case .error(let message): return state.machine.replyFailed("the speech service: \(message)")
                case .unknown(let type): return [.debug("speech: skipped \(type)")]
                }
            }
            perform(actions)
        }
    }

    // MARK: - The text model

    /// After the text service refused the Gemini key, asks it about the model (`models.get`, no text generated)
    /// before the next connection is ready: while it refuses the key the session stays in its error state instead
    /// of listening for a turn it cannot answer. The failure when it refuses; nil when it takes the key or cannot
    /// say (the next text request tells).
    private func checkGeminiKey() async -> SessionFailure? {
        let request = HTTPRequest(
            url: configuration.modelURL,
            headers: [("x-goog-api-key", configuration.geminiKey.reveal())],
            timeout: configuration.replyHeadTimeout
        )
        guard let response = try? await http.send(request) else { return nil }
        guard GeminiKeyRefusal.refuses(status: response.status, body: response.body) else {
            state.withLock { $0.geminiKeyRefused = false }
            return nil
        }
        return GeminiKeyRefusal.failure(
            status: response.status,
            body: response.body,
            origin: configuration.geminiKeyOrigin,
            key: configuration.geminiKey
        )
    }

    /// The user began to speak: a text request will likely follow, so its connection (TCP and TLS: two round trips
    /// on a real network) is opened now rather than after the turn ends. One kept at a time, for at most
    /// ``CascadeConfiguration/openAheadLifetime`` (a server closes an idle connection after a while).
    private func openTextAhead() {
        let now = elapsed()
        let lifetime = configuration.openAheadLifetime
        guard !state.withLock({ $0.ahead != nil && now - $0.aheadOpenedAt < lifetime }) else { return }
        let ahead = http.openAhead(to: configuration.replyURL)
        let replaced = state.withLock { state -> (any HTTPOpenedAhead)? in
            defer {
                state.ahead = ahead
                state.aheadOpenedAt = now
            }
            return state.ahead
        }
        replaced?.close()
    }

    /// The connection opened ahead, if it is fresh enough to use (taken: the next request opens its own).
    private func takeTextAhead() -> (any HTTPOpenedAhead)? {
        let now = elapsed()
        let (ahead, fresh) = state.withLock { state in
            defer { state.ahead = nil }
            return (state.ahead, now - state.aheadOpenedAt < configuration.openAheadLifetime)
        }
        guard fresh else {
            ahead?.close()
            return nil
        }
        return ahead
    }

    /// The body of a text request for `contents`, put together from the parts encoded for earlier requests.
    private func requestBody(_ contents: [Content]) throws -> Data {
        let generation = tools.catalog?.generation ?? 0
        let current = tools.current
        return try bodies.withLock { bodies in
            var made =
                try bodies.flatMap { $0.generation == generation ? $0.bodies : nil }
                ?? GenerateContentBodies(
                    GenerateContentRequest(
                        contents: [],
                        systemInstruction: configuration.systemInstruction,
                        // A schema from elsewhere (an MCP server's) goes as JSON Schema, untranslated.
                        tools: current.map {
                            FunctionDeclaration(
                                name: $0.name,
                                description: $0.description,
                                parameters: $0.parametersJSONSchema == nil ? $0.parameters : nil,
                                parametersJsonSchema: $0.parametersJSONSchema
                            )
                        },
                        temperature: configuration.temperature,
                        maxOutputTokens: configuration.maxOutputTokens,
                        thinkingLevel: configuration.thinkingLevel
                    )
                )
            defer { bodies = (made, generation) }
            return try made.body(contents)
        }
    }

    private func requestReply(_ contents: [Content]) {
        let body: Data
        do {
            body = try requestBody(contents)
        } catch {
            perform(state.withLock { $0.machine.replyFailed("cannot encode the request: \(error)") })
            return
        }
        let request = HTTPRequest(
            method: "POST",
            url: configuration.replyURL,
            headers: [
                ("x-goog-api-key", configuration.geminiKey.reveal()), ("Content-Type", "application/json"),
                ("Accept", "text/event-stream"),
            ],
            body: body,
            headTimeout: configuration.replyHeadTimeout
        )
        let task = Task { [self] in
            let retry = configuration.replyRetry
            var backoff = retry.backoff
            var random = SeededRandom(seed: configuration.link.randomSeed ?? UInt64.random(in: .min ... .max))
            var attempt = 1
            var ahead = takeTextAhead()
            while true {
                let now = elapsed()
                guard state.withLock({ $0.requestRate.admit(now: now) }) else {
                    ahead?.close()
                    let limit = configuration.requestsPerMinute
                    perform(
                        state.withLock {
                            $0.machine.replyFailed(
                                "the text model was asked \(limit) times in the last minute: not again yet"
                            )
                        }
                    )
                    return
                }
                let outcome = await attemptReply(request, on: ahead)
                ahead = nil
                guard !Task.isCancelled else { return }
                switch outcome {
                case .done:
                    return
                case .failed(let message):
                    perform(state.withLock { $0.machine.replyFailed(message) })
                    return
                case .keyRefused(let failure):
                    // The reply stops and says so (the turn is not complete), then the session fails with the
                    // authentication error: no turn can be answered with this key.
                    state.withLock { $0.geminiKeyRefused = true }
                    perform(state.withLock { $0.machine.replyRefused(failure.message) })
                    keyRefusals.push(failure)
                    return
                case .turnedAway(let failure, let asked):
                    guard let wait = retry.wait(after: attempt, asked: asked, backoff: &backoff, using: &random) else {
                        let tries = attempt == 1 ? "" : " (\(attempt) requests)"
                        perform(state.withLock { $0.machine.replyFailed(failure.message + tries) })
                        return
                    }
                    logger.info(
                        "\(failure.message); asking again in \(wait.humanDescription) (request \(attempt + 1) of \(retry.attempts))"
                    )
                    do { try await runtime.clock.sleep(for: wait) } catch { return }
                    attempt += 1
                }
            }
        }
        state.withLock { $0.reply = task }
    }

    /// How one text request went.
    private enum ReplyAttempt {
        /// The answer came (or the request was abandoned).
        case done
        /// It failed after its answer began, or for good: the reply fails with this.
        case failed(String)
        /// The service refused the Gemini key: the reply fails, and the session with an authentication error.
        case keyRefused(SessionFailure)
        /// Turned away before its answer began, with what the service asked to wait (``ReplyRetry``).
        case turnedAway(SessionFailure, asked: Duration?)
    }

    /// The most of a refused text request's body that is read (and kept, for its message and its retry delay).
    static let errorBodyLimit = 64 * 1024

    /// Sends the text request once and hands its answer to the machine as it streams.
    private func attemptReply(_ request: HTTPRequest, on ahead: (any HTTPOpenedAhead)?) async -> ReplyAttempt {
        // Once a chunk reached the machine the request is not asked again: part of it may have been spoken.
        var began = false
        var finished = false
        func handle(_ items: [ReplyStreamReader.Item]) -> ReplyAttempt? {
            for item in items {
                switch item {
                case .chunk(let chunk):
                    began = true
                    if chunk.finishReason != nil { finished = true }
                    perform(state.withLock { $0.machine.replyChunk(chunk) })
                case .error(let message):
                    let failure = SessionFailure(.transient, "the text model: \(message)")
                    return began ? .failed(failure.message) : .turnedAway(failure, asked: nil)
                case .undecodable:
                    logger.debug("an undecodable reply event, skipped")
                }
            }
            return nil
        }
        do {
            let response = try await http.stream(request, on: ahead)
            guard response.status == 200 else {
                // What is kept of an error's body is all that is read of it.
                var bytes = Data()
                for try await chunk in response.body {
                    bytes += chunk.prefix(Self.errorBodyLimit - bytes.count)
                    if bytes.count >= Self.errorBodyLimit { break }
                }
                response.body.cancel()
                if GeminiKeyRefusal.refuses(status: response.status, body: bytes) {
                    return .keyRefused(
                        GeminiKeyRefusal.failure(
                            status: response.status,
                            body: bytes,
                            origin: configuration.geminiKeyOrigin,
                            key: configuration.geminiKey
                        )
                    )
                }
                let failure = SessionFailure.fromHTTP(
                    status: response.status,
                    what: "the text model",
                    body: bytes,
                    hiding: [configuration.geminiKey]
                )
                guard ReplyRetry.statuses.contains(response.status) else { return .failed(failure.message) }
                return .turnedAway(
                    failure,
                    asked: ReplyRetry.asked(retryAfter: response.header("Retry-After"), body: bytes)
                )
            }
            var reader = ReplyStreamReader()
            for try await data in response.body {
                if Task.isCancelled {
                    response.body.cancel()
                    return .done
                }
                if let end = handle(reader.feed(data)) {
                    response.body.cancel()
                    return end
                }
            }
            if let end = handle(reader.finish()) { return end }
            guard !Task.isCancelled else { return .done }
            guard finished else {
                let failure = SessionFailure(.transient, "the text model's answer ended before it finished")
                return began ? .failed(failure.message) : .turnedAway(failure, asked: nil)
            }
            perform(state.withLock { $0.machine.replyFinished() })
            return .done
        } catch {
            guard !Task.isCancelled else { return .done }
            let failure = SessionFailure.fromHTTPClient(error, what: "the text model")
            guard !began, failure.kind == .transient else { return .failed(failure.message) }
            return .turnedAway(failure, asked: nil)
        }
    }

    // MARK: - Actions

    private func perform(_ actions: [CascadeMachine.Action]) {
        // The speech socket's commands go together, once all are known: a sentence and its flush in one write.
        var speech: [SpeechCommand] = []
        defer { speechCommands.push(contentsOf: speech) }
        for action in actions {
            switch action {
            case .emit(let event):
                runtime.emit(event)
            case .requestReply(let contents):
                state.withLock { $0.firstAudioAt = nil }
                requestReply(contents)
            case .cancelReply:
                let task = state.withLock { state in
                    defer { state.reply = nil }
                    return state.reply
                }
                task?.cancel()
            case .speak(let sentence):
                speech.append(.speak(sentence))
            case .flushSpeech:
                speech.append(.flush)
            case .replaceSpeech:
                state.withLock { $0.speechGeneration += 1 }
                speech.append(.replace)
            case .startReplyDeadline(let number):
                let deadline = configuration.replyDeadline
                let task = Task { [self, clock = runtime.clock] in
                    do { try await clock.sleep(for: deadline) } catch { return }
                    perform(state.withLock { $0.machine.replyTimedOut(number, after: deadline) })
                }
                let earlier = state.withLock { state in
                    defer { state.deadline = task }
                    return state.deadline
                }
                earlier?.cancel()
            case .runTool(let call):
                let id = call.id ?? ""
                let task = Task { [self] in
                    let (result, _) = await tools.call(name: call.name, arguments: call.args ?? .object([:]))
                    if Task.isCancelled { return }
                    state.withLock { _ = $0.toolTasks.removeValue(forKey: id) }
                    perform(state.withLock { $0.machine.toolFinished(id, name: call.name, result: result) })
                }
                state.withLock { $0.toolTasks[id] = task }
            case .debug(let text):
                logger.debug("\(text)")
            case .warning(let text):
                logger.warning("\(text)")
            }
        }
    }
}

/// How many requests went out in the last minute: a new one is admitted while fewer than ``perMinute`` did.
struct RequestRate: Sendable {
    let perMinute: Int
    /// When the requests of the last minute went out, oldest first (at most ``perMinute``).
    private var times: [Duration] = []

    init(perMinute: Int) { self.perMinute = max(1, perMinute) }

    /// Admits a request at `now` (counting it), or refuses it when the minute's are used.
    mutating func admit(now: Duration) -> Bool {
        times.removeAll { now - $0 >= .seconds(60) }
        guard times.count < perMinute else { return false }
        times.append(now)
        return true
    }
}
