import Synchronization

/// A clock that moves only when a test says so. Sleepers wake when ``advance(by:)`` passes their
/// deadline, so code that backs off, times out or animates is tested exactly and without waiting.
public final class ManualClock: Clock, Sendable {
    /// A point on the manual clock: an offset from its start.
    public struct Instant: InstantProtocol, Sendable, Hashable, Comparable {
        public var offset: Duration

        public init(offset: Duration) { self.offset = offset }

        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private struct Sleeper {
        var id: Int
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now = Instant(offset: .zero)
        var sleepers: [Sleeper] = []
        var nextID = 0
        var requested: [Duration] = []
        var sleepWaiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state = Mutex(State())

    public init() {}

    public var now: Instant { state.withLock { $0.now } }
    public var minimumResolution: Duration { .zero }

    /// Every sleep asked for so far, as durations from the moment of asking, in order.
    public var requestedSleeps: [Duration] { state.withLock { $0.requested } }

    /// How many tasks are asleep on this clock now.
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let id = state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                // A task cancelled before it is parked had its cancellation handler run with no sleeper
                // to remove: it must not be parked, or it sleeps for ever. Checked under the lock the
                // handler takes, so a later cancellation finds the sleeper.
                let (wakeNow, cancelled, waiters) = state.withLock {
                    state -> (Bool, Bool, [CheckedContinuation<Void, Never>]) in
                    state.requested.append(state.now.duration(to: deadline))
                    if Task.isCancelled { return (false, true, []) }
                    if deadline <= state.now { return (true, false, []) }
                    state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    return (false, false, Self.readyWaiters(&state))
                }
                for waiter in waiters { waiter.resume() }
                if cancelled {
                    continuation.resume(throwing: CancellationError())
                } else if wakeNow {
                    continuation.resume()
                }
            }
        } onCancel: {
            let sleeper = state.withLock { state -> Sleeper? in
                guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.sleepers.remove(at: index)
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves time forward and wakes every sleeper whose deadline has come, earliest first.
    public func advance(by duration: Duration) {
        let woken = state.withLock { state -> [Sleeper] in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            let due = state.sleepers.filter { $0.deadline <= now }.sorted { $0.deadline < $1.deadline }
            state.sleepers.removeAll { $0.deadline <= now }
            return due
        }
        for sleeper in woken { sleeper.continuation.resume() }
    }

    /// Waits until at least `count` tasks sleep on this clock (no polling: woken by each new sleeper).
    public func waitForSleepers(_ count: Int = 1) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { state -> Bool in
                if state.sleepers.count >= count { return true }
                state.sleepWaiters.append((count, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    private static func readyWaiters(_ state: inout State) -> [CheckedContinuation<Void, Never>] {
        let count = state.sleepers.count
        let ready = state.sleepWaiters.filter { $0.count <= count }.map(\.continuation)
        state.sleepWaiters.removeAll { $0.count <= count }
        return ready
    }
}

/// Awaits `operation`, failing with ``DeadlineExceeded`` if it takes longer than `timeout` of real
/// time. For tests that await an event: a deadline instead of a sleep. When the deadline passes the
/// operation is cancelled but not waited for, so work that ignores cancellation (awaiting another task's
/// value, a blocked read) fails the test instead of hanging it.
public func withDeadline<T: Sendable>(
    _ timeout: Duration,
    _ what: String = "operation",
    _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    let outcome = DeadlineOutcome<T>()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            let work = Task {
                do { outcome.finish(.success(try await operation())) } catch { outcome.finish(.failure(error)) }
            }
            let timer = Task {
                try? await Task.sleep(for: timeout)
                outcome.finish(.failure(DeadlineExceeded(what: what, timeout: timeout)))
            }
            outcome.start(continuation, cancelling: [work, timer])
        }
    } onCancel: {
        outcome.finish(.failure(CancellationError()))
    }
}

/// The first of an operation's result, its deadline and its caller's cancellation; the others are dropped.
private final class DeadlineOutcome<T: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<T, any Error>?
        var tasks: [Task<Void, Never>] = []
        var result: Result<T, any Error>?
    }
    private let state = Mutex(State())

    func start(_ continuation: CheckedContinuation<T, any Error>, cancelling tasks: [Task<Void, Never>]) {
        let early = state.withLock { state -> Result<T, any Error>? in
            state.tasks = tasks
            if let result = state.result { return result }
            state.continuation = continuation
            return nil
        }
        if let early {
            tasks.forEach { $0.cancel() }
            continuation.resume(with: early)
        }
    }

    func finish(_ result: Result<T, any Error>) {
        let (continuation, tasks) = state.withLock {
            state -> (CheckedContinuation<T, any Error>?, [Task<Void, Never>]) in
            guard state.result == nil else { return (nil, []) }
            state.result = result
            defer { state.continuation = nil }
            return (state.continuation, state.tasks)
        }
        tasks.forEach { $0.cancel() }
        continuation?.resume(with: result)
    }
}

/// An awaited event did not happen in time.
public struct DeadlineExceeded: Error, CustomStringConvertible {
    public var what: String
    public var timeout: Duration
    public var description: String { "\(what) did not happen within \(timeout)" }
}
