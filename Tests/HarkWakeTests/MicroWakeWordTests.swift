import Glibc
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

/// The microWakeWord references, run at test time from the environment scripts/setup makes
/// (`.venv-wake-reference`, pinned with hashes by scripts/lib/wake-reference-requirements.txt): pymicro-features 2.0.2
/// for the front end, pymicro-wakeword 2.5.0 for the models, through `scripts/lib/wake-reference.py`.
///
/// The microWakeWord fixtures in Tests/Fixtures/wake, made by `wake-reference.py speak OUT.wav TEXT --engine flite
/// --voice VOICE` (flite 2.2, Debian 12; 0.5 s of silence around): `okay-nabu.wav` ("okay nabu, what time is it",
/// voice awb), `hey-mycroft.wav` ("hey mycroft, ...", rms), `alexa.wav` ("alexa, ...", kal16) and
/// `hey-jarvis-flite.wav` ("hey jarvis, ...", rms). The microWakeWord models hear flite's voices as speech (each clip
/// makes its own word's reference probability pass its cutoff, and no other's); espeak-ng's `hey-jarvis.wav` they
/// mostly do not (0.01 for hey_jarvis).
enum MicroReference {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    static let root: String = {
        var path = #filePath
        for _ in 0..<3 { path = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)]) }
        return path
    }()
    static let python = root + "/.venv-wake-reference/bin/python"
    static let script = root + "/scripts/lib/wake-reference.py"
    static let available = FileManager.default.isExecutableFile(atPath: python)
    static let missing = "the wake-word references are not installed: scripts/setup makes .venv-wake-reference"

    /// The clips that say a microWakeWord word, by word, and those that say none.
    static let positives = [
        "okay_nabu": "okay-nabu", "hey_jarvis": "hey-jarvis-flite", "alexa": "alexa", "hey_mycroft": "hey-mycroft",
    ]
    static let negatives = ["hey-jarvis", "hello-there"]
    static let words = ["okay_nabu", "hey_jarvis", "alexa", "hey_mycroft"]

    static func run(_ arguments: [String]) async throws -> String {
        let result = try await ChildProcess.run(python, [script] + arguments, separateErrors: true)
        guard result.status == 0 else {
            throw Failure(description: "wake-reference.py \(arguments.joined(separator: " ")): \(result.errorText)")
        }
        return result.text
    }

    /// pymicro-features' frames of `path`.
    static func features(_ path: String) async throws -> [[UInt16]] {
        try await run(["features", path]).split(separator: "\n").map { line in
            line.split(separator: " ").compactMap { UInt16($0) }
        }
    }

    /// pymicro-wakeword's probability at every run of each word's model: (seconds, word, probability).
    static func scores(_ path: String, _ words: [String]) async throws -> [(
        seconds: Double, word: String, probability: Double
    )] {
        try await run(["scores", path] + words).split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.count == 3, let seconds = Double(fields[0]), let probability = Double(fields[2]) else {
                return nil
            }
            return (seconds, String(fields[1]), probability)
        }
    }

    static func write(_ samples: [Int16]) throws -> String {
        let path = FileManager.default.temporaryDirectory.path + "/hark-micro-\(UUID().uuidString).wav"
        try WAVFile.write(path: path, samples: samples, sampleRate: 16_000)
        return path
    }
}

