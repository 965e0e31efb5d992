import HarkAppliance
import HarkCore
import HarkIndicators
import HarkTestKit
import Logging
import Synchronization
import Testing

@testable import HarkAppliance

/// The wake word in the mode machine: what opens on it, what it interrupts, follow-ups.
@Suite struct WakeWordMachineTests {
    let jarvis = WakeDetection(word: "hey_jarvis", score: 0.9, endSample: 16_000)

    func machine(_ mode: InteractionMode, followUps: Bool = true) -> ApplianceMachine {
        ApplianceMachine(
            settings: .init(mode: mode, greeting: "greet", wakeWord: true, followUps: followUps),
            now: .zero
        )
    }

    @Test func speechAloneOpensNothingAndTheWakeWordOpensWithWhatFollowsIt() {
        var machine = machine(.alwaysListening)
        #expect(machine.handle(.voiceStarted, now: .seconds(1)).isEmpty)
        #expect(!machine.sessionOpen)
        let open = machine.handle(.wakeWord(jarvis), now: .seconds(2))
        #expect(
            open == [.openSession(fresh: false), .forwardMicrophone(true, preRoll: true), .earcon(.listeningStart)]
        )
        #expect(machine.microphoneLive)
        // Said again while the microphone is open (a follow-up with the word): nothing to open.
        _ = machine.handle(.session(.link(.connected)), now: .seconds(2))
        #expect(machine.handle(.wakeWord(jarvis), now: .seconds(3)) == [.earcon(.listeningStart)])
    }

    @Test func theWakeWordInterruptsAnAnswerAsTheButtonDoes() {
        var machine = machine(.alwaysListening)
        _ = machine.handle(.wakeWord(jarvis), now: .seconds(1))
        _ = machine.handle(.session(.link(.connected)), now: .seconds(1))
        _ = machine.handle(.session(.conversation(.speaking)), now: .seconds(2))
        _ = machine.handle(.session(.audio(AudioChunk(samples: [1], sampleRate: 24_000))), now: .seconds(2))
        #expect(machine.playing)
        let barge = machine.handle(.wakeWord(jarvis), now: .seconds(3))
        #expect(barge == [.interruptPlayback, .send(.interrupt), .earcon(.listeningStart)])
        #expect(!machine.playing)
    }

    @Test func withoutFollowUpsTheMicrophoneClosesAfterEachAnswerUntilTheNextWakeWord() {
        var machine = machine(.alwaysListening, followUps: false)
        _ = machine.handle(.wakeWord(jarvis), now: .seconds(1))
        _ = machine.handle(.session(.link(.connected)), now: .seconds(1))
        _ = machine.handle(.session(.audio(AudioChunk(samples: [1], sampleRate: 24_000))), now: .seconds(2))
        #expect(machine.handle(.session(.turnComplete), now: .seconds(3)) == [.awaitPlaybackDrain])
        let heard = machine.handle(.playbackDrained, now: .seconds(4))
        #expect(heard == [.forwardMicrophone(false, preRoll: false), .send(.audioStreamEnd)])
        #expect(!machine.microphoneLive)
        #expect(machine.sessionOpen)  // open until the idle timeout: the next question resumes at once
        #expect(machine.handle(.voiceStarted, now: .seconds(5)).isEmpty)
        let again = machine.handle(.wakeWord(jarvis), now: .seconds(6))
        #expect(again == [.forwardMicrophone(true, preRoll: true), .earcon(.listeningStart)])
    }

    @Test func withFollowUpsTheMicrophoneStaysOpenAfterTheAnswer() {
        var machine = machine(.alwaysListening)
        _ = machine.handle(.wakeWord(jarvis), now: .seconds(1))
        _ = machine.handle(.session(.audio(AudioChunk(samples: [1], sampleRate: 24_000))), now: .seconds(2))
        _ = machine.handle(.session(.turnComplete), now: .seconds(3))
        #expect(machine.handle(.playbackDrained, now: .seconds(4)).isEmpty)
        #expect(machine.microphoneLive)
    }

    @Test func mutedIgnoresTheWakeWordAndPushToTalkNeverListens() {
        var speaker = machine(.alwaysListening)
        _ = speaker.handle(.setMuted(true), now: .zero)
        #expect(speaker.handle(.wakeWord(jarvis), now: .seconds(1)).isEmpty)
        var button = machine(.pushToTalk)
        #expect(button.handle(.wakeWord(jarvis), now: .seconds(1)).isEmpty)
    }

    @Test func aKioskVisitStartsOnTheWakeWordWithTheGreeting() {
        var machine = machine(.kiosk)
        #expect(machine.handle(.voiceStarted, now: .seconds(1)).isEmpty)
        let visit = machine.handle(.wakeWord(jarvis), now: .seconds(2))
        #expect(visit == [.openSession(fresh: true), .send(.text("greet")), .earcon(.listeningStart)])
    }
}

