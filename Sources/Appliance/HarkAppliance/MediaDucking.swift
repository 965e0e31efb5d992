import HarkCore

/// When the supervisor ducks the speaker's media lane (music, radio), as a value: from the wake word until the
/// conversation it began is over (idle again, the wake animation ended), and while the user speaks (the voice
/// detector's speech, the push-to-talk button held). The playback thread ducks for the agent's voice and an alert by
/// itself. The supervisor tells it what changed (``update(wakeShown:userSpeaking:buttonHeld:conversation:)``).
struct MediaDucking {
    /// The reasons the speaker holds now, as last told.
    private(set) var held: DuckReason = []
    /// A wake word was heard and its conversation is not over.
    private var woken = false
    /// The conversation has left idle since the wake word (a wake word in a conversation already under way counts
    /// from the next idle).
    private var leftIdle = false

    /// The wake word was heard (a question starts).
    mutating func wakeWordHeard() {
        woken = true
        leftIdle = false
    }

    /// The changes to tell the speaker, given what the supervisor sees now: each (reason, active).
    mutating func update(
        wakeShown: Bool,
        userSpeaking: Bool,
        buttonHeld: Bool,
        conversation: ConversationState
    ) -> [(DuckReason, Bool)] {
        if woken {
            if conversation != .idle { leftIdle = true }
            if leftIdle && conversation == .idle && !wakeShown { woken = false }
        }
        var wanted: DuckReason = []
        if woken || wakeShown { wanted.insert(.wakeWord) }
        if userSpeaking || buttonHeld { wanted.insert(.userSpeech) }
        var changes: [(DuckReason, Bool)] = []
        for reason in [DuckReason.wakeWord, .userSpeech] where wanted.contains(reason) != held.contains(reason) {
            changes.append((reason, wanted.contains(reason)))
        }
        held = wanted
        return changes
    }
}
