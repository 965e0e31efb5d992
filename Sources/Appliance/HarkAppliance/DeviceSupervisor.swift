import HarkCore

/// The supervisor's rules for local devices, as a value checked on every tick: an audio device that fails is
/// reopened by its own thread (with backoff) and logged once as gone and once as back; a microphone, or a
/// speaker with audio to play, that stays gone for ``giveUpAfter`` makes the appliance give up (the service
/// manager restarts it, which may find the device again); devices that keep going away and coming back, or a
/// button that keeps failing, spend the ``budget``, one outage or error at a time. A speaker that is gone
/// while idle owes nothing: its clock starts only when audio is waiting for it.
public struct DeviceSupervisor: Sendable {
    /// What one check found.
    public struct Verdict: Sendable, Hashable {
        /// Lines to log (a device gone, a device back).
        public var lines: [LogLine] = []
        /// The newest problem, for `hark status`.
        public var lastError: String?
        /// Set when the appliance must give up: why.
        public var fatal: String?
    }

    /// How long the microphone, or a speaker owing audio, may stay gone.
    public var giveUpAfter: Duration
    /// Local failures tolerated in a window.
    public private(set) var budget: FailureBudget
    private var failing: Set<String> = []
    private var speakerOwingSince: Duration?
    private var seenOutages = 0
    private var seenButtonErrors = 0

    public init(
        giveUpAfter: Duration = .seconds(20),
        budget: FailureBudget = FailureBudget(limit: 5, window: .seconds(120))
    ) {
        self.giveUpAfter = giveUpAfter
        self.budget = budget
    }

    /// Checks the devices at `now`. `speakerOwes` is true while audio waits to be played.
    public mutating func check(
        microphone: DeviceCondition,
        speaker: DeviceCondition,
        speakerOwes: Bool,
        buttonErrors: Int?,
        now: Duration
    ) -> Verdict {
        var verdict = Verdict()
        if let buttonErrors, buttonErrors > seenButtonErrors {
            seenButtonErrors = buttonErrors
            verdict.lastError = "the button could not be read"
            if budget.record(at: now) {
                verdict.fatal = "the button keeps failing"
                return verdict
            }
        }
        for (name, condition) in [("microphone", microphone), ("speaker", speaker)] {
            if condition.failingFor != nil, failing.insert(name).inserted {
                verdict.lines.append(
                    LogLine(
                        .warning,
                        "audio device failed: the \(name) (\(condition.lastError ?? "no detail")); reopening it with backoff"
                    )
                )
                verdict.lastError = condition.lastError
            } else if condition.failingFor == nil, failing.remove(name) != nil {
                verdict.lines.append(LogLine(.info, "audio device back: the \(name) works again"))
            }
        }
        let owing = speaker.failingFor != nil && speakerOwes
        speakerOwingSince = owing ? speakerOwingSince ?? now : nil
        if let gone = microphone.failingFor, gone >= giveUpAfter {
            verdict.fatal = "the microphone stopped and will not reopen (\(microphone.lastError ?? "no detail"))"
            return verdict
        }
        if let since = speakerOwingSince, now - since >= giveUpAfter {
            verdict.fatal = "the speaker stopped and will not reopen (\(speaker.lastError ?? "no detail"))"
            return verdict
        }
        let outages = microphone.outages + speaker.outages
        while seenOutages < outages {
            seenOutages += 1
            if budget.record(at: now) {
                let problem = microphone.lastError ?? speaker.lastError ?? "an audio device went away"
                verdict.fatal = "audio devices keep failing (\(problem))"
                return verdict
            }
        }
        return verdict
    }
}