/// The audio kept for after a wake word, where the word ended, and false starts.
@Suite struct WakeGateTests {
    /// `count` frames of 320 samples, frame `i` holding the value `loud` but `quiet` frames silent.
    func frames(_ count: Int, quiet: Set<Int> = [], loud: Int16 = 3000) -> [[Int16]] {
        (0..<count).map { index in [Int16](repeating: quiet.contains(index) ? 0 : loud + Int16(index), count: 320) }
    }

    @Test func theRecentAudioIsCutAtAnySampleAndKeepsOnlyItsLimit() {
        var recent = RecentAudio(limit: 3200)
        for (index, frame) in frames(20).enumerated() { recent.append(frame, at: index * 320) }
        #expect(recent.end == 6400)
        #expect(recent.start! >= 6400 - 3200 - 320 && recent.start! <= 6400 - 3200)
        let cut = recent.audio(from: 6000).map(\.samples)
        #expect(cut.joined().count == 400)
        #expect(cut.first?.count == 80)  // the last 80 samples of frame 18
        #expect(Int(cut.first?.first ?? 0) == 3018)
        #expect(recent.audio(from: 0).flatMap(\.samples).count == 6400 - recent.start!)
    }

    @Test func theWordEndsAtThePauseBeforeTheDetectionOrThreeHundredMillisecondsBefore() {
        var recent = RecentAudio(limit: 48_000)
        for (index, frame) in frames(40, quiet: [22]).enumerated() { recent.append(frame, at: index * 320) }
        // Detection at 9600: the quiet frame 22 (7040..<7360) lies in 3200..<8000; its first 10 ms block wins.
        #expect(recent.wordEnd(detectionEnd: 9600) == 7040 + 80)
        var steady = RecentAudio(limit: 48_000)
        for index in 0..<40 { steady.append([Int16](repeating: 3000, count: 320), at: index * 320) }
        #expect(steady.wordEnd(detectionEnd: 9600) == 9600 - 4800)
        // Too little kept: never before what is there.
        var short = RecentAudio(limit: 48_000)
        short.append([Int16](repeating: 3000, count: 320), at: 9000)
        #expect(short.wordEnd(detectionEnd: 9600) == 9000)
    }

