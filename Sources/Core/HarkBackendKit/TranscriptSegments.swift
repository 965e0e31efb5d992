import HarkCore

/// Turns transcript pieces into ``Transcript`` segments: for backends whose service sends fragments (Gemini's
/// input and output transcriptions) it gathers them per role into one open segment, emitting the whole text so
/// far each time, and closes the segment when the service says it is finished or the turn ends. For backends
/// that send whole utterances it numbers them. What one segment keeps is bounded (a service that floods
/// transcript text cannot grow memory): past ``limit`` characters further fragments are dropped and counted.
public struct TranscriptSegments: Sendable {
    /// The most characters one segment keeps.
    public let limit: Int
    /// Characters dropped because a segment was full.
    public private(set) var droppedCharacters = 0
    private var open: [Transcript.Role: Segment] = [:]
    private struct Segment {
        var id: String
        /// The confirmed text (fragments appended).
        var text = ""
        var characters = 0
        /// The low-latency guess at what follows the confirmed text, replaced by each interim piece and dropped
        /// when a fragment confirms it.
        var interim = ""
        /// What the segment says so far.
        var whole: String { interim.isEmpty ? text : text + interim }
    }
    private var numbers: [Transcript.Role: Int] = [:]

    public init(limit: Int = 8192) {
        self.limit = max(1, limit)
    }

    /// A fragment of `role`'s current utterance; `finished` closes it. Nil when nothing changed (an empty
    /// fragment, or one dropped because the segment is full and not finished).
    public mutating func append(_ role: Transcript.Role, _ fragment: String, finished: Bool = false) -> Transcript? {
        var segment = open[role] ?? Segment(id: nextID(role))
        let room = max(0, limit - segment.characters)
        var changed = false
        if !fragment.isEmpty {
            let count = fragment.count
            let taken = min(count, room)
            segment.text += taken == count ? fragment : String(fragment.prefix(taken))
            segment.characters += taken
            droppedCharacters += count - taken
            changed = taken > 0 || !segment.interim.isEmpty
            segment.interim = ""
        }
        if finished {
            open[role] = nil
            let text = segment.whole
            return text.isEmpty ? nil : Transcript(role: role, segment: segment.id, text: text, isFinal: true)
        }
        open[role] = segment
        return changed ? Transcript(role: role, segment: segment.id, text: segment.whole, isFinal: false) : nil
    }

    /// A low-latency guess at what `role` is saying after the confirmed text so far, replacing the previous
    /// guess (Gemini's `interimInputTranscription`); bounded like the rest of the segment. Nil when nothing
    /// changed.
    public mutating func interim(_ role: Transcript.Role, _ text: String) -> Transcript? {
        if open[role] == nil, text.isEmpty { return nil }
        var segment = open[role] ?? Segment(id: nextID(role))
        let room = max(0, limit - segment.characters)
        let bounded = text.count <= room ? text : String(text.prefix(room))
        guard bounded != segment.interim else {
            open[role] = segment
            return nil
        }
        segment.interim = bounded
        open[role] = segment
        return Transcript(role: role, segment: segment.id, text: segment.whole, isFinal: false)
    }

    /// A whole utterance of `role` (a backend that sends utterances, not fragments): closes any open segment
    /// of that role first.
    public mutating func utterance(_ role: Transcript.Role, _ text: String) -> [Transcript] {
        var result = close(role).map { [$0] } ?? []
        let bounded = text.count <= limit ? text : String(text.prefix(limit))
        droppedCharacters += text.count - bounded.count
        if !bounded.isEmpty {
            result.append(Transcript(role: role, segment: nextID(role), text: bounded, isFinal: true))
        }
        return result
    }

    /// Closes `role`'s open segment: its final event, or nil when none is open (or it is empty).
    public mutating func close(_ role: Transcript.Role) -> Transcript? {
        guard let segment = open.removeValue(forKey: role), !segment.whole.isEmpty else { return nil }
        return Transcript(role: role, segment: segment.id, text: segment.whole, isFinal: true)
    }

    /// Closes every open segment (the turn ended, or was interrupted): the user's first, then the agent's.
    public mutating func closeAll() -> [Transcript] {
        [Transcript.Role.user, .agent].compactMap { close($0) }
    }

    /// True while `role` has an open segment.
    public func isOpen(_ role: Transcript.Role) -> Bool { open[role] != nil }

    private mutating func nextID(_ role: Transcript.Role) -> String {
        let number = numbers[role, default: 0] + 1
        numbers[role] = number
        return "\(role.rawValue)-\(number)"
    }
}
