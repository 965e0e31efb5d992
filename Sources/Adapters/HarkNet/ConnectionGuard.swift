import NIOCore
import Synchronization

/// One connection attempt's channels, its first failure and its deadlines, shared by the task that awaits the
/// connection, that task's cancellation handler and the event loop. Cancelling, a failure and a deadline that
/// passes each close the channel at once (within one tick of its event loop), whatever phase it is in, and wake
/// whoever waits on a bound promise.
package final class ConnectionGuard<Failure: Error & Sendable>: Sendable {
    private struct State {
        /// Every channel of the attempt (happy eyeballs may try several addresses).
        var channels: [any Channel] = []
        var cancelled = false
        var closed = false
        var failure: Failure?
        var timers: [String: Scheduled<Void>] = [:]
        var waiters: [@Sendable (any Error) -> Void] = []
    }

    private let state = Mutex(State())

    package init() {}

    /// The first failure recorded, if any.
    package var failure: Failure? { state.withLock { $0.failure } }

    /// Whether ``cancel()`` was called.
    package var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// What to throw instead of an error that surfaced from the channel: the recorded failure (a deadline, a
    /// protocol violation), or a `CancellationError` after ``cancel()``; nil when the channel's error stands.
    package var overridingError: (any Error)? {
        state.withLock { state in
            if let failure = state.failure { return failure }
            return state.cancelled ? CancellationError() : nil
        }
    }

    /// Takes charge of `channel`. Returns false, and closes it, when the attempt already ended.
    package func adopt(_ channel: any Channel) -> Bool {
        let ended = state.withLock { state in
            state.channels.append(channel)
            return state.closed
        }
        if ended { channel.close(promise: nil) }
        return !ended
    }

    /// Fails `promise` as soon as the attempt is cancelled or fails (at once if it already was).
    package func bind<Value>(_ promise: EventLoopPromise<Value>) {
        let error = state.withLock { state -> (any Error)? in
            if let failure = state.failure { return failure }
            if state.cancelled { return CancellationError() }
            state.waiters.append { promise.fail($0) }
            return nil
        }
        if let error { promise.fail(error) }
    }

    /// Cancels the attempt: closes its channels and fails the bound promises with `CancellationError`.
    package func cancel() {
        end { $0.cancelled = true }
    }

    /// Records `failure` (the first one counts), closes the channels and fails the bound promises with it.
    package func fail(_ failure: Failure) {
        end { state in
            if state.failure == nil, !state.cancelled { state.failure = failure }
        }
    }

    /// Closes the channels without recording a failure (the connection is over).
    package func close() {
        end { _ in }
    }

    /// After `delay`, fails the attempt with `failure()`. Replaces a deadline of the same `name`; needs a channel.
    package func arm(_ name: String, in delay: Duration, _ failure: @escaping @Sendable () -> Failure) {
        guard let loop = state.withLock({ $0.channels.last?.eventLoop }) else { return }
        let timer = loop.scheduleTask(in: TimeAmount(max(delay, .zero))) { [self] in fail(failure()) }
        let replaced = state.withLock { state -> Scheduled<Void>? in
            defer { state.timers[name] = timer }
            return state.timers[name]
        }
        replaced?.cancel()
    }

    /// Cancels the deadline `name`.
    package func disarm(_ name: String) {
        state.withLock { $0.timers.removeValue(forKey: name) }?.cancel()
    }

    private func end(_ update: (inout State) -> Void) {
        let (channels, timers, waiters, error) = state.withLock { state in
            update(&state)
            state.closed = true
            let error: any Error = state.failure.map { $0 as any Error } ?? CancellationError()
            defer {
                state.timers = [:]
                state.waiters = []
            }
            return (state.channels, Array(state.timers.values), state.waiters, error)
        }
        for timer in timers { timer.cancel() }
        for channel in channels { channel.close(promise: nil) }
        for waiter in waiters { waiter(error) }
    }
}
