import HarkBackendKit
import HarkCore
import Logging
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A conversation with the Gemini Live API over one WebSocket at a time, resumed across goAways,
/// drops and restarts. The protocol decisions live in ``LiveSessionMachine``; this class performs them.
public final class GeminiLiveSession: RuntimeSession {
    public let runtime: SessionRuntime
    private let configuration: GeminiLiveConfiguration
    private let transport: any WebSocketTransport
    private let tokens: EphemeralTokenSource?
    private let tools: ToolRegistry
    private let codec = LiveCodec()
    private let state: Mutex<State>
    /// Time on the session's clock since it was made (the time base of the pacer and the unconfirmed log).
    private let elapsed: @Sendable () -> Duration
    private var logger: Logger { runtime.logger }
    private var input: SessionInputQueue { runtime.input }

    private struct State {
        var machine: LiveSessionMachine
        var outbound: (any WebSocketOutbound)?
        var pendingToolResponses: [ClientMessage] = []
        var toolTasks: [String: Task<Void, Never>] = [:]
        var currentResult: ConnectionRecord?
        var switchRequested = false
        /// The number of the last message sent on this connection, counted as the service counts
        /// them: the setup is 0.
        var sentIndex: Int64 = 0
        /// Input sent since the last resumable update, sent again if the connection ends.
        var unconfirmed: UnconfirmedInput
        /// The input sent again holds its own `activityStart`: do not reopen the activity after setup.
        var skipActivityReplay = false
        /// Samples at the front of the input that went out before: counted as resent when they go again.
        var resendSamplesPending = 0
        /// A connection was left because a transcribed question went unanswered; until the next
        /// `turnComplete`, a transcribed question no longer counts as owed.
        var leftOnceForAnUnansweredQuestion = false
        /// Paces a backlog (nil: sent at once).
        var pacer: CatchUpPacer?
        /// What was said (final transcripts), to seed a fresh session after a refused resumption.
        var history: ConversationHistory?
        /// The next connection starts a fresh session that is told ``history`` before anything else.
        var seedHistory = false
        /// The generation of the tool catalog the service was last told (in `setup` or a `contextUpdate`).
        var declaredGeneration = 0
        /// The model takes no `contextUpdate`, and that was said once.
        var toldNoContextUpdate = false
    }

    /// A session; nothing happens until ``run()``.
    /// - Parameters:
    ///   - tokens: needed for ephemeral-token authentication (fetches one per new session).
    ///   - clock: times the setup timeout, the backoff and the goAway deadline.
    public init(
        configuration: GeminiLiveConfiguration,
        transport: any WebSocketTransport,
        tokens: EphemeralTokenSource? = nil,
        tools: ToolRegistry = ToolRegistry(),
        clock: any Clock<Duration> = ContinuousClock(),
        logger: Logger,
        audioSent: (@Sendable (AudioChunk) -> Void)? = nil
    ) {
        let manual = configuration.setup.realtimeInputConfig?.isManualActivity ?? false
        let machine = LiveSessionMachine(
            manualActivity: manual,
            handle: configuration.initialHandle,
            profile: configuration.profile
        )
        self.configuration = configuration
        self.transport = transport
        self.tokens = tokens
        self.tools = tools
        self.elapsed = Self.stopwatch(clock)
        self.runtime = SessionRuntime(
            inputBound: configuration.inputBound,
            clock: clock,
            logger: logger,
            audioSent: audioSent
        )
        self.state = Mutex(
            State(
                machine: machine,
                unconfirmed: UnconfirmedInput(boundSamples: Int(configuration.inputBound.milliseconds) * 16),
                pacer: configuration.catchUpRate.map { CatchUpPacer(rate: $0) },
                history: configuration.profile.historyConfig ? configuration.history : nil
            )
        )
    }

    /// The tools of `setup` (built-in ones) and the function declarations of every tool now: what a `setup` or a
    /// `contextUpdate` declares.
    private func declaredTools() -> [Tool]? {
        var list = configuration.setup.tools ?? []
        let current = tools.current
        if !current.isEmpty {
            let declarations = state.withLock { state in current.map { state.machine.declaration(of: $0) } }
            list.append(Tool(functionDeclarations: declarations))
        }
        return list.isEmpty ? nil : list
    }

