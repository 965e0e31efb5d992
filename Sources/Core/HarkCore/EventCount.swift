import Synchronization

/// Where tasks wait for a change to a state that another lock guards: the one wait-and-wake of Hark's queues.
///
/// An event count: ``notify()`` counts a change and wakes every task waiting. A waiter takes a ``Ticket``
/// *before* it looks at the condition it waits for, and ``wait(after:cancellable:)`` returns at once when a
/// change was counted since, so a change that falls between the look and the wait is never missed. Waiters
/// loop: take a ticket, look, wait, look again.
///
/// ``notify()`` never waits for anything but a short lock and never allocates: threads that are not Swift's
/// (an ALSA capture thread, a native library's callback thread) call it after each push.
public final class EventCount: Sendable {
    /// The count of changes when a waiter looked.
    public struct Ticket: Sendable, Hashable {
        fileprivate let count: UInt64
    }

    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var count: UInt64 = 0
        /// The first waiter (a queue's one consumer), apart, so that waking it moves no array.
        var first: Waiter?
        var others: [Waiter] = []
    }

    private let state = Mutex(State())
    private let ids = Atomic<UInt64>(0)

    public init() {}

    /// Tasks waiting now (a test's handle on "the producer is blocked": an event to await instead of yields).
    public var waiting: Int { state.withLock { ($0.first == nil ? 0 : 1) + $0.others.count } }

    /// The count now: take it before looking at the condition.
    public func ticket() -> Ticket { Ticket(count: state.withLock { $0.count }) }

    /// Counts a change and wakes every waiting task.
    public func notify() {
        let (first, others) = state.withLock { state -> (Waiter?, [Waiter]) in
            state.count &+= 1
            defer {
                state.first = nil
                if !state.others.isEmpty { state.others = [] }
            }
            return (state.first, state.others)
        }
        first?.continuation.resume()
        for waiter in others { waiter.continuation.resume() }
    }

    /// Waits until a change is counted after `ticket` (at once when one was). A `cancellable` wait also ends
    /// when the task is cancelled (or already was): the caller looks at its condition and at the cancellation.
    public func wait(after ticket: Ticket, cancellable: Bool = true) async {
        let id = ids.add(1, ordering: .relaxed).newValue
        guard cancellable else {
            await park(id, after: ticket, cancellable: false)
            return
        }
        await withTaskCancellationHandler {
            await park(id, after: ticket, cancellable: true)
        } onCancel: {
            let waiter = state.withLock { state -> Waiter? in
                if state.first?.id == id {
                    defer { state.first = nil }
                    return state.first
                }
                guard let index = state.others.firstIndex(where: { $0.id == id }) else { return nil }
                return state.others.remove(at: index)
            }
            waiter?.continuation.resume()
        }
    }

    private func park(_ id: UInt64, after ticket: Ticket, cancellable: Bool) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                // Under the lock the cancellation handler takes: it finds the waiter, or this sees the cancellation.
                if state.count != ticket.count || cancellable && Task.isCancelled { return true }
                let waiter = Waiter(id: id, continuation: continuation)
                if state.first == nil { state.first = waiter } else { state.others.append(waiter) }
                return false
            }
            if now { continuation.resume() }
        }
    }
}
