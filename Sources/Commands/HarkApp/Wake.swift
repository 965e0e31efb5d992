import ArgumentParser
import HarkAppliance
import HarkAudio
import HarkCore
import HarkDSP
import HarkWake

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// `hark wake`: the wake-word detector over a recording, for choosing a threshold and for tests.
struct Wake: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Find wake words in a recording.",
        discussion: """
            Runs the on-device wake-word detector (microWakeWord and openWakeWord models through TensorFlow Lite) \
            over IN.wav (PCM 8/16/24/32-bit or float, any rate and channel count; mixed to mono and converted to \
            16 kHz as `hark converse` does) and prints one line per detection:
              SECONDS WORD SCORE
            where SECONDS is where the audio the detector had heard ended (about where the wake word ended), \
            WORD the wake word's name and SCORE the model's probability (a microWakeWord model's: the mean over its \
            sliding window). With --scores it prints every frame's probability instead (one line per word at \
            every run of its model: every 30 ms for microWakeWord's, every 80 ms for openWakeWord's; the same \
            columns), to choose a threshold on your own room's recordings. A detection is a probability above the \
            word's threshold: its own (NAME:X), else its manifest's probability_cutoff (every microWakeWord \
            model's), else --threshold; after one, the same word is not reported again for --refractory seconds. \
            Exit code 0 whether or not anything was detected; 2 for a usage error or an unreadable input; 1 when \
            the detector cannot run.

            --list prints the built-in words instead, with their family, licence and threshold, and needs no \
            input.

            As on the device (wake.quiet_level), probabilities that depend only on audio quieter than \
            --quiet-level are not computed (nothing can be detected there; every other probability is the same); \
            --scores computes every frame.

            Built-in words: \(WakeRuntime.builtInWords.joined(separator: ", ")) (default: \
            \(WakeRuntime.defaultWord)). Those without oww_ are microWakeWord's (Apache-2.0: a product may ship \
            them); those with it are openWakeWord's (CC BY-NC-SA 4.0: non-commercial use only). Any other model is \
            given by its path: a microWakeWord model's manifest (NAME.json, the model beside it) or its .tflite \
            with the manifest beside it, or an openWakeWord .tflite. Several --word options run together (each \
            family's sharing its front end). A word may carry its own threshold after a colon (--word alexa:0.7), \
            as in wake.words.

            The TensorFlow Lite library (\(WakeRuntime.libraryName)) and the models are looked for in \
            $\(WakeRuntime.libraryVariable) (models in its wake/ folder, or $\(WakeRuntime.modelsVariable)), \
            then in a \(WakeRuntime.developmentFolder)/ folder above the hark binary or the working folder (a \
            checkout's, made by scripts/setup), then in \
            \(WakeRuntime.installedLibraryFolder) and \(WakeRuntime.installedModelFolder) (the hark package).

            With --front-end the recording first goes through the appliance's capture front end (noise \
            suppression, and with --playback FAR.wav echo cancellation against what the speaker played at the same \
            time, sample for sample from the recording's start): the detector hears what it hears on the device. \
            --front-end-output OUT.wav keeps that audio, to listen to what the detector heard.

            With --question-start each detection line has a fourth column, FROM: the second from which the \
            appliance would send what followed the word (the word's end as it finds it there: where the score \
            began to rise, or a pause after that), to check that a question said in one breath keeps its first \
            words.

            Example:
              hark wake --input kitchen.wav --word okay_nabu --threshold 0.6
            """
    )

    @Option(
        name: .long,
        help: ArgumentHelp("The recording (WAV: PCM 8/16/24/32-bit or float, any rate).", valueName: "IN.wav")
    )
    var input: String?

    @Flag(name: .long, help: "List the built-in words: family, licence, threshold, model file.")
    var list = false

    @Option(
        name: .customLong("word"),
        help: ArgumentHelp(
            "A wake word: a built-in name or the path of a model (a microWakeWord manifest .json, or a .tflite), "
                + "optionally with its own threshold (alexa:0.7; repeatable).",
            valueName: "NAME[:X]"
        )
    )
    var words: [String] = []

    @Option(
        name: .long,
        help: ArgumentHelp(
            "A probability above this is a detection (0 to 1), for words with no threshold of their own or in "
                + "their manifest.",
            valueName: "X"
        )
    )
    var threshold: Double = 0.5

    @Option(
        name: .long,
        help: ArgumentHelp("Seconds after a detection in which the same word is not reported again.", valueName: "S")
    )
    var refractory: Double = 2

    @Option(
        name: .customLong("quiet-level"),
        parsing: .unconditional,
        help: ArgumentHelp(
            "Audio below this RMS level (dBFS) is quiet: nothing is detected in it, its models are not run.",
            valueName: "DBFS"
        )
    )
    var quietLevel: Double = WakeWordDetector.defaultQuietLevel

    @Flag(name: .long, help: "Print every frame's probability (SECONDS WORD PROBABILITY) instead of detections.")
    var scores = false

    @Flag(
        name: .customLong("question-start"),
        help: "Add to each detection where the appliance would begin sending what follows the word (seconds)."
    )
    var questionStart = false

    @Flag(name: .customLong("front-end"), help: "Run the appliance's capture front end (noise suppression) first.")
    var frontEnd = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "What the speaker played during the recording, for the front end's echo canceller (implies --front-end).",
            valueName: "FAR.wav"
        )
    )
    var playback: String?

    @Option(
        name: .customLong("front-end-output"),
        help: ArgumentHelp(
            "Write what the front end made of the recording, what the detector heard (implies --front-end).",
            valueName: "OUT.wav"
        )
    )
    var frontEndOutput: String?

    func validate() throws {
        if list {
            guard input == nil, words.isEmpty, !scores, !questionStart, !frontEnd, playback == nil,
                frontEndOutput == nil
            else { throw ValidationError("--list takes no other option") }
            return
        }
        guard let input, !input.isEmpty else { throw ValidationError("--input must name a file") }
        guard threshold.isFinite, (0...1).contains(threshold) else {
            throw ValidationError("--threshold must be a number from 0 to 1 (got \(threshold))")
        }
        _ = try CommandLineDuration.seconds(refractory, option: "--refractory", in: 0...3600)
        guard quietLevel.isFinite, (-120...0).contains(quietLevel) else {
            throw ValidationError("--quiet-level must be a level from -120 to 0 dBFS (got \(quietLevel))")
        }
        guard words.count <= 16 else { throw ValidationError("at most 16 --word options") }
        if let playback, playback.isEmpty { throw ValidationError("--playback must name a file") }
        if let frontEndOutput, frontEndOutput.isEmpty { throw ValidationError("--front-end-output must name a file") }
        if scores && questionStart { throw ValidationError("--question-start goes with detections, not --scores") }
        if let empty = words.first(where: \.isEmpty) {
            throw ValidationError("--word must name a word or a model file (got \"\(empty)\")")
        }
        do {
            _ = try WakeRuntime.distinctWords(words)
        } catch {
            throw ValidationError("--word: \(error)")
        }
    }

    func run() throws {
        if list {
            writeAll(
                STDOUT_FILENO,
                Self.listing(runtime: try? WakeRuntime.locate(environment: ProcessInfo.processInfo.environment))
            )
            return
        }
        var samples: [Int16]
        do {
            samples = try WAVStreamReader.readMono(path: input ?? "", sampleRate: WakeWordDetector.sampleRate)
        } catch {
            throw ValidationError("cannot use the input: \(error)")
        }
        if frontEnd || playback != nil || frontEndOutput != nil {
            var far: [Int16]?
            if let playback {
                do {
                    far = try WAVStreamReader.readMono(path: playback, sampleRate: WakeWordDetector.sampleRate)
                } catch {
                    throw ValidationError("cannot use the playback: \(error)")
                }
            }
            samples = Self.frontEnd(samples, playback: far)
            if let frontEndOutput {
                do {
                    try WAVFile.write(path: frontEndOutput, samples: samples, sampleRate: WakeWordDetector.sampleRate)
                } catch {
                    throw ValidationError("cannot write the front end's output: \(error)")
                }
            }
        }
        let detector: WakeWordDetector
        do {
            let runtime = try WakeRuntime.locate(environment: ProcessInfo.processInfo.environment)
            detector = try WakeWordDetector(
                runtime: runtime,
                words: try WakeRuntime.distinctWords(words.isEmpty ? [WakeRuntime.defaultWord] : words).map {
                    (name) throws(WakeError) in try runtime.word(name)
                },
                threshold: Float(threshold),
                refractory: try CommandLineDuration.seconds(refractory, option: "--refractory", in: 0...3600),
                quietLevel: scores ? nil : quietLevel
            )
        } catch let error as WakeError {
            writeAll(STDERR_FILENO, "hark wake: \(RemoteText.printable(error.description, limit: 1000))\n")
            // A word that is not one is a usage error, like every other (2); the runtime's trouble is not (1).
            throw ExitCode(error.isWordError ? 2 : 1)
        }
        var lines = ""
        do {
            try samples.withUnsafeBufferPointer { (buffer) throws(WakeError) in
                try detector.process(buffer) { score in
                    guard scores || score.isDetection else { return }
                    let word = detector.words[score.word]
                    let start =
                        questionStart
                        ? WakeWordBoundary.questionStart(
                            in: samples,
                            detectionEnd: score.endSample,
                            hint: score.riseSample.map { word.wordEndSample(risenAt: $0) }
                        ) : nil
                    lines += Self.line(score, word: word.name, questionStart: start)
                    if lines.utf8.count >= 1 << 16 {
                        writeAll(STDOUT_FILENO, lines)
                        lines = ""
                    }
                }
            }
        } catch {
            writeAll(STDOUT_FILENO, lines)
            writeAll(STDERR_FILENO, "hark wake: \(error)\n")
            throw ExitCode(1)
        }
        writeAll(STDOUT_FILENO, lines)
    }

    /// The built-in words, one a line: name, family, licence, what is said, threshold (a microWakeWord model's from
    /// its manifest) and model file, or that it is not installed; then what holds for models given by path.
    static func listing(runtime: WakeRuntime?) -> String {
        var rows: [[String]] = [["WORD", "FAMILY", "LICENCE", "SAY", "THRESHOLD", "MODEL"]]
        for builtIn in WakeRuntime.builtIns {
            var threshold = "wake.threshold (0.5)"
            var model = "not installed"
            if let runtime, let word = try? runtime.word(builtIn.name) {
                model = word.path
                if let cutoff = word.cutoff {
                    threshold = "\(fixed(cutoff, decimals: 2)) over \(word.slidingWindow) runs"
                }
            }
            rows.append([
                builtIn.name, builtIn.family.rawValue, builtIn.licence.name, "\"\(builtIn.phrase)\"", threshold, model,
            ])
        }
        let widths = (0..<5).map { column in rows.map { $0[column].count }.max() ?? 0 }
        var text = ""
        for row in rows {
            for column in 0..<5 {
                text += row[column] + String(repeating: " ", count: widths[column] - row[column].count + 2)
            }
            text += row[5] + "\n"
        }
        text += """
            The default is \(WakeRuntime.defaultWord). microWakeWord's models are Apache-2.0, weights included: a \
            product may ship them (the names may be others' trademarks). openWakeWord's pre-trained models (oww_) \
            are CC BY-NC-SA 4.0: non-commercial use only. A model given by its path carries its maker's licence. No \
            stop model comes with Hark (no wheel on PyPI carries one): give your own microWakeWord stop model's \
            manifest in wake.stop_words.

            """
        return text
    }

    /// `samples` through the appliance's capture front end (its default options: noise suppression, and echo
    /// cancellation when `playback` is given), in 20 ms frames, with the front end's own delay taken out so times
    /// stay those of the recording.
    static func frontEnd(_ samples: [Int16], playback: [Int16]?) -> [Int16] {
        var options = FrontEndOptions()
        options.echoCancellation = playback != nil
        options.residualEchoSuppression = playback != nil
        let frame = AudioFormat.microphone.frameSamples
        let canceller = EchoCanceller(frameSize: frame, sampleRate: AudioFormat.microphone.sampleRate, options: options)
        let latency = canceller.latency
        let padded = samples + [Int16](repeating: 0, count: frame + latency)
        var output = [Int16](repeating: 0, count: padded.count - padded.count % frame)
        var reference = [Int16](repeating: 0, count: frame)
        padded.withUnsafeBufferPointer { microphone in
            output.withUnsafeMutableBufferPointer { out in
                for start in stride(from: 0, to: out.count, by: frame) {
                    for index in 0..<frame {
                        let at = start + index
                        reference[index] = playback.map { at < $0.count ? $0[at] : 0 } ?? 0
                    }
                    reference.withUnsafeBufferPointer { far in
                        canceller.process(
                            microphone: microphone.baseAddress! + start,
                            reference: far.baseAddress!,
                            output: out.baseAddress! + start
                        )
                    }
                }
            }
        }
        return Array(output[latency..<(latency + samples.count)])
    }

    /// `SECONDS WORD PROBABILITY`: seconds with two decimals (frames are 80 ms apart), the probability with six.
    /// With `questionStart` (a sample), a fourth column: that sample in seconds, with three decimals.
    static func line(_ score: WakeScore, word: String, questionStart: Int? = nil) -> String {
        let from = questionStart.map { " " + fixed(Double($0) / Double(WakeWordDetector.sampleRate), decimals: 3) }
        return
            "\(fixed(score.seconds, decimals: 2)) \(word) \(fixed(Double(score.probability), decimals: 6))\(from ?? "")\n"
    }

    /// `value` with exactly `decimals` decimals (no Foundation formatting needed).
    static func fixed(_ value: Double, decimals: Int) -> String {
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        let scaled = (abs(value) * scale).rounded()
        guard scaled < 9e15 else { return "\(value)" }
        let whole = Int(scaled) / Int(scale)
        let fraction = String(Int(scaled) % Int(scale))
        let sign = value < 0 && scaled > 0 ? "-" : ""
        return "\(sign)\(whole).\(String(repeating: "0", count: decimals - fraction.count))\(fraction)"
    }
}
