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
public final class GeminiLiveSession: VoiceSession {
    public let events: AsyncStream<SessionEvent>
    private let eventSink: AsyncStream<SessionEvent>.Continuation
    private let configuration: GeminiLiveConfiguration
    private let transport: any WebSocketTransport
    private let tokens: EphemeralTokenSource?
    private let tools: ToolRegistry
    private let clock: any Clock<Duration>
    private let logger: Logger
    private let codec = LiveCodec()
    private let input: SessionInputQueue
    private let state: Mutex<State>
    private let lifecycle = SessionLifecycle()
    /// Time on `clock` since the session was made (the time base of the pacer and the unconfirmed log).
    private let elapsed: @Sendable () -> Duration

    /// Counters a status line or a test reads.
    public struct Statistics: Sendable, Hashable {
        /// Connections opened (setup sent).
        public var connections = 0
        /// Connections that reached `setupComplete`.
        public var setupsCompleted = 0
        /// Connection attempts that failed before setup completed, or connections lost.
        public var failures = 0
        /// Resumptions the service refused.
        public var resumptionsRefused = 0
        /// Input audio samples sent to the service, each counted once however often it went out.
        public var audioSamplesSent = 0
        /// Server frames that could not be decoded and were skipped.
        public var undecodableFrames = 0
        /// Input samples dropped because the hold bound was exceeded.
        public var droppedInputSamples = 0
        /// Audio samples sent again on a new connection because the service had not confirmed them.
        public var audioSamplesResent = 0
    }

    private struct State {
        var machine: LiveSessionMachine
        var statistics = Statistics()
        var outbound: (any WebSocketOutbound)?
        var pendingToolResponses: [ClientMessage] = []
        var toolTasks: [String: Task<Void, Never>] = [:]
        var currentResult: ConnectionResult?
        var loggedDecodeKinds: Set<String> = []
        var loggedUnknownFields: Set<String> = []
        var policy: ReconnectPolicy
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
        /// Frames received on this connection (the stall check's sign of life).
        var framesReceived = 0
        /// Paces a backlog (nil: sent at once).
        var pacer: CatchUpPacer?
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
        logger: Logger
    ) {
        var configuration = configuration
        if !tools.tools.isEmpty {
            let declarations = tools.tools.map {
                FunctionDeclaration(name: $0.name, description: $0.description, parameters: $0.parameters)
            }
            var list = configuration.setup.tools ?? []
            list.append(Tool(functionDeclarations: declarations))
            configuration.setup.tools = list
        }
        self.configuration = configuration
        self.transport = transport
        self.tokens = tokens
        self.tools = tools
        self.clock = clock
        self.elapsed = Self.stopwatch(clock)
        self.logger = logger
        self.input = SessionInputQueue(audioBound: configuration.inputBound)
        (self.events, self.eventSink) = AsyncStream.makeStream(
            of: SessionEvent.self,
            bufferingPolicy: .bufferingNewest(4096)
        )
        let manual = configuration.setup.realtimeInputConfig?.isManualActivity ?? false
        var seedSource = SystemRandomNumberGenerator()
        self.state = Mutex(
            State(
                machine: LiveSessionMachine(manualActivity: manual, handle: configuration.initialHandle),
                policy: ReconnectPolicy(
                    backoff: configuration.backoff,
                    rejectedRetryDelay: configuration.rejectedRetryDelay,
                    giveUpOnRejection: configuration.giveUpOnRejection,
                    maxConsecutiveFailures: configuration.maxConsecutiveFailures,
                    seed: configuration.randomSeed ?? seedSource.next()
                ),
                unconfirmed: UnconfirmedInput(boundSamples: Int(configuration.inputBound.milliseconds) * 16),
                pacer: configuration.catchUpRate.map { CatchUpPacer(rate: $0) }
            )
        )
    }

    private static func stopwatch<C: Clock<Duration>>(_ clock: C) -> @Sendable () -> Duration {
        let start = clock.now
        return { start.duration(to: clock.now) }
    }

