import HarkCore
import Logging
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A conversation with a Datagrid voice agent over one WebSocket at a time, reconnected with backoff and
/// continued under the same `conversation_id`. The protocol decisions live in ``DatagridSessionMachine``;
/// this class performs them.
///
/// Each connection starts with the REST hand-off (``DatagridConnectionMode/handoff``, the default: the key
/// goes in the `Authorization` header, the answer holds a WebSocket URL with a short-lived token and the
/// `start` message to send as is) or connects directly with the key as `token` (``DatagridConnectionMode/direct``).
/// Either URL carries a credential, so only its redacted form is logged. Input waits in a bounded queue until
/// `ready`; ``finish()`` sends `stop` and waits briefly for `ended`.
public final class DatagridSession: VoiceSession {
    public let events: AsyncStream<SessionEvent>
    private let eventSink: AsyncStream<SessionEvent>.Continuation
    private let configuration: DatagridConfiguration
    private let transport: any WebSocketTransport
    private let http: (any HTTPClient)?
    private let clock: any Clock<Duration>
    private let logger: Logger
    private let codec = DatagridCodec()
    private let input: SessionInputQueue
    private let state: Mutex<State>
    private let lifecycle = SessionLifecycle()

    /// Counters a status line or a test reads.
    public struct Statistics: Sendable, Hashable {
        /// Hand-off requests answered with a WebSocket URL.
        public var handoffs = 0
        /// Connections opened (`start` sent).
        public var connections = 0
        /// Connections that reached `ready`.
        public var readies = 0
        /// Connection attempts that failed, or connections lost.
        public var failures = 0
        /// Audio samples sent to the service.
        public var audioSamplesSent = 0
        /// Server frames that could not be decoded and were skipped.
        public var undecodableFrames = 0
        /// Server messages of unknown type, skipped.
        public var unknownMessages = 0
        /// `error` messages received.
        public var serviceErrors = 0
        /// True once the session fell back to the direct connection (no hand-off endpoint).
        public var fellBackToDirect = false
        /// Input samples dropped because the hold bound was exceeded.
        public var droppedInputSamples = 0
    }

    private struct State {
        var machine: DatagridSessionMachine
        var statistics = Statistics()
        var outbound: (any WebSocketOutbound)?
        var conversationOver = false
        var loggedDecodeKinds: Set<String> = []
        var loggedUnknown: Set<String> = []
        var policy: ReconnectPolicy
        /// The hand-off endpoint was missing: connect directly (``DatagridConfiguration/directFallback``).
        var useDirect = false
        /// Answer audio frames received, for the quiet watcher.
        var audioFrames = 0
    }

    /// A session; nothing happens until ``run()``.
    /// - Parameters:
    ///   - http: needed for the REST hand-off (``DatagridConnectionMode/handoff``).
    ///   - clock: times the ready and stop timeouts and the backoff.
    ///   - conversationId: a conversation to continue from the first connection on (else the one in
    ///     ``DatagridConfiguration/conversationStore``, if any).
    public init(
        configuration: DatagridConfiguration,
        transport: any WebSocketTransport,
        http: (any HTTPClient)?,
        conversationId: String? = nil,
        clock: any Clock<Duration> = ContinuousClock(),
        logger: Logger
    ) {
        self.configuration = configuration
        self.transport = transport
        self.http = http
        self.clock = clock
        self.logger = logger
        self.input = SessionInputQueue(audioBound: configuration.inputBound)
        (self.events, self.eventSink) = AsyncStream.makeStream(
            of: SessionEvent.self,
            bufferingPolicy: .bufferingNewest(4096)
        )
        var seedSource = SystemRandomNumberGenerator()
        let stored = configuration.conversationStore?.load(
            model: configuration.start.agentId ?? "",
            now: Date().timeIntervalSince1970
        )
        self.state = Mutex(
            State(
                machine: DatagridSessionMachine(
                    conversationId: conversationId ?? configuration.start.conversationId ?? stored
                ),
                policy: ReconnectPolicy(
                    backoff: configuration.backoff,
                    rejectedRetryDelay: configuration.rejectedRetryDelay,
                    giveUpOnRejection: configuration.giveUpOnRejection,
                    maxConsecutiveFailures: configuration.maxConsecutiveFailures,
                    seed: configuration.randomSeed ?? seedSource.next()
                )
            )
        )
    }

    /// Counters so far.
    public var statistics: Statistics {
        var statistics = state.withLock { $0.statistics }
        statistics.droppedInputSamples = input.droppedSamples
        return statistics
    }

