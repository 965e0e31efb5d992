import HarkBackendKit
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
public final class DatagridSession: RuntimeSession {
    public let runtime: SessionRuntime
    private let configuration: DatagridConfiguration
    private let transport: any WebSocketTransport
    private let http: (any HTTPClient)?
    private let codec = DatagridCodec()
    private let state: Mutex<State>
    private var logger: Logger { runtime.logger }
    private var input: SessionInputQueue { runtime.input }

    private struct State {
        var machine: DatagridSessionMachine
        var outbound: (any WebSocketOutbound)?
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
        logger: Logger,
        audioSent: (@Sendable (AudioChunk) -> Void)? = nil
    ) {
        self.configuration = configuration
        self.transport = transport
        self.http = http
        self.runtime = SessionRuntime(
            inputBound: configuration.inputBound,
            clock: clock,
            logger: logger,
            audioSent: audioSent
        )
        let stored = configuration.conversationStore?.load(
            model: configuration.start.agentId ?? "",
            now: Date().timeIntervalSince1970
        )
        self.state = Mutex(
            State(
                machine: DatagridSessionMachine(
                    conversationId: conversationId ?? configuration.start.conversationId ?? stored
                )
            )
        )
    }

    /// The conversation this session continues (from `started`).
    public var conversationId: String? { state.withLock { $0.machine.conversationId } }

    /// The conversation state last reported.
    public var conversationState: ConversationState { state.withLock { $0.machine.conversation } }

    public func finish() {
        // Connected: the sender sees the closed queue, sends `stop` and waits for `ended`.
        // Otherwise (connecting, backing off): stop at once.
        runtime.finish(connected: state.withLock { $0.outbound != nil })
    }

    public func run() async throws {
        try await runtime.runConnections(machine: configuration.link.reconnectMachine()) { [self] _ in
            await connectOnce()
        }
    }

    // MARK: - One connection

    private var isFinishing: Bool { runtime.isFinishing }

