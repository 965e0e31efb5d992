import HarkCore
import Logging

/// The supervisor's listening words: the wake word that opens a session, the stop word that stops what plays. The
/// decisions are the gates' (``WakeGate``, ``StopWordGate``); here they are started, heard and watched.
extension Supervisor {
    func startWakeWord() {
        guard let wake = behaviour.wake else { return }
        let inputs = self.inputs
        do {
            try wake.spotter.start { detection in inputs.post(.event(.wakeWord(detection))) }
            logger.info("listening for the wake word \(wake.spotter.words.joined(separator: ", "))")
        } catch {
            // Never a fallback to opening on any speech: a device set up to wait for its name stays quiet.
            logger.error("the wake-word detector cannot run: \(error); no session opens by voice")
            lastError = "the wake-word detector cannot run"
        }
    }

    /// A detection: the audio after the wake word (or, when asked, the word too) goes first, then live audio.
    func wakeWordHeard(_ detection: WakeDetection) {
        guard var gate = wake else { return }
        // What rings is stopped by the wake word, and that is all it does.
        if stopRinging("the wake word") { return }
        let word = RemoteText.printable(detection.word, limit: SessionLog.nameLimit)
        let score = Double((detection.score * 100).rounded()) / 100
        let start = gate.detected(detection, muted: machine.muted, now: now())
        wake = gate
        guard case .question(let preRoll, let earlierFalseStart) = start else {
            logger.debug("wake word \(word) (\(score)) while muted: ignored")
            return
        }
        logger.info("wake word \(word) (\(score))")
        mediaDucking.wakeWordHeard()
        if earlierFalseStart { logger.info("the wake word before it was a false start") }
        apply(machine.handle(.wakeWord(detection), now: now()), preRoll: preRoll)
    }

    /// The detector's health, on every tick: a failure is said once.
    func checkWakeWord() {
        guard var gate = wake, let spotter = behaviour.wake?.spotter else { return }
        let failure = gate.failureToSay(spotter.counters.lastError)
        wake = gate
        guard let failure else { return }
        logger.error("the wake-word detector failed: \(RemoteText.printable(failure)); no session opens by voice")
        lastError = "the wake-word detector failed"
    }

    func startStopWord() {
        guard let spotter = behaviour.stopWord?.spotter else { return }
        let inputs = self.inputs
        do {
            try spotter.start { detection in inputs.post(.event(.stopWord(detection))) }
            logger.info("the stop word \(spotter.words.joined(separator: ", ")) stops an answer while it plays")
        } catch {
            logger.error("the stop-word detector cannot run: \(error); answers stop by the button or the wake word")
            lastError = "the stop-word detector cannot run"
        }
    }

    /// A stop word: stops the answer that plays (never opens a session); nothing when nothing plays any more.
    func stopWordHeard(_ detection: WakeDetection) {
        let word = RemoteText.printable(detection.word, limit: SessionLog.nameLimit)
        let score = Double((detection.score * 100).rounded()) / 100
        guard case .stop(let activity) = stopWord.verdict(detection) else {
            logger.debug("stop word \(word) (\(score)) with nothing to stop: ignored")
            return
        }
        if activity.contains(.ringing) { stopRinging("the stop word \(word) (\(score))") }
        guard activity.contains(.agentSpeaking) else { return }
        logger.info("stop word \(word) (\(score)): stopping the answer")
        if activity.contains(.agentSpeaking) { apply(machine.handle(.stopWord(detection), now: now())) }
    }

    /// The stop-word detector's health, on every tick: a failure is said once.
    func checkStopWord() {
        guard let spotter = behaviour.stopWord?.spotter else { return }
        guard let failure = stopWord.failureToSay(spotter.counters.lastError) else { return }
        logger.error("the stop-word detector failed: \(RemoteText.printable(failure)); answers stop by the button")
        lastError = "the stop-word detector failed"
    }
}
