import HarkAppliance
import HarkConfig
import HarkCore
import HarkWake

/// What opens a session, from `mode` and `session.trigger`: a wake word (with its runtime) or any speech.
enum WakeSetup {
    /// The trigger in force.
    enum Trigger: Equatable {
        /// Sessions open on a wake word, its runtime there.
        case wake(WakeRuntime)
        /// Sessions open on any speech; `note` says why, when the configuration asked for `auto`.
        case voice(note: String?)
        /// Push-to-talk: the button opens sessions.
        case button
    }

    /// The trigger the configuration asks for on this machine. `session.trigger: wake` without the runtime is
    /// an error (exit code 2) naming what to install; `auto` falls back to voice and says so.
    static func trigger(_ configuration: ApplianceConfiguration, environment: [String: String]) throws -> Trigger {
        guard configuration.mode != .pushToTalk else { return .button }
        switch configuration.session.trigger {
        case "voice":
            return .voice(note: nil)
        case "wake":
            do {
                return .wake(try WakeRuntime.locate(environment: environment))
            } catch {
                throw ApplianceSetupError(
                    description: RemoteText.printable("session.trigger is wake, but \(error.description)", limit: 1000)
                )
            }
        default:
            do {
                return .wake(try WakeRuntime.locate(environment: environment))
            } catch  where error.isRuntimeMissing {
                return .voice(
                    note: "no wake-word runtime is installed, so any speech opens a session (session.trigger: auto); "
                        + "install the hark package or run scripts/setup for the wake word"
                )
            } catch {
                throw ApplianceSetupError(
                    description: RemoteText.printable("the wake word cannot run: \(error.description)", limit: 1000)
                )
            }
        }
    }

    /// Checks that every configured word's model is there; returns them. A word that is not one is an error about
    /// `wake.words`, with the file and line it came from (its text printable).
    static func words(_ loaded: LoadedConfiguration, runtime: WakeRuntime) throws -> [WakeWord] {
        do {
            return try loaded.configuration.wake.words.map { (name) throws(WakeError) in try runtime.word(name) }
        } catch {
            throw loaded.error(key: "wake.words", error.description)
        }
    }

    /// The detector `hark run` starts: the library and every model loaded (`hark config check` makes it too, so
    /// the two give one verdict). A model TensorFlow Lite cannot load is an error about `wake.words` when it is a
    /// configured word's; a damaged library or runtime model says which file and how to restore it.
    static func detector(_ loaded: LoadedConfiguration, runtime: WakeRuntime) throws -> WakeWordDetector {
        let configuration = loaded.configuration
        let words = try words(loaded, runtime: runtime)
        do {
            return try WakeWordDetector(
                runtime: runtime,
                words: words,
                threshold: Float(configuration.wake.threshold),
                refractory: configuration.wake.refractory,
                quietLevel: configuration.wake.quietLevel
            )
        } catch {
            if let model = error.model, words.contains(where: { $0.path == model }) {
                throw loaded.error(key: "wake.words", error.description)
            }
            throw ApplianceSetupError(
                description: RemoteText.printable(
                    "the wake-word detector cannot start: \(error.description)",
                    limit: 1000
                )
            )
        }
    }

    /// The appliance's wake-word behaviour: the models loaded into a detector on a thread of its own.
    static func behaviour(_ loaded: LoadedConfiguration, runtime: WakeRuntime) throws -> WakeBehaviour {
        WakeBehaviour(
            spotter: WakeWordListener(detector: try detector(loaded, runtime: runtime)),
            sendWakeWord: loaded.configuration.wake.sendWakeWord
        )
    }

    /// The stop word's detector (`wake.stop_words`), or nil when none is configured. It needs the runtime whatever
    /// opens sessions: a stop word configured without it is an error about `wake.stop_words` naming what to
    /// install. Its words' models are loaded here, so `hark config check` and `hark run` give one verdict.
    static func stopDetector(_ loaded: LoadedConfiguration, environment: [String: String]) throws -> WakeWordDetector? {
        let configuration = loaded.configuration
        guard !configuration.wake.stopWords.isEmpty else { return nil }
        do {
            let runtime = try WakeRuntime.locate(environment: environment)
            let words = try configuration.wake.stopWords.map { (name) throws(WakeError) in try runtime.word(name) }
            return try WakeWordDetector(
                runtime: runtime,
                words: words,
                threshold: Float(configuration.wake.threshold),
                refractory: configuration.wake.refractory
            )
        } catch {
            throw loaded.error(key: "wake.stop_words", error.description)
        }
    }

    /// The appliance's stop word: its detector on a thread of its own, or nil.
    static func stopBehaviour(_ loaded: LoadedConfiguration, environment: [String: String]) throws
        -> StopWordBehaviour?
    {
        try stopDetector(loaded, environment: environment).map {
            StopWordBehaviour(spotter: WakeWordListener(detector: $0))
        }
    }

    /// What `hark config check` says of each word a detector listens for: its family, model and licence.
    static func describe(_ words: [WakeWord]) -> [String] {
        words.map { word in
            "\(word.name): \(word.family), \(word.path), licence \(word.licence)"
        }
    }

    /// The warning `hark config check` gives for words a product may not ship: openWakeWord's pre-trained models
    /// are for non-commercial use only.
    static func licenceWarning(_ words: [WakeWord], key: String) -> String? {
        let restricted = words.filter { $0.licence.commercialUse == false }
        guard !restricted.isEmpty else { return nil }
        return "\(key): \(restricted.map(\.name).joined(separator: ", ")) "
            + (restricted.count == 1 ? "is an openWakeWord model" : "are openWakeWord models")
            + " licensed CC BY-NC-SA 4.0, for non-commercial use only: a product may not ship "
            + (restricted.count == 1 ? "it" : "them")
            + "; microWakeWord's \(WakeRuntime.builtIns.filter { $0.family == .micro }.map(\.name).joined(separator: ", ")) "
            + "are Apache-2.0, or train your own"
    }
}