/// The front end, held to pymicro-features bit for bit: on the clips, on loud noise that clips, on a full-scale tone
/// and on digital silence; however the audio is cut; and after a reset.
@Suite(.enabled(if: MicroReference.available, "\(MicroReference.missing)"))
struct MicroFrontEndTests {
    /// Signals that reach every branch of the fixed-point code: white noise at −3 dBFS RMS with full-scale clipped
    /// stretches and a run of −32768 (the window's and the FFT's extremes), a full-scale 1 kHz tone (features above
    /// what a microWakeWord model's int8 input holds), silence, and the clips.
    static func signals() throws -> [(name: String, samples: [Int16])] {
        var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
        func random() -> Double {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Double(seed >> 11) / Double(1 << 53)
        }
        var noise = (0..<(3 * 16_000)).map { _ in
            // Box–Muller, RMS 23000 (clipped where it goes past full scale).
            let value = (-2 * log(max(random(), 1e-12))).squareRoot() * cos(2 * Double.pi * random()) * 23_000
            return Int16(clamping: Int(value.rounded()))
        }
        for index in 16_000..<16_100 { noise[index] = -32_768 }
        let tone = (0..<(2 * 16_000)).map { (index: Int) -> Int16 in
            let phase = 2 * Double.pi * 1_000 * Double(index) / 16_000
            return Int16(32_767 * sin(phase))
        }
        return [
            ("noise", noise), ("tone", tone), ("silence", [Int16](repeating: 0, count: 16_000)),
            ("okay-nabu", try WakeFixtures.samples("okay-nabu")),
            ("hey-jarvis", try WakeFixtures.samples("hey-jarvis")),
        ]
    }

    @Test func featuresEqualTheReferenceBitForBit() async throws {
        for (name, samples) in try Self.signals() {
            let path = try MicroReference.write(samples)
            defer { try? FileManager.default.removeItem(atPath: path) }
            let expected = try await MicroReference.features(path)
            let actual = MicroFrontEnd().process(samples)
            // A frame every 160 samples once the first 480 are in.
            #expect(expected.count == (samples.count - 480) / 160 + 1, "\(name): the reference has \(expected.count)")
            #expect(actual.count == expected.count, "\(name): \(actual.count) frames, the reference \(expected.count)")
            let differing = zip(actual, expected).enumerated().filter { $0.element.0 != $0.element.1 }.map(\.offset)
            #expect(differing.isEmpty, "\(name): frames \(differing.prefix(5)) differ, of \(expected.count)")
            #expect(expected.allSatisfy { $0.count == MicroFrontEnd.channels })
        }
    }

    /// The tone and the noise reach the front end's extremes: features above 666 (what an int8 input of scale
    /// 0.102 holds) and near zero.
    @Test func theSignalsReachTheExtremes() throws {
        let signals = Dictionary(uniqueKeysWithValues: try Self.signals().map { ($0.name, $0.samples) })
        let tone = MicroFrontEnd().process(try #require(signals["tone"])).joined()
        #expect((tone.max() ?? 0) > 666)
        let silence = MicroFrontEnd().process(try #require(signals["silence"])).joined()
        #expect(silence.allSatisfy { $0 == 0 })
    }

    @Test func chunkingAndResetDoNotChangeTheFeatures() throws {
        let samples = try WakeFixtures.samples("okay-nabu")
        let frontEnd = MicroFrontEnd()
        let whole = frontEnd.process(samples)
        for size in [1, 159, 160, 161, 480, 4001] {
            frontEnd.reset()
            var pieces: [[UInt16]] = []
            var start = 0
            while start < samples.count {
                let end = min(start + size, samples.count)
                pieces += frontEnd.process(Array(samples[start..<end]))
                start = end
            }
            #expect(pieces == whole, "cut into \(size)-sample pieces")
        }
    }
}

/// Each microWakeWord model's probabilities against pymicro-wakeword's on every clip: the same runs at the same
/// times, probabilities within 1e-6 (the reference prints eight decimals; the computations are the same), the same
/// detections.
@Suite(
    .enabled(if: WakeFixtures.runtime != nil, "\(WakeFixtures.missing)"),
    .enabled(if: MicroReference.available, "\(MicroReference.missing)")
)
struct MicroWakeWordTests {
    static let clips = MicroReference.positives.values.sorted() + MicroReference.negatives

    @Test(arguments: clips)
    func probabilitiesEqualTheReference(clip: String) async throws {
        let runtime = try #require(WakeFixtures.runtime)
        let path = WakeFixtures.folder + "/\(clip).wav"
        let reference = try await MicroReference.scores(path, MicroReference.words)
        let detector = try WakeWordDetector(
            runtime: runtime,
            words: try MicroReference.words.map { try runtime.word($0) }
        )
        let scores = try detector.process(try WakeFixtures.samples(clip))
        for (index, word) in MicroReference.words.enumerated() {
            let expected = reference.filter { $0.word == word }
            let actual = scores.filter { $0.word == index }
            #expect(
                !expected.isEmpty && actual.count == expected.count,
                "\(word): \(actual.count) runs, not \(expected.count)"
            )
            var largest = 0.0
            for (score, run) in zip(actual, expected) {
                #expect(
                    abs(score.seconds - run.seconds) < 1e-9,
                    "\(word): a run at \(score.seconds) s, not \(run.seconds)"
                )
                largest = max(largest, abs(Double(score.probability) - run.probability))
            }
            #expect(largest <= 1e-6, "\(word) on \(clip): largest difference \(largest)")
            // The detections: the reference's probabilities above the manifest's cutoff, 2 s apart, as Hark makes them.
            let cutoff = try #require(detector.words[index].cutoff)
            var referenceDetections: [Double] = []
            for run in expected where run.probability > cutoff {
                if let last = referenceDetections.last, run.seconds - last < 2 { continue }
                referenceDetections.append(run.seconds)
            }
            #expect(actual.filter(\.isDetection).map(\.seconds) == referenceDetections, "\(word) on \(clip)")
            // Each clip makes its own word fire, once, and no other.
            let own = MicroReference.positives[word] == clip
            #expect(referenceDetections.count == (own ? 1 : 0), "\(word) on \(clip): \(referenceDetections)")
        }
    }