    /// Tells the service of tools that changed since it was last told: a `contextUpdate` on models that take
    /// one (the conversation goes on), else nothing until the next connection's `setup`.
    private func watchTools(_ catalog: ToolCatalog, outbound: any WebSocketOutbound) async throws {
        let changes = catalog.changes()
        try await declareChangedTools(catalog, outbound: outbound)
        for await _ in changes {
            try await declareChangedTools(catalog, outbound: outbound)
        }
    }

    private func declareChangedTools(_ catalog: ToolCatalog, outbound: any WebSocketOutbound) async throws {
        let generation = catalog.generation
        guard state.withLock({ $0.declaredGeneration != generation }) else { return }
        guard configuration.profile.contextUpdate else {
            let first = state.withLock { state in
                defer { state.toldNoContextUpdate = true }
                return !state.toldNoContextUpdate
            }
            if first {
                logger.notice(
                    "the tools changed; \(configuration.setup.model) takes no contextUpdate, so the model gets them with the next connection"
                )
            }
            return
        }
        let list = declaredTools() ?? []
        state.withLock { state in
            state.declaredGeneration = generation
            state.sentIndex += 1
        }
        try await outbound.send(text: try codec.encode(.contextUpdate(ContextUpdate(tools: list))))
        runtime.count { $0.other["contextUpdates", default: 0] += 1 }
        let count = list.reduce(0) { $0 + ($1.functionDeclarations?.count ?? 0) }
        logger.info("the tools changed: \(count) functions declared to the model mid-session (contextUpdate)")
    }

    private static func stopwatch<C: Clock<Duration>>(_ clock: C) -> @Sendable () -> Duration {
        let start = clock.now
        return { start.duration(to: clock.now) }
    }

    /// The last resumable handle.
    public var resumptionHandle: String? { state.withLock { $0.machine.handle } }

    public func finish() {
        // Connected: the sender sees the closed queue and closes the socket politely (1000).
        // Otherwise (connecting, backing off): stop at once.
        runtime.finish(connected: state.withLock { $0.outbound != nil })
    }

    public func run() async throws {
        defer { cancelAllTools() }
        try await runtime.runConnections(machine: configuration.link.reconnectMachine()) { [self] _ in
            await connectOnce()
        } startFresh: { [self] in
            let actions = state.withLock { state in
                // The conversation goes on in a fresh session that is told what was said.
                state.seedHistory = !(state.history?.isEmpty ?? true)
                return state.machine.forgetHandle()
            }
            perform(localActions: actions)
            configuration.resumptionStore?.clear()
        }
    }

    // MARK: - One connection

    private var isFinishing: Bool { runtime.isFinishing }

    private func connectOnce() async -> ConnectionEnd {
        let resuming = state.withLock { $0.machine.handle != nil }
        let request: WebSocketRequest
        do {
            request = try await makeRequest()
        } catch let failure as SessionFailure {
            return .failed(failure, healthy: false)
        } catch {
            return .failed(SessionFailure(.transient, "\(error)"), healthy: false)
        }
        logger.info("connecting to \(request.loggableURL)\(resuming ? " (resuming)" : "")")
        if resuming { runtime.count { $0.resumptions += 1 } }
        let result = ConnectionRecord()
        state.withLock { $0.currentResult = result }
        let outcome = await transport.exchange(request) { [self] inbound, outbound in
            try await self.serve(inbound: inbound, outbound: outbound, result: result)
        }
        let actions = state.withLock { state in
            state.outbound = nil
            return state.machine.connectionClosed()
        }
        perform(localActions: actions)
        if isFinishing { return .finished }
        requeueUnconfirmed()
        let failure: SessionFailure
        switch outcome {
        case .failure(let failed):
            // Refused, unreachable, a TLS hiccup, a declined upgrade (HTTP 4xx/5xx before the WebSocket)
            // and an oversized frame are worth another try after a backoff; an untrusted certificate is
            // an error to show.
            return .failed(failed, healthy: result.ready)
        case .success(let close):
            if result.switched { return switchedEnd() }
            failure = SessionFailure.fromClose(code: close?.code, reason: close?.reason)
            if let code = close?.code {
                let reason = RemoteText.printable(close?.reason ?? "", limit: 200)
                logger.info("connection closed by the service: \(code) \(reason)")
            }
        }
        if resuming, !result.ready, failure.closeCode == 1007 || failure.closeCode == 1011 {
            return .resumptionRefused(failure)
        }
        if failure.closeCode == 1000, result.ready {
            // The connection-lifetime close without a goAway we acted on: resume at once.
            return switchedEnd()
        }
        return .failed(failure, healthy: result.ready)
    }

