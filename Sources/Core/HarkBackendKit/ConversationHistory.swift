import HarkCore

/// What was said in a conversation, kept so that a fresh session can be told it when the service cannot continue
/// the old one (a resumption handle refused, expired or unknown). Only final transcript segments are kept, a
/// role's consecutive segments merged into one turn; bounded by turns and by characters (the oldest turns go
/// first), and held in memory only.
public struct ConversationHistory: Sendable, Hashable {
    /// One turn: who spoke and what they said.
    public struct Turn: Sendable, Hashable {
        public var role: Transcript.Role
        public var text: String

        public init(role: Transcript.Role, text: String) {
            self.role = role
            self.text = text
        }
    }

    /// The most turns kept (0: nothing is kept).
    public let turnLimit: Int
    /// The most characters kept over all turns.
    public let characterLimit: Int
    /// The turns kept, oldest first.
    public private(set) var turns: [Turn] = []
    private var characters = 0

    public init(turns: Int, characters: Int) {
        self.turnLimit = max(0, turns)
        self.characterLimit = max(0, characters)
    }

    /// True when nothing is kept.
    public var isEmpty: Bool { turns.isEmpty }

    /// Takes a transcript event: final segments are kept, interim ones ignored.
    public mutating func record(_ transcript: Transcript) {
        guard transcript.isFinal, turnLimit > 0, characterLimit > 0 else { return }
        let text = transcript.text.trimmedWhitespace
        guard !text.isEmpty else { return }
        if let last = turns.last, last.role == transcript.role {
            turns[turns.count - 1].text = last.text + " " + text
            characters += text.count + 1
        } else {
            turns.append(Turn(role: transcript.role, text: text))
            characters += text.count
        }
        trim()
    }

    /// Forgets everything (a new conversation).
    public mutating func clear() {
        turns.removeAll()
        characters = 0
    }

    private mutating func trim() {
        while turns.count > turnLimit || (characters > characterLimit && turns.count > 1) {
            characters -= turns.removeFirst().text.count
        }
        // One turn longer than the bound keeps its end (the most recent words).
        if characters > characterLimit, let only = turns.first {
            turns[0].text = String(only.text.suffix(characterLimit))
            characters = turns[0].text.count
        }
    }
}
