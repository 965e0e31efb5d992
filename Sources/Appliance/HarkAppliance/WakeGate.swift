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

/// The last few seconds of microphone audio, frame by frame, each with the number of its first sample: what is
/// sent first after a wake word (the detector reports it some frames late, so the question's first words are
/// already here).
struct RecentAudio: Sendable {
    /// How much is kept, in samples.
    let limit: Int
    private var frames: [(start: Int, samples: [Int16])] = []
    private var head = 0
    private var kept = 0

    init(limit: Int) { self.limit = limit }

    /// The sample after the newest frame (the count's end), or nil when empty.
    var end: Int? { frames.last.map { $0.start + $0.samples.count } }

    /// The oldest sample kept, or nil when empty.
    var start: Int? { head < frames.count ? frames[head].start : nil }

    mutating func append(_ samples: [Int16], at start: Int) {
        frames.append((start, samples))
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

    /// The audio from sample `from` (clamped to what is kept) to the end, as frames (the first one cut).
    func audio(from: Int) -> [[Int16]] {
        var result: [[Int16]] = []
        for frame in frames[head...] where frame.start + frame.samples.count > from {
            if frame.start >= from {
                result.append(frame.samples)
            } else {
                result.append(Array(frame.samples[(from - frame.start)...]))
            }
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
    func wordEnd(detectionEnd: Int, hint: Int? = nil, sampleRate: Int = 16_000) -> Int {
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
        let window = Array(audio(from: from).joined().prefix(to - from))
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
    /// The sample of `samples` (16 kHz, what the detector heard) from which the question is sent, for a detection
    /// that ended at `detectionEnd`, the word's end estimated at `hint` (``WakeWord/wordEndSample(risenAt:)``).
    public static func questionStart(in samples: [Int16], detectionEnd: Int, hint: Int?) -> Int {
        let end = max(0, min(detectionEnd, samples.count))
        let from = max(0, end - 3 * 16_000)
        var recent = RecentAudio(limit: 3 * 16_000)
        if end > from { recent.append(Array(samples[from..<end]), at: from) }
        return recent.wordEnd(detectionEnd: end, hint: hint)
    }
}

/// Counts false starts: a wake word after which (nearly) nothing is said, a television's "hey Jarvis" or a
/// misfire. Fed every frame with the voice detector's verdict; a detection's judgement ends after the window.
struct FalseStartJudge: Sendable {
    /// Speech after the wake word that makes it a real start.
    static let speechNeeded = 16_000 * 3 / 10
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
