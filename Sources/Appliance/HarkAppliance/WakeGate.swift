import HarkCore

/// The wake word in the appliance's behaviour: the detector and what to do around a detection.
public struct WakeBehaviour: Sendable {
    /// The detector (started by the supervisor, stopped when it ends or a reload replaces it).
    public var spotter: any WakeWordSpotter
    /// Send the wake word itself to the agent with the question (by default only what follows it).
    public var sendWakeWord: Bool
    /// A detection after which less than ``FalseStartJudge/speechNeeded`` of speech is heard within this
    /// long counts as a false start.
    public var falseStartWindow: Duration

    public init(spotter: any WakeWordSpotter, sendWakeWord: Bool = false, falseStartWindow: Duration = .seconds(4)) {
        self.spotter = spotter
        self.sendWakeWord = sendWakeWord
        self.falseStartWindow = falseStartWindow
    }
}

/// The last few seconds of microphone audio, frame by frame, each with the number of its first sample and its
/// capture time: what is sent first after a wake word (the detector reports it some frames late, so the question's
/// first words are already here).
struct RecentAudio: Sendable {
    /// How much is kept, in samples.
    let limit: Int
    private var frames: [(start: Int, samples: [Int16], capturedAt: UInt64?)] = []
    private var head = 0
    private var kept = 0

    init(limit: Int) { self.limit = limit }

    /// The sample after the newest frame (the count's end), or nil when empty.
    var end: Int? { frames.last.map { $0.start + $0.samples.count } }

    /// The oldest sample kept, or nil when empty.
    var start: Int? { head < frames.count ? frames[head].start : nil }

    /// Keeps `samples`, the count's `start` onward, captured at `capturedAt` (monotonic ns, when known).
    mutating func append(_ samples: [Int16], at start: Int, capturedAt: UInt64? = nil) {
        frames.append((start, samples, capturedAt))
        kept += samples.count
        while kept - frames[head].samples.count >= limit {
            kept -= frames[head].samples.count
            head += 1
        }
        if head > 64, head * 2 > frames.count {
            frames.removeFirst(head)
            head = 0
        }
    }

    /// The audio from sample `from` (clamped to what is kept) to the end, as microphone chunks that keep their
    /// frames' capture times (the first one cut).
    func audio(from: Int) -> [AudioChunk] {
        var result: [AudioChunk] = []
        for frame in frames[head...] where frame.start + frame.samples.count > from {
            let samples = frame.start >= from ? frame.samples : Array(frame.samples[(from - frame.start)...])
            result.append(
                AudioChunk(
                    samples: samples,
                    sampleRate: AudioFormat.microphone.sampleRate,
                    capturedAt: frame.capturedAt
                )
            )
        }
        return result
    }

    /// Where the wake word whose detection frame ended at `detectionEnd` most likely ended. The detector fires
    /// up to half a second after the word (its score crosses the threshold once enough of the word is in its
    /// window, later for some models than for others), and a question said in one breath has already begun by
    /// then; so the detection's own time would cut the question's first words.
    ///
    /// With `hint` (the detector's estimate, ``WakeDetection/wordEndSample``: a little before the word's score
    /// began to climb toward the detection, for the scores rise as the word's last sound comes in) the boundary is
    /// there, moved forward to a pause if the speaker made one between there and the detection (80 ms or more,
    /// every 10 ms of it 20 dB below the stretch's median). The estimate errs early rather than late: a little of
    /// the word may go with the question, rather than the question's first sound be lost. Measured on spoken
    /// phrases, this keeps the question whole where cutting 100 to 400 ms before the detection cut it in one
    /// detection in six. A hint more than 1.2 s before the detection (the score hovered above 1 % for long: a noisy
    /// room) says nothing, and without one the boundary is the quietest 10 ms between 400 and 100 ms before the
    /// detection's end (where no 10 ms is clearly quieter than the rest, 300 ms before). Never later than
    /// `detectionEnd`, never before what is kept.
    func wordEnd(detectionEnd: Int, hint: Int? = nil, sampleRate: Int = AudioFormat.microphone.sampleRate) -> Int {
        let millisecond = sampleRate / 1000
        if let hint, hint <= detectionEnd, detectionEnd - hint <= 1200 * millisecond {
            let moved = pause(from: hint, to: detectionEnd, blocks: 8, sampleRate: sampleRate) ?? hint
            return max(min(moved, detectionEnd), start ?? moved)
        }
        let block = sampleRate / 100
        let earliest = detectionEnd - sampleRate * 4 / 10
        let latest = detectionEnd - sampleRate / 10
        let fallback = detectionEnd - sampleRate * 3 / 10
        guard let start, start <= earliest, let end, end >= latest else { return max(fallback, start ?? fallback) }
        let energies = blockEnergies(from: earliest, to: latest, block: block)
        guard energies.count == (latest - earliest) / block,
            let quietest = energies.indices.min(by: { energies[$0] < energies[$1] })
        else { return fallback }
        let sorted = energies.sorted()
        let median = sorted[sorted.count / 2]
        // A pause is at least 6 dB below the typical block; in steady sound any minimum is noise.
        guard energies[quietest] * 4 <= median else { return fallback }
        return earliest + quietest * block + block / 2
    }

