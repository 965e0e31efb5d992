import HarkAppliance
import HarkCore
import HarkTestKit
import Synchronization
import Testing

/// The stop word as a value: it listens only while something it can stop is going on, and a detection stops that
/// or nothing.
@Suite struct StopWordGateTests {
    let stop = WakeDetection(word: "stop", score: 0.9, endSample: 16_000)

    @Test func itListensOnlyWhileSomethingCanBeStoppedAndCountsEverySample() {
        var gate = StopWordGate()
        #expect(!gate.isListening)
        // Frames while nothing can be stopped are counted but not heard.
        #expect(gate.heard(320, while: []) == nil)
        #expect(gate.heard(320, while: .agentSpeaking) == 320)
        #expect(gate.isListening)
        #expect(gate.heard(320, while: []) == nil)
        #expect(!gate.isListening)
        // What rings is a condition of its own: the stop word listens for it too.
        #expect(gate.heard(320, while: .ringing) == 960)
        #expect(gate.heard(320, while: [.ringing, .agentSpeaking]) == 1280)
        #expect(gate.samplesHeard == 1600)
    }

    @Test func aFailureIsSaidOnce() {
        var gate = StopWordGate()
        #expect(gate.failureToSay(nil) == nil)
        #expect(gate.failureToSay("model gone") == "model gone")
        #expect(gate.failureToSay("model gone") == nil)
    }

    @Test func aDetectionStopsWhatIsGoingOnOrNothing() {
        var gate = StopWordGate()
        var verdicts = [gate.verdict(stop)]
        _ = gate.heard(320, while: .agentSpeaking)
        verdicts.append(gate.verdict(stop))
        _ = gate.heard(320, while: [.agentSpeaking, .ringing])
        verdicts.append(gate.verdict(stop))
        _ = gate.heard(320, while: [])
        verdicts.append(gate.verdict(stop))
        #expect(verdicts == [.ignore, .stop(.agentSpeaking), .stop([.agentSpeaking, .ringing]), .ignore])
        #expect(gate.stops == 2 && gate.ignored == 2)
    }
}

/// The stop word in the mode machine: it stops an answer as the button's cancel does, and never opens anything.
@Suite struct StopWordMachineTests {
    let stop = WakeDetection(word: "stop", score: 0.9, endSample: 16_000)

    @Test(arguments: [InteractionMode.alwaysListening, .pushToTalk, .kiosk])
    func itStopsTheAnswerAndOpensNothing(mode: InteractionMode) {
        var machine = ApplianceMachine(settings: .init(mode: mode, earcons: [.cancel], wakeWord: true), now: .zero)
        // Nothing plays: nothing happens, and no session opens (with or without a wake word).
        #expect(machine.handle(.stopWord(stop), now: .seconds(1)).isEmpty)
        #expect(!machine.sessionOpen)
        var plain = ApplianceMachine(settings: .init(mode: mode, earcons: []), now: .zero)
        #expect(plain.handle(.stopWord(stop), now: .seconds(1)).isEmpty && !plain.sessionOpen)
        // An answer plays: stopped at once, as the button's cancel stops it.
        if mode == .pushToTalk {
            _ = machine.handle(.button(.talkStart), now: .seconds(2))
        } else {
            _ = machine.handle(
                .wakeWord(WakeDetection(word: "okay_nabu", score: 0.9, endSample: 8000)),
                now: .seconds(2)
            )
        }
        _ = machine.handle(.session(.link(.connected)), now: .seconds(2))
        _ = machine.handle(.session(.audio(AudioChunk(samples: [1], sampleRate: 24_000))), now: .seconds(3))
        #expect(machine.playing)
        var cancelled = machine
        let byButton = cancelled.handle(.button(.cancel), now: .seconds(4))
        let byWord = machine.handle(.stopWord(stop), now: .seconds(4))
        #expect(byWord == byButton && byWord.starts(with: [.interruptPlayback, .send(.interrupt)]), "\(byWord)")
        #expect(byWord.contains(.earcon(.cancel)))
        #expect(!machine.playing && machine.sessionOpen == cancelled.sessionOpen)
        #expect(!byWord.contains { if case .openSession = $0 { true } else { false } })
    }
}

