import HarkCore
import HarkTestKit
import Synchronization

/// A session's events as they come, with what the tests ask of them.
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

    private let box = Box()
    private let task: Task<Void, Never>

    private final class Box: Sendable {
        let state = Mutex(Snapshot())
    }

    init(_ events: AsyncStream<SessionEvent>) {
        let box = self.box
        task = Task {
            for await event in events {
                box.state.withLock { snapshot in
                    snapshot.events.append(event)
                    switch event {
                    case .audio(let chunk): snapshot.audioSamples += chunk.samples.count
                    case .turnComplete: snapshot.turns += 1
                    case .conversation(let conversation): snapshot.states.append(conversation)
                    case .transcript(let transcript): snapshot.transcripts.append(transcript)
                    case .link(let link):
                        snapshot.links.append(link)
                        if case .ended = link { snapshot.ended = true }
                    default: break
                    }
                }
            }
        }
    }

    var snapshot: Snapshot { box.state.withLock { $0 } }

    func waitFor(
        _ what: String,
        within timeout: Duration = .seconds(30),
        _ condition: @escaping @Sendable (Snapshot) -> Bool
    )
        async throws
    {
        try await withDeadline(timeout, what) {
            while !condition(self.snapshot) { try await Task.sleep(for: .milliseconds(20)) }
        }
    }
}