    /// Counters so far.
    public var statistics: Statistics {
        var statistics = state.withLock { $0.statistics }
        statistics.droppedInputSamples = input.droppedSamples
        return statistics
    }

    /// The last resumable handle.
    public var resumptionHandle: String? { state.withLock { $0.machine.handle } }

    public func send(_ input: SessionInput) {
        self.input.push(input)
    }

    public func waitForInputRoom(below samples: Int) async {
        await input.waitForRoom(below: samples)
    }

    public func finish() {
        // Connected: the sender sees the closed queue and closes the socket politely (1000).
        // Otherwise (connecting, backing off): stop at once.
        lifecycle.finish(stopAtOnce: false)
        let connected = state.withLock { $0.outbound != nil }
        input.close()
        if !connected { lifecycle.finish(stopAtOnce: true) }
    }

    public func run() async throws {
        try await lifecycle.run { try await self.runLoop() }
    }

    private func runLoop() async throws {
        defer {
            eventSink.yield(.link(.ended))
            eventSink.finish()
            cancelAllTools()
        }
        var attempt = 0
        while !isFinishing {
            attempt += 1
            eventSink.yield(.link(.connecting(attempt: attempt)))
            let outcome = await connectOnce()
            if isFinishing { return }
            switch outcome {
            case .switched:
                state.withLock { $0.policy.connected() }
                if !configuration.resumeAfterGoAway() {
                    logger.info("goAway: the session is done, not resuming")
                    return
                }
                logger.info("switching to a new connection (resuming)")
                continue
            case .ended:
                return
            case .resumptionRefused(let failure):
                let count = state.withLock { state -> Int in
                    state.statistics.resumptionsRefused += 1
                    state.machine.forgetHandle()
                    return state.statistics.resumptionsRefused
                }
                configuration.resumptionStore?.clear()
                logger.notice("resumption refused (\(failure.message)); starting a fresh session")
                eventSink.yield(.notice("resumption refused; starting a fresh session"))
                if count > 3 { try await pause(for: nextBackoff()) }
            case .failed(let failure, let healthy):
                let decision = state.withLock { state in
                    state.statistics.failures += 1
                    return state.policy.failed(failure, healthy: healthy)
                }
                switch decision {
                case .giveUp(let link, let message):
                    logger.error("\(message)")
                    eventSink.yield(.link(link))
                    throw failure
                case .retry(let delay, let link, let message):
                    if failure.kind == .transient {
                        logger.warning("\(message)")
                    } else {
                        logger.error("\(message)")
                    }
                    eventSink.yield(.link(link))
                    try await pause(for: delay)
                }
            }
        }
    }

    // MARK: - One connection

    private enum Outcome {
        /// goAway handled: resume at once.
        case switched
        /// finish() was called.
        case ended
        /// A resume was refused before setup completed.
        case resumptionRefused(SessionFailure)
        /// The connection failed; `healthy` when it had been working (setup completed).
        case failed(SessionFailure, healthy: Bool)
    }

    private var isFinishing: Bool { lifecycle.isFinishing || Task.isCancelled }

    private func nextBackoff() -> Duration {
        state.withLock { $0.policy.nextDelay() }
    }

    private func pause(for delay: Duration) async throws {
        do {
            try await clock.sleep(for: delay)
        } catch {
            if isFinishing { return }
            throw error
        }
    }