    /// The conversation this session continues (from `started`).
    public var conversationId: String? { state.withLock { $0.machine.conversationId } }

    /// The conversation state last reported.
    public var conversationState: ConversationState { state.withLock { $0.machine.conversation } }

    public func send(_ input: SessionInput) {
        self.input.push(input)
    }

    public func waitForInputRoom(below samples: Int) async {
        await input.waitForRoom(below: samples)
    }

    public func finish() {
        // Connected: the sender sees the closed queue, sends `stop` and waits for `ended`.
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
        }
        var attempt = 0
        while !isFinishing {
            attempt += 1
            eventSink.yield(.link(.connecting(attempt: attempt)))
            let outcome = await connectOnce()
            if isFinishing { return }
            switch outcome {
            case .ended:
                logger.info("the conversation ended")
                return
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
        /// finish() was called, or the service ended the conversation.
        case ended
        /// The connection failed; `healthy` when it had been working (`ready` came).
        case failed(SessionFailure, healthy: Bool)
    }

    private var isFinishing: Bool {
        (lifecycle.isFinishing || state.withLock { $0.conversationOver }) || Task.isCancelled
    }

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
        let request: WebSocketRequest
        let first: String
        do {
            (request, first) = try await prepare()
        } catch let failure as SessionFailure {
            return .failed(failure, healthy: false)
        } catch {
            return .failed(SessionFailure(.transient, "cannot prepare the connection: \(error)"), healthy: false)
        }
        let continuing = state.withLock { $0.machine.conversationId != nil }
        logger.info("connecting to \(request.loggableURL)\(continuing ? " (continuing the conversation)" : "")")
        let result = ConnectionResult()
        let close: WebSocketClose?
        defer {
            state.withLock { state in
                for case .emit(let event) in state.machine.connectionClosed() { eventSink.yield(event) }
            }
        }
        do {
            close = try await transport.connect(request) { [self] inbound, outbound in
                try await self.serve(inbound: inbound, outbound: outbound, first: first, result: result)
            }
        } catch let error as WebSocketConnectError {
            state.withLock { $0.outbound = nil }
            if result.ended || isFinishing { return .ended }
            if let failure = result.failure { return .failed(failure, healthy: result.ready) }
            return .failed(SessionFailure.fromConnect(error), healthy: result.ready)
        } catch {
            state.withLock { $0.outbound = nil }
            if result.ended || isFinishing { return .ended }
            if let failure = result.failure { return .failed(failure, healthy: result.ready) }
            if let failure = error as? SessionFailure { return .failed(failure, healthy: result.ready) }
            return .failed(SessionFailure(.transient, "connection failed: \(error)"), healthy: result.ready)
        }
        state.withLock { $0.outbound = nil }
        if result.ended || isFinishing { return .ended }
        if let failure = result.failure { return .failed(failure, healthy: result.ready) }
        if let code = close?.code { logger.info("connection closed by the service: \(code) \(close?.reason ?? "")") }
        return .failed(SessionFailure.fromClose(code: close?.code, reason: close?.reason), healthy: result.ready)
    }

    /// Where to connect and the first message to send, by the configured mode.
    private func prepare() async throws -> (WebSocketRequest, String) {
        let (start, useDirect) = state.withLock {
            ($0.machine.startPayload(template: configuration.start), $0.useDirect)
        }
        switch useDirect ? .direct : configuration.mode {
        case .direct:
            let url = configuration.directURL
            return (
                WebSocketRequest(url: url, loggableURL: URLRedaction.redact(url)),
                try codec.encode(.start(start))
            )
        case .handoff:
            guard let http else { throw SessionFailure(.configuration, "the REST hand-off needs an HTTP client") }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            var headers: [(name: String, value: String)] = [
                ("Authorization", "Bearer \(configuration.apiKey.reveal())"),
                ("Content-Type", "application/json"),
                ("Accept", "application/json"),
            ]
            if let teamspace = configuration.teamspace { headers.append(("Datagrid-Teamspace", teamspace)) }
            let what = "voice session hand-off"
            logger.debug("requesting a voice session from \(URLRedaction.redact(configuration.handoffURL))")
            let response: HTTPResponse
            do {
                response = try await http.send(
                    HTTPRequest(
                        method: "POST",
                        url: configuration.handoffURL,
                        headers: headers,
                        body: try encoder.encode(start)
                    )
                )
            } catch {
                throw SessionFailure.fromHTTPClient(error, what: what)
            }
            guard (200..<300).contains(response.status) else {
                if configuration.directFallback, response.status == 404 || response.status == 405 {
                    logger.notice("\(what): HTTP \(response.status), no hand-off endpoint; connecting directly")
                    state.withLock {
                        $0.useDirect = true
                        $0.statistics.fellBackToDirect = true
                    }
                    eventSink.yield(.notice("no REST hand-off at the service; using the direct WebSocket"))
                    return try await prepare()
                }
                throw SessionFailure.fromHTTP(status: response.status, what: what)
            }
            let handoff: DatagridHandoff
            do {
                handoff = try JSONDecoder().decode(DatagridHandoff.self, from: response.body)
            } catch {
                throw SessionFailure(.transient, "\(what): the answer has no usable url (\(response.body.count) bytes)")
            }
            var url = handoff.url
            if url.hasPrefix("/") { url = configuration.webSocketBaseURL + url }
            guard url.hasPrefix("ws://") || url.hasPrefix("wss://") else {
                throw SessionFailure(.transient, "\(what): the answer's url is not a WebSocket URL")
            }
            state.withLock { $0.statistics.handoffs += 1 }
            let first = try handoff.startMessage.map { try codec.encode(raw: $0) } ?? codec.encode(.start(start))
            return (WebSocketRequest(url: url, loggableURL: URLRedaction.redact(url)), first)
        }
    }