/// The supervisor with a scripted stop-word detector: fed only while the answer plays; a detection then stops the
/// answer, one when nothing plays does nothing and opens nothing.
@Suite struct StopWordSupervisorTests {
    let silence = [Int16](repeating: 0, count: 320)
    let loud = [Int16](repeating: 6000, count: 320)

    @Test func heardWhileTheAnswerPlaysAndIgnoredWhenNothingPlays() async throws {
        let spotter = ScriptedWakeSpotter(words: ["stop"])
        let logs = LogCapture()
        let rig = SupervisorTests.Rig(
            settings: ApplianceMachine.Settings(mode: .alwaysListening, earcons: []),
            stopWord: StopWordBehaviour(spotter: spotter),
            logger: logs.logger("hark")
        )
        try await withDeadline(.seconds(10), "the stop word's detector to start") {
            while !logs.all.contains(where: { $0.contains("the stop word stop stops an answer while it plays") }) {
                await Task.yield()
            }
        }
        // Nothing plays: a detection (as from a television) stops nothing and opens nothing.
        #expect(spotter.fire(WakeDetection(word: "stop", score: 0.9, endSample: 3200)))
        try await withDeadline(.seconds(10), "the detection to be judged") {
            while !logs.all.contains(where: { $0.contains("stop word stop (0.9) with nothing to stop: ignored") }) {
                await Task.yield()
            }
        }
        #expect(rig.sessions.list.withLock { $0.isEmpty })
        // A quiet room, then speech: it opens a session (this appliance opens on any speech), and all the while
        // nothing plays, the stop word's detector hears nothing.
        for _ in 0..<10 { rig.microphone.push(silence) }
        for _ in 0..<30 { rig.microphone.push(loud) }
        try await withDeadline(.seconds(10), "the session to open") {
            while rig.sessions.list.withLock({ $0.isEmpty }) { await Task.yield() }
        }
        #expect(spotter.samplesFed == 0)
        #expect(rig.speaker.interruptCount == 0)
        // The agent answers: the answer plays.
        let session = try #require(rig.sessions.list.withLock { $0.first })
        session.emit(.link(.connected))
        session.emit(.audio(AudioChunk(samples: [Int16](repeating: 100, count: 24_000), sampleRate: 24_000)))
        try await withDeadline(.seconds(10), "the answer to play") {
            while rig.speaker.chunks.isEmpty { await Task.yield() }
        }
        // While it plays the stop word's detector hears the microphone, from the next frame on.
        for _ in 0..<5 { rig.microphone.push(silence) }
        try await withDeadline(.seconds(10), "the stop word's detector to be fed") {
            while spotter.samplesFed < 5 * 320 { await Task.yield() }
        }
        #expect(spotter.fire(WakeDetection(word: "stop", score: 0.93, endSample: 14_000)))
        // The speaker silenced and the session told (one action after the other: awaited together).
        try await withDeadline(.seconds(10), "the answer to stop") {
            while rig.speaker.interruptCount == 0 || !session.sent.contains(.interrupt) { await Task.yield() }
        }
        #expect(logs.all.contains { $0.contains("stop word stop (0.93): stopping the answer") })
        #expect(rig.sessions.list.withLock { $0.count } == 1)  // nothing more opened
        // The answer stopped: the detector hears nothing more (the microphone's frames still reach the session).
        @Sendable func audioSent() -> Int {
            session.sent.reduce(0) { total, input in
                if case .audio(let chunk) = input { return total + chunk.samples.count }
                return total
            }
        }
        let fed = spotter.samplesFed
        let sent = audioSent()
        for _ in 0..<5 { rig.microphone.push(silence) }
        try await withDeadline(.seconds(10), "the frames to reach the session") {
            while audioSent() < sent + 5 * 320 { await Task.yield() }
        }
        #expect(spotter.samplesFed == fed)
        try await rig.stop()
    }
}