    private func connectOnce() async -> ConnectionEnd {
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
        if continuing { runtime.count { $0.resumptions += 1 } }
        let result = ConnectionRecord()
        let outcome = await transport.exchange(request) { [self] inbound, outbound in
            try await self.serve(inbound: inbound, outbound: outbound, first: first, result: result)
        }
        state.withLock { state in
            state.outbound = nil
            for case .emit(let event) in state.machine.connectionClosed() { runtime.emit(event) }
        }
        if result.ended || isFinishing { return .finished }
        if let failure = result.failure { return .failed(failure, healthy: result.ready) }
        switch outcome {
        case .failure(let failure):
            return .failed(failure, healthy: result.ready)
        case .success(let close):
            if let code = close?.code {
                let reason = RemoteText.printable(close?.reason ?? "", limit: 200)
                logger.info("connection closed by the service: \(code) \(reason)")
            }
            return .failed(SessionFailure.fromClose(code: close?.code, reason: close?.reason), healthy: result.ready)
        }
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
                    state.withLock { $0.useDirect = true }
                    runtime.count { $0.other["directFallbacks", default: 0] += 1 }
                    runtime.emit(.notice("no REST hand-off at the service; using the direct WebSocket"))
                    return try await prepare()
                }
                throw SessionFailure.fromHTTP(
                    status: response.status,
                    what: what,
                    body: response.body,
                    hiding: [configuration.apiKey]
                )
            }
            let handoff: DatagridHandoff
            do {
                handoff = try JSONDecoder().decode(DatagridHandoff.self, from: response.body)
            } catch {
                throw SessionFailure(.transient, "\(what): the answer has no usable url (\(response.body.count) bytes)")
            }
            let url = Self.resolve(handoff.url, against: configuration.webSocketBaseURL)
            guard url.hasPrefix("ws://") || url.hasPrefix("wss://") else {
                throw SessionFailure(.transient, "\(what): the answer's url is not a WebSocket URL")
            }
            runtime.count { $0.other["handoffs", default: 0] += 1 }
            let first = try handoff.startMessage.map { try codec.encode(raw: $0) } ?? codec.encode(.start(start))
            return (WebSocketRequest(url: url, loggableURL: URLRedaction.redact(url)), first)
        }
    }

    /// The hand-off's `url`, absolute as given, or a path (`/ws/voice?token=T`) joined to `base`: the path
    /// after the base's path, the query after the base's query (``EndpointURL/join(_:path:query:)``). A
    /// fragment is dropped (a WebSocket URL has none).
    static func resolve(_ url: String, against base: String) -> String {
        guard url.hasPrefix("/") else { return url }
        var relative = Substring(url)
        if let hash = relative.firstIndex(of: "#") { relative = relative[..<hash] }
        guard let question = relative.firstIndex(of: "?") else { return EndpointURL.join(base, path: String(relative)) }
        return EndpointURL.join(
            base,
            path: String(relative[..<question]),
            query: String(relative[relative.index(after: question)...])
        )
    }

    private func serve(
        inbound: WebSocketInbound,
        outbound: any WebSocketOutbound,
        first: String,
        result: ConnectionRecord
    ) async throws {
        state.withLock { $0.machine.connectionOpened() }
        runtime.count { $0.connections += 1 }
        try await outbound.send(text: first)

        let frame: @Sendable (WebSocketMessage) async throws -> FrameVerdict = { [self] message in
            try await self.handleFrame(message, outbound: outbound, result: result)
        }
        let ready = try await runtime.awaitReady(
            inbound,
            within: configuration.readyTimeout,
            waitingFor: "ready",
            handle: frame
        )
        guard ready else { return }
        result.ready = true
        state.withLock { $0.outbound = outbound }
        if runtime.isFinishing { input.close() }
        try await ConnectionPhases.serve(
            inbound,
            alongside: [
                { [self] in try await self.sendLoop(outbound: outbound, result: result) },
                { [self] in try await self.watchForQuietAnswers() },
            ],
            handle: frame
        )
    }

    /// Decodes and handles one server frame.
    private func handleFrame(
        _ frame: WebSocketMessage,
        outbound: any WebSocketOutbound,
        result: ConnectionRecord
    ) async throws -> FrameVerdict {
        let decoded = runtime.decode(frame) { bytes in
            let decoded = try codec.decodeServer(bytes)
            return (decoded.message, decoded.unknownFields)
        }
        guard let message = decoded else { return .keepReading }
        if case .unknown(let type) = message {
            runtime.count { $0.unknownMessages += 1 }
            runtime.skippedUnknown(["message type \(type)"])
            return .keepReading
        }
        // Events are yielded under the lock, so their order is the machine's even when the sender emits too.
        let actions = state.withLock { state in
            if case .audio = message { state.audioFrames += 1 }
            let skipped = state.machine.unsupportedRateAudio
            let actions = state.machine.receive(message)
            if state.machine.unsupportedRateAudio > skipped { runtime.count { $0.audioMessagesSkipped += 1 } }
            for case .emit(let event) in actions { runtime.emit(event) }
            return actions
        }
        var outcome = FrameVerdict.keepReading
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
                        let path = RemoteText.printable(error.path)
                        logger.warning("cannot save the conversation id to \(path): \(error.reason)")
                    }
                }
            case .forgetConversation:
                configuration.conversationStore?.clear()
            case .fail(let failure):
                runtime.count { $0.serviceErrors += 1 }
                logger.warning("the service reported an error: \(failure.message)")
                result.failure = failure
                state.withLock { $0.outbound = nil }
                try? await outbound.leave(code: 1000, reason: "error")
                outcome = .over
            case .conversationEnded:
                result.ended = true
                state.withLock { $0.outbound = nil }
                runtime.conversationEnded()
                try? await outbound.leave(code: 1000, reason: "conversation ended")
                outcome = .over
            }
        }
        if case .ready = message, outcome == .keepReading { return .ready }
        return outcome
    }

    /// Ends a turn whose answer audio stopped without an agent transcript (see ``DatagridSessionMachine/answerQuiet()``).
    private func watchForQuietAnswers() async throws {
        var lastSeen = -1
        while !Task.isCancelled {
            try await runtime.clock.sleep(for: configuration.answerQuietTimeout)
            let actions = state.withLock { state -> [DatagridSessionMachine.Action] in
                let seen = state.audioFrames
                defer { lastSeen = seen }
                guard seen == lastSeen, state.machine.turnInFlight else { return [] }
                let actions = state.machine.answerQuiet()
                for case .emit(let event) in actions { runtime.emit(event) }
                return actions
            }
            for case .debug(let text) in actions { logger.debug("\(text)") }
        }
    }

    private func sendLoop(outbound: any WebSocketOutbound, result: ConnectionRecord) async throws {
        let maxSamples = Int(configuration.maxAudioChunk.milliseconds) * 16
        while let item = await input.next(maxAudio: maxSamples) {
            if result.isOver || state.withLock({ $0.machine.phase != .ready }) {
                input.pushFront([item])
                return
            }
            let (message, actions) = state.withLock { state in
                let (message, actions) = state.machine.send(item)
                for case .emit(let event) in actions { runtime.emit(event) }
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
                runtime.sentAudio(chunk)
            }
        }
        guard isFinishing, !result.isOver else { return }
        // finish(): say `stop`, then give the service a moment to answer `ended` (with the transcript).
        state.withLock { $0.machine.stopping() }
        logger.info("stopping the conversation")
        do {
            try await outbound.send(text: try codec.encode(.stop))
            try await runtime.clock.sleep(for: configuration.stopTimeout)
            logger.info("no ended within \(configuration.stopTimeout.humanDescription); closing")
        } catch {
            // Cancelled because the reader saw `ended` and the connection closed: done.
            return
        }
        state.withLock { $0.outbound = nil }
        try? await outbound.leave(code: 1000, reason: "session finished")
    }
}