    /// The manifests' settings reach the detector: each built-in word's cutoff and window are its manifest's.
    @Test func theManifestsSettingsAreUsed() throws {
        let runtime = try #require(WakeFixtures.runtime)
        let cutoffs = ["okay_nabu": 0.85, "hey_jarvis": 0.97, "alexa": 0.9, "hey_mycroft": 0.95]
        for (name, cutoff) in cutoffs {
            let word = try runtime.word(name)
            #expect(word.family == .micro && word.cutoff == cutoff && word.slidingWindow == 5, "\(word)")
            #expect(word.licence == .apache2 && word.path.hasSuffix("/micro/\(name).tflite"))
            #expect(word.effectiveThreshold(detector: 0.5) == cutoff)
            #expect(try runtime.word(name + ":0.6").effectiveThreshold(detector: 0.5) == Double(Float(0.6)))
        }
    }

    /// The probabilities do not depend on how the audio is cut, and a reset (the models' interpreters made anew)
    /// starts over exactly.
    @Test func chunkingAndResetDoNotChangeTheScores() throws {
        let runtime = try #require(WakeFixtures.runtime)
        let samples = try WakeFixtures.samples("okay-nabu")
        let detector = try WakeWordDetector(runtime: runtime, words: [try runtime.word("okay_nabu")])
        let whole = try detector.process(samples)
        #expect(whole.filter(\.isDetection).count == 1)
        for size in [1, 160, 479, 480, 4001] {
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
    }

    /// Both families in one detector: each word's scores are those of the word alone, in order of time, and at one
    /// time in the order of the words.
    @Test func bothFamiliesTogetherScoreAsEachAlone() throws {
        let runtime = try #require(WakeFixtures.runtime)
        let names = ["oww_hey_jarvis", "okay_nabu", "oww_okay_nabu", "hey_mycroft"]
        let samples = try WakeFixtures.samples("okay-nabu") + (try WakeFixtures.samples("hey-jarvis"))
        let together = try WakeWordDetector(runtime: runtime, words: try names.map { try runtime.word($0) })
        #expect(together.words.map(\.family) == [.open, .micro, .open, .micro])
        let scores = try together.process(samples)
        for (index, name) in names.enumerated() {
            let alone = try WakeWordDetector(runtime: runtime, words: [try runtime.word(name)]).process(samples)
            #expect(
                scores.filter { $0.word == index }.map { [$0.endSample, Int($0.probability.bitPattern)] }
                    == alone.map { [$0.endSample, Int($0.probability.bitPattern)] },
                "\(name)"
            )
        }
        for (earlier, later) in zip(scores, scores.dropFirst()) {
            #expect(
                earlier.endSample < later.endSample
                    || (earlier.endSample == later.endSample && earlier.word < later.word)
            )
        }
        // microWakeWord's okay_nabu and openWakeWord's hey_jarvis each fire on their own clip.
        let fired = scores.filter(\.isDetection).map { together.words[$0.word].name }
        #expect(fired == ["okay_nabu", "oww_hey_jarvis"], "\(fired)")
    }
}

