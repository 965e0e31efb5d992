import HarkCore
import Synchronization

/// What one frame meant for a connection that is starting or running.
public enum FrameVerdict: Sendable, Hashable {
    /// Nothing that changes the connection: read on.
    case keepReading
    /// The connection became ready (Gemini's `setupComplete`, Datagrid's `ready`).
    case ready
    /// The connection is over (the conversation ended, an error closed it): stop reading.
    case over
}

extension WebSocketTransport {
    /// Opens `request` and runs `handler` on it, and says how it went: what the server said when it closed,
    /// or the failure, classified — a connection that could not be opened by ``SessionFailure/fromConnect(_:)``,
    /// a ``SessionFailure`` the handler threw as it is, anything else as transient.
    public func exchange(
        _ request: WebSocketRequest,
        handler: @escaping @Sendable (WebSocketInbound, any WebSocketOutbound) async throws -> Void
    ) async -> Result<WebSocketClose?, SessionFailure> {
        do {
            return .success(try await connect(request, handler: handler))
        } catch let error as WebSocketConnectError {
            return .failure(SessionFailure.fromConnect(error))
        } catch let failure as SessionFailure {
            return .failure(failure)
        } catch {
            return .failure(SessionFailure(.transient, "connection failed: \(error)"))
        }
    }
}

/// The phases of a connection every backend goes through in the same way.
public enum ConnectionPhases {
    /// Reads frames, handing each to `handle`, until one makes the connection ready (true), the connection is
    /// over or closes (false), or `timeout` passes on `clock` (throws a transient failure: "no `what` within …").
    public static func awaitReady(
        _ inbound: WebSocketInbound,
        within timeout: Duration,
        clock: any Clock<Duration>,
        waitingFor what: String,
        handle: @escaping @Sendable (WebSocketMessage) async throws -> FrameVerdict
    ) async throws -> Bool {
        struct TimedOut: Error {}
        return try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                while let message = try await inbound.next() {
                    switch try await handle(message) {
                    case .ready: return true
                    case .over: return false
                    case .keepReading: continue
                    }
                }
                return false
            }
            group.addTask {
                try await clock.sleep(for: timeout)
                throw TimedOut()
            }
            defer { group.cancelAll() }
            do {
                return try await group.next() ?? false
            } catch is TimedOut {
                throw SessionFailure(.transient, "no \(what) within \(timeout.humanDescription)")
            }
        }
    }

    /// Serves a ready connection: reads frames with `handle` until the connection closes or a frame says it is
    /// over, with the `alongside` tasks (the sender, watchers) running beside the reader. A task beside it may
    /// return early (a sender holding input for the next connection); when the reader ends, the rest are
    /// cancelled. A task that throws ends the connection with its error.
    public static func serve(
        _ inbound: WebSocketInbound,
        alongside: [@Sendable () async throws -> Void],
        handle: @escaping @Sendable (WebSocketMessage) async throws -> FrameVerdict
    ) async throws {
        try await withThrowingTaskGroup(of: Bool.self) { group in
            for task in alongside {
                group.addTask {
                    try await task()
                    return false
                }
            }
            group.addTask {
                while let message = try await inbound.next() {
                    // However busy the service keeps the reader, a stop or a deadline is seen between frames.
                    try Task.checkCancellation()
                    if try await handle(message) == .over { break }
                }
                return true
            }
            while let isReader = try await group.next() {
                if isReader {
                    group.cancelAll()
                    break
                }
            }
        }
    }
}

/// What happened on one connection, filled in by the tasks serving it and read when it has ended.
public final class ConnectionRecord: Sendable {
    private struct Values {
        var ready = false
        var switched = false
        var ended = false
        var failure: SessionFailure?
    }

    private let values = Mutex(Values())

    public init() {}

    /// The connection became ready (it was healthy, whatever ended it).
    public var ready: Bool {
        get { values.withLock { $0.ready } }
        set { values.withLock { $0.ready = newValue } }
    }

    /// The session left the connection on purpose, to resume on a new one.
    public var switched: Bool {
        get { values.withLock { $0.switched } }
        set { values.withLock { $0.switched = newValue } }
    }

    /// The service ended the conversation on it.
    public var ended: Bool {
        get { values.withLock { $0.ended } }
        set { values.withLock { $0.ended = newValue } }
    }

    /// A failure the service reported in a message (the connection was then closed).
    public var failure: SessionFailure? {
        get { values.withLock { $0.failure } }
        set { values.withLock { $0.failure = newValue } }
    }

    /// Ended or failed: nothing more to do on this connection.
    public var isOver: Bool { values.withLock { $0.ended || $0.failure != nil } }
}
