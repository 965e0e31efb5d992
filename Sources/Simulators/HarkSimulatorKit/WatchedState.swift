import Synchronization

/// A value that changes over time and can be awaited: ``wait(_:until:_:)`` returns the value as soon as a
/// condition holds for it, or throws ``WatchTimeout`` at a deadline. Recorders (the simulators') and
/// status views use it so that nothing polls and no test sleeps.
public final class WatchedState<Value: Sendable>: Sendable {
    private struct Waiter {
        var id: Int
        var what: String
        var condition: @Sendable (Value) -> Bool
        var continuation: CheckedContinuation<Value, any Error>
    }

    private struct State {
        var value: Value
        var waiters: [Waiter] = []
        var nextWaiter = 0
        var abandoned: Set<Int> = []
    }

    private let state: Mutex<State>

    public init(_ value: Value) {
        self.state = Mutex(State(value: value))
    }

    /// The value now.
    public var value: Value { state.withLock { $0.value } }

    /// Applies `change` and wakes the waiters whose condition now holds.
    public func update(_ change: (inout Value) -> Void) {
        let woken: [(Waiter, Value)] = state.withLock { state in
            change(&state.value)
            guard !state.waiters.isEmpty else { return [] }
            var woken: [(Waiter, Value)] = []
            state.waiters.removeAll { waiter in
                guard waiter.condition(state.value) else { return false }
                woken.append((waiter, state.value))
                return true
            }
            return woken
        }
        for (waiter, value) in woken { waiter.continuation.resume(returning: value) }
    }

    /// Waits until `condition` holds for the value and returns it; throws ``WatchTimeout`` at `deadline`,
    /// or `CancellationError` when the waiting task is cancelled.
    public func wait(
        _ what: String,
        until deadline: ContinuousClock.Instant,
        _ condition: @escaping @Sendable (Value) -> Bool
    ) async throws -> Value {
        let id = state.withLock { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        let timer = Task {
            try? await Task.sleep(until: deadline, clock: .continuous)
            self.abandon(id, error: nil)
        }
        defer { timer.cancel() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let ready: Value? = state.withLock { state in
                    if state.abandoned.remove(id) != nil {
                        continuation.resume(throwing: WatchTimeout(what: what, value: state.value))
                        return nil
                    }
                    if condition(state.value) { return state.value }
                    state.waiters.append(Waiter(id: id, what: what, condition: condition, continuation: continuation))
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            self.abandon(id, error: CancellationError())
        }
    }

    private func abandon(_ id: Int, error: (any Error)?) {
        let found: (Waiter, Value)? = state.withLock { state in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }) else {
                state.abandoned.insert(id)
                return nil
            }
            return (state.waiters.remove(at: index), state.value)
        }
        guard let (waiter, value) = found else { return }
        waiter.continuation.resume(throwing: error ?? WatchTimeout(what: waiter.what, value: value))
    }
}

/// A watched condition did not come true by its deadline; `value` is what it was then.
public struct WatchTimeout<Value: Sendable>: Error, Sendable, CustomStringConvertible {
    public var what: String
    public var value: Value
    public var description: String { "timed out waiting for \(what)" }
}