    /// The connection was left to resume on a new one, unless the owner says the session is done.
    private func switchedEnd() -> ConnectionEnd {
        guard configuration.resumeAfterGoAway() else {
            logger.info("goAway: the session is done, not resuming")
            return .finished
        }
        return .switched
    }

    /// Puts what the service had not confirmed back at the front of the input, for the next connection.
    private func requeueUnconfirmed() {
        let (held, samples, holdsActivityStart) = state.withLock { state in
            let samples = state.unconfirmed.audioSamples
            let holdsActivityStart = state.unconfirmed.holdsActivityStart
            let held = state.unconfirmed.takeAll()
            if !held.isEmpty {
                state.skipActivityReplay = holdsActivityStart
                state.resendSamplesPending += samples
            }
            return (held, samples, holdsActivityStart)
        }
        guard !held.isEmpty else { return }
        input.pushFront(held)
        let audio = Duration.milliseconds(samples / 16).humanDescription
        logger.info(
            "the connection ended before the service confirmed \(held.count) inputs (\(audio) of audio\(holdsActivityStart ? ", with an activity start" : "")): sending them again on the next connection"
        )
    }

    private func makeRequest() async throws -> WebSocketRequest {
        switch configuration.authentication {
        case .apiKey(let key):
            let url = configuration.webSocketURL(constrained: false)
            return WebSocketRequest(url: url, headers: [("x-goog-api-key", key.reveal())], loggableURL: url)
        case .tokenServer, .mintedToken:
            guard let tokens else {
                throw SessionFailure(.configuration, "ephemeral tokens need an HTTP client")
            }
            let token = try await tokens.token(for: configuration)
            let url = configuration.webSocketURL(constrained: true)
            return WebSocketRequest(url: url, headers: [("Authorization", "Token \(token.reveal())")], loggableURL: url)
        }
    }

