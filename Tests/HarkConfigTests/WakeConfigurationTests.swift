import HarkApp
import HarkConfig
import HarkCore
import HarkWake
import Testing

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// `session.trigger` and the `wake:` section: read from the file and the environment, refused with the key named,
/// and what `hark config check` says of them.
@Suite struct WakeConfigurationTests {
    func load(_ text: String, environment: [String: String] = [:]) throws -> ApplianceConfiguration {
        try ConfigurationLoader.parse(text, file: "/etc/hark/hark.yaml", folder: "/etc/hark", environment: environment)
            .configuration
    }

    /// The default word is microWakeWord's okay_nabu (Apache-2.0: a product may ship it); no stop word.
    @Test func theDefaultsListenForOkayNabuWhenTheRuntimeIsThere() throws {
        let configuration = try load("mode: speaker\n")
        #expect(configuration.session.trigger == "auto")
        #expect(configuration.wake.words == ["okay_nabu"])
        #expect(WakeRuntime.builtIn("okay_nabu")?.licence.commercialUse == true)
        #expect(configuration.wake.stopWords.isEmpty)
        #expect(configuration.wake.threshold == 0.5)
        #expect(configuration.wake.refractory == .seconds(2))
        #expect(configuration.wake.quietLevel == WakeWordDetector.defaultQuietLevel)
        #expect(configuration.wake.followUps)
        #expect(!configuration.wake.sendWakeWord)
    }

    @Test func wordsAreAListOrCommaSeparatedAndModelPathsAreResolved() throws {
        let list = try load(
            "wake:\n  words: [alexa, models/kitchen.tflite, alexa]\n  threshold: 0.7\n  quiet_level: -72.5\n"
        )
        #expect(list.wake.words == ["alexa", "/etc/hark/models/kitchen.tflite"])
        #expect(list.wake.threshold == 0.7)
        #expect(list.wake.quietLevel == -72.5)
        let block = try load("wake:\n  words:\n    - okay_nabu\n    - /opt/words/hey_hark.tflite\n")
        #expect(block.wake.words == ["okay_nabu", "/opt/words/hey_hark.tflite"])
        let environment = try load("", environment: ["HARK_WAKE_WORDS": "hey_mycroft, oww_hey_rhasspy:0.6"])
        #expect(environment.wake.words == ["hey_mycroft", "oww_hey_rhasspy:0.6"])
        let manifest = try load("wake:\n  words: [words/hey_hark.json:0.8]\n  stop_words: stop/stop.json\n")
        #expect(manifest.wake.words == ["/etc/hark/words/hey_hark.json:0.8"])
        #expect(manifest.wake.stopWords == ["/etc/hark/stop/stop.json"])
        let stops = try load("", environment: ["HARK_WAKE_STOP_WORDS": "/opt/stop.json, alexa:0.95"])
        #expect(stops.wake.stopWords == ["/opt/stop.json", "alexa:0.95"])
        let own = try load("wake:\n  words: [alexa:0.7, models/kitchen.tflite:0.55, alexa:0.7]\n")
        #expect(own.wake.words == ["alexa:0.7", "/etc/hark/models/kitchen.tflite:0.55"])
        let trigger = try load("session:\n  trigger: voice\nwake:\n  follow_ups: false\n  send_wake_word: true\n")
        #expect(trigger.session.trigger == "voice")
        #expect(!trigger.wake.followUps && trigger.wake.sendWakeWord)
    }

