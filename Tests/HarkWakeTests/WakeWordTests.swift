import HarkAudio
import HarkCore
import HarkTestKit
import HarkWake
import Testing

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The fixtures in Tests/Fixtures/wake, and how they were made (scripts/lib/wake-reference.py does both):
///
/// - `hey-jarvis.wav`: `wake-reference.py speak hey-jarvis.wav "hey jarvis, what time is it"` — espeak-ng 1.51,
///   voice en-us, 140 words a minute, resampled from 22050 Hz to 16 kHz mono 16-bit (Python's audioop.ratecv),
///   0.5 s of silence before and after.
/// - `hello-there.wav`: the same with "hello there, what time is it" (no wake word).
/// - `*.scores`: the per-frame probabilities of the Python reference, pyopen-wakeword 1.1.0 (the x86_64 wheel,
///   numpy 2.4) fed 1280 samples at a time: `wake-reference.py scores CLIP.wav hey_jarvis okay_nabu`, run with
///   the Python of a virtual environment that has it (`python3 -m venv /tmp/wake-ref &&
///   /tmp/wake-ref/bin/pip install pyopen-wakeword==1.1.0`). One line per frame and word,
///   `SECONDS WORD PROBABILITY`, as `hark wake --scores` prints them.
enum WakeFixtures {
    static let folder: String = {
        var path = #filePath
        for _ in 0..<3 { path = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)]) }
        return path + "/Tests/Fixtures/wake"
    }()

    /// The runtime scripts/setup unpacks, or nil (the tests that need it are then skipped, saying so).
    static let runtime: WakeRuntime? = try? WakeRuntime.locate(environment: ProcessInfo.processInfo.environment)
    static let missing = "the wake-word runtime is not installed: scripts/setup puts it in .hark-lib"

    static func samples(_ name: String) throws -> [Int16] {
        let audio = try WAVFile.read(path: "\(folder)/\(name).wav")
        #expect(audio.sampleRate == 16_000 && audio.channels == 1)
        return audio.samples
    }

    /// The reference's frames: (seconds, word, probability).
    static func reference(_ name: String) throws -> [(seconds: Double, word: String, probability: Double)] {
        let text = try String(contentsOfFile: "\(folder)/\(name).scores", encoding: .utf8)
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.count == 3, let seconds = Double(fields[0]), let probability = Double(fields[2]) else {
                return nil
            }
            return (seconds, String(fields[1]), probability)
        }
    }

    static func detector(_ words: [String] = ["oww_hey_jarvis", "oww_okay_nabu"], threshold: Float = 0.5) throws
        -> WakeWordDetector
    {
        let runtime = try #require(runtime)
        return try WakeWordDetector(
            runtime: runtime,
            words: try words.map { try runtime.word($0) },
            threshold: threshold
        )
    }
}