    private func serve(inbound: WebSocketInbound, outbound: any WebSocketOutbound, result: ConnectionRecord)
        async throws
    {
        var setup = configuration.setup
        let (handle, seed) = state.withLock { state -> (String?, [ConversationHistory.Turn]) in
            state.machine.connectionOpened()
            state.switchRequested = false
            state.sentIndex = 0
            state.unconfirmed.removeAll()
            let seed = state.seedHistory && state.machine.handle == nil ? state.history?.turns ?? [] : []
            return (state.machine.handle, seed)
        }
        runtime.count { $0.connections += 1 }
        let generation = tools.catalog?.generation ?? 0
        setup.tools = declaredTools()
        state.withLock { $0.declaredGeneration = generation }
        if setup.sessionResumption != nil || handle != nil {
            setup.sessionResumption = SessionResumptionConfig(handle: handle)
        }
        if !seed.isEmpty { setup.historyConfig = HistoryConfig(initialHistoryInClientContent: true) }
        try await outbound.send(text: try codec.encode(.setup(setup)))

        let frame: @Sendable (WebSocketMessage) async throws -> FrameVerdict = { [self] message in
            try await self.handleFrame(message, outbound: outbound, result: result)
        }
        let completed = try await runtime.awaitReady(
            inbound,
            within: configuration.setupTimeout,
            waitingFor: "setupComplete",
            handle: frame
        )
        guard completed else { return }  // closed before setup completed
        result.ready = true
        if !seed.isEmpty {
            // Before any realtime input: the service takes these turns without answering them.
            let turns = seed.map { Content.text($0.text, role: $0.role == .user ? "user" : "model") }
            try await outbound.send(
                text: try codec.encode(.clientContent(ClientContent(turns: turns, turnComplete: true)))
            )
            state.withLock { state in
                state.seedHistory = false
                state.sentIndex += 1
            }
            runtime.count { $0.other["historySeeds", default: 0] += 1 }
            logger.notice("resumption refused; continued with \(seed.count) turns of history")
        }
        let (replay, pendingTools) = state.withLock { state -> ([ClientMessage], [ClientMessage]) in
            state.outbound = outbound
            let pending = state.pendingToolResponses
            state.pendingToolResponses = []
            let replay = state.skipActivityReplay ? [] : state.machine.replayAfterSetup()
            state.skipActivityReplay = false
            state.sentIndex += Int64(replay.count + pending.count)
            return (replay, pending)
        }
        for message in replay + pendingTools { try await outbound.send(text: try codec.encode(message)) }

        // The sender may stop early (a goAway holds input for the next connection); the reader ends when the
        // connection closes, and then the sender and the stall check stop too.
        var alongside: [@Sendable () async throws -> Void] = [{ [self] in try await self.sendLoop(outbound: outbound) }]
        if let period = configuration.stallTimeout {
            alongside.append { [self] in try await self.checkForStalls(every: period) }
        }
        if let catalog = tools.catalog {
            alongside.append { [self] in try await self.watchTools(catalog, outbound: outbound) }
        }
        try await ConnectionPhases.serve(inbound, alongside: alongside, handle: frame)
    }

    /// Fails the connection when the service owed a reply for a whole `period` and made no progress
    /// (``LiveSessionMachine/progress``: frames that are only alive do not count): a stalled server sends no close
    /// and may answer no ping for minutes, or keep the link alive with `usageMetadata` and say nothing.
    private func checkForStalls(every period: Duration) async throws {
        var before = (owed: false, progress: -1)
        while true {
            try await runtime.clock.sleep(for: period)
            let now = state.withLock { state in
                let machine = state.machine
                // A transcribed question alone counts once: a service may choose not to answer what it
                // heard (noise, proactive audio), and that must not become a reconnect every 30 s.
                let heard = machine.userHeard && !state.leftOnceForAnUnansweredQuestion
                let owed =
                    (machine.turnInFlight || heard || machine.exchangeInProgress || machine.conversation == .thinking)
                    && machine.pendingToolCalls.isEmpty
                    && state.pendingToolResponses.isEmpty
                return (owed: owed, progress: state.machine.progress)
            }
            if before.owed, now.owed, now.progress == before.progress {
                let actions = state.withLock { state in
                    // Owed only because a question was transcribed: that counts once.
                    if !state.machine.turnInFlight, state.machine.conversation != .thinking {
                        state.leftOnceForAnUnansweredQuestion = true
                    }
                    return state.machine.exchangeAbandoned()
                }
                perform(localActions: actions)
                throw SessionFailure(
                    .transient,
                    "the service went silent mid-turn (no progress for \(period.humanDescription)); reconnecting"
                )
            }
            before = now
        }
    }

