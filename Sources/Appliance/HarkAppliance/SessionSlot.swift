import HarkCore

/// The supervisor's one open session, numbered: events of a session that has since been closed carry an old
/// generation and are ignored. A closed session is left to end politely (its run goes on until it returns; the
/// slot knows which runs have not) and its counters are folded into the totals `hark status` shows.
struct SessionSlot {
    private(set) var session: (any VoiceSession)?
    /// The open session's number (bumped on close, so late events of the closed one are told apart).
    private(set) var generation = 0
    /// Sessions opened since the start.
    private(set) var opened = 0
    /// The sessions whose run has not returned yet, by generation: the open one and closed ones ending politely.
    private(set) var running: Set<Int> = []
    /// Totals of the sessions already closed.
    private var closedReconnects = 0
    private var closedDroppedSamples = 0
    private var closedResentSamples = 0

    /// Takes `session` as the open one, its run under way; returns its generation.
    mutating func open(_ session: any VoiceSession) -> Int {
        generation += 1
        opened += 1
        self.session = session
        running.insert(generation)
        return generation
    }

    /// True when `number` is the open session's.
    func isCurrent(_ number: Int) -> Bool { number == generation && session != nil }

    /// Forgets the open session (after ``VoiceSession/finish()`` or its end), folding its counters.
    mutating func close() {
        guard let session else { return }
        let statistics = session.statistics
        closedReconnects += max(0, statistics.readies - 1)
        closedDroppedSamples += statistics.droppedInputSamples
        closedResentSamples += statistics.audioSamplesResent
        self.session = nil
        generation += 1
    }

    /// The run of session `number` returned. True when it was the open session's (which is closed now: the mode
    /// machine hears that it ended); false for one closed before.
    mutating func runEnded(_ number: Int) -> Bool {
        running.remove(number)
        guard isCurrent(number) else { return false }
        close()
        return true
    }

    /// Connections after the first of each session, since the start.
    var reconnects: Int { closedReconnects + max(0, (session?.statistics.readies ?? 0) - 1) }

    /// Microphone samples the sessions dropped (their hold bound), since the start.
    var droppedInputSamples: Int { closedDroppedSamples + (session?.statistics.droppedInputSamples ?? 0) }

    /// The service's name for the open session, if it gave one.
    var serviceSession: String? { session?.statistics.serviceSession }

    /// Microphone samples sent again on a new connection, since the start.
    var resentSamples: Int { closedResentSamples + (session?.statistics.audioSamplesResent ?? 0) }
}