    private func connectOnce() async -> Outcome {
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
        let result = ConnectionResult()
        state.withLock { $0.currentResult = result }
        let close: WebSocketClose?
        defer {
            let actions = state.withLock { $0.machine.connectionClosed() }
            for action in actions {
                switch action {
                case .emit(let event): eventSink.yield(event)
                case .debug(let text): logger.debug("\(text)")
                default: break
                }
            }
        }
        do {
            close = try await transport.connect(request) { [self] inbound, outbound in
                try await self.serve(inbound: inbound, outbound: outbound, result: result)
            }
        } catch let error as WebSocketConnectError {
            state.withLock { $0.outbound = nil }
            if isFinishing { return .ended }
            requeueUnconfirmed()
            // Refused, unreachable, a TLS hiccup, a declined upgrade (HTTP 4xx/5xx before the WebSocket)
            // and an oversized frame are worth another try after a backoff; an untrusted certificate is
            // an error to show.
            return .failed(SessionFailure.fromConnect(error), healthy: result.setupCompleted)
        } catch {
            state.withLock { $0.outbound = nil }
            if isFinishing { return .ended }
            requeueUnconfirmed()
            if let failure = error as? SessionFailure {
                return .failed(failure, healthy: result.setupCompleted)
            }
            return .failed(SessionFailure(.transient, "connection failed: \(error)"), healthy: result.setupCompleted)
        }
        state.withLock { $0.outbound = nil }
        if isFinishing { return .ended }
        requeueUnconfirmed()
        if result.switched { return .switched }
        let failure = SessionFailure.fromClose(code: close?.code, reason: close?.reason)
        if let code = close?.code { logger.info("connection closed by the service: \(code) \(close?.reason ?? "")") }
        if resuming, !result.setupCompleted, failure.closeCode == 1007 || failure.closeCode == 1011 {
            return .resumptionRefused(failure)
        }
        if failure.closeCode == 1000, result.setupCompleted {
            // The connection-lifetime close without a goAway we acted on: resume at once.
            return .switched
        }
        return .failed(failure, healthy: result.setupCompleted)
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

    /// What happened on one connection, filled in by the tasks serving it.
    final class ConnectionResult: Sendable {
        private let lock = Mutex((setupCompleted: false, switched: false))
        var setupCompleted: Bool {
            get { lock.withLock { $0.setupCompleted } }
            set { lock.withLock { $0.setupCompleted = newValue } }
        }
        var switched: Bool {
            get { lock.withLock { $0.switched } }
            set { lock.withLock { $0.switched = newValue } }
        }
    }

    private struct SetupTimeout: Error {}

    private func serve(inbound: WebSocketInbound, outbound: any WebSocketOutbound, result: ConnectionResult)
        async throws
    {
        var setup = configuration.setup
        let handle = state.withLock { state -> String? in
            state.machine.connectionOpened()
            state.statistics.connections += 1
            state.switchRequested = false
            state.sentIndex = 0
            state.unconfirmed.removeAll()
            return state.machine.handle
        }
        if setup.sessionResumption != nil || handle != nil {
            setup.sessionResumption = SessionResumptionConfig(handle: handle)
        }
        try await outbound.send(text: try codec.encode(.setup(setup)))

        // Wait for setupComplete, but no longer than the setup timeout.
        let completed = try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask { [self] in
                while let message = try await inbound.next() {
                    if try await self.handleFrame(message, outbound: outbound, result: result) { return true }
                }
                return false
            }
            group.addTask { [clock, configuration] in
                try await clock.sleep(for: configuration.setupTimeout)
                throw SetupTimeout()
            }
            defer { group.cancelAll() }
            do {
                return try await group.next() ?? false
            } catch is SetupTimeout {
                throw SessionFailure(
                    .transient,
                    "no setupComplete within \(configuration.setupTimeout.humanDescription)"
                )
            }
        }
        guard completed else { return }  // closed before setup completed
        result.setupCompleted = true
        let (replay, pendingTools) = state.withLock { state -> ([ClientMessage], [ClientMessage]) in
            state.statistics.setupsCompleted += 1
            state.outbound = outbound
            let pending = state.pendingToolResponses
            state.pendingToolResponses = []
            let replay = state.skipActivityReplay ? [] : state.machine.replayAfterSetup()
            state.skipActivityReplay = false
            state.sentIndex += Int64(replay.count + pending.count)
            return (replay, pending)
        }
        for message in replay + pendingTools { try await outbound.send(text: try codec.encode(message)) }

        enum Role { case sender, reader, stallCheck }
        try await withThrowingTaskGroup(of: Role.self) { group in
            if let period = configuration.stallTimeout {
                group.addTask { [self] in
                    try await self.checkForStalls(every: period)
                    return .stallCheck
                }
            }
            group.addTask { [self] in
                try await self.sendLoop(outbound: outbound)
                return .sender
            }
            group.addTask { [self] in
                while let message = try await inbound.next() {
                    _ = try await self.handleFrame(message, outbound: outbound, result: result)
                }
                return .reader
            }
            // The sender may stop early (a goAway holds input for the next connection); the reader ends
            // when the connection closes, and then the sender stops too.
            while let role = try await group.next() {
                if role == .reader {
                    group.cancelAll()
                    break
                }
            }
        }
    }

