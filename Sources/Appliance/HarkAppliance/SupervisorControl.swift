import HarkCore
import Synchronization

/// What the control socket asks of the supervisor itself: the status as it is now, and a wait until the loop has
/// handled what was posted before (a reload, say) so a reply can tell that it is in force.
extension Supervisor {
    /// The status `hark status` shows, as it is now (the status file may be a few seconds older).
    public func currentStatus() -> ApplianceStatus {
        var status = publisher.status
        fillCounters(&status)
        return status
    }

    /// Returns once the loop has handled every input posted before this call, or when the calling task is
    /// cancelled (a loop that has stopped never handles it: race it against a deadline).
    public nonisolated func settled() async {
        let once = ResumeOnce()
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                if once.hold(continuation) { inputs.post(.settled { once.resume() }) }
            }
        } onCancel: {
            once.resume()
        }
    }
}

/// A continuation resumed once, by whichever comes first: the loop, or the task's cancellation.
private final class ResumeOnce: Sendable {
    private let state = Mutex<(continuation: CheckedContinuation<Void, Never>?, done: Bool)>((nil, false))

    /// Keeps `continuation` to resume later; false (and resumed now) when it was resumed already.
    func hold(_ continuation: CheckedContinuation<Void, Never>) -> Bool {
        let already = state.withLock { state -> Bool in
            if state.done { return true }
            state.continuation = continuation
            return false
        }
        if already { continuation.resume() }
        return !already
    }

    func resume() {
        let continuation = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.done = true
            defer { state.continuation = nil }
            return state.continuation
        }
        continuation?.resume()
    }
}