    @Test func badWordsAndValuesNameTheKey() throws {
        let unknown = try #require(failure("wake:\n  words: hey_computer\n"))
        #expect(unknown.description.contains("wake.words: must be built-in wake words (okay_nabu, hey_jarvis, alexa"))
        #expect(unknown.description.contains("oww_hey_jarvis"))
        #expect(unknown.description.contains("(got \"hey_computer\")"))
        // openWakeWord's word by its old bare name is not a word any more.
        let bare = try #require(failure("wake:\n  words: hey_rhasspy\n"))
        #expect(bare.description.contains("oww_hey_rhasspy"), "\(bare)")
        let notModel = try #require(failure("wake:\n  words: [models/kitchen.onnx]\n"))
        #expect(notModel.description.contains("a wake-word model must be a .tflite file or its .json manifest"))
        let stopMany = try #require(failure("wake:\n  stop_words: [a.json, b.json, c.json, d.json, e.json]\n"))
        #expect(stopMany.description.contains("wake.stop_words: names more than 4 wake words"), "\(stopMany)")
        let stopUnknown = try #require(failure("wake:\n  stop_words: stop\n"))
        #expect(stopUnknown.description.contains("wake.stop_words: must be built-in wake words"), "\(stopUnknown)")
        let empty = try #require(failure("wake:\n  words: \"\"\n"))
        #expect(empty.description.contains("wake.words: must name at least one wake word"))
        let many = try #require(
            failure("wake:\n  words: [\(Array(repeating: "alexa", count: 9).joined(separator: ", "))]\n")
        )
        #expect(many.description.contains("names more than 8 wake words"))
        let nested = try #require(failure("wake:\n  words: [[alexa]]\n"))
        #expect(nested.description.contains("wake.words: must be a list of single values"))
        let ownThreshold = try #require(failure("wake:\n  words: [hey_jarvis, alexa:1.5]\n"))
        #expect(ownThreshold.description.contains("wake.words: a wake word's threshold (after ':') must be from 0.01"))
        #expect(ownThreshold.description.contains("(got \"alexa:1.5\")"), "\(ownThreshold)")
        let twice = try #require(failure("wake:\n  words: [alexa, alexa:0.7]\n"))
        let named = "a word is given twice, with different thresholds (got \"alexa, alexa:0.7\")"
        #expect(twice.description.contains(named), "\(twice)")
        let threshold = try #require(failure("wake:\n  threshold: 1.5\n"))
        #expect(threshold.description.contains("wake.threshold: must be from 0.01 to 0.99"))
        let quiet = try #require(failure("wake:\n  quiet_level: 3\n"))
        #expect(quiet.description.contains("wake.quiet_level: must be from -120 to 0"), "\(quiet)")
        let trigger = try #require(failure("session:\n  trigger: clap\n"))
        #expect(trigger.description.contains("session.trigger: must be one of auto, wake, voice"))
        let stray = try #require(failure("wake:\n  word: alexa\n"))
        #expect(stray.description.contains("word"))
    }

    @Test func configCheckSaysWhatOpensASessionAndRefusesAWakeWordWithoutItsRuntime() throws {
        let scratch = try Scratch()
        let base = "board: host\nboard_dir: \(repositoryRoot())/board\n"
        let voice = try scratch.write("voice.yaml", base + "session:\n  trigger: voice\n")
        let heard = ConfigCheck.run(path: voice, environment: ["GEMINI_API_KEY": "k"], systemRoot: scratch.path)
        #expect(heard.exitCode == 0)
        #expect(heard.output.contains("sessions open on: any speech the voice detector hears\n"))

        // No runtime where it is looked for: `wake` is an error naming what to install, `auto` a warning.
        let nowhere = ["GEMINI_API_KEY": "k", "HARK_LIB_DIR": scratch.path + "/empty"]
        let wake = try scratch.write("wake.yaml", base + "session:\n  trigger: wake\n")
        let refused = ConfigCheck.run(path: wake, environment: nowhere, systemRoot: scratch.path)
        #expect(refused.exitCode == 2)
        #expect(refused.output.hasPrefix("hark config: session.trigger is wake, but the wake word's TensorFlow Lite"))
        #expect(refused.output.contains("Install the hark package"))
        let auto = try scratch.write("auto.yaml", base)
        let fallback = ConfigCheck.run(path: auto, environment: nowhere, systemRoot: scratch.path)
        #expect(fallback.exitCode == 0)
        #expect(fallback.output.contains("warning: no wake-word runtime is installed, so any speech opens a session"))
        // Push-to-talk has no trigger.
        let button = ConfigCheck.run(
            path: auto,
            environment: nowhere.merging(["HARK_MODE": "push-to-talk"]) { $1 },
            systemRoot: scratch.path
        )
        #expect(!button.output.contains("sessions open on"))
    }

    @Test(
        .enabled(
            if: (try? WakeRuntime.locate(environment: ProcessInfo.processInfo.environment)) != nil,
            "the wake-word runtime is not installed: scripts/setup puts it in .hark-lib"
        )
    )
    func configCheckNamesTheWordsAndAMissingModel() throws {
        let scratch = try Scratch()
        let base = "board: host\nboard_dir: \(repositoryRoot())/board\nsession:\n  trigger: wake\n"
        let good = try scratch.write("good.yaml", base + "wake:\n  words: [hey_jarvis, alexa]\n")
        let result = ConfigCheck.run(path: good, environment: ["GEMINI_API_KEY": "k"], systemRoot: scratch.path)
        #expect(result.exitCode == 0, "\(result.output)")
        let thresholds = "(threshold hey_jarvis 0.97 over 5 runs, alexa 0.90 over 5 runs; models in "
        #expect(result.output.contains("sessions open on: the wake word hey_jarvis, alexa \(thresholds)"), "\(result)")
        // Each word's family, model and licence; microWakeWord's may ship in a product: no licence warning.
        #expect(result.output.contains("\n  hey_jarvis: microWakeWord, "), "\(result.output)")
        #expect(result.output.contains("/micro/hey_jarvis.tflite, licence Apache-2.0\n"), "\(result.output)")
        #expect(!result.output.contains("non-commercial"), "\(result.output)")
        let own = try scratch.write(
            "own.yaml",
            base + "wake:\n  words: [oww_hey_jarvis, alexa:0.7]\n  threshold: 0.6\n"
        )
        let owned = ConfigCheck.run(path: own, environment: ["GEMINI_API_KEY": "k"], systemRoot: scratch.path)
        let expected =
            "sessions open on: the wake word oww_hey_jarvis, alexa (threshold oww_hey_jarvis 0.60, alexa 0.70"
        #expect(owned.output.contains(expected), "\(owned.output)")
        // An openWakeWord word is a warning: its licence is non-commercial.
        #expect(owned.exitCode == 0)
        #expect(owned.output.contains("\n  oww_hey_jarvis: openWakeWord, "), "\(owned.output)")
        #expect(owned.output.contains("licence CC BY-NC-SA 4.0 (non-commercial)\n"), "\(owned.output)")
        let warning =
            "warning: wake.words: oww_hey_jarvis is an openWakeWord model licensed CC BY-NC-SA 4.0, for "
            + "non-commercial use only: a product may not ship it"
        #expect(owned.output.contains(warning), "\(owned.output)")
        // A stop word by its manifest's path: its model and licence named (a maker's), loaded as hark run loads it.
        let runtime = try WakeRuntime.locate(environment: ProcessInfo.processInfo.environment)
        try FileManager.default.createDirectory(atPath: scratch.path + "/stop", withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            atPath: runtime.microModels + "/okay_nabu.tflite",
            toPath: scratch.path + "/stop/stop.tflite"
        )
        let manifest =
            #"{"type": "micro", "wake_word": "Stop", "model": "stop.tflite", "micro": "#
            + #"{"probability_cutoff": 0.5, "sliding_window_size": 5, "feature_step_size": 10}}"#
        try Data(manifest.utf8).write(to: URL(fileURLWithPath: scratch.path + "/stop/stop.json"))
        // The wake word of one family, the stop word of the other: both loaded, both named.
        let stop = try scratch.write(
            "stop.yaml",
            base + "wake:\n  words: oww_hey_jarvis\n  stop_words: stop/stop.json\n"
        )
        let stopped = ConfigCheck.run(path: stop, environment: ["GEMINI_API_KEY": "k"], systemRoot: scratch.path)
        #expect(stopped.exitCode == 0, "\(stopped.output)")
        let line = "\n  stop word stop: microWakeWord, \(scratch.path)/stop/stop.tflite, licence its maker's"
        #expect(stopped.output.contains(line), "\(stopped.output)")
        #expect(stopped.output.contains("\n  oww_hey_jarvis: openWakeWord, "), "\(stopped.output)")
        let badStop = try scratch.write("bad-stop.yaml", base + "wake:\n  stop_words: stop/absent.json\n")
        let refusedStop = ConfigCheck.run(path: badStop, environment: ["GEMINI_API_KEY": "k"], systemRoot: scratch.path)
        #expect(refusedStop.exitCode == 2)
        #expect(refusedStop.output.contains("wake.stop_words: no readable wake-word manifest"), "\(refusedStop)")

        let missing = try scratch.write("missing.yaml", base + "wake:\n  words: [absent/kitchen.tflite]\n")
        let refused = ConfigCheck.run(path: missing, environment: ["GEMINI_API_KEY": "k"], systemRoot: scratch.path)
        #expect(refused.exitCode == 2)
        #expect(
            refused.output.contains("wake.words: no readable wake-word model \(scratch.path)/absent/kitchen.tflite")
        )
    }
}