    /// Fails the connection when the service owed a reply for a whole `period` and sent no frame:
    /// a stalled server sends no close and may answer no ping for minutes.
    private func checkForStalls(every period: Duration) async throws {
        var before = (owed: false, frames: -1)
        while true {
            try await clock.sleep(for: period)
            let now = state.withLock { state in
                let machine = state.machine
                // A transcribed question alone counts once: a service may choose not to answer what it
                // heard (noise, proactive audio), and that must not become a reconnect every 30 s.
                let heard = machine.userHeard && !state.leftOnceForAnUnansweredQuestion
                let owed =
                    (machine.turnInFlight || heard || machine.conversation == .thinking)
                    && machine.pendingToolCalls.isEmpty
                    && state.pendingToolResponses.isEmpty
                return (owed: owed, frames: state.framesReceived)
            }
            if before.owed, now.owed, now.frames == before.frames {
                state.withLock { state in
                    // Owed only because a question was transcribed: that counts once.
                    if !state.machine.turnInFlight, state.machine.conversation != .thinking {
                        state.leftOnceForAnUnansweredQuestion = true
                    }
                }
                throw SessionFailure(
                    .transient,
                    "the service went silent mid-turn (no frame for \(period.humanDescription)); reconnecting"
                )
            }
            before = now
        }
    }