    /// What happened on one connection, filled in by the tasks serving it.
    private final class ConnectionResult: Sendable {
        private struct Values {
            var ready = false
            var ended = false
            var failure: SessionFailure?
        }
        private let lock = Mutex(Values())
        var ready: Bool {
            get { lock.withLock { $0.ready } }
            set { lock.withLock { $0.ready = newValue } }
        }
        var ended: Bool {
            get { lock.withLock { $0.ended } }
            set { lock.withLock { $0.ended = newValue } }
        }
        var failure: SessionFailure? {
            get { lock.withLock { $0.failure } }
            set { lock.withLock { $0.failure = newValue } }
        }
        /// Ended or failed: nothing more to do on this connection.
        var isOver: Bool { lock.withLock { $0.ended || $0.failure != nil } }
    }

    private struct ReadyTimeout: Error {}

    /// What one frame meant for the connection.
    private enum FrameResult {
        case none
        case ready
        /// The conversation ended or the service reported an error: the connection is being closed.
        case over
    }

    private func serve(
        inbound: WebSocketInbound,
        outbound: any WebSocketOutbound,
        first: String,
        result: ConnectionResult
    ) async throws {
        state.withLock { state in
            state.machine.connectionOpened()
            state.statistics.connections += 1
        }
        try await outbound.send(text: first)

        // Wait for `ready`, but no longer than the ready timeout.
        let ready = try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask { [self] in
                while let message = try await inbound.next() {
                    switch try await self.handleFrame(message, outbound: outbound, result: result) {
                    case .ready: return true
                    case .over: return false
                    case .none: continue
                    }
                }
                return false
            }
            group.addTask { [clock, configuration] in
                try await clock.sleep(for: configuration.readyTimeout)
                throw ReadyTimeout()
            }
            defer { group.cancelAll() }
            do {
                return try await group.next() ?? false
            } catch is ReadyTimeout {
                throw SessionFailure(.transient, "no ready within \(configuration.readyTimeout.humanDescription)")
            }
        }
        guard ready else { return }
        result.ready = true
        state.withLock { state in
            state.statistics.readies += 1
            state.outbound = outbound
        }
        if lifecycle.isFinishing { input.close() }

