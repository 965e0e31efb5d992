import HarkCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The simulator's server-side voice activity detector: the RMS level of 20 ms frames against thresholds.
///
/// - Idle: a frame at or above ``Parameters/startThresholdDBFS`` is speech. Speech starts (commits) after
///   ``Parameters/prefixPadding`` of consecutive speech frames; it is dated from the first of them.
/// - Speaking: a frame below ``Parameters/endThresholdDBFS`` is silence. Speech ends (commits) after
///   ``Parameters/silenceDuration`` of consecutive silent frames; it is dated to the end of the last
///   speech frame.
///
/// Frames are cut at fixed sample positions, so the result does not depend on how the audio was chunked.
/// Positions are sample indices at the input rate, counted from the start of the stream.
public struct SimulatorVoiceDetector: Sendable {
    /// Thresholds and durations (the Live simulator derives them from a setup's `automaticActivityDetection`).
    public struct Parameters: Sendable, Hashable {
        /// Level (dBFS) at or above which a frame counts as speech while idle.
        public var startThresholdDBFS: Double
        /// Level (dBFS) below which a frame counts as silence while speaking.
        public var endThresholdDBFS: Double
        /// Speech needed before the start commits.
        public var prefixPadding: Duration
        /// Silence needed before the end commits.
        public var silenceDuration: Duration

        public init(
            startThresholdDBFS: Double,
            endThresholdDBFS: Double,
            prefixPadding: Duration,
            silenceDuration: Duration
        ) {
            self.startThresholdDBFS = startThresholdDBFS
            self.endThresholdDBFS = endThresholdDBFS
            self.prefixPadding = prefixPadding
            self.silenceDuration = silenceDuration
        }
    }

    /// What the detector decided.
    public enum Event: Sendable, Hashable {
        /// Speech started at sample `start` (committed at sample `commit`).
        case speechStarted(start: Int64, commit: Int64)
        /// Speech that started at `start` ended at `end` (the end of its last speech frame), committed at `commit`.
        case speechEnded(start: Int64, end: Int64, commit: Int64)
    }

    public let parameters: Parameters
    public let sampleRate: Int
    /// Samples per 20 ms frame.
    public let frameLength: Int

    private let startThreshold: Int64
    private let endThreshold: Int64
    private let prefixFrames: Int
    private let silenceFrames: Int

    private var position: Int64 = 0
    private var frameFill = 0
    private var frameEnergy: Int64 = 0
    private var speechRun = 0
    private var silenceRun = 0
    private var runStart: Int64 = 0
    private var speechStart: Int64 = 0
    /// The end of the last speech frame (input samples): while speaking, where the speech heard so far ends.
    public private(set) var lastSpeechEnd: Int64 = 0
    /// True between a committed start and a committed end.
    public private(set) var isSpeaking = false

    public init(parameters: Parameters, sampleRate: Int = 16_000) {
        self.parameters = parameters
        self.sampleRate = max(sampleRate, 50)
        self.frameLength = self.sampleRate / 50
        let frameMillis = 20.0
        self.prefixFrames = max(1, Int((Double(parameters.prefixPadding.nanoseconds) / 1e6 / frameMillis).rounded(.up)))
        self.silenceFrames = max(
            1,
            Int((Double(parameters.silenceDuration.nanoseconds) / 1e6 / frameMillis).rounded(.up))
        )
        // Thresholds as frame energy (sum of squares over a frame), so no logarithm per frame.
        let frameLength = self.sampleRate / 50
        func energy(_ dbfs: Double) -> Int64 {
            let amplitude = 32768.0 * pow(10, dbfs / 20)
            return Int64(amplitude * amplitude * Double(frameLength))
        }
        self.startThreshold = energy(parameters.startThresholdDBFS)
        self.endThreshold = energy(parameters.endThresholdDBFS)
    }

    /// Samples consumed so far.
    public var samplesProcessed: Int64 { position }

    /// Feeds little-endian PCM16 bytes; a trailing odd byte is ignored. Appends what it decides to `events`.
    public mutating func process(littleEndianBytes bytes: UnsafeRawBufferPointer, into events: inout [Event]) {
        let count = bytes.count / 2
        var index = 0
        while index < count {
            let sample = Int64(Int16(littleEndian: bytes.loadUnaligned(fromByteOffset: index * 2, as: Int16.self)))
            frameEnergy &+= sample &* sample
            frameFill += 1
            position += 1
            index += 1
            if frameFill == frameLength {
                endFrame(into: &events)
            }
        }
    }

    /// Feeds samples; returns what it decided.
    public mutating func process(samples: [Int16]) -> [Event] {
        var events: [Event] = []
        samples.withUnsafeBytes { raw in
            #if _endian(little)
                process(littleEndianBytes: raw, into: &events)
            #else
                let swapped = samples.map { $0.littleEndian }
                swapped.withUnsafeBytes { process(littleEndianBytes: $0, into: &events) }
            #endif
        }
        return events
    }

    /// Ends speech now (`audioStreamEnd`): returns the end event if speech was in progress, and forgets
    /// any start that had not committed yet.
    public mutating func flush() -> Event? {
        speechRun = 0
        silenceRun = 0
        guard isSpeaking else { return nil }
        isSpeaking = false
        return .speechEnded(start: speechStart, end: max(lastSpeechEnd, speechStart), commit: position)
    }

    private mutating func endFrame(into events: inout [Event]) {
        let energy = frameEnergy
        frameEnergy = 0
        frameFill = 0
        let frameStart = position - Int64(frameLength)
        if isSpeaking {
            if energy >= endThreshold {
                silenceRun = 0
                lastSpeechEnd = position
            } else {
                silenceRun += 1
                if silenceRun >= silenceFrames {
                    isSpeaking = false
                    silenceRun = 0
                    speechRun = 0
                    events.append(.speechEnded(start: speechStart, end: lastSpeechEnd, commit: position))
                }
            }
        } else if energy >= startThreshold {
            if speechRun == 0 { runStart = frameStart }
            speechRun += 1
            if speechRun >= prefixFrames {
                isSpeaking = true
                speechStart = runStart
                lastSpeechEnd = position
                silenceRun = 0
                events.append(.speechStarted(start: runStart, commit: position))
            }
        } else {
            speechRun = 0
        }
    }
}
