import HarkCore
import HarkLiveKitProto
import HarkPlatform
import Logging
import SwiftProtobuf
import Synchronization

/// The one owner of the LiveKit library's lifecycle in this process: ``withClient(library:configuration:logger:_:)``
/// initializes it (`livekit_ffi_initialize`), runs the body with the client, then disconnects every room still
/// connected and disposes of it (`livekit_ffi_dispose`, which would otherwise block ~15 s per connected room).
/// Requests go through ``request(_:_:)`` (`livekit_ffi_request`, the response copied out and its handle dropped);
/// answers that come later as events are matched by `async_id` (chosen here and sent as `request_async_id`, so
/// an answer can never arrive before its waiter exists) and awaited with a deadline. Events are copied out on the
/// library's threads into a bounded queue (the core's `BoundedQueue`) and decoded by the client's event pump, which hands
/// room events, audio frames and text-stream chunks to whoever opened them. One client at a time per process.
public final class LiveKitClient: Sendable {
    /// The client's bounds and deadlines.
    public struct Configuration: Sendable {
        /// The most events waiting for the pump; beyond, the oldest are dropped and counted.
        public var eventCapacity = 4096
        /// The most bytes of events waiting for the pump (each event alone is refused above this).
        public var eventByteCapacity = 8 << 20
        /// The most log batches waiting; beyond, the oldest are dropped and counted.
        public var logCapacity = 256
        /// Whether the library's log records come to this client's logger (redacted; its information records at
        /// the logger's debug level, its debug and trace records at trace) instead of its own `RUST_LOG`-driven
        /// standard error, which would bypass the redaction. The library then formats and sends every record: a join
        /// attempt brings some 400, nearly all libwebrtc's trace (measured here).
        public var captureLogs = true
        /// The longest a request's answer may take when the call names no deadline of its own.
        public var requestTimeout: Duration = .seconds(10)
        /// The longest a room's disconnection may take at the end.
        public var disconnectTimeout: Duration = .seconds(5)
        /// The most bytes one response may have.
        public var maximumResponseBytes = 4 << 20

        /// The defaults.
        public init() {}
    }

    /// What the client has seen so far.
    public struct Statistics: Sendable, Equatable {
        /// The event queue's counts (dropped, high water in cost).
        public var events: BoundedQueue<[UInt8]>.Statistics
        /// The log queue's counts.
        public var logs: BoundedQueue<[UInt8]>.Statistics
        /// Events larger than their queue's bound on their own, refused without being copied.
        public var tooLarge = 0
        /// Events that could not be decoded.
        public var undecodable = 0
        /// Events nobody waited for (answers after their deadline, events of closed rooms and streams).
        public var unclaimed = 0
        /// Audio frames dropped because their stream's buffer was full, or because their size was out of bounds.
        public var droppedFrames = 0
    }

    /// The library.
    public let library: LiveKitLibrary
    let configuration: Configuration
    let logger: Logger
    private let events: BoundedQueue<[UInt8]>
    private let logs: BoundedQueue<[UInt8]>
    private let tooLarge = CallbackRouting.TooLargeCount()
    private let state = Mutex(State())
    /// The next `request_async_id`: far above the library's own ids (handles and its async ids count up from 1),
    /// and process-wide, so a late answer to an earlier client's request can never match a later client's.
    private static let nextAsyncID = Atomic<UInt64>(1 << 62)

    /// Whether a client runs in this process (the library has one callback and one server).
    private static let running = Mutex(false)

    /// An awaited answer: not yet here (with its waiter once it waits), or here before its waiter.
    private enum Slot {
        case waiting(CheckedContinuation<Livekit_Proto_FfiEvent, any Error>?)
        case arrived(Livekit_Proto_FfiEvent)
    }

    private struct State {
        var running = true
        var failure: LiveKitError?
        var slots: [UInt64: Slot] = [:]
        var rooms: [UInt64: RoomRoute] = [:]
        var audioStreams: [UInt64: AudioStreamRoute] = [:]
        var textReaders: [UInt64: TextReaderRoute] = [:]
        var undecodable = 0
        var unclaimed = 0
        var droppedFrames = 0
        var loggedKinds: Set<String> = []
    }

    struct RoomRoute: Sendable {
        let continuation: AsyncStream<LiveKitRoomEvent>.Continuation
        let room: WeakRoom
    }

