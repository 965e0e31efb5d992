import HarkCore
import HarkDatagrid
import Synchronization

/// What all connections of one simulator share: connection numbers, hand-off tokens, conversations.
public final class DatagridStore: Sendable {
    /// A conversation's lasting state.
    public struct Conversation: Sendable, Hashable {
        public var id: String
        public var turns = 0
        public var transcript: [DatagridTranscriptLine] = []
    }

    private struct State {
        var connections = 0
        var tokens: [String: (expires: Duration, start: DatagridStart)] = [:]
        var conversations: [String: Conversation] = [:]
        var nextConversation = 0
        var nextToken = 0
        var nextSession = 0
    }

    private let state = Mutex(State())
    private let epoch = ContinuousClock.now

    public init() {}

    /// Wall-clock time since the store was made.
    public func wallNow() -> Duration { ContinuousClock.now - epoch }

    func nextConnectionNumber() -> Int {
        state.withLock { state in
            state.connections += 1
            return state.connections
        }
    }

    func nextSessionID() -> String {
        state.withLock { state in
            state.nextSession += 1
            return "vs_\(state.nextSession)"
        }
    }

    /// A single-use token for the hand-off, valid until `expires`.
    func mintToken(start: DatagridStart, expires: Duration) -> String {
        state.withLock { state in
            state.nextToken += 1
            var generator = SeededRandom(seed: UInt64(state.nextToken) &* 0x9E37_79B9)
            let suffix = String(generator.next() & 0xFFFF_FFFF_FFFF, radix: 16)
            let token = "vt_\(state.nextToken)_\(suffix)"
            state.tokens[token] = (expires, start)
            return token
        }
    }

    /// Takes a hand-off token (single use). Nil when unknown, used or expired.
    func redeem(token: String, wall: Duration) -> DatagridStart? {
        state.withLock { state in
            guard let entry = state.tokens.removeValue(forKey: token), entry.expires >= wall else { return nil }
            return entry.start
        }
    }

    /// The conversation `id` if known, else a new one. Returns it and whether it continued.
    func join(conversation id: String?) -> (Conversation, continued: Bool) {
        state.withLock { state in
            if let id, let existing = state.conversations[id] { return (existing, true) }
            state.nextConversation += 1
            let conversation = Conversation(id: "conv_\(state.nextConversation)")
            state.conversations[conversation.id] = conversation
            return (conversation, false)
        }
    }

    func update(conversation id: String, _ change: (inout Conversation) -> Void) -> Conversation? {
        state.withLock { state in
            guard var conversation = state.conversations[id] else { return nil }
            change(&conversation)
            state.conversations[id] = conversation
            return conversation
        }
    }

    /// A conversation's state.
    public func conversation(_ id: String) -> Conversation? {
        state.withLock { $0.conversations[id] }
    }
}