    /// Decodes and handles one server frame. Returns true when it was `setupComplete`.
    private func handleFrame(_ frame: WebSocketMessage, outbound: any WebSocketOutbound, result: ConnectionResult)
        async throws
        -> Bool
    {
        state.withLock { $0.framesReceived &+= 1 }
        let message: ServerMessage
        do {
            let decoded = try codec.decodeServer(frame.bytes)
            message = decoded.message
            if !decoded.unknownFields.isEmpty { logUnknownFields(decoded.unknownFields) }
        } catch {
            logUndecodable(error, size: frame.bytes.count)
            return false
        }
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
            return state.machine.receive(message)
        }
        try await perform(actions, outbound: outbound, result: result)
        if case .setupComplete = message.payload { return true }
        return false
    }

    private func perform(
        _ actions: [LiveSessionMachine.Action],
        outbound: any WebSocketOutbound,
        result: ConnectionResult
    )
        async throws
    {
        for action in actions {
            switch action {
            case .emit(let event):
                eventSink.yield(event)
            case .saveHandle(let handle):
                if let store = configuration.resumptionStore {
                    do {
                        try store.save(
                            handle: handle,
                            model: configuration.setup.model,
                            now: Date().timeIntervalSince1970
                        )
                    } catch {
                        logger.warning("cannot persist the resumption handle at \(store.path): \(error)")
                    }
                }
            case .runTool(let call):
                startTool(call)
            case .cancelTools(let ids):
                let tasks = state.withLock { state in ids.compactMap { state.toolTasks.removeValue(forKey: $0) } }
                for task in tasks { task.cancel() }
            case .switchConnection(let reason):
                logger.info("closing the connection to switch (\(reason))")
                result.switched = true
                state.withLock {
                    $0.switchRequested = true; $0.outbound = nil
                }
                try? await outbound.close(code: 1000, reason: "switching connection")
            case .scheduleSwitch(let delay):
                logger.info("goAway: letting the turn in flight finish (at most \(delay.humanDescription))")
                Task { [self, clock] in
                    try? await clock.sleep(for: delay)
                    let actions = self.state.withLock { $0.machine.switchDeadlineReached() }
                    try? await self.perform(actions, outbound: outbound, result: result)
                }
            case .debug(let text):
                logger.debug("\(text)")
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
                        try await clock.sleep(for: wait)
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
            for case .emit(let event) in actions { eventSink.yield(event) }
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
            let fresh = state.withLock { state -> AudioChunk? in
                state.unconfirmed.sent(item, index: index, at: sentAt)
                guard case .audio(let chunk) = item else { return nil }
                // `audioSamplesSent` counts each input sample once; the repeats are counted apart.
                let again = min(state.resendSamplesPending, chunk.samples.count)
                state.resendSamplesPending -= again
                state.statistics.audioSamplesResent += again
                state.statistics.audioSamplesSent += chunk.samples.count - again
                // What went out for the first time: the newest samples (a resend leads the queue).
                guard configuration.audioSent != nil else { return nil }
                guard again > 0 else { return chunk }
                guard again < chunk.samples.count else { return nil }
                var fresh = chunk
                fresh.samples.removeFirst(again)
                return fresh
            }
            if let fresh { configuration.audioSent?(fresh) }
        }
        if isFinishing {
            try? await outbound.close(code: 1000, reason: "session finished")
        }
    }

    // MARK: - Tools

    private func startTool(_ call: FunctionCall) {
        let id = call.id ?? ""
        let task = Task { [self, tools] in
            let (result, succeeded) = await tools.call(name: call.name, arguments: call.args ?? .object([:]))
            if Task.isCancelled { return }
            let (message, actions, outbound) = state.withLock { state in
                state.toolTasks.removeValue(forKey: id)
                let (message, actions) = state.machine.toolFinished(
                    id: id,
                    name: call.name,
                    result: result,
                    succeeded: succeeded
                )
                if message != nil, state.outbound != nil { state.sentIndex += 1 }
                return (message, actions, state.outbound)
            }
            for case .emit(let event) in actions { eventSink.yield(event) }
            guard let message else { return }
            if let outbound, (try? await outbound.send(text: try codec.encode(message))) != nil {
            } else {
                state.withLock { $0.pendingToolResponses.append(message) }
            }
            let switches = actions.filter { if case .switchConnection = $0 { true } else { false } }
            if let outbound, !switches.isEmpty, let result = state.withLock({ $0.currentResult }) {
                try? await perform(switches, outbound: outbound, result: result)
            }
        }
        state.withLock { $0.toolTasks[id] = task }
    }

    private func cancelAllTools() {
        let tasks = state.withLock { state in
            defer { state.toolTasks.removeAll() }
            return Array(state.toolTasks.values)
        }
        for task in tasks { task.cancel() }
    }

    // MARK: - Logging bad input once per kind

    private func logUndecodable(_ error: any Error, size: Int) {
        let kind: String
        switch error as? DecodingError {
        case .dataCorrupted(let context)?:
            kind = "corrupt:" + context.codingPath.map(\.stringValue).joined(separator: ".")
        case .typeMismatch(_, let context)?:
            kind = "type:" + context.codingPath.map(\.stringValue).joined(separator: ".")
        case .valueNotFound(_, let context)?:
            kind = "missing:" + context.codingPath.map(\.stringValue).joined(separator: ".")
        case .keyNotFound(let key, _)?: kind = "key:" + key.stringValue
        default: kind = "other"
        }
        let first = state.withLock { state in
            state.statistics.undecodableFrames += 1
            return state.loggedDecodeKinds.insert(kind).inserted
        }
        if first {
            logger.warning(
                "skipped a server frame that could not be decoded (\(size) bytes, \(kind)); further ones of this kind are only counted"
            )
        }
    }

    private func logUnknownFields(_ paths: [String]) {
        let fresh = state.withLock { state in paths.filter { state.loggedUnknownFields.insert($0).inserted } }
        if !fresh.isEmpty { logger.debug("skipped unknown fields: \(fresh.joined(separator: ", "))") }
    }
}
