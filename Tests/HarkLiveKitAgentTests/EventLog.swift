import HarkCore
import HarkTestKit
import Synchronization

/// A session's events as they come, with what the tests ask of them: ``waitFor(_:within:_:)`` wakes on each event
/// and checks its condition then.
final class EventLog: Sendable {
    struct Snapshot: Sendable {
        var events: [SessionEvent] = []
        var audioSamples = 0
        var turns = 0
        var ended = false
        var states: [ConversationState] = []
        var transcripts: [Transcript] = []
        var links: [LinkState] = []
    }

    private struct Waiter {
        let condition: @Sendable (Snapshot) -> Bool
        let continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var snapshot = Snapshot()
        var waiters: [Int: Waiter] = [:]
        var nextWaiter = 0
    }

    private final class Box: Sendable {
        let state = Mutex(State())

        /// Resumes the waiters whose condition now holds.
        func wake() {
            let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                let due = state.waiters.filter { $0.value.condition(state.snapshot) }
                for key in due.keys { state.waiters[key] = nil }
                return due.values.map(\.continuation)
            }
            for continuation in ready { continuation.resume() }
        }
    }

    private let box = Box()
    private let task: Task<Void, Never>

    init(_ events: AsyncStream<SessionEvent>) {
        let box = self.box
        task = Task {
            for await event in events {
                box.state.withLock { state in
                    state.snapshot.events.append(event)
                    switch event {
                    case .audio(let chunk): state.snapshot.audioSamples += chunk.samples.count
                    case .turnComplete: state.snapshot.turns += 1
                    case .conversation(let conversation): state.snapshot.states.append(conversation)
                    case .transcript(let transcript): state.snapshot.transcripts.append(transcript)
                    case .link(let link):
                        state.snapshot.links.append(link)
                        if case .ended = link { state.snapshot.ended = true }
                    default: break
                    }
                }
                box.wake()
            }
        }
    }

    var snapshot: Snapshot { box.state.withLock { $0.snapshot } }

    /// Returns once `condition` holds for the events so far, or throws after `timeout`.
    func waitFor(
        _ what: String,
        within timeout: Duration = .seconds(30),
        _ condition: @escaping @Sendable (Snapshot) -> Bool
    ) async throws {
        let box = self.box
        try await withDeadline(timeout, what) {
            let id = box.state.withLock { state -> Int in
                defer { state.nextWaiter += 1 }
                return state.nextWaiter
            }
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let now = box.state.withLock { state -> Bool in
                        if condition(state.snapshot) { return true }
                        state.waiters[id] = Waiter(condition: condition, continuation: continuation)
                        return false
                    }
                    if now { continuation.resume() }
                }
            } onCancel: {
                let waiter = box.state.withLock { $0.waiters.removeValue(forKey: id) }
                waiter?.continuation.resume()
            }
        }
    }
}
