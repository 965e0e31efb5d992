import CConcurrencyHooks
import HarkCore
import NIOCore
import NIOPosix
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Where the process's Swift concurrency runs.
public enum ConcurrencyExecutor {
    private typealias Original = @convention(thin) (UnownedJob) -> Void
    private typealias Hook = @convention(thin) (UnownedJob, Original) -> Void

    /// Makes one NIO event loop thread the global executor of Swift concurrency, so that tasks and the
    /// sockets they use share a thread: a message from the network to a session, to the appliance and to
    /// the speaker's queue, and back, costs no thread switch (on small boards each switch is a wake-up that
    /// costs more than the work). What NIO's `unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor`
    /// does, through a reference the linker resolves instead of `dlsym`, which cannot see the hook in a
    /// static-stdlib binary. `Task.sleep` still wakes on Dispatch's timer thread: sleep on
    /// ``EventLoopClock`` where it happens often. Call once, first thing in `main`, before any task starts.
    /// Returns false when another hook was installed first (the default pool stays).
    @discardableResult
    public static func installEventLoop() -> Bool {
        NIOSingletons.groupLoopCountSuggestion = 1
        executor = MultiThreadedEventLoopGroup.singleton.next().executor
        return withUnsafeTemporaryAllocation(of: Hook.self, capacity: 1) { slot in
            slot.baseAddress!.initialize(to: { job, _ in ConcurrencyExecutor.executor?.enqueue(ExecutorJob(job)) })
            return slot.baseAddress!.withMemoryRebound(to: UnsafeRawPointer.self, capacity: 1) { pointer in
                hark_install_enqueue_global_hook(pointer.pointee) == 1
            }
        }
    }

    /// Set once, before the hook that reads it is installed (the installing exchange publishes it).
    nonisolated(unsafe) private static var executor: (any SerialExecutor)?
}

/// The continuous clock, whose sleeps are timers of the NIO event loop rather than of Dispatch: with
/// ``ConcurrencyExecutor/installEventLoop()`` a sleep that ends costs one wake-up of the thread that runs
/// everything else, not a timer thread's and then a hop. A scheduled callback, not a scheduled task: no
/// promise and no future per sleep (the pacing of 20 ms audio sleeps 50 times a second).
public struct EventLoopClock: Clock {
    public typealias Duration = Swift.Duration
    public typealias Instant = ContinuousClock.Instant

    private let loop: any EventLoop

    public init(loop: any EventLoop = MultiThreadedEventLoopGroup.singleton.next()) {
        self.loop = loop
    }

    public var now: Instant { ContinuousClock.now }
    public var minimumResolution: Duration { ContinuousClock().minimumResolution }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        let delay = ContinuousClock.now.duration(to: deadline)
        guard delay > .zero else { return }
        let nanoseconds = delay.nanoseconds
        let alarm = Alarm()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                guard alarm.arm(continuation) else { return }
                do {
                    alarm.scheduled(try loop.scheduleCallback(in: .nanoseconds(max(1, nanoseconds)), handler: alarm))
                } catch {
                    alarm.fail(error)
                }
            }
        } onCancel: {
            alarm.cancel()
        }
    }

    /// One sleep's continuation and its callback. The continuation is resumed exactly once, and never from
    /// inside NIO's cancellation (which holds the loop's task lock: resuming there would schedule on it).
    private final class Alarm: NIOScheduledCallbackHandler, Sendable {
        private struct State {
            var continuation: CheckedContinuation<Void, any Error>?
            var callback: NIOScheduledCallback?
            var cancelled = false
        }
        private let state = Mutex(State())

        /// Keeps the continuation; false (and resumed with cancellation) when the task was cancelled first.
        func arm(_ continuation: CheckedContinuation<Void, any Error>) -> Bool {
            let cancelled = state.withLock { state -> Bool in
                if !state.cancelled { state.continuation = continuation }
                return state.cancelled
            }
            if cancelled { continuation.resume(throwing: CancellationError()) }
            return !cancelled
        }

        func scheduled(_ callback: NIOScheduledCallback) {
            let cancelled = state.withLock { state -> Bool in
                state.callback = callback
                return state.cancelled
            }
            if cancelled { callback.cancel() }
        }

        func fail(_ error: any Error) {
            state.withLock { state in
                defer { state.continuation = nil }
                return state.continuation
            }?.resume(throwing: error)
        }

        func cancel() {
            let (continuation, callback) = state.withLock { state in
                state.cancelled = true
                defer { state.continuation = nil }
                return (state.continuation, state.callback)
            }
            continuation?.resume(throwing: CancellationError())
            callback?.cancel()
        }

        func handleScheduledCallback(eventLoop: some EventLoop) {
            state.withLock { state in
                defer { state.continuation = nil }
                return state.continuation
            }?.resume()
        }

        func didCancelScheduledCallback(eventLoop: some EventLoop) {
            // ``cancel()`` has resumed the continuation already. The other canceller is the loop's own
            // shutdown, which holds its task lock here (resuming would schedule on it); the singleton loop
            // is never shut down while the process runs.
        }
    }
}
