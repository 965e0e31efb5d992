import Logging
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What every backend session shares, whatever its protocol: the event stream, the bounded input queue,
/// run and finish, the reconnect loop, the counters, and logging a bad frame once per kind. A backend's
/// session owns one and adds its protocol: how to connect, what to send, what a frame means.
public final class SessionRuntime: Sendable {
    /// The session's events, in order. One consumer.
    public let events: AsyncStream<SessionEvent>
    private let sink: AsyncStream<SessionEvent>.Continuation
    /// Input waiting for the service (bounded; held across reconnects).
    public let input: SessionInputQueue
    /// Times the backoff and every deadline of the session.
    public let clock: any Clock<Duration>
    public let logger: Logger
    /// Told of each message of microphone audio the session puts on the wire for the first time.
    private let audioSent: (@Sendable (AudioChunk) -> Void)?

    private struct State {
        var finishing = false
        /// The conversation is over on the service's side: nothing to reconnect for.
        var ended = false
        var task: Task<Void, any Error>?
        var statistics = SessionStatistics()
        var loggedKinds: Set<String> = []
    }

    private let state = Mutex(State())

    /// - Parameters:
    ///   - inputBound: how much microphone audio is held while no connection takes it.
    ///   - audioSent: called right after a message of microphone audio went out for the first time (not for audio
    ///     sent again after a resume), with that audio: where the appliance measures capture-to-wire latency from
    ///     ``AudioChunk/capturedAt`` (``SessionRequest/audioSent``). Must return at once.
    public init(
        inputBound: Duration,
        clock: any Clock<Duration>,
        logger: Logger,
        audioSent: (@Sendable (AudioChunk) -> Void)? = nil
    ) {
        self.input = SessionInputQueue(audioBound: inputBound)
        self.clock = clock
        self.logger = logger
        self.audioSent = audioSent
        (events, sink) = AsyncStream.makeStream(of: SessionEvent.self, bufferingPolicy: .bufferingNewest(4096))
    }

    /// Delivers `event` to the session's consumer, counting the answer audio and the turns.
    public func emit(_ event: SessionEvent) {
        switch event {
        case .audio(let chunk): count { $0.audioSamplesReceived += chunk.samples.count }
        case .turnComplete: count { $0.turns += 1 }
        default: break
        }
        sink.yield(event)
    }

    /// A message of microphone audio went out: `chunk`, whose first `resent` samples were sent before (a resume
    /// sends again what the service had not confirmed). Counts the new samples and the repeated ones apart, and tells
    /// ``init(inputBound:clock:logger:audioSent:)``'s `audioSent` of the new part. Call it from the sender, right
    /// after the write.
    public func sentAudio(_ chunk: AudioChunk, resent: Int = 0) {
        let again = max(0, min(resent, chunk.samples.count))
        count {
            $0.audioSamplesResent += again
            $0.audioSamplesSent += chunk.samples.count - again
        }
        guard let audioSent, again < chunk.samples.count else { return }
        guard again > 0 else { return audioSent(chunk) }
        var fresh = chunk
        fresh.samples.removeFirst(again)
        audioSent(fresh)
    }

    /// Updates the counters.
    public func count(_ update: (inout SessionStatistics) -> Void) {
        state.withLock { update(&$0.statistics) }
    }

    /// The counters so far.
    public var statistics: SessionStatistics {
        var statistics = state.withLock { $0.statistics }
        statistics.droppedInputSamples = input.droppedSamples
        return statistics
    }

    // MARK: - Run and finish

    /// True once ``finish(connected:)`` was called or the conversation ended, or the run was cancelled.
    public var isFinishing: Bool {
        state.withLock { $0.finishing || $0.ended } || Task.isCancelled
    }

    /// The service ended the conversation: no more input is taken and no reconnect follows.
    public func conversationEnded() {
        state.withLock { $0.ended = true }
        input.close()
    }

    /// Ends the session: no more input is taken. A `connected` session ends politely (its sender sees the
    /// closed queue and closes the connection); otherwise (connecting, backing off) the run stops at once.
    public func finish(connected: Bool) {
        let task = state.withLock { state -> Task<Void, any Error>? in
            state.finishing = true
            return state.task
        }
        input.close()
        if !connected { task?.cancel() }
    }

