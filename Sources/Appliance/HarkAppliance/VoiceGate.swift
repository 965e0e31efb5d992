import HarkCore

/// A local energy voice-activity detector: a frame is loud when its level is `threshold` above an adaptive
/// noise floor (and above `minimumLevel`); speech starts after `attack` of loud frames and ends after
/// `hangover` of quiet ones. A value: time is the audio's own (frame durations), so tests are exact.
public struct EnergyVAD: Sendable, Hashable {
    /// What a frame changed.
    public enum Event: Sendable, Hashable {
        /// Speech began (the frames of the attack are part of it).
        case speechStarted
        /// Speech ended (after the hangover).
        case speechEnded
    }

    /// dB above the noise floor that counts as voice.
    public var threshold: Double
    /// Quietest level that can be voice, dBFS.
    public var minimumLevel: Double
    /// Loud time before speech starts.
    public var attack: Duration
    /// Quiet time before speech ends.
    public var hangover: Duration
    /// Current noise floor estimate, dBFS.
    public private(set) var noiseFloor: Double
    /// True while in speech.
    public private(set) var inSpeech = false
    /// Whether the last frame was loud enough to be voice.
    public private(set) var lastFrameLoud = false
    private var loud: Duration = .zero
    private var quiet: Duration = .zero

    public init(
        threshold: Double = 12,
        minimumLevel: Double = -50,
        attack: Duration = .milliseconds(60),
        hangover: Duration = .milliseconds(700),
        initialNoiseFloor: Double = -70
    ) {
        self.threshold = threshold
        self.minimumLevel = minimumLevel
        self.attack = attack
        self.hangover = hangover
        self.noiseFloor = initialNoiseFloor
    }

    /// Feeds one frame's level (dBFS) lasting `duration`; returns the event it caused, if any.
    public mutating func process(level: Double, duration: Duration) -> Event? {
        let isLoud = level >= max(minimumLevel, noiseFloor + threshold)
        lastFrameLoud = isLoud
        // The floor follows quiet frames quickly downward and slowly upward (so speech does not raise it).
        if level < noiseFloor {
            noiseFloor = max(-120, noiseFloor + (level - noiseFloor) * 0.3)
        } else if !isLoud {
            noiseFloor += (level - noiseFloor) * 0.02
        }
        if isLoud {
            loud += duration
            quiet = .zero
            if !inSpeech && loud >= attack {
                inSpeech = true
                return .speechStarted
            }
        } else {
            quiet += duration
            loud = .zero
            if inSpeech && quiet >= hangover {
                inSpeech = false
                return .speechEnded
            }
        }
        return nil
    }
}

/// The VAD with a pre-roll: until someone speaks, frames wait in a ring of the last `preRoll`; when speech
/// starts they are released first, so none of the first word is lost. After that frames pass straight
/// through until speech ends. A value, fed frame by frame by the consumer of the capture queue; the frames it
/// releases keep their capture times, so the first message after speech starts is measured like any other.
public struct VoiceGate: Sendable {
    /// What one frame produced.
    public struct Result: Sendable, Equatable {
        /// The VAD's event, if any.
        public var event: EnergyVAD.Event?
        /// Frames to send now, oldest first (the pre-roll, then this frame, when speech starts).
        public var frames: [AudioChunk]
    }

    /// The detector.
    public var vad: EnergyVAD
    /// How much audio before speech start is kept.
    public let preRoll: Duration
    private var held: [AudioChunk] = []
    private var heldDuration: Duration = .zero

    public init(vad: EnergyVAD = EnergyVAD(), preRoll: Duration = .milliseconds(500)) {
        self.vad = vad
        self.preRoll = preRoll
    }

    /// True while the gate is open (speech in progress).
    public var isOpen: Bool { vad.inSpeech }

    /// Feeds one frame.
    public mutating func process(_ frame: AudioChunk) -> Result {
        let duration = frame.duration
        let wasOpen = vad.inSpeech
        let event = vad.process(level: PCM16.levelDBFS(frame.samples), duration: duration)
        if wasOpen {
            return Result(event: event, frames: [frame])
        }
        held.append(frame)
        heldDuration += duration
        while heldDuration > preRoll + duration, let first = held.first {
            heldDuration -= first.duration
            held.removeFirst()
        }
        guard event == .speechStarted else { return Result(event: event, frames: []) }
        let released = held
        held.removeAll(keepingCapacity: true)
        heldDuration = .zero
        return Result(event: event, frames: released)
    }
}