    /// With the detector's estimate (a little before the word's score began to climb), the word ends there, or in
    /// a pause of 80 ms or more between there and the detection; an estimate too long before the detection, or
    /// none, leaves the pause search of 400 to 100 ms before it.
    @Test func theWordEndsJustBeforeTheScoreRoseOrInAPauseAfterThat() {
        func speech(quiet: Set<Int>) -> RecentAudio {
            var recent = RecentAudio(limit: 48_000)
            for (index, frame) in frames(60, quiet: quiet).enumerated() { recent.append(frame, at: index * 320) }
            return recent
        }
        // One breath: the estimate.
        #expect(speech(quiet: []).wordEnd(detectionEnd: 16_000, hint: 8_000) == 8_000)
        // A 20 ms dip (frame 35, 11200..<11520) is a sound, not a pause: the same.
        #expect(speech(quiet: [35]).wordEnd(detectionEnd: 16_000, hint: 8_000) == 8_000)
        // A 100 ms pause (frames 35 to 39, 11200..<12800) after the estimate: its middle.
        #expect(speech(quiet: Set(35...39)).wordEnd(detectionEnd: 16_000, hint: 8_000) == 12_000)
        // A pause before the estimate is the word's own: not looked at.
        #expect(speech(quiet: Set(10...14)).wordEnd(detectionEnd: 16_000, hint: 8_000) == 8_000)
        // An estimate 1.3 s before the detection says nothing: the old search (frame 40 is quiet, 12800..<13120,
        // in 9600..<14400), as without one.
        let old = speech(quiet: [40])
        #expect(old.wordEnd(detectionEnd: 16_000, hint: 16_000 - 20_800) == 12_800 + 80)
        #expect(old.wordEnd(detectionEnd: 16_000) == 12_800 + 80)
        // Never before what is kept.
        var short = RecentAudio(limit: 48_000)
        short.append([Int16](repeating: 3000, count: 320), at: 9_000)
        #expect(short.wordEnd(detectionEnd: 9_600, hint: 7_800) == 9_000)
    }

    @Test func aWakeWordFollowedBySilenceIsAFalseStartAndOneFollowedBySpeechIsNot() {
        var judge = FalseStartJudge()
        let first = judge.detected(at: 1000, window: 16_000)
        #expect(!first)
        var ended = false
        for start in stride(from: 1000, to: 17_000, by: 320) where !ended {
            ended = judge.frame(start: start, count: 320, loud: start < 3000)  // 2000 samples: under 300 ms
        }
        #expect(ended)
        #expect(judge.falseStarts == 1)
        let second = judge.detected(at: 20_000, window: 16_000)
        #expect(!second)
        var endedAsFalse = false
        for start in stride(from: 20_000, to: 36_000, by: 320) {
            endedAsFalse = endedAsFalse || judge.frame(start: start, count: 320, loud: start < 26_000)
        }
        #expect(!endedAsFalse)
        #expect(judge.falseStarts == 1)
        // A second detection before the first's window ended judges the first at once.
        _ = judge.detected(at: 40_000, window: 16_000)
        let judgedEarly = judge.detected(at: 41_000, window: 16_000)
        #expect(judgedEarly)
        #expect(judge.falseStarts == 2)
    }

    /// The detector runs on its own thread: its detection may come after the speech that followed the word was
    /// heard. That speech counts.
    @Test func speechHeardBeforeALateDetectionCountsForIt() {
        var judge = FalseStartJudge()
        for start in stride(from: 0, to: 16_000, by: 320) {
            _ = judge.frame(start: start, count: 320, loud: start >= 8_000)  // the question, from 0.5 s
        }
        _ = judge.detected(at: 8_000, window: 16_000)  // arrives half a second late
        var endedAsFalse = false
        for start in stride(from: 16_000, to: 26_000, by: 320) {
            endedAsFalse = endedAsFalse || judge.frame(start: start, count: 320, loud: false)
        }
        #expect(!endedAsFalse)
        #expect(judge.falseStarts == 0)
    }
}

/// The supervisor with a scripted wake-word detector: what is sent after a detection, and what is not.
@Suite struct WakeWordSupervisorTests {
    /// The supervisor's test rig with a scripted wake-word detector and its log kept.
    final class Rig: Sendable {
        let spotter: ScriptedWakeSpotter
        let logs: LogCapture
        let base: SupervisorTests.Rig
        var sessions: OpenedSessions { base.sessions }