@Suite(.enabled(if: WakeFixtures.runtime != nil, "\(WakeFixtures.missing)"))
struct WakeWordDetectorTests {
    /// Every frame's probability, for both words on both clips, equals the Python reference's within 1e-4, at the
    /// same times: on TensorFlow Lite's built-in kernels (as the reference runs) and on its XNNPACK kernels.
    @Test(arguments: ["hey-jarvis", "hello-there"], [false, true])
    func probabilitiesEqualTheReference(clip: String, optimizedKernels: Bool) throws {
        let runtime = try #require(WakeFixtures.runtime)
        let detector = try WakeWordDetector(
            runtime: runtime,
            words: [try runtime.word("oww_hey_jarvis"), try runtime.word("oww_okay_nabu")],
            optimizedKernels: optimizedKernels
        )
        let scores = try detector.process(try WakeFixtures.samples(clip))
        let reference = try WakeFixtures.reference(clip)
        #expect(reference.count == 2 * 45, "the reference has \(reference.count) lines")
        for word in ["oww_hey_jarvis", "oww_okay_nabu"] {
            let expected = reference.filter { $0.word == word }
            let index = detector.words.firstIndex { $0.name == word }
            let actual = scores.filter { $0.word == index }
            #expect(actual.count == expected.count, "\(word): \(actual.count) frames, the reference \(expected.count)")
            var largest = 0.0
            for (score, frame) in zip(actual, expected) {
                #expect(
                    abs(score.seconds - frame.seconds) < 1e-9,
                    "\(word): frame at \(score.seconds) s, not \(frame.seconds)"
                )
                largest = max(largest, abs(Double(score.probability) - frame.probability))
            }
            #expect(largest <= 1e-4, "\(word) on \(clip): largest difference \(largest)")
        }
    }

    /// hey_jarvis fires once on the clip that says it, where the reference's probability crosses 0.5, and not on
    /// the one that does not; okay_nabu fires on neither.
    @Test func detectsTheWakeWordOnlyWhereItIsSaid() throws {
        let detector = try WakeFixtures.detector()
        let positive = try detector.process(try WakeFixtures.samples("hey-jarvis")).filter(\.isDetection)
        #expect(positive.count == 1, "\(positive)")
        if let detection = positive.first {
            #expect(detector.words[detection.word].name == "oww_hey_jarvis")
            #expect((1.7...1.9).contains(detection.seconds), "detected at \(detection.seconds) s")
            #expect(detection.probability > 0.5)
            // The rise: the first frame of the run at or above 1 % that led to the detection, in the reference's
            // numbers (1.31 s: "jarvis" ends at 1.46 s).
            let reference = try WakeFixtures.reference("hey-jarvis").filter { $0.word == "oww_hey_jarvis" }
            let fired = try #require(reference.lastIndex { abs($0.seconds - detection.seconds) < 0.01 })
            var first = fired
            while first > 0, reference[first - 1].probability >= Double(WakeWordDetector.riseLevel) { first -= 1 }
            let rise = try #require(detection.riseSample)
            #expect(abs(Double(rise) / 16_000 - reference[first].seconds) < 0.01, "rose at \(rise)")
            #expect((1.2...1.4).contains(reference[first].seconds))
            // The word's end: hey_jarvis's lead (100 ms) before the rise.
            #expect(detector.words[detection.word].wordEndSample(risenAt: rise) == rise - 1_600)
        }
        try detector.reset()
        let negative = try detector.process(try WakeFixtures.samples("hello-there")).filter(\.isDetection)
        #expect(negative.isEmpty, "\(negative)")
    }

    /// The scores do not depend on how the audio is cut into calls, and a reset starts over exactly.
    @Test func chunkingAndResetDoNotChangeTheScores() throws {
        let samples = try WakeFixtures.samples("hey-jarvis")
        let detector = try WakeFixtures.detector(["oww_hey_jarvis"])
        let whole = try detector.process(samples)
        for size in [1, 160, 1279, 1280, 4001] {
            try detector.reset()
            var pieces: [WakeScore] = []
            var start = 0
            while start < samples.count {
                let end = min(start + size, samples.count)
                pieces += try detector.process(Array(samples[start..<end]))
                start = end
            }
            #expect(pieces == whole, "cut into \(size)-sample pieces")
        }
        #expect(detector.samplesHeard == samples.count)
    }

    /// After a detection the same word is not reported again within the refractory period, then is.
    @Test func refractoryPeriodSpacesDetections() throws {
        let detector = try WakeFixtures.detector(["oww_hey_jarvis"], threshold: 0)
        detector.refractory = .seconds(1)
        let detections = try detector.process(try WakeFixtures.samples("hey-jarvis")).filter(\.isDetection)
        #expect(detections.count >= 3)
        for (earlier, later) in zip(detections, detections.dropFirst()) {
            #expect(later.endSample - earlier.endSample >= 16_000)
        }
    }

    /// A word's own threshold decides its detections; the words without one keep the detector's. The clip's
    /// hey_jarvis peaks at 0.98 (the reference's recording): at 0.99 of its own it is heard but not detected,
    /// at 0.95 once, while alexa beside it, without a threshold of its own, fires on everything above the
    /// detector's 0 (once per refractory period).
    @Test func aWordsOwnThresholdDecidesItsDetections() throws {
        let runtime = try #require(WakeFixtures.runtime)
        let samples = try WakeFixtures.samples("hey-jarvis")
        func detections(_ words: [String]) throws -> [String: Int] {
            let detector = try WakeWordDetector(
                runtime: runtime,
                words: try words.map { try runtime.word($0) },
                threshold: 0
            )
            var counts: [String: Int] = [:]
            for score in try detector.process(samples) where score.isDetection {
                counts[detector.words[score.word].name, default: 0] += 1
            }
            return counts
        }
        #expect(try runtime.word("oww_hey_jarvis:0.99").threshold == 0.99)
        #expect(try detections(["oww_hey_jarvis:0.99", "oww_alexa"]) == ["oww_alexa": 2])
        #expect(try detections(["oww_hey_jarvis:0.95", "oww_alexa"]) == ["oww_hey_jarvis": 1, "oww_alexa": 2])
    }

    /// Several words share the front end: each word's scores alone equal those of a detector of that word alone.
    @Test func wordsTogetherScoreAsWordsAlone() throws {
        let samples = try WakeFixtures.samples("hey-jarvis")
        let together = try WakeFixtures.detector(["oww_okay_nabu", "oww_hey_jarvis", "oww_alexa"]).process(samples)
        for (index, word) in ["oww_okay_nabu", "oww_hey_jarvis", "oww_alexa"].enumerated() {
            let alone = try WakeFixtures.detector([word]).process(samples).map(\.probability)
            #expect(together.filter { $0.word == index }.map(\.probability) == alone, "\(word)")
        }
    }

    /// Resting in quiet audio changes nothing that is computed: the wake-word clip and the clip without it, apart
    /// and between stretches of a quiet room's noise (−70 dBFS, long enough for the models to rest), scored with
    /// every frame computed and with quiet frames skipped. Every probability the resting detector computes is,
    /// bit for bit, the one at the same time without resting; it skips frames only where the audio of the last
    /// two seconds was all quiet, and it finds the same wake words.
    @Test func restingInQuietAudioKeepsEveryComputedProbability() throws {
        let wake = try WakeFixtures.samples("hey-jarvis")
        let other = try WakeFixtures.samples("hello-there")
        var seed: UInt32 = 12_345
        func roomNoise(seconds: Double) -> [Int16] {
            (0..<Int(seconds * 16_000)).map { _ in
                seed = seed &* 1_664_525 &+ 1_013_904_223
                return Int16(Int(seed >> 24) % 21 - 10)  // about −70 dBFS RMS
            }
        }
        let audio =
            roomNoise(seconds: 5) + wake + roomNoise(seconds: 4.3) + other + roomNoise(seconds: 2.9) + wake
            + roomNoise(seconds: 0.7) + wake + roomNoise(seconds: 6.1)
        let every = try WakeFixtures.detector(["oww_hey_jarvis", "oww_okay_nabu"])
        let resting = try WakeFixtures.detector(["oww_hey_jarvis", "oww_okay_nabu"])
        resting.quietLevel = -60
        let all = try every.process(audio)
        let computed = try resting.process(audio)
        #expect(resting.quietFrames > 0 && computed.count + resting.quietFrames == all.count)
        let byTime = Dictionary(uniqueKeysWithValues: all.map { (SIMD2($0.endSample, $0.word), $0) })
        for score in computed {
            #expect(byTime[SIMD2(score.endSample, score.word)] == score, "\(score) differs from the full run's")
        }
        #expect(computed.filter(\.isDetection) == all.filter(\.isDetection))
        #expect(all.filter(\.isDetection).count == 3, "\(all.filter(\.isDetection))")
        // Frames are skipped only where the last 1.9 s held no speech (no sample of 1400 or more: the clips' words
        // are far above −60 dBFS), and the pause of 2.9 s rests.
        let kept = Set(computed.map(\.endSample))
        let skipped = all.filter { !kept.contains($0.endSample) }
        for score in skipped {
            let loudest = audio[max(0, score.endSample - 30_400)..<score.endSample].map { abs(Int($0)) }.max() ?? 0
            #expect(loudest < 1400, "skipped at \(score.seconds) s, \(loudest) within 1.9 s before")
        }
        #expect(skipped.contains { (18.0..<19.5).contains($0.seconds) }, "the 2.9 s pause rested")

        // Digital silence rests too, and a reset starts over exactly.
        try resting.reset()
        #expect(try resting.process(audio) == computed && resting.samplesHeard == audio.count)
    }

    /// A file that is not an openWakeWord wake-word model is refused with its reason, before anything runs.
    @Test func aModelOfTheWrongShapeIsRefused() throws {
        let runtime = try #require(WakeFixtures.runtime)
        let notAWord = WakeWord(name: "embedding", path: runtime.models + "/embedding_model.tflite")
        let shape = try #require(throws: WakeError.self) { try WakeWordDetector(runtime: runtime, words: [notAWord]) }
        #expect(shape.description.contains("not an openWakeWord wake-word model"), "\(shape)")
        let folder = FileManager.default.temporaryDirectory.path + "/hark-wake-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try Data("not a model".utf8).write(to: URL(fileURLWithPath: folder + "/junk.tflite"))
        let junk = try #require(throws: WakeError.self) {
            try WakeWordDetector(runtime: runtime, words: [try runtime.word(folder + "/junk.tflite")])
        }
        #expect(junk.description.contains("cannot read it as a model"), "\(junk)")
    }
}