    /// The middle of the first pause between `from` and `to`: `blocks` or more 10 ms blocks in a row, each 20 dB
    /// below the median block of the stretch; nil when there is none (or too little is kept to tell).
    private func pause(from: Int, to: Int, blocks: Int, sampleRate: Int) -> Int? {
        let block = sampleRate / 100
        let energies = blockEnergies(from: from, to: to, block: block)
        guard energies.count >= blocks else { return nil }
        let sorted = energies.sorted()
        let median = sorted[sorted.count / 2]
        var run = 0
        for (index, energy) in energies.enumerated() {
            run = energy * 100 <= median ? run + 1 : 0
            guard run >= blocks else { continue }
            var last = index
            while last + 1 < energies.count, energies[last + 1] * 100 <= median { last += 1 }
            return from + (index - run + 1 + last + 1) * block / 2
        }
        return nil
    }

    /// The energy of each whole `block` of samples from `from` to `to` (only when all of it is kept: empty else).
    private func blockEnergies(from: Int, to: Int, block: Int) -> [Double] {
        guard let start, let end, start <= from, end >= to, to - from >= block else { return [] }
        let window = Array(audio(from: from).lazy.flatMap(\.samples).prefix(to - from))
        guard window.count == to - from else { return [] }
        var energies: [Double] = []
        energies.reserveCapacity(window.count / block)
        var index = window.startIndex
        while index + block <= window.endIndex {
            var sum = 0.0
            for sample in window[index..<(index + block)] { sum += Double(sample) * Double(sample) }
            energies.append(sum)
            index += block
        }
        return energies
    }
}

/// Where the appliance begins sending after a wake word heard in a recording: ``RecentAudio/wordEnd(detectionEnd:hint:sampleRate:)``
/// over the same three seconds of audio the appliance keeps. For `hark wake --question-start` and the benchmark.
public enum WakeWordBoundary {
    /// The sample of `samples` (the microphone's rate, what the detector heard) from which the question is sent,
    /// for a detection that ended at `detectionEnd`, the word's end estimated at `hint`
    /// (``WakeWord/wordEndSample(risenAt:)``).
    public static func questionStart(in samples: [Int16], detectionEnd: Int, hint: Int?) -> Int {
        let end = max(0, min(detectionEnd, samples.count))
        let from = max(0, end - WakeGate.recentSamples)
        var recent = RecentAudio(limit: WakeGate.recentSamples)
        if end > from { recent.append(Array(samples[from..<end]), at: from) }
        return recent.wordEnd(detectionEnd: end, hint: hint)
    }
}

/// Counts false starts: a wake word after which (nearly) nothing is said, a television's "hey Jarvis" or a
/// misfire. Fed every frame with the voice detector's verdict; a detection's judgement ends after the window.
struct FalseStartJudge: Sendable {
    /// Speech after the wake word that makes it a real start.
    static let speechNeeded = AudioFormat.microphone.samples(in: .milliseconds(300))
    /// Detections judged false starts so far.
    private(set) var falseStarts = 0
    /// The detection being judged: where its window ends, and the speech heard in it so far.
    private var pending: (from: Int, until: Int, voiced: Int)?
    /// The last frames heard (a ring, oldest overwritten): a detection comes from the detector's own thread,
    /// after the frames that followed the word may already have been heard here; they count too.
    private var heard = [(start: Int, count: Int, loud: Bool)](repeating: (0, 0, false), count: 256)
    private var heardNext = 0

    /// A detection ending at `sample`, judged over the `window` samples after it (a pending one is judged now).
    mutating func detected(at sample: Int, window: Int) -> Bool {
        var judged = false
        if let current = pending { judged = judge(current) }
        var voiced = 0
        for frame in heard where frame.loud && frame.start + frame.count > sample {
            voiced += min(frame.count, frame.start + frame.count - sample)
        }
        pending = (sample, sample + window, voiced)
        return judged
    }

    /// One frame of `count` samples from `start`, loud or not; true when it ended a window as a false start.
    mutating func frame(start: Int, count: Int, loud: Bool) -> Bool {
        heard[heardNext] = (start, count, loud)
        heardNext = heardNext + 1 == heard.count ? 0 : heardNext + 1
        guard var current = pending else { return false }
        if loud, start + count > current.from { current.voiced += min(count, start + count - current.from) }
        pending = current
        guard start + count >= current.until else { return false }
        return judge(current)
    }

    private mutating func judge(_ current: (from: Int, until: Int, voiced: Int)) -> Bool {
        pending = nil
        guard current.voiced < Self.speechNeeded else { return false }
        falseStarts += 1
        return true
    }
}