    /// Decodes and handles one server frame: `.ready` when it was `setupComplete`.
    private func handleFrame(_ frame: WebSocketMessage, outbound: any WebSocketOutbound, result: ConnectionRecord)
        async throws
        -> FrameVerdict
    {
        let decoded = runtime.decode(frame) { bytes in
            let decoded = try codec.decodeServer(bytes)
            return (decoded.message, decoded.unknownFields)
        }
        guard let message = decoded else { return .keepReading }
        let now = elapsed()
        let actions = state.withLock { state in
            switch message.payload {
            case .sessionResumptionUpdate(let update) where update.resumableHandle != nil:
                state.unconfirmed.confirmed(
                    through: update.lastConsumedClientMessageIndex,
                    marginSamples: Int(configuration.confirmationMargin.milliseconds) * 16,
                    lag: configuration.confirmationLag,
                    now: now
                )
            case .serverContent(let content) where content.turnComplete == true:
                state.leftOnceForAnUnansweredQuestion = false
                // Without resumption no handle ever confirms: the next connection is a fresh session,
                // which must not hear the answered question again.
                if configuration.setup.sessionResumption == nil, state.machine.handle == nil {
                    state.unconfirmed.removeAll()
                }
            default: break
            }
            let skipped = state.machine.unsupportedRateAudio
            let actions = state.machine.receive(message)
            let newlySkipped = state.machine.unsupportedRateAudio - skipped
            if newlySkipped > 0 { runtime.count { $0.audioMessagesSkipped += newlySkipped } }
            return actions
        }
        try await perform(actions, outbound: outbound, result: result)
        if case .setupComplete(let complete) = message.payload {
            if let id = complete.sessionId, !id.isEmpty {
                runtime.count { $0.serviceSession = RemoteText.printable(id, limit: 120) }
            }
            return .ready
        }
        return .keepReading
    }

    /// Performs the actions that need no connection (after it closed).
    private func perform(localActions actions: [LiveSessionMachine.Action]) {
        for action in actions {
            switch action {
            case .emit(let event): emit(event)
            case .debug(let text): logger.debug("\(text)")
            case .info(let text): logger.info("\(text)")
            case .warning(let text): logger.warning("\(text)")
            default: break
            }
        }
    }

    /// Delivers `event`, keeping what was said for a fresh session to be told.
    private func emit(_ event: SessionEvent) {
        if case .transcript(let piece) = event, piece.isFinal {
            state.withLock { $0.history?.record(piece) }
        }
        runtime.emit(event)
    }

    private func perform(
        _ actions: [LiveSessionMachine.Action],
        outbound: any WebSocketOutbound,
        result: ConnectionRecord
    )
        async throws
    {
        for action in actions {
            switch action {
            case .emit(let event):
                emit(event)
            case .saveHandle(let handle):
                if let store = configuration.resumptionStore {
                    do {
                        try store.save(
                            handle: handle,
                            model: configuration.setup.model,
                            now: Date().timeIntervalSince1970
                        )
                    } catch {
                        // The error names the file and the reason.
                        logger.warning("\(error)")
                    }
                }
            case .runTool(let call):
                startTool(call)
            case .cancelTools(let ids):
                let tasks = state.withLock { state in ids.compactMap { state.toolTasks.removeValue(forKey: $0) } }
                for task in tasks { task.cancel() }
            case .send(let message):
                let current = state.withLock { state -> (any WebSocketOutbound)? in
                    if state.outbound != nil { state.sentIndex += 1 }
                    return state.outbound
                }
                await sendOrHold(message, on: current)
            case .switchConnection(let reason):
                logger.info("closing the connection to switch (\(reason))")
                result.switched = true
                state.withLock {
                    $0.switchRequested = true; $0.outbound = nil
                }
                try? await outbound.close(code: 1000, reason: "switching connection")
            case .scheduleSwitch(let delay):
                logger.info("goAway: letting the turn in flight finish (at most \(delay.humanDescription))")
                Task { [self, clock = runtime.clock] in
                    try? await clock.sleep(for: delay)
                    let actions = self.state.withLock { $0.machine.switchDeadlineReached() }
                    try? await self.perform(actions, outbound: outbound, result: result)
                }
            case .debug(let text):
                logger.debug("\(text)")
            case .info(let text):
                logger.info("\(text)")
            case .warning(let text):
                logger.warning("\(text)")
            }
        }
    }