        init(sendWakeWord: Bool = false) {
            let spotter = ScriptedWakeSpotter()
            let logs = LogCapture()
            self.spotter = spotter
            self.logs = logs
            base = SupervisorTests.Rig(
                settings: ApplianceMachine.Settings(mode: .alwaysListening, earcons: [], wakeWord: true),
                wake: WakeBehaviour(spotter: spotter, sendWakeWord: sendWakeWord, falseStartWindow: .seconds(2)),
                logger: logs.logger("hark")
            )
        }

        /// Pushes `frames` and waits until the detector was fed all of them.
        func push(_ frames: [[Int16]]) async throws {
            let target = spotter.samplesFed + frames.reduce(0) { $0 + $1.count }
            for frame in frames { base.microphone.push(frame) }
            try await withDeadline(.seconds(10), "the frames to reach the detector") {
                while self.spotter.samplesFed < target { await Task.yield() }
            }
        }

        /// The audio the one session was sent, in order.
        func sentAudio() -> [Int16] {
            guard let session = sessions.list.withLock({ $0.first }) else { return [] }
            return session.sent.flatMap { input -> [Int16] in
                if case .audio(let chunk) = input { return chunk.samples }
                return []
            }
        }

        func stop() async throws { try await base.stop() }
    }

    /// 50 frames: loud speech with one silent frame (22) between the wake word and the question.
    let speech: [[Int16]] = (0..<50).map { index in
        [Int16](repeating: index == 22 ? 0 : 3000 + Int16(index), count: 320)
    }

    @Test func theAudioAfterTheWakeWordGoesFirstThenLiveAudioWithNothingTwiceOrMissing() async throws {
        let rig = Rig()
        try await rig.push(Array(speech[0..<40]))
        let none = rig.sessions.list.withLock { $0.isEmpty }
        #expect(none)  // speech alone opened nothing
        #expect(rig.spotter.frameStarts == (0..<40).map { $0 * 320 })
        rig.spotter.fire(WakeDetection(word: "hey_jarvis", score: 0.9, endSample: 9600))
        try await withDeadline(.seconds(10), "the session to open") {
            while rig.sessions.list.withLock({ $0.isEmpty }) { await Task.yield() }
        }
        try await rig.push(Array(speech[40...]))
        let all = Array(speech.joined())
        let expected = Array(all[7120...])
        try await withDeadline(.seconds(10), "the audio to be sent") {
            while rig.sentAudio().count < expected.count { await Task.yield() }
        }
        #expect(rig.sentAudio() == expected)
        let opened = rig.sessions.list.withLock { $0.count }
        #expect(opened == 1)
        #expect(rig.logs.all.contains { $0.contains("wake word hey_jarvis (0.9)") })
        try await rig.stop()
    }

    @Test func askedToTheWakeWordIsSentTooAndNothingSaidAfterItIsAFalseStart() async throws {
        let rig = Rig(sendWakeWord: true)
        try await rig.push(Array(speech[0..<40]))
        rig.spotter.fire(WakeDetection(word: "hey_jarvis", score: 0.9, endSample: 9600))
        try await withDeadline(.seconds(10), "the session to open") {
            while rig.sessions.list.withLock({ $0.isEmpty }) { await Task.yield() }
        }
        // 1.5 s before the detection's end, clamped to the start: everything so far (sent just after the session
        // opens, in the same turn of the loop: awaited, not assumed).
        try await withDeadline(.seconds(10), "the pre-roll to be sent") {
            while rig.sentAudio().count < 12_800 { await Task.yield() }
        }
        #expect(Array(rig.sentAudio().prefix(12_800)) == Array(speech[0..<40].joined()))
        // Then silence past the two-second window: a false start.
        try await rig.push([[Int16]](repeating: [Int16](repeating: 0, count: 320), count: 120))
        try await withDeadline(.seconds(10), "the false start") {
            while !rig.logs.all.contains(where: { $0.contains("a false start") }) { await Task.yield() }
        }
        try await rig.stop()
    }
}