/// The wake word as the appliance runs it, as a value beside ``VoiceGate``: it numbers the microphone's samples for
/// the detector, keeps the last seconds of audio for what follows a word, judges false starts, and says what a
/// detection starts. The supervisor feeds the detector and performs what it returns.
struct WakeGate: Sendable {
    /// What the microphone keeps for after a wake word: three seconds.
    static let recentSamples = AudioFormat.microphone.samples(in: .seconds(3))
    /// How long the wake animation shows after a detection.
    static let shownFor = Duration.seconds(1)

    /// What one frame did.
    struct FrameVerdict: Sendable, Equatable {
        /// Where the frame begins in the detector's count: feed it there.
        var start: Int
        /// The wake word that this frame showed was a false start (nothing said after it), if any.
        var falseStart: String?
    }

    /// What a detection starts.
    enum Start: Sendable, Equatable {
        /// Nothing: the microphone is muted.
        case ignored
        /// A question: `preRoll` goes first (what followed the word, or the word too, with capture times), then
        /// live audio. `earlierFalseStart`: the detection before this one was a false start.
        case question(preRoll: [AudioChunk], earlierFalseStart: Bool)
    }

    /// Send the wake word itself with the question.
    var sendWakeWord: Bool
    /// A detection after which less than ``FalseStartJudge/speechNeeded`` of speech is heard within this long
    /// counts as a false start.
    var falseStartWindow: Duration
    /// Microphone samples heard so far: the count detections are placed in.
    private(set) var samplesHeard = 0
    private var recent = RecentAudio(limit: WakeGate.recentSamples)
    private var judge = FalseStartJudge()
    private var lastWake: WakeDetection?
    private var shownUntil: Duration?
    private var failureSaid = false

    init(sendWakeWord: Bool = false, falseStartWindow: Duration = .seconds(4)) {
        self.sendWakeWord = sendWakeWord
        self.falseStartWindow = falseStartWindow
    }

    init(_ behaviour: WakeBehaviour) {
        self.init(sendWakeWord: behaviour.sendWakeWord, falseStartWindow: behaviour.falseStartWindow)
    }

    /// Detections judged false starts so far.
    var falseStarts: Int { judge.falseStarts }

    /// One microphone frame; `loud` is the voice detector's verdict on it (nil without one: nothing is judged).
    mutating func frame(_ chunk: AudioChunk, loud: Bool?) -> FrameVerdict {
        let start = samplesHeard
        samplesHeard += chunk.samples.count
        recent.append(chunk.samples, at: start, capturedAt: chunk.capturedAt)
        var verdict = FrameVerdict(start: start)
        if let loud, judge.frame(start: start, count: chunk.samples.count, loud: loud) {
            verdict.falseStart = lastWake?.word
        }
        return verdict
    }

    /// A detection at `now`: the question it starts (the audio after the word, or from 1.5 s before the detection
    /// when the word goes too), or nothing while `muted`.
    mutating func detected(_ detection: WakeDetection, muted: Bool, now: Duration) -> Start {
        guard !muted else { return .ignored }
        lastWake = detection
        shownUntil = now + Self.shownFor
        let window = AudioFormat.microphone.samples(in: falseStartWindow)
        let earlierFalseStart = judge.detected(at: detection.endSample, window: window)
        let from =
            sendWakeWord
            ? detection.endSample - AudioFormat.microphone.samples(in: .milliseconds(1500))
            : recent.wordEnd(detectionEnd: detection.endSample, hint: detection.wordEndSample)
        return .question(preRoll: recent.audio(from: from), earlierFalseStart: earlierFalseStart)
    }

    /// True while the wake animation shows (a second after a detection).
    mutating func isShown(now: Duration) -> Bool {
        guard let until = shownUntil else { return false }
        if now < until { return true }
        shownUntil = nil
        return false
    }

    /// The detector's last error, when it is to be said: once, the first time it is seen.
    mutating func failureToSay(_ error: String?) -> String? {
        guard let error, !failureSaid else { return nil }
        failureSaid = true
        return error
    }

    /// True when the detector has heard about everything fed to it (within half a second): it has nothing to do,
    /// so a still counter is no stall.
    func caughtUp(_ counters: WakeCounters) -> Bool {
        samplesHeard - counters.samplesHeard - counters.droppedSamples < AudioFormat.microphone.sampleRate / 2
    }

    /// The wake word's part of `hark status`.
    func status(words: [String], counters: WakeCounters) -> WakeStatus {
        WakeStatus(
            words: words,
            detections: counters.detections,
            falseStarts: judge.falseStarts,
            cpuSeconds: Double(counters.cpuNanoseconds) / 1e9,
            audioSeconds: AudioFormat.microphone.seconds(counters.samplesHeard),
            droppedSeconds: AudioFormat.microphone.seconds(counters.droppedSamples)
        )
    }
}