    /// Runs the session's connections until finished, given up or cancelled: the one reconnect loop
    /// (``ReconnectMachine``) with `connect` making and serving one connection (its number given) and saying
    /// how it ended; `startFresh` forgets what was kept of the earlier conversation after a refused resumption.
    /// Ends the event stream when it returns. Throws the failure when the session gives up.
    public func runConnections(
        machine: ReconnectMachine,
        connect: @escaping @Sendable (Int) async -> ConnectionEnd,
        startFresh: @escaping @Sendable () -> Void = {}
    ) async throws {
        let task = Task { [self] in
            defer {
                emit(.link(.ended))
                sink.finish()
            }
            var machine = machine
            var step = machine.start()
            while true {
                switch step {
                case .stop:
                    return
                case .giveUp(let failure, let link, let log):
                    write(log)
                    emit(.link(link))
                    throw failure
                case .startFresh(let attempt, let after, let log):
                    write(log)
                    count { $0.resumptionsRefused += 1 }
                    startFresh()
                    emit(.notice("resumption refused; starting a fresh session"))
                    guard try await pause(for: after) else { return }
                    step = .connect(attempt: attempt, after: .zero, link: nil, log: nil)
                    continue
                case .connect(let attempt, let after, let link, let log):
                    if let log { write(log) }
                    if let link { emit(.link(link)) }
                    guard try await pause(for: after), !isFinishing else { return }
                    emit(.link(.connecting(attempt: attempt)))
                    let end = await connect(attempt)
                    if isFinishing { return }
                    if case .failed = end { count { $0.failures += 1 } }
                    step = machine.ended(end)
                }
            }
        }
        let finishing = state.withLock { state -> Bool in
            state.task = task
            return state.finishing
        }
        if finishing { task.cancel() }
        try await withTaskCancellationHandler {
            try await task.value
        } onCancel: {
            task.cancel()
        }
    }

    /// Sleeps `delay` on the session's clock; false when the session finished meanwhile (the sleep was
    /// cancelled by ``finish(connected:)``). Throws when cancelled from outside.
    /// Keeps a secondary link of the session (a socket beside its main connection, such as the cascade's speech
    /// socket) by the same reconnect rule as the main one, without the main one's link events: `connect` makes and
    /// serves connection number `attempt` and says how it ended, and `link`'s backoff and slow retry say when to try
    /// again; its lines go to the log after `name`. A secondary link never ends the session, whatever `link` says of
    /// giving up (a failure the session cannot survive shows on the main connection). Returns once the session
    /// finishes or the task is cancelled.
    public func keepLink(
        _ name: String,
        link: LinkSettings,
        connect: (_ attempt: Int) async -> ConnectionEnd
    ) async {
        var forever = link
        forever.giveUpOnRejection = false
        forever.maxConsecutiveFailures = nil
        var machine = forever.reconnectMachine()
        var step = machine.start()
        while !isFinishing {
            switch step {
            case .stop:
                return
            case .connect(let attempt, let after, _, let log):
                if let log { write(LogLine(log.level, "\(name): \(log.message)")) }
                guard (try? await pause(for: after)) == true else { return }
                let end = await connect(attempt)
                if isFinishing { return }
                step = machine.ended(end)
            case .startFresh(let attempt, let after, let log):
                write(LogLine(log.level, "\(name): \(log.message)"))
                step = .connect(attempt: attempt, after: after, link: nil, log: nil)
            case .giveUp(_, _, let log):
                let delay = machine.policy.rejectedRetryDelay
                write(LogLine(log.level, "\(name): \(log.message); trying again in \(delay.humanDescription)"))
                guard (try? await pause(for: delay)) == true else { return }
                step = machine.start()
            }
        }
    }

    public func pause(for delay: Duration) async throws -> Bool {
        guard delay > .zero else { return !isFinishing }
        do {
            try await clock.sleep(for: delay)
        } catch {
            if isFinishing { return false }
            throw error
        }
        return !isFinishing
    }

    private func write(_ line: LogLine) {
        switch line.level {
        case .info: logger.info("\(line.message)")
        case .notice: logger.notice("\(line.message)")
        case .warning: logger.warning("\(line.message)")
        case .error: logger.error("\(line.message)")
        }
    }

    // MARK: - A connection's phases

