import HarkCore

/// Cuts a reply that arrives in pieces into sentences as soon as each one is complete, so the first sentence is
/// spoken while the model still writes the rest. A sentence ends at `.` `!` `?` `…` (and the danda `।` `॥`)
/// followed by white space, or at a line break, or at the end of a piece where it cannot be anything else
/// (``pieceEnded()``); closing quotes and brackets stay with it. A sentence that runs
/// on without any of them is cut at a clause (`,` `;` `:` and dashes, then white space) once it passes
/// ``softLength``, and at ``hardLength`` characters at the latest, so what waits is always bounded whatever the
/// model writes. Malayalam writes its sentences with the Latin full stop and question mark.
public struct SentenceCutter: Sendable {
    /// Past this many characters a sentence is cut at its last clause boundary.
    public let softLength: Int
    /// No sentence is longer (the speech service takes at most 2500 characters, under 500 recommended).
    public let hardLength: Int
    private var pending: [Character] = []

    public init(softLength: Int = 200, hardLength: Int = 400) {
        self.hardLength = max(2, hardLength)
        self.softLength = min(max(1, softLength), self.hardLength)
    }

    /// Characters waiting for their sentence to end.
    public var waiting: Int { pending.count }

    /// Takes the next piece of the reply; returns the sentences it completed, in order (without the white space
    /// around them; empty ones dropped).
    public mutating func add(_ piece: String) -> [String] {
        var sentences: [String] = []
        for character in piece {
            pending.append(character)
            if let cut = cutPoint() {
                emit(upTo: cut, into: &sentences)
            }
        }
        return sentences
    }

    /// A piece of the reply ended here: a sentence that ends with it is complete if it cannot be anything else,
    /// so it goes now rather than with the next piece (which a model may send a good while later). A `!` `?` `…` or
    /// danda ends it; a full stop only after a word of two letters or more (not `3.`, which may go on as `3.5`,
    /// nor an initial, nor `..`).
    public mutating func pieceEnded() -> [String] {
        var index = pending.count - 1
        while index > 0, Self.closers.contains(pending[index]) { index -= 1 }
        guard index >= 0, Self.terminators.contains(pending[index]) else { return [] }
        if pending[index] == "." {
            guard index >= 2, pending[index - 1].isLetter, pending[index - 2].isLetter else { return [] }
        }
        var sentences: [String] = []
        emit(upTo: pending.count, into: &sentences)
        return sentences
    }

    /// The reply ended: whatever waits is the last sentence.
    public mutating func finish() -> [String] {
        var sentences: [String] = []
        emit(upTo: pending.count, into: &sentences)
        return sentences
    }

    /// Forgets what waits (the reply was abandoned).
    public mutating func reset() {
        pending.removeAll(keepingCapacity: true)
    }

    static let terminators: Set<Character> = [".", "!", "?", "…", "।", "॥", "。", "！", "？"]
    static let closers: Set<Character> = ["\"", "'", ")", "]", "}", "”", "’", "»", "」"]
    static let clauseMarks: Set<Character> = [",", ";", ":", "—", "–", "،", "、"]

    /// Where the pending text can be cut now (the count of characters that make the sentence), or nil.
    private func cutPoint() -> Int? {
        guard let last = pending.last else { return nil }
        if last.isNewline { return pending.count }
        if last.isWhitespace, pending.count >= 2 {
            // A terminator (and its closers) just before this white space ends the sentence.
            var index = pending.count - 2
            while index > 0, Self.closers.contains(pending[index]) { index -= 1 }
            if Self.terminators.contains(pending[index]) { return pending.count - 1 }
        }
        if pending.count >= hardLength {
            return clauseCut(from: softLength / 2) ?? whitespaceCut() ?? pending.count
        }
        if pending.count >= softLength, last.isWhitespace, pending.count >= 2,
            Self.clauseMarks.contains(pending[pending.count - 2])
        {
            return pending.count - 1
        }
        return nil
    }

    /// The last clause boundary at or after `minimum` characters.
    private func clauseCut(from minimum: Int) -> Int? {
        var index = pending.count - 1
        while index >= minimum {
            if Self.clauseMarks.contains(pending[index]) { return index + 1 }
            index -= 1
        }
        return nil
    }

    /// The last white space after the first quarter (a word is not split).
    private func whitespaceCut() -> Int? {
        var index = pending.count - 1
        while index >= hardLength / 4 {
            if pending[index].isWhitespace { return index }
            index -= 1
        }
        return nil
    }

    private mutating func emit(upTo count: Int, into sentences: inout [String]) {
        let sentence = String(pending[..<count]).trimmedWhitespace
        pending.removeFirst(count)
        while let first = pending.first, first.isWhitespace { pending.removeFirst() }
        if !sentence.isEmpty { sentences.append(sentence) }
    }
}