        enum Role { case sender, reader, watcher }
        try await withThrowingTaskGroup(of: Role.self) { group in
            group.addTask { [self] in
                try await self.sendLoop(outbound: outbound, result: result)
                return .sender
            }
            group.addTask { [self] in
                try await self.watchForQuietAnswers()
                return .watcher
            }
            group.addTask { [self] in
                while let message = try await inbound.next() {
                    if case .over = try await self.handleFrame(message, outbound: outbound, result: result) { break }
                }
                return .reader
            }
            while let role = try await group.next() {
                if role == .reader {
                    group.cancelAll()
                    break
                }
            }
        }
    }

    /// Decodes and handles one server frame.
    private func handleFrame(
        _ frame: WebSocketMessage,
        outbound: any WebSocketOutbound,
        result: ConnectionResult
    ) async throws -> FrameResult {
        let message: DatagridServerMessage
        do {
            let decoded = try codec.decodeServer(frame.bytes)
            message = decoded.message
            if !decoded.unknownFields.isEmpty { logUnknown(decoded.unknownFields.map { "field \($0)" }) }
        } catch {
            logUndecodable(error, size: frame.bytes.count)
            return .none
        }
        if case .unknown(let type) = message {
            state.withLock { $0.statistics.unknownMessages += 1 }
            logUnknown(["message type \(type)"])
            return .none
        }
        // Events are yielded under the lock, so their order is the machine's even when the sender emits too.
        let actions = state.withLock { state in
            if case .audio = message { state.audioFrames += 1 }
            let actions = state.machine.receive(message)
            for case .emit(let event) in actions { eventSink.yield(event) }
            return actions
        }
        var outcome = FrameResult.none
        for action in actions {
            switch action {
            case .emit:
                break
            case .debug(let text):
                logger.debug("\(text)")
            case .saveConversation(let id):
                if let store = configuration.conversationStore {
                    do {
                        try store.save(
                            handle: id,
                            model: configuration.start.agentId ?? "",
                            now: Date().timeIntervalSince1970
                        )
                    } catch {
                        logger.warning("cannot persist the conversation id at \(store.path): \(error)")
                    }
                }
            case .forgetConversation:
                configuration.conversationStore?.clear()
            case .fail(let failure):
                state.withLock { $0.statistics.serviceErrors += 1 }
                logger.warning("the service reported an error: \(failure.message)")
                result.failure = failure
                state.withLock { $0.outbound = nil }
                try? await outbound.close(code: 1000, reason: "error")
                outcome = .over
            case .conversationEnded:
                result.ended = true
                state.withLock {
                    $0.conversationOver = true
                    $0.outbound = nil
                }
                input.close()
                try? await outbound.close(code: 1000, reason: "conversation ended")
                outcome = .over
            }
        }
        if case .ready = message, case .none = outcome { return .ready }
        return outcome
    }

    /// Ends a turn whose answer audio stopped without an agent transcript (see ``DatagridSessionMachine/answerQuiet()``).
    private func watchForQuietAnswers() async throws {
        var lastSeen = -1
        while !Task.isCancelled {
            try await clock.sleep(for: configuration.answerQuietTimeout)
            let actions = state.withLock { state -> [DatagridSessionMachine.Action] in
                let seen = state.audioFrames
                defer { lastSeen = seen }
                guard seen == lastSeen, state.machine.turnInFlight else { return [] }
                let actions = state.machine.answerQuiet()
                for case .emit(let event) in actions { eventSink.yield(event) }
                return actions
            }
            for case .debug(let text) in actions { logger.debug("\(text)") }
        }
    }

    private func sendLoop(outbound: any WebSocketOutbound, result: ConnectionResult) async throws {
        let maxSamples = Int(configuration.maxAudioChunk.milliseconds) * 16
        while let item = await input.next(maxAudio: maxSamples) {
            if result.isOver || state.withLock({ $0.machine.phase != .ready }) {
                input.pushFront([item])
                return
            }
            let (message, actions) = state.withLock { state in
                let (message, actions) = state.machine.send(item)
                for case .emit(let event) in actions { eventSink.yield(event) }
                return (message, actions)
            }
            for case .debug(let text) in actions { logger.debug("\(text)") }
            guard let message else { continue }
            do {
                try await outbound.send(text: try codec.encode(message))
            } catch {
                input.pushFront([item])
                throw error
            }
            if case .audio(let chunk) = item {
                state.withLock { $0.statistics.audioSamplesSent += chunk.samples.count }
                configuration.audioSent?(chunk)
            }
        }
        guard isFinishing, !result.isOver else { return }
        // finish(): say `stop`, then give the service a moment to answer `ended` (with the transcript).
        state.withLock { $0.machine.stopping() }
        logger.info("stopping the conversation")
        do {
            try await outbound.send(text: try codec.encode(.stop))
            try await clock.sleep(for: configuration.stopTimeout)
            logger.info("no ended within \(configuration.stopTimeout.humanDescription); closing")
        } catch {
            // Cancelled because the reader saw `ended` and the connection closed: done.
            return
        }
        state.withLock { $0.outbound = nil }
        try? await outbound.close(code: 1000, reason: "session finished")
    }

    // MARK: - Logging odd input once per kind

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

    private func logUnknown(_ what: [String]) {
        let fresh = state.withLock { state in what.filter { state.loggedUnknown.insert($0).inserted } }
        if !fresh.isEmpty { logger.debug("skipped unknown \(fresh.joined(separator: ", "))") }
    }
}
