import HarkCore
import HarkTestKit
import Synchronization
import Testing

@testable import HarkAppliance

/// What ducks the media lane on the supervisor's side: the wake word until its conversation is over, the user's
/// speech while it lasts; as a value, and told to the speaker by a running supervisor.
@Suite struct MediaDuckingTests {
    @Test func theWakeWordDucksUntilItsConversationIsOverAndSpeechWhileItLasts() {
        var ducking = MediaDucking()
        #expect(ducking.update(wakeShown: false, userSpeaking: false, buttonHeld: false, conversation: .idle).isEmpty)
        ducking.wakeWordHeard()
        let heard = ducking.update(wakeShown: true, userSpeaking: false, buttonHeld: false, conversation: .idle)
        #expect(heard.map(\.0) == [.wakeWord] && heard.map(\.1) == [true])
        // The animation ends before the conversation starts: still ducked (the question is coming).
        #expect(ducking.update(wakeShown: false, userSpeaking: false, buttonHeld: false, conversation: .idle).isEmpty)
        let speaking = ducking.update(wakeShown: false, userSpeaking: true, buttonHeld: false, conversation: .listening)
        #expect(speaking.map(\.0) == [.userSpeech] && speaking.map(\.1) == [true])
        let ended = ducking.update(wakeShown: false, userSpeaking: false, buttonHeld: false, conversation: .thinking)
        #expect(ended.map(\.0) == [.userSpeech] && ended.map(\.1) == [false])
        #expect(ducking.held == [.wakeWord])
        #expect(
            ducking.update(wakeShown: false, userSpeaking: false, buttonHeld: false, conversation: .speaking).isEmpty
        )
        // Idle again: the conversation is over and the media comes back.
        let over = ducking.update(wakeShown: false, userSpeaking: false, buttonHeld: false, conversation: .idle)
        #expect(over.map(\.0) == [.wakeWord] && over.map(\.1) == [false])
        // The push-to-talk button held is the user speaking.
        let held = ducking.update(wakeShown: false, userSpeaking: false, buttonHeld: true, conversation: .idle)
        #expect(held.map(\.0) == [.userSpeech] && held.map(\.1) == [true])
        #expect(ducking.held == [.userSpeech])
    }

    @Test func aRunningSupervisorDucksForTheWakeWordAndTheUsersSpeech() async throws {
        let spotter = ScriptedWakeSpotter(words: ["hey_jarvis"])
        let rig = TimerSupervisorTests.Rig(wake: WakeBehaviour(spotter: spotter))
        try await rig.pass(1)
        #expect(rig.speaker.ducks.isEmpty)
        #expect(spotter.fire(WakeDetection(word: "hey_jarvis", score: 0.9, endSample: 0)))
        try await rig.until("the wake word's duck") { rig.speaker.ducking == [.wakeWord] }
        for _ in 0..<30 { rig.microphone.push([Int16](repeating: 6000, count: 320)) }
        try await rig.until("the user's speech") { rig.speaker.ducking == [.wakeWord, .userSpeech] }
        rig.microphone.pushSilence(frames: 150)
        try await rig.until("the speech's end") { rig.speaker.ducking == [.wakeWord] }
        let session = try #require(rig.sessions.list.withLock { $0.first })
        session.emit(.conversation(.thinking))
        session.emit(.conversation(.idle))
        for _ in 0..<5 { try await rig.pass(0) }  // the wake animation's second (a tick is 250 ms)
        try await rig.until("the conversation's end") { rig.speaker.ducking.isEmpty }
        try await rig.stop()
    }
}