/// Models given by their path: a maker's microWakeWord model with its manifest (here okay_nabu standing in for a
/// `stop` model, as a maker would name theirs), and manifests that are not right.
@Suite(.enabled(if: WakeFixtures.runtime != nil, "\(WakeFixtures.missing)"))
struct WakeManifestTests {
    /// A folder with `stop.tflite` (okay_nabu's model) and `stop.json`, its manifest as given.
    static func maker(_ manifest: String, model: String = "okay_nabu.tflite") throws -> String {
        let runtime = try #require(WakeFixtures.runtime)
        let folder = FileManager.default.temporaryDirectory.path + "/hark-maker-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: runtime.microModels + "/" + model, toPath: folder + "/stop.tflite")
        try Data(manifest.utf8).write(to: URL(fileURLWithPath: folder + "/stop.json"))
        return folder
    }

    static let stopManifest = """
        {"type": "micro", "wake_word": "Stop", "author": "a maker", "model": "stop.tflite", "trained_languages": ["en"],
         "version": 2, "micro": {"probability_cutoff": 0.5, "feature_step_size": 10, "sliding_window_size": 5,
         "tensor_arena_size": 21000, "minimum_esphome_version": "2024.7.0"}}
        """

    @Test func aMakersModelLoadsByItsManifestOrItsModel() throws {
        let runtime = try #require(WakeFixtures.runtime)
        let folder = try Self.maker(Self.stopManifest)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        for given in [folder + "/stop.json", folder + "/stop.tflite"] {
            let word = try runtime.word(given)
            #expect(word.name == "stop" && word.family == .micro && word.path == folder + "/stop.tflite", "\(word)")
            #expect(word.cutoff == 0.5 && word.slidingWindow == 5 && word.phrase == "Stop")
            #expect(word.licence == .maker && word.licence.commercialUse == nil)
        }
        // It runs: okay_nabu's model under the name stop fires on the okay nabu clip (its cutoff now 0.5).
        let detector = try WakeWordDetector(runtime: runtime, words: [try runtime.word(folder + "/stop.json")])
        let fired = try detector.process(try WakeFixtures.samples("okay-nabu")).filter(\.isDetection)
        #expect(fired.count == 1 && detector.words[fired[0].word].name == "stop")
        let own = try runtime.word(folder + "/stop.json:0.99")
        #expect(own.threshold == 0.99 && own.effectiveThreshold(detector: 0.5) == Double(Float(0.99)))
    }

    @Test(arguments: [
        (#"{"type": "micro", "model": "stop.tflite"}"#, "has no \"micro\" settings"),
        (#"{"type": "nano", "model": "stop.tflite"}"#, "not micro or openWakeWord"),
        (
            #"{"type": "micro", "model": "stop.tflite", "micro": {"probability_cutoff": 1.5, "sliding_window_size": 5}}"#,
            "probability_cutoff"
        ),
        (
            #"{"type": "micro", "model": "stop.tflite", "micro": {"probability_cutoff": 0.5, "sliding_window_size": 0}}"#,
            "sliding_window_size"
        ),
        (
            #"{"type": "micro", "model": "stop.tflite", "micro": {"probability_cutoff": 0.5, "sliding_window_size": 5, "feature_step_size": 20}}"#,
            "version 2"
        ),
        (
            #"{"type": "micro", "model": "../stop.tflite", "micro": {"probability_cutoff": 0.5, "sliding_window_size": 5}}"#,
            "names no model file beside it"
        ),
        ("not json at all", "is not a manifest"),
        (String(repeating: " ", count: 70_000) + "{}", "larger than"),
    ])
    func aBadManifestIsRefusedWithItsReason(manifest: String, reason: String) throws {
        let runtime = try #require(WakeFixtures.runtime)
        let folder = try Self.maker(manifest)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let error = try #require(throws: WakeError.self) { try runtime.word(folder + "/stop.json") }
        #expect(error.isWordError && error.description.contains(reason), "\(error)")
        #expect(error.description.contains(folder + "/stop.json"))
    }

    /// An openWakeWord model with a microWakeWord manifest is refused when loaded, before anything runs.
    @Test func aModelOfTheOtherFamilyIsRefused() throws {
        let runtime = try #require(WakeFixtures.runtime)
        let folder = try Self.maker(Self.stopManifest)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try FileManager.default.removeItem(atPath: folder + "/stop.tflite")
        try FileManager.default.copyItem(atPath: runtime.models + "/alexa.tflite", toPath: folder + "/stop.tflite")
        let error = try #require(throws: WakeError.self) {
            try WakeWordDetector(runtime: runtime, words: [try runtime.word(folder + "/stop.json")])
        }
        #expect(
            error.description.contains("not a microWakeWord model") || error.description.contains("quantised"),
            "\(error)"
        )
    }
}