    struct AudioStreamRoute: Sendable {
        let continuation: AsyncStream<LiveKitAudioFrame>.Continuation
    }

    struct TextReaderRoute: Sendable {
        let continuation: AsyncThrowingStream<String, any Error>.Continuation
    }

    /// A room, not kept alive by its route (the caller owns it; it leaves when released).
    struct WeakRoom: Sendable {
        weak var value: LiveKitRoom?
    }

    private init(library: LiveKitLibrary, configuration: Configuration, logger: Logger) {
        self.library = library
        self.configuration = configuration
        self.logger = logger
        events = Self.queue(elements: configuration.eventCapacity, bytes: configuration.eventByteCapacity)
        logs = Self.queue(elements: configuration.logCapacity, bytes: 1 << 20)
    }

    /// A queue of at most `bytes` of events and at most `elements` of them: each costs its size, and at least its
    /// share of the bytes (so a flood of tiny events is bounded in number too). The oldest are dropped for room.
    static func queue(elements: Int, bytes: Int) -> BoundedQueue<[UInt8]> {
        let share = max(1, bytes / max(1, elements))
        return BoundedQueue(bound: bytes, overflow: .dropOldest) { max($0.count, share) }
    }

    /// Runs `body` with a client of `library`, which is initialized first and disposed of after (also when
    /// `body` throws): rooms still connected are disconnected, then `livekit_ffi_dispose` runs on a thread of
    /// its own. The client's event pump runs beside `body` meanwhile. Throws when another client runs in this
    /// process.
    public static func withClient<Result>(
        library: LiveKitLibrary,
        configuration: Configuration = Configuration(),
        logger: Logger = Logger(label: "hark.livekit"),
        _ body: (LiveKitClient) async throws -> Result
    ) async throws -> Result {
        let client = try start(library: library, configuration: configuration, logger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.pumpEvents() }
            group.addTask { await client.pumpLogs() }
            // The end runs whatever happens to the caller's task: cancelled, the rooms' disconnections would not be
            // waited for, and dispose would then block on each.
            let result: Result
            do {
                result = try await body(client)
            } catch {
                await Task { await client.shutdown() }.value
                throw error
            }
            await Task { await client.shutdown() }.value
            return result
        }
    }

    /// Claims the process's client slot and initializes the library (`livekit_ffi_initialize`).
    private static func start(
        library: LiveKitLibrary,
        configuration: Configuration,
        logger: Logger
    ) throws(LiveKitError) -> LiveKitClient {
        let claimed = running.withLock { running in
            if running { return false }
            running = true
            return true
        }
        guard claimed else {
            throw LiveKitError.busy("a LiveKit client already runs in this process (the library has one callback)")
        }
        let client = LiveKitClient(library: library, configuration: configuration, logger: logger)
        CallbackRouting.active.withLock {
            $0 = CallbackRouting.Sink(events: client.events, logs: client.logs, tooLarge: client.tooLarge)
        }
        // The SDK the server is told about: the library is LiveKit's Rust SDK (an unknown name makes it warn on every
        // join and report UNKNOWN), in the build the pinned wheel carries.
        library.initialize(CallbackRouting.callback, configuration.captureLogs, "rust", LiveKitLibrary.wheelVersion)
        logger.debug("LiveKit library initialized", metadata: ["path": "\(library.path)"])
        return client
    }

    // MARK: Requests

    /// Sends `request` (`livekit_ffi_request`) and returns the library's immediate response, copied out (the
    /// response's handle is dropped at once). `what` names the call in errors. Throws when the client has ended,
    /// when the library refuses the request (it logs why) or when the response is unreadable or too large.
    public func request(_ request: Livekit_Proto_FfiRequest, _ what: String) throws(LiveKitError)
        -> Livekit_Proto_FfiResponse
    {
        if let refusal = state.withLock({
            $0.running ? nil : ($0.failure ?? .notRunning("\(what): the LiveKit client has ended"))
        }) {
            throw refusal
        }
        return try send(request, what)
    }

    /// `request` without the running check (the shutdown's disconnections use it too).
    private func send(_ request: Livekit_Proto_FfiRequest, _ what: String) throws(LiveKitError)
        -> Livekit_Proto_FfiResponse
    {
        let bytes: [UInt8]
        do {
            bytes = try request.serializedBytes()
        } catch {
            throw LiveKitError.invalidArgument("\(what): the request cannot be encoded (\(error))")
        }
        var responsePointer: UnsafePointer<UInt8>?
        var responseLength = 0
        let handle = bytes.withUnsafeBufferPointer { buffer in
            library.request(buffer.baseAddress, buffer.count, &responsePointer, &responseLength)
        }
        guard handle != 0 else {
            throw LiveKitError.request("\(what): the LiveKit library refused the request (its log says why)")
        }
        defer { _ = library.dropHandle(handle) }
        guard let responsePointer, responseLength >= 0, responseLength <= configuration.maximumResponseBytes else {
            throw LiveKitError.response("\(what): the LiveKit library's response is missing or too large")
        }
        let copy = Array(UnsafeBufferPointer(start: responsePointer, count: responseLength))
        do {
            return try Livekit_Proto_FfiResponse(serializedBytes: copy, partial: true)
        } catch {
            throw LiveKitError.response("\(what): the LiveKit library's response cannot be decoded (\(error))")
        }
    }

    /// A fresh `request_async_id`.
    func makeAsyncID() -> UInt64 {
        Self.nextAsyncID.add(1, ordering: .relaxed).newValue
    }

    /// Sends the request `make` builds around a fresh async id, then waits up to `timeout` (default: the
    /// configuration's) for the event that answers it. `answeredID` reads the async id from the immediate response
    /// (the library echoes the one it was given). Throws ``LiveKitError`` (refused, timed out, client ended) or
    /// `CancellationError`.
    func call(
        _ what: String,
        timeout: Duration? = nil,
        _ make: (UInt64) -> Livekit_Proto_FfiRequest,
        answeredID: (Livekit_Proto_FfiResponse) -> UInt64
    ) async throws -> Livekit_Proto_FfiEvent {
        let id = try begin(what, make, answeredID: answeredID)
        return try await answer(id, what, timeout: timeout)
    }

    /// The first, synchronous half of ``call(_:timeout:_:answeredID:)``: makes the answer's slot, sends the request
    /// and checks the id it echoes; returns the id to await with ``answer(_:_:timeout:)``. A request that points at
    /// caller memory (audio samples) is sent while that memory is valid: the library copies it during the request.
    func begin(
        _ what: String,
        _ make: (UInt64) -> Livekit_Proto_FfiRequest,
        answeredID: (Livekit_Proto_FfiResponse) -> UInt64
    ) throws(LiveKitError) -> UInt64 {
        let id = makeAsyncID()
        try register(id, what)
        let response: Livekit_Proto_FfiResponse
        do {
            response = try request(make(id), what)
        } catch {
            abandon(id)
            throw error
        }
        let answered = answeredID(response)
        guard answered == id else {
            abandon(id)
            throw LiveKitError.response("\(what): the LiveKit library answered async id \(answered), not \(id)")
        }
        return id
    }

    /// The second half of ``call(_:timeout:_:answeredID:)``: the event answering `id`, within `timeout` (default:
    /// the configuration's).
    func answer(_ id: UInt64, _ what: String, timeout: Duration? = nil) async throws -> Livekit_Proto_FfiEvent {
        try await wait(for: id, what, timeout: timeout ?? configuration.requestTimeout)
    }

    /// The event answering `id`, however long it takes: for a caller that bounds the wait itself (no timer per call).
    /// Cancellation gives it up.
    func answerWithoutDeadline(_ id: UInt64, _ what: String) async throws -> Livekit_Proto_FfiEvent {
        do {
            return try await waitForAnswer(id)
        } catch {
            abandon(id)
            throw error
        }
    }

    /// Makes a slot for the answer to `id` before the request goes out.
    private func register(_ id: UInt64, _ what: String) throws(LiveKitError) {
        let refusal: LiveKitError? = state.withLock { state in
            guard state.running else { return state.failure ?? .notRunning("\(what): the LiveKit client has ended") }
            state.slots[id] = .waiting(nil)
            return nil
        }
        if let refusal { throw refusal }
    }

    /// Waits for the answer to `id` until `timeout`: whichever comes first, the answer or the deadline.
    private func wait(for id: UInt64, _ what: String, timeout: Duration) async throws -> Livekit_Proto_FfiEvent {
        try await withThrowingTaskGroup(of: Livekit_Proto_FfiEvent.self) { group in
            group.addTask { try await self.waitForAnswer(id) }
            group.addTask {
                try await Task.sleep(for: timeout)
                throw LiveKitError.timeout(what, after: timeout)
            }
            defer { group.cancelAll() }
            do {
                guard let first = try await group.next() else { throw CancellationError() }
                return first
            } catch {
                abandon(id)
                throw error
            }
        }
    }

    /// The answer to `id`, waiting for it; cancellation gives it up.
    private func waitForAnswer(_ id: UInt64) async throws -> Livekit_Proto_FfiEvent {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation {
                (continuation: CheckedContinuation<Livekit_Proto_FfiEvent, any Error>) in
                let outcome: Result<Livekit_Proto_FfiEvent, any Error>? = state.withLock { state in
                    switch state.slots[id] {
                    case .arrived(let event):
                        state.slots[id] = nil
                        return .success(event)
                    case .waiting(nil):
                        if Task.isCancelled {
                            state.slots[id] = nil
                            return .failure(CancellationError())
                        }
                        state.slots[id] = .waiting(continuation)
                        return nil
                    case .waiting(.some):
                        return .failure(LiveKitError.invalidArgument("async id \(id) awaited twice"))
                    case nil:
                        return .failure(state.failure ?? CancellationError())
                    }
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            let waiter: CheckedContinuation<Livekit_Proto_FfiEvent, any Error>? = state.withLock { state in
                guard case .waiting(let waiter) = state.slots[id] else { return nil }
                state.slots[id] = nil
                return waiter
            }
            waiter?.resume(throwing: CancellationError())
        }
    }

    /// Gives up on the answer to `id`: its slot goes (a waiter still in it ends with `CancellationError`), and the
    /// answer, when it is already here or still comes, is cleaned up (``discard(_:)``).
    private func abandon(_ id: UInt64) {
        let (late, waiter) = state.withLock {
            state -> (Livekit_Proto_FfiEvent?, CheckedContinuation<Livekit_Proto_FfiEvent, any Error>?) in
            switch state.slots.removeValue(forKey: id) {
            case .arrived(let event): (event, nil)
            case .waiting(let waiter): (nil, waiter)
            case nil: (nil, nil)
            }
        }
        waiter?.resume(throwing: CancellationError())
        if let late { discard(late) }
    }

    /// Hands an answer to its waiter, or keeps it for the waiter to come; an answer given up on is cleaned up.
    private func resolve(_ id: UInt64, _ event: Livekit_Proto_FfiEvent) {
        enum Outcome {
            case resume(CheckedContinuation<Livekit_Proto_FfiEvent, any Error>)
            case kept
            case late
        }
        let outcome: Outcome = state.withLock { state in
            switch state.slots[id] {
            case .waiting(let waiter?):
                state.slots[id] = nil
                return .resume(waiter)
            case .waiting(nil):
                state.slots[id] = .arrived(event)
                return .kept
            case .arrived:
                return .late
            case nil:
                // Given up on (deadline, cancellation): nobody will take it.
                state.unclaimed += 1
                return .late
            }
        }
        switch outcome {
        case .resume(let waiter): waiter.resume(returning: event)
        case .kept: break
        case .late: discard(event)
        }
    }

    /// Cleans up an answer nobody waits for: a room it connected is disconnected, the handles it carries dropped.
    private func discard(_ event: Livekit_Proto_FfiEvent) {
        guard case .connect(let connected) = event.message, case .result(let result) = connected.message else { return }
        let room = OwnedHandle(result.room.handle, library: library)
        _ = OwnedHandle(result.localParticipant.handle, library: library)
        for participant in result.participants {
            _ = OwnedHandle(participant.participant.handle, library: library)
            for publication in participant.publications { _ = OwnedHandle(publication.handle, library: library) }
        }
        logger.warning("LiveKit joined a room after its caller gave up: leaving it")
        var request = Livekit_Proto_FfiRequest()
        var disconnect = Livekit_Proto_DisconnectRequest()
        disconnect.roomHandle = room.id
        disconnect.requestAsyncID = makeAsyncID()
        request.disconnect = disconnect
        _ = try? send(request, "leave an abandoned room")
    }

    // MARK: Routes

    /// Registers the stream a room's events go to (before `ReadyForRoomEvent`, so none is missed).
    func route(room handle: UInt64, to continuation: AsyncStream<LiveKitRoomEvent>.Continuation, room: LiveKitRoom) {
        state.withLock { $0.rooms[handle] = RoomRoute(continuation: continuation, room: WeakRoom(value: room)) }
    }

    /// Sends a request whose answer nobody awaits (it is counted as unclaimed when it comes): for `deinit`s, which
    /// cannot wait.
    func sendDetached(_ request: Livekit_Proto_FfiRequest, _ what: String) {
        guard state.withLock({ $0.running }) else { return }
        do {
            _ = try send(request, what)
        } catch {
            logger.debug("\(what): \(error)")
        }
    }

    /// Forgets a room's route (its stream is finished).
    func unroute(room handle: UInt64) {
        let route = state.withLock { $0.rooms.removeValue(forKey: handle) }
        route?.continuation.finish()
    }

    /// Opens an audio stream (`NewAudioStream`) and routes its frames to `continuation` in the same step, so no
    /// frame can come before its route: the state's lock is held across the request, and the pump, which needs it
    /// to route, waits. (The library's callback only queues, it never takes this lock: nothing can deadlock.)
    /// Returns the stream's handle id.
    func openAudioStream(
        _ request: Livekit_Proto_FfiRequest,
        continuation: AsyncStream<LiveKitAudioFrame>.Continuation
    ) throws(LiveKitError) -> UInt64 {
        let what = "open the audio stream"
        let result: Result<UInt64, LiveKitError> = state.withLock { state in
            guard state.running else {
                return .failure(state.failure ?? .notRunning("\(what): the LiveKit client has ended"))
            }
            do throws(LiveKitError) {
                let response = try send(request, what)
                guard case .newAudioStream(let opened) = response.message, opened.stream.hasHandle else {
                    throw LiveKitError.response("\(what): the response holds no stream")
                }
                state.audioStreams[opened.stream.handle.id] = AudioStreamRoute(continuation: continuation)
                return .success(opened.stream.handle.id)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// Starts reading a text stream (`TextStreamReaderReadIncremental`), its route registered first.
    func openTextReader(
        _ request: Livekit_Proto_FfiRequest,
        handle: UInt64,
        continuation: AsyncThrowingStream<String, any Error>.Continuation
    ) throws(LiveKitError) {
        let what = "read the text stream"
        let refusal: LiveKitError? = state.withLock { state in
            guard state.running else { return state.failure ?? .notRunning("\(what): the LiveKit client has ended") }
            state.textReaders[handle] = TextReaderRoute(continuation: continuation)
            return nil
        }
        if let refusal { throw refusal }
        do {
            _ = try send(request, what)
        } catch {
            unroute(textReader: handle)
            throw error
        }
    }

    /// Forgets an audio stream's route.
    func unroute(audioStream handle: UInt64) {
        let route = state.withLock { $0.audioStreams.removeValue(forKey: handle) }
        route?.continuation.finish()
    }

    /// Forgets a text reader's route.
    func unroute(textReader handle: UInt64) {
        let route = state.withLock { $0.textReaders.removeValue(forKey: handle) }
        route?.continuation.finish()
    }

    /// Counts audio frames dropped by a stream.
    func countDroppedFrames(_ count: Int) {
        state.withLock { $0.droppedFrames += count }
    }

    // MARK: The event pump

    /// Takes events from the queue, decodes them and hands them over, until the client ends.
    private func pumpEvents() async {
        while let bytes = await events.next() {
            let event: Livekit_Proto_FfiEvent
            do {
                event = try Livekit_Proto_FfiEvent(serializedBytes: bytes, partial: true)
            } catch {
                let first = state.withLock { state in
                    state.undecodable += 1
                    return state.undecodable == 1
                }
                if first { logger.warning("an event from the LiveKit library cannot be decoded (\(error)): skipped") }
                continue
            }
            dispatch(event)
        }
    }

    /// Takes the library's log batches and logs them, redacted, until the client ends.
    private func pumpLogs() async {
        while let bytes = await logs.next() {
            guard let event = try? Livekit_Proto_FfiEvent(serializedBytes: bytes, partial: true),
                case .logs(let batch) = event.message
            else { continue }
            log(batch)
        }
    }

    /// One decoded event, to whoever waits for it.
    private func dispatch(_ event: Livekit_Proto_FfiEvent) {
        switch event.message {
        case .roomEvent(let roomEvent):
            let converted = LiveKitRoomEvent.convert(roomEvent, client: self)
            let route = state.withLock { $0.rooms[roomEvent.roomHandle] }
            guard let route else {
                state.withLock { $0.unclaimed += 1 }
                return
            }
            if let converted {
                if case .ended = converted {
                    unroute(room: roomEvent.roomHandle)
                } else {
                    route.continuation.yield(converted)
                }
            }
            if case .disconnected = roomEvent.message { route.room.value?.markDisconnected() }
        case .audioStreamEvent(let streamEvent):
            deliver(streamEvent)
        case .textStreamReaderEvent(let readerEvent):
            deliver(readerEvent)
        case .logs(let batch):
            log(batch)
        case .panic(let panic):
            fail(LiveKitError.panic(panic.message))
        case .some(let message):
            if let id = Self.asyncID(of: message) {
                resolve(id, event)
            } else {
                noteUnhandled(message)
            }
        case nil:
            state.withLock { $0.unclaimed += 1 }
        }
    }

    /// An audio stream's event: a frame is copied out (bounded) and its buffer's handle dropped at once.
    private func deliver(_ event: Livekit_Proto_AudioStreamEvent) {
        let route = state.withLock { $0.audioStreams[event.streamHandle] }
        switch event.message {
        case .frameReceived(let received):
            let buffer = OwnedHandle(received.frame.handle, library: library)
            let frame = LiveKitAudioFrame.copy(received.frame.info)
            withExtendedLifetime(buffer) {}
            guard let route, let frame else {
                state.withLock { $0.droppedFrames += 1 }
                return
            }
            if case .dropped = route.continuation.yield(frame) { countDroppedFrames(1) }
        case .eos:
            if route != nil { unroute(audioStream: event.streamHandle) }
        case nil:
            break
        }
    }

    /// A text stream reader's event: a chunk, or the end (with the reason, when the stream failed).
    private func deliver(_ event: Livekit_Proto_TextStreamReaderEvent) {
        guard let route = state.withLock({ $0.textReaders[event.readerHandle] }) else {
            state.withLock { $0.unclaimed += 1 }
            return
        }
        switch event.detail {
        case .chunkReceived(let chunk):
            route.continuation.yield(chunk.content)
        case .eos(let end):
            let removed = state.withLock { $0.textReaders.removeValue(forKey: event.readerHandle) }
            if end.hasError {
                removed?.continuation.finish(
                    throwing: LiveKitError.failed("the text stream", end.error.description_p)
                )
            } else {
                removed?.continuation.finish()
            }
        case nil:
            break
        }
    }

    /// Logs one batch of the library's log records, redacted: errors and warnings as such, information at debug
    /// (the library is chatty), debug and trace only at trace.
    private func log(_ batch: Livekit_Proto_LogBatch) {
        for record in batch.records {
            var level: Logger.Level
            switch record.level {
            case .logError: level = .error
            case .logWarn: level = .warning
            case .logInfo: level = .debug
            case .logDebug, .logTrace: level = .trace
            }
            // A handle the library already let go of itself (a track it unsubscribed, a stream it ended) is harmless
            // to drop again: not a warning.
            if level == .warning, record.message.hasPrefix("Attempted to drop unknown FFI handle") { level = .debug }
            guard logger.logLevel <= level else { continue }
            logger.log(
                level: level,
                "\(RemoteText.printable(LogRedaction.redact(record.message, limit: 512), limit: 600))",
                metadata: [
                    "target": "\(RemoteText.printable(LogRedaction.redact(record.target, limit: 64), limit: 80))"
                ]
            )
        }
    }

    /// Logs once per kind that an event came which nothing here handles (then only counts).
    private func noteUnhandled(_ message: Livekit_Proto_FfiEvent.OneOf_Message) {
        let name = String(describing: message).prefix { $0 != "(" }
        let first = state.withLock { state in
            state.unclaimed += 1
            return state.loggedKinds.insert(String(name)).inserted
        }
        if first { logger.debug("LiveKit event \(name) is not handled here: skipped") }
    }

    /// The library failed for good (it panicked): every waiter and stream ends with `error`, and requests are
    /// refused from now on.
    private func fail(_ error: LiveKitError) {
        logger.critical("\(error.description)")
        let (waiters, routes) = state.withLock { state in
            state.running = false
            state.failure = error
            return takeAll(&state)
        }
        for waiter in waiters { waiter.resume(throwing: error) }
        routes()
    }

    /// Empties the state's waiters and routes; returns the waiters, and a function that finishes the routes.
    private func takeAll(
        _ state: inout State
    ) -> ([CheckedContinuation<Livekit_Proto_FfiEvent, any Error>], @Sendable () -> Void) {
        var waiters: [CheckedContinuation<Livekit_Proto_FfiEvent, any Error>] = []
        for (_, slot) in state.slots {
            if case .waiting(let waiter?) = slot { waiters.append(waiter) }
        }
        state.slots = [:]
        let rooms = state.rooms.values.map(\.continuation)
        let streams = state.audioStreams.values.map(\.continuation)
        let readers = state.textReaders.values.map(\.continuation)
        state.rooms = [:]
        state.audioStreams = [:]
        state.textReaders = [:]
        return (
            waiters,
            {
                for room in rooms { room.finish() }
                for stream in streams { stream.finish() }
                for reader in readers { reader.finish() }
            }
        )
    }

    // MARK: The end

    /// Disconnects the rooms still connected (each within the configuration's deadline), disposes of the library
    /// on a thread of its own (`livekit_ffi_dispose` blocks), ends the pumps and every waiter, and frees the
    /// process's client slot.
    private func shutdown() async {
        let rooms = state.withLock { state in
            state.running = false
            return state.rooms.values.compactMap { $0.room.value }
        }
        await withTaskGroup(of: Void.self) { group in
            for room in rooms {
                group.addTask { await room.leave(timeout: self.configuration.disconnectTimeout) }
            }
        }
        let library = self.library
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            do {
                _ = try DeviceThread(name: "hark-lk-dispose") {
                    library.dispose()
                    continuation.resume()
                }
            } catch {
                // No thread to spare: dispose here (rooms are already disconnected, so it is quick).
                library.dispose()
                continuation.resume()
            }
        }
        CallbackRouting.active.withLock { $0 = nil }
        events.close()
        logs.close()
        let (waiters, routes) = state.withLock { state in
            takeAll(&state)
        }
        for waiter in waiters {
            waiter.resume(throwing: LiveKitError.notRunning("the LiveKit client has ended"))
        }
        routes()
        Self.running.withLock { $0 = false }
        logger.debug("LiveKit library disposed")
    }

    /// What the client has seen so far.
    public var statistics: Statistics {
        state.withLock { state in
            Statistics(
                events: events.statistics,
                logs: logs.statistics,
                tooLarge: tooLarge.value.load(ordering: .relaxed),
                undecodable: state.undecodable,
                unclaimed: state.unclaimed,
                droppedFrames: state.droppedFrames
            )
        }
    }

    /// The async id an answering event carries, for the kinds of answer this client asks for.
    static func asyncID(of message: Livekit_Proto_FfiEvent.OneOf_Message) -> UInt64? {
        switch message {
        case .connect(let answer): answer.asyncID
        case .disconnect(let answer): answer.asyncID
        case .dispose(let answer): answer.asyncID
        case .publishTrack(let answer): answer.asyncID
        case .unpublishTrack(let answer): answer.asyncID
        case .publishData(let answer): answer.asyncID
        case .captureAudioFrame(let answer): answer.asyncID
        case .setLocalMetadata(let answer): answer.asyncID
        case .setLocalName(let answer): answer.asyncID
        case .setLocalAttributes(let answer): answer.asyncID
        case .getStats(let answer): answer.asyncID
        case .getSessionStats(let answer): answer.asyncID
        case .sendText(let answer): answer.asyncID
        case .sendBytes(let answer): answer.asyncID
        case .textStreamReaderReadAll(let answer): answer.asyncID
        case .byteStreamReaderReadAll(let answer): answer.asyncID
        case .simulateScenario(let answer): answer.asyncID
        default: nil
        }
    }
}