    /// Reads a new connection's frames with `handle` until one makes it ready (true, counted), the connection
    /// ends first (false), or `timeout` passes (a transient failure: "no `what` within …").
    public func awaitReady(
        _ inbound: WebSocketInbound,
        within timeout: Duration,
        waitingFor what: String,
        handle: @escaping @Sendable (WebSocketMessage) async throws -> FrameVerdict
    ) async throws -> Bool {
        let ready = try await ConnectionPhases.awaitReady(
            inbound,
            within: timeout,
            clock: clock,
            waitingFor: what,
            handle: handle
        )
        if ready { count { $0.readies += 1 } }
        return ready
    }

    // MARK: - Bad input, logged once per kind

    /// Decodes one server frame with `decoder` (the message and the paths of fields it did not know): nil when
    /// it cannot be read, which is counted and logged once per kind; unknown fields are logged once each.
    public func decode<Message>(
        _ frame: WebSocketMessage,
        with decoder: (Data) throws -> (message: Message, unknownFields: [String])
    ) -> Message? {
        let bytes = frame.bytes
        do {
            let decoded = try decoder(bytes)
            if !decoded.unknownFields.isEmpty { skippedUnknown(decoded.unknownFields.map { "field \($0)" }) }
            return decoded.message
        } catch {
            skippedUndecodable(error, size: bytes.count)
            return nil
        }
    }

    /// How many kinds of bad input are remembered (and so logged once each); past that, new kinds are only
    /// counted, so a service that makes up a new name in every frame cannot grow memory or the log.
    public static let loggedKindsLimit = 256

    /// The longest name of a kind logged (a field path, a message type), in Unicode scalars.
    public static let kindNameLimit = 120

    /// Remembers `kind`: true the first time it is seen, while fewer than ``loggedKindsLimit`` are remembered.
    private static func firstSeen(_ kind: String, in state: inout State) -> Bool {
        guard state.loggedKinds.count < loggedKindsLimit else { return false }
        return state.loggedKinds.insert(kind).inserted
    }

    /// A server frame that could not be decoded: counted, and logged the first time its kind is seen.
    public func skippedUndecodable(_ error: any Error, size: Int) {
        let kind = RemoteText.printable(Self.kind(of: error), limit: Self.kindNameLimit)
        let first = state.withLock { state in
            state.statistics.undecodableFrames += 1
            return Self.firstSeen("decode " + kind, in: &state)
        }
        if first {
            logger.warning(
                "skipped a server frame that could not be decoded (\(size) bytes, \(kind)); further ones of this kind are only counted"
            )
        }
    }

    /// Parts of messages this client does not know (`names`: "field x", "message type y", as the service
    /// spelled them): logged at debug the first time each is seen, printable and bounded.
    public func skippedUnknown(_ names: [String]) {
        let printable = names.prefix(64).map { RemoteText.printable($0, limit: Self.kindNameLimit) }
        let fresh = state.withLock { state in printable.filter { Self.firstSeen("unknown " + $0, in: &state) } }
        if !fresh.isEmpty { logger.debug("skipped unknown \(fresh.joined(separator: ", "))") }
    }

    /// Something the service sent that is not worth a line each time it comes: `message` is logged at
    /// warning level, printable and bounded, the first time `kind` is seen.
    public func noteOnce(kind: String, _ message: @autoclosure () -> String) {
        let kind = RemoteText.printable(kind, limit: Self.kindNameLimit)
        if state.withLock({ Self.firstSeen("note " + kind, in: &$0) }) {
            logger.warning("\(RemoteText.printable(message()))")
        }
    }

    private static func kind(of error: any Error) -> String {
        switch error as? DecodingError {
        case .dataCorrupted(let context)?:
            "corrupt:" + context.codingPath.map(\.stringValue).joined(separator: ".")
        case .typeMismatch(_, let context)?:
            "type:" + context.codingPath.map(\.stringValue).joined(separator: ".")
        case .valueNotFound(_, let context)?:
            "missing:" + context.codingPath.map(\.stringValue).joined(separator: ".")
        case .keyNotFound(let key, _)?: "key:" + key.stringValue
        default: "other"
        }
    }
}

/// The session's side of ``VoiceSession`` that is the same for every backend, for sessions that keep a
/// ``SessionRuntime``.
public protocol RuntimeSession: VoiceSession {
    /// The shared plumbing.
    var runtime: SessionRuntime { get }
}

extension RuntimeSession {
    public var events: AsyncStream<SessionEvent> { runtime.events }
    public func send(_ input: SessionInput) { runtime.input.push(input) }
    public func waitForInputRoom(below samples: Int) async { await runtime.input.waitForRoom(below: samples) }
    public var statistics: SessionStatistics { runtime.statistics }
}