    private func sendLoop(outbound: any WebSocketOutbound) async throws {
        let maxSamples = Int(configuration.maxAudioChunk.milliseconds) * 16
        let minSamples = Int(configuration.minAudioChunk.milliseconds) * 16
        while let item = await input.next(maxAudio: maxSamples, minAudio: minSamples) {
            if case .audio(let chunk) = item {
                let now = elapsed()
                let wait = state.withLock { $0.pacer?.delay(sending: chunk.samples.count, at: now) ?? .zero }
                if wait > .zero {
                    do {
                        try await runtime.clock.sleep(for: wait)
                    } catch {
                        input.pushFront([item])
                        throw error
                    }
                }
            }
            // Once the switch is ordered, input waits for the next connection. While a turn in flight
            // finishes after a goAway (draining), input still goes out: the service still reads it, and
            // the handle that ends the turn covers it (what it does not cover is sent again), so the next
            // connection starts with less to send again.
            let phase = state.withLock { $0.switchRequested ? .switching : $0.machine.phase }
            if phase != .ready, phase != .draining {
                input.pushFront([item])
                return
            }
            let (message, actions) = state.withLock { $0.machine.send(item) }
            for case .emit(let event) in actions { emit(event) }
            guard let message else { continue }
            let index = state.withLock { state in
                state.sentIndex += 1
                return state.sentIndex
            }
            let sentAt = elapsed()
            do {
                try await outbound.send(text: try codec.encode(message))
            } catch {
                input.pushFront([item])
                throw error
            }
            let again = state.withLock { state -> Int? in
                state.unconfirmed.sent(item, index: index, at: sentAt)
                guard case .audio(let chunk) = item else { return nil }
                // A resend leads the queue: the first samples of this message may be a repeat.
                let again = min(state.resendSamplesPending, chunk.samples.count)
                state.resendSamplesPending -= again
                return again
            }
            if let again, case .audio(let chunk) = item { runtime.sentAudio(chunk, resent: again) }
        }
        if isFinishing {
            try? await outbound.close(code: 1000, reason: "session finished")
        }
    }

    // MARK: - Tools

    private func startTool(_ call: FunctionCall) {
        let id = call.id ?? ""
        let behavior = tools.tool(named: call.name)?.behavior ?? .blocking
        let task = Task { [self, tools] in
            // Progress goes out as partial results while the call runs (models that take them).
            let progress = ToolProgress { [self] partial in
                guard !Task.isCancelled else { return }
                let (message, outbound) = state.withLock { state in
                    let message = state.machine.toolProgress(
                        id: id,
                        name: call.name,
                        partial: partial,
                        behavior: behavior
                    )
                    if message != nil, state.outbound != nil { state.sentIndex += 1 }
                    return (message, state.outbound)
                }
                guard let message else { return }
                await sendOrHold(message, on: outbound)
            }
            let (result, succeeded) = await tools.call(
                name: call.name,
                arguments: call.args ?? .object([:]),
                progress: progress
            )
            if Task.isCancelled { return }
            let (message, actions, outbound) = state.withLock { state in
                state.toolTasks.removeValue(forKey: id)
                let (message, actions) = state.machine.toolFinished(
                    id: id,
                    name: call.name,
                    result: result,
                    succeeded: succeeded,
                    behavior: behavior
                )
                if message != nil, state.outbound != nil { state.sentIndex += 1 }
                return (message, actions, state.outbound)
            }
            for case .emit(let event) in actions { emit(event) }
            guard let message else { return }
            await sendOrHold(message, on: outbound)
            let switches = actions.filter { if case .switchConnection = $0 { true } else { false } }
            if let outbound, !switches.isEmpty, let result = state.withLock({ $0.currentResult }) {
                try? await perform(switches, outbound: outbound, result: result)
            }
        }
        state.withLock { $0.toolTasks[id] = task }
    }

    /// Sends a tool's message on the connection, or holds it for the next one.
    private func sendOrHold(_ message: ClientMessage, on outbound: (any WebSocketOutbound)?) async {
        if let outbound, (try? await outbound.send(text: try codec.encode(message))) != nil { return }
        state.withLock { $0.pendingToolResponses.append(message) }
    }

    private func cancelAllTools() {
        let tasks = state.withLock { state in
            defer { state.toolTasks.removeAll() }
            return Array(state.toolTasks.values)
        }
        for task in tasks { task.cancel() }
    }
}
