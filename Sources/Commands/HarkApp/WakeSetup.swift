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
                throw ApplianceSetupError(description: "session.trigger is wake, but \(error.description)")
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
                throw ApplianceSetupError(description: "the wake word cannot run: \(error.description)")
            }
        }
    }

    /// Checks that every configured word's model is there; returns them.
    static func words(_ configuration: ApplianceConfiguration, runtime: WakeRuntime) throws -> [WakeWord] {
        do {
            return try configuration.wake.words.map { (name) throws(WakeError) in try runtime.word(name) }
        } catch {
            throw ApplianceSetupError(description: "wake.words: \(error.description)")
        }
    }

    /// The appliance's wake-word behaviour: the models loaded into a detector on a thread of its own.
    static func behaviour(_ configuration: ApplianceConfiguration, runtime: WakeRuntime) throws -> WakeBehaviour {
        let words = try words(configuration, runtime: runtime)
        let detector: WakeWordDetector
        do {
            detector = try WakeWordDetector(
                runtime: runtime,
                words: words,
                threshold: Float(configuration.wake.threshold),
                refractory: configuration.wake.refractory,
                quietLevel: configuration.wake.quietLevel
            )
        } catch {
            throw ApplianceSetupError(description: "the wake-word detector cannot start: \(error.description)")
        }
        return WakeBehaviour(
            spotter: WakeWordListener(detector: detector),
            sendWakeWord: configuration.wake.sendWakeWord
        )
    }
}