/// Finding the runtime and the words; needs no library.
struct WakeRuntimeTests {
    @Test func aMissingLibraryNamesWhatToInstall() throws {
        let error = try #require(throws: WakeError.self) {
            try WakeRuntime.locate(environment: ["HARK_LIB_DIR": "/nonexistent/hark-lib"])
        }
        #expect(error.isRuntimeMissing)
        for part in ["/nonexistent/hark-lib", "scripts/setup", "hark package", "libtensorflowlite_c.so"] {
            #expect(error.description.contains(part), "\(error)")
        }
    }

    @Test func wordsByNameOrPath() throws {
        let runtime = WakeRuntime(library: "/nonexistent/libtensorflowlite_c.so", models: "/nonexistent/wake")
        let unknown = try #require(throws: WakeError.self) { try runtime.word("hey_siri") }
        let listed =
            "okay_nabu, hey_jarvis, alexa, hey_mycroft, oww_hey_jarvis, oww_okay_nabu, oww_alexa, "
            + "oww_hey_mycroft, oww_hey_rhasspy"
        #expect(unknown.isWordError && unknown.description.contains(listed), "\(unknown)")
        #expect(unknown.description.contains("non-commercial"), "\(unknown)")
        // A word that was openWakeWord's by its bare name before is a word error naming the oww_ one.
        let missing = try #require(throws: WakeError.self) { try runtime.word("oww_hey_jarvis") }
        #expect(missing.isRuntimeMissing && missing.description.contains("/nonexistent/wake/hey_jarvis.tflite"))
        let micro = try #require(throws: WakeError.self) { try runtime.word("okay_nabu") }
        #expect(micro.isRuntimeMissing && micro.description.contains("/nonexistent/wake/micro/okay_nabu.json"))
        let path = try #require(throws: WakeError.self) { try runtime.word("/nonexistent/my_word.tflite") }
        #expect(path.description.contains("no readable wake-word model /nonexistent/my_word.tflite"), "\(path)")
        if let installed = WakeFixtures.runtime {
            // openWakeWord's okay_nabu by its path: named by its file, its licence its maker's (Hark cannot know).
            let word = try installed.word(installed.models + "/okay_nabu.tflite")
            #expect(word.name == "okay_nabu" && word.threshold == nil && word.riseLead == .milliseconds(100))
            #expect(word.family == .open && word.licence == .maker && word.cutoff == nil)
            #expect(try installed.word("oww_okay_nabu").licence == .nonCommercial)
            #expect(try installed.word("oww_okay_nabu").riseLead == .milliseconds(400))
            #expect(try installed.word("oww_okay_nabu").wordEndSample(risenAt: 20_000) == 20_000 - 6_400)
            #expect(try installed.word("oww_hey_jarvis").riseLead == .milliseconds(100))
            let own = try installed.word(installed.models + "/okay_nabu.tflite:0.65")
            #expect(own.name == "okay_nabu" && own.path == word.path && own.threshold == 0.65)
        }
    }

    /// `NAME:THRESHOLD`: the last colon followed by a number; a threshold outside 0.01...0.99 is refused without
    /// echoing what was given.
    @Test func aWordsOwnThresholdFollowsAColon() throws {
        #expect(try WakeRuntime.splitThreshold("oww_alexa") == ("oww_alexa", nil))
        #expect(try WakeRuntime.splitThreshold("oww_alexa:0.7") == ("oww_alexa", 0.7))
        #expect(try WakeRuntime.splitThreshold("/opt/a:b/my_word.tflite:0.6") == ("/opt/a:b/my_word.tflite", 0.6))
        #expect(try WakeRuntime.splitThreshold("/opt/a:b/my_word.tflite") == ("/opt/a:b/my_word.tflite", nil))
        #expect(try WakeRuntime.splitThreshold("alexa:loud") == ("alexa:loud", nil))
        for bad in ["oww_alexa:1.5", "oww_alexa:0", "alexa:nan", "alexa:-0.5", ":0.5"] {
            let error = try #require(throws: WakeError.self, "\(bad)") { try WakeRuntime.splitThreshold(bad) }
            #expect(!error.description.contains(bad), "\(error)")
        }
    }
}
