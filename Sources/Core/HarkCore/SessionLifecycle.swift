import Synchronization

/// The run/finish handling every session shares: ``run(_:)`` runs the session's loop in a task of its own,
/// so that ``finish(stopAtOnce:)`` can stop a session that is connecting or backing off at once, while a
/// connected one is left to end politely.
public final class SessionLifecycle: Sendable {
    private let state = Mutex<(finishing: Bool, task: Task<Void, any Error>?)>((false, nil))

    public init() {}

    /// True once ``finish(stopAtOnce:)`` was called.
    public var isFinishing: Bool { state.withLock { $0.finishing } }

    /// Marks the session finishing; with `stopAtOnce` (nothing polite left to do) cancels its loop.
    public func finish(stopAtOnce: Bool) {
        let task = state.withLock { state -> Task<Void, any Error>? in
            state.finishing = true
            return state.task
        }
        if stopAtOnce { task?.cancel() }
    }

    /// Runs `loop` until it returns or throws; cancelling the caller cancels it.
    public func run(_ loop: @escaping @Sendable () async throws -> Void) async throws {
        let task = Task { try await loop() }
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
}
