import HarkCore

/// What is going on that a stop word can stop: the agent's answer playing, and (for the timers and alarms to come)
/// something ringing. The stop word is heard only while one of them is.
public struct StoppableActivity: OptionSet, Sendable, Hashable {
    public let rawValue: Int

    public init(rawValue: Int) { self.rawValue = rawValue }

    /// The agent's answer is in the speaker.
    public static let agentSpeaking = StoppableActivity(rawValue: 1 << 0)
    /// A timer or an alarm rings.
    public static let ringing = StoppableActivity(rawValue: 1 << 1)
}

/// The stop word in the appliance's behaviour: a second detector (any family: a microWakeWord `stop` model beside
/// an openWakeWord wake word is fine), fed only while something it can stop is going on. Its detections stop that
/// without the wake word and never open a session.
public struct StopWordBehaviour: Sendable {
    /// The detector (started by the supervisor, stopped when it ends or a reload replaces it).
    public var spotter: any WakeWordSpotter

    public init(spotter: any WakeWordSpotter) {
        self.spotter = spotter
    }
}

/// When the stop word listens and what a detection stops, as a value: the owner tells it what is going on (every
/// microphone frame), feeds the detector while ``isListening``, and acts on each detection's ``verdict(_:)``.
public struct StopWordGate: Sendable, Hashable {
    /// What a detection does.
    public enum Verdict: Sendable, Hashable {
        /// Stop these (the agent's answer, as the button's cancel does; what rings).
        case stop(StoppableActivity)
        /// Nothing to stop any more (the answer ended between the word and its detection): nothing happens.
        case ignore
    }

    /// What can be stopped now.
    public private(set) var activity: StoppableActivity = []
    /// Detections acted on since the start.
    public private(set) var stops = 0
    /// Detections that found nothing to stop.
    public private(set) var ignored = 0
    /// True once the detector's failure was said (it is said once).
    private var failureSaid = false

    public init() {}

    /// True while the detector should hear the microphone: something can be stopped.
    public var isListening: Bool { !activity.isEmpty }

    /// Microphone samples counted so far: the count the detector's detections are placed in.
    public private(set) var samplesHeard = 0

    /// A microphone frame of `samples` while `activity` goes on: where the frame starts in the count when the
    /// detector should hear it, nil when nothing can be stopped (the detector restarts at the next frame it hears,
    /// as after any gap).
    public mutating func heard(_ samples: Int, while activity: StoppableActivity) -> Int? {
        self.activity = activity
        let start = samplesHeard
        samplesHeard += samples
        return isListening ? start : nil
    }

    /// The detector's failure, the first time it is seen; nil after that and while there is none.
    public mutating func failureToSay(_ failure: String?) -> String? {
        guard let failure, !failureSaid else { return nil }
        failureSaid = true
        return failure
    }

    /// What a detection does now: stop what is going on, or nothing when nothing is.
    public mutating func verdict(_ detection: WakeDetection) -> Verdict {
        guard isListening else {
            ignored += 1
            return .ignore
        }
        stops += 1
        return .stop(activity)
    }
}