/// The stop word as the appliance hears it while the answer plays: a microWakeWord model given by its path (okay_nabu's
/// standing in for a maker's stop model, named stop) hears "okay nabu" said under loud playback once the echo canceller
/// is given what the speaker played, and not in the raw microphone; and the mean's rise comes just before the
/// detection, near the word's end.
@Suite(.enabled(if: WakeFixtures.runtime != nil, "\(WakeFixtures.missing)"))
struct StopWordHearingTests {
    @Test func heardDuringPlaybackThroughTheEchoCanceller() async throws {
        guard let hark = BuiltProducts.executable("hark") else {
            Issue.record("no built hark next to the tests: swift build --build-tests")
            return
        }
        let folder = try WakeManifestTests.maker(WakeManifestTests.stopManifest)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // The speaker has played other speech for 4 s when the user speaks, as loud as the user, 30 ms late.
        let user = [Int16](repeating: 0, count: 64_000) + (try WakeFixtures.samples("okay-nabu"))
        let answer = try WakeFixtures.samples("hey-jarvis") + (try WakeFixtures.samples("hello-there"))
        let far = answer + answer
        var microphone = user
        for index in microphone.indices where index >= 480 && index - 480 < far.count {
            microphone[index] = Int16(clamping: Int(microphone[index]) + Int(far[index - 480]))
        }
        try WAVFile.write(path: folder + "/mic.wav", samples: microphone, sampleRate: 16_000)
        try WAVFile.write(path: folder + "/far.wav", samples: far, sampleRate: 16_000)
        let stop = folder + "/stop.json"
        let raw = try await ChildProcess.run(hark, ["wake", "--input", folder + "/mic.wav", "--word", stop])
        let heard = try await ChildProcess.run(
            hark,
            ["wake", "--input", folder + "/mic.wav", "--word", stop, "--playback", folder + "/far.wav"]
        )
        #expect(raw.status == 0 && heard.status == 0, "\(heard.text)")
        #expect(raw.text.isEmpty, "the raw microphone: \(raw.text)")
        let lines = heard.text.split(separator: "\n")
        #expect(lines.count == 1 && lines.first?.contains(" stop 0.") == true, "\(heard.text)")
        // Where the user's "okay nabu" ends in the microphone: 4 s + the clip's 1.5 s.
        let seconds = lines.first.flatMap { Double($0.split(separator: " ")[0]) } ?? 0
        #expect(seconds > 5.3 && seconds < 5.8, "\(seconds)")
    }

    @Test func theRiseIsJustBeforeTheDetection() throws {
        let runtime = try #require(WakeFixtures.runtime)
        for (word, clip) in MicroReference.positives {
            let detector = try WakeWordDetector(runtime: runtime, words: [try runtime.word(word)])
            let detection = try #require(
                try detector.process(try WakeFixtures.samples(clip)).first(where: \.isDetection)
            )
            let rise = try #require(detection.riseSample)
            // Within 300 ms before the detection (its mean passed half the cutoff), and that is the word's end.
            #expect(rise <= detection.endSample && detection.endSample - rise <= 4_800, "\(word): \(detection)")
            #expect(detector.words[0].wordEndSample(risenAt: rise) == rise)
        }
    }
}
