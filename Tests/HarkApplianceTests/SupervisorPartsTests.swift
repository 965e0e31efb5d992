import Foundation
import HarkCore
import HarkIndicators
import HarkTestKit
import Logging
import Synchronization
import Testing

@testable import HarkAppliance

/// The wake word as the supervisor runs it, as a value: frames numbered for the detector, what a detection starts
/// (the pre-roll as data, with its capture times), the wake animation, false starts, the detector's health.
@Suite struct WakeGateValueTests {
    /// Frame `index` of a recording: 320 samples of `3000 + index` (silent frames 0), captured at `1000 + index`.
    func frame(_ index: Int, silent: Bool = false) -> AudioChunk {
        AudioChunk(
            samples: [Int16](repeating: silent ? 0 : 3000 + Int16(index), count: 320),
            sampleRate: 16_000,
            capturedAt: 1000 + UInt64(index)
        )
    }

    @Test func framesAreNumberedForTheDetectorOneAfterAnother() {
        var gate = WakeGate()
        let starts = (0..<5).map { gate.frame(frame($0), loud: nil).start }
        #expect(starts == [0, 320, 640, 960, 1280])
        #expect(gate.samplesHeard == 1600)
    }

    @Test func aDetectionStartsTheQuestionAfterTheWordWithEachFrameItsCaptureTime() {
        var gate = WakeGate()
        for index in 0..<40 { _ = gate.frame(frame(index), loud: true) }
        // The detector put the word's end at 8000 (frame 25's first sample).
        let start = gate.detected(
            WakeDetection(word: "hey_jarvis", score: 0.9, endSample: 9600, wordEndSample: 8000),
            muted: false,
            now: .seconds(3)
        )
        guard case .question(let preRoll, let earlierFalseStart) = start else {
            Issue.record("expected a question, got \(start)")
            return
        }
        #expect(!earlierFalseStart)
        #expect(preRoll.flatMap(\.samples).count == 12_800 - 8000)
        #expect(preRoll.first?.samples.first == 3025)
        #expect(preRoll.map(\.capturedAt) == (25..<40).map { 1000 + UInt64($0) })
        #expect(preRoll.allSatisfy { $0.sampleRate == AudioFormat.microphone.sampleRate })
    }

    @Test func askedToItSendsTheWordTooFromASecondAndAHalfBeforeTheDetection() {
        var gate = WakeGate(sendWakeWord: true)
        for index in 0..<100 { _ = gate.frame(frame(index), loud: true) }
        let start = gate.detected(
            WakeDetection(word: "hey_jarvis", score: 0.9, endSample: 32_000, wordEndSample: 30_000),
            muted: false,
            now: .zero
        )
        guard case .question(let preRoll, _) = start else {
            Issue.record("expected a question, got \(start)")
            return
        }
        #expect(preRoll.flatMap(\.samples).count == 32_000 - (32_000 - 24_000))
        #expect(preRoll.first?.capturedAt == UInt64(1025))  // sample 8000: frame 25
    }

    @Test func whileMutedADetectionStartsNothingAndShowsNothing() {
        var gate = WakeGate()
        for index in 0..<10 { _ = gate.frame(frame(index), loud: true) }
        let start = gate.detected(WakeDetection(word: "w", score: 1, endSample: 3200), muted: true, now: .zero)
        #expect(start == .ignored)
        let shownWhileMuted = gate.isShown(now: .zero)
        #expect(!shownWhileMuted)
    }

    @Test func theWakeAnimationShowsForOneSecondAfterADetection() {
        var gate = WakeGate()
        _ = gate.detected(WakeDetection(word: "w", score: 1, endSample: 0), muted: false, now: .seconds(10))
        let shownAtOnce = gate.isShown(now: .seconds(10))
        #expect(shownAtOnce)
        let shownJustBefore = gate.isShown(now: .milliseconds(10_999))
        #expect(shownJustBefore)
        let shownAfter = gate.isShown(now: .seconds(11))
        #expect(!shownAfter)
    }

    @Test func aWordFollowedBySilenceIsAFalseStartNamedByTheFrameThatEndsItsWindow() {
        var gate = WakeGate(falseStartWindow: .seconds(1))
        for index in 0..<10 { _ = gate.frame(frame(index), loud: true) }
        _ = gate.detected(WakeDetection(word: "hey_jarvis", score: 1, endSample: 3200), muted: false, now: .zero)
        var named: [String] = []
        for index in 10..<70 {
            if let word = gate.frame(frame(index, silent: true), loud: false).falseStart { named.append(word) }
        }
        #expect(named == ["hey_jarvis"])
        #expect(gate.falseStarts == 1)
        // Without a voice detector's verdict nothing is judged.
        var unjudged = WakeGate(falseStartWindow: .seconds(1))
        _ = unjudged.detected(WakeDetection(word: "w", score: 1, endSample: 0), muted: false, now: .zero)
        for index in 0..<70 { _ = unjudged.frame(frame(index, silent: true), loud: nil) }
        #expect(unjudged.falseStarts == 0)
    }

    @Test func theDetectorsFailureIsToBeSaidOnce() {
        var gate = WakeGate()
        #expect(gate.failureToSay(nil) == nil)
        #expect(gate.failureToSay("model gone") == "model gone")
        #expect(gate.failureToSay("model gone") == nil)
    }

    @Test func theDetectorIsCaughtUpWithinHalfASecondAndItsStatusIsInSeconds() {
        var gate = WakeGate()
        for index in 0..<100 { _ = gate.frame(frame(index), loud: nil) }  // 32 000 samples fed
        #expect(gate.caughtUp(WakeCounters(samplesHeard: 24_001)))
        #expect(!gate.caughtUp(WakeCounters(samplesHeard: 24_000)))
        #expect(gate.caughtUp(WakeCounters(samplesHeard: 20_000, droppedSamples: 4_001)))
        let status = gate.status(
            words: ["hey_jarvis"],
            counters: WakeCounters(
                detections: 2,
                samplesHeard: 32_000,
                droppedSamples: 8_000,
                cpuNanoseconds: 1_500_000_000
            )
        )
        #expect(
            status
                == WakeStatus(
                    words: ["hey_jarvis"],
                    detections: 2,
                    falseStarts: 0,
                    cpuSeconds: 1.5,
                    audioSeconds: 2,
                    droppedSeconds: 0.5
                )
        )
    }
}

/// The session slot as a value: generations, runs still ending, totals folded from closed sessions.
@Suite struct SessionSlotTests {
    func session(readies: Int = 1, dropped: Int = 0, resent: Int = 0) -> ScriptedSession {
        let session = ScriptedSession()
        var statistics = SessionStatistics()
        statistics.readies = readies
        statistics.droppedInputSamples = dropped
        statistics.audioSamplesResent = resent
        session.statistics = statistics
        return session
    }

    @Test func aClosedSessionsEventsAreOldAndItsRunIsStillAwaited() {
        var slot = SessionSlot()
        let first = slot.open(session())
        #expect(slot.isCurrent(first))
        #expect(slot.running == [first])
        slot.close()
        #expect(!slot.isCurrent(first))  // its late events are ignored
        #expect(slot.session == nil)
        #expect(slot.running == [first])  // left to end politely
        let second = slot.open(session())
        #expect(second != first && slot.isCurrent(second))
        // The closed one's run returns: nothing for the mode machine, and the open one stays.
        let closedOneWasOpen = slot.runEnded(first)
        #expect(!closedOneWasOpen)
        #expect(slot.isCurrent(second))
        #expect(slot.running == [second])
        // The open one's run returns: it is closed, and the mode machine hears of it.
        let openOneWasOpen = slot.runEnded(second)
        #expect(openOneWasOpen)
        #expect(slot.session == nil && slot.running.isEmpty)
        #expect(slot.opened == 2)
    }

    @Test func countersOfClosedSessionsAreKeptInTheTotals() {
        var slot = SessionSlot()
        _ = slot.open(session(readies: 3, dropped: 100, resent: 10))
        slot.close()
        let open = slot.open(session(readies: 2, dropped: 5, resent: 1))
        #expect(slot.reconnects == 2 + 1)
        #expect(slot.droppedInputSamples == 105)
        #expect(slot.resentSamples == 11)
        let endedTheOpenOne = slot.runEnded(open)
        #expect(endedTheOpenOne)
        #expect(slot.reconnects == 3 && slot.droppedInputSamples == 105 && slot.resentSamples == 11)
        // Closing twice folds nothing twice.
        slot.close()
        #expect(slot.reconnects == 3)
    }
}

/// What is shown, as a value: the LEDs on every frame, the status line and file only on changes and ticks.
@Suite struct StatusPublisherTests {
    final class RecordingIndicator: Indicator {
        let updates = Mutex<[IndicatorInput]>([])
        func update(_ input: IndicatorInput) { updates.withLock { $0.append(input) } }
        var framesRendered: Int { 0 }
        var isResting: Bool { true }
    }

    final class Shown: Sendable {
        let states = Mutex<[ShownState]>([])
    }

    struct Rig {
        let indicator = RecordingIndicator()
        let notifier = RecordingNotifier()
        let logs = LogCapture()
        let shown = Shown()
        let file = FileManager.default.temporaryDirectory.appending(path: "hark-publisher-\(UUID().uuidString).json")
        var publisher: StatusPublisher

        init(statusFile: String? = nil) {
            let shown = self.shown
            publisher = StatusPublisher(
                indicator: indicator,
                notifier: notifier,
                statusFile: statusFile ?? file.path,
                logger: logs.logger("hark"),
                status: ApplianceStatus(),
                onShown: { state in shown.states.withLock { $0.append(state) } }
            )
        }
    }

    let listening = IndicatorInput(conversation: .listening, microphoneLive: true, level: 0.3)

    @Test func aFrameUpdatesTheLEDsOnlyNeitherTheLineNorTheFile() throws {
        var rig = Rig()
        defer { try? FileManager.default.removeItem(at: rig.file) }
        var writes = 0
        rig.publisher.publish(listening, line: "listening", now: .zero, force: true) { _ in writes += 1 }
        #expect(writes == 1)
        for level in [0.1, 0.5, 0.9] {
            var frame = listening
            frame.level = level
            #expect(!rig.publisher.changes(frame))
            rig.publisher.show(frame)
        }
        #expect(rig.indicator.updates.withLock { $0.map(\.level) } == [0.3, 0.1, 0.5, 0.9])
        #expect(rig.notifier.statusLines == ["listening"])
        #expect(writes == 1)
        #expect(rig.shown.states.withLock { $0 } == [.conversation(.listening)])
        // A frame that changes what is shown is a change: the line and the file are due.
        #expect(rig.publisher.changes(IndicatorInput(conversation: .speaking)))
    }

    @Test func theFileIsWrittenOnAChangeWhenForcedAndEveryFiveSecondsNotOnEachCall() throws {
        var rig = Rig()
        defer { try? FileManager.default.removeItem(at: rig.file) }
        var writes: [Duration] = []
        func publish(_ input: IndicatorInput, _ line: String, at seconds: Double, force: Bool = false) {
            let now = Duration.milliseconds(Int64(seconds * 1000))
            rig.publisher.publish(input, line: line, now: now, force: force) { _ in writes.append(now) }
        }
        publish(listening, "listening", at: 0)
        publish(listening, "listening", at: 1)
        publish(listening, "listening", at: 4.9)
        #expect(writes == [.zero])
        publish(listening, "listening", at: 5)
        #expect(writes == [.zero, .seconds(5)])
        publish(IndicatorInput(conversation: .thinking), "thinking", at: 5.5)
        #expect(writes.count == 3)
        publish(IndicatorInput(conversation: .thinking), "thinking", at: 6, force: true)
        #expect(writes.count == 4)
        #expect(rig.notifier.statusLines == ["listening", "thinking"])  // each line once
        #expect(rig.logs.all.filter { $0.contains("state: ") }.count == 2)
        let written = try ApplianceStatus.read(from: rig.file.path)
        #expect(written.state == "thinking" && written.line == "thinking")
        rig.publisher.stopped { _ in }
        #expect(try ApplianceStatus.read(from: rig.file.path).state == "stopped")
    }

    @Test func aFileThatCannotBeWrittenIsSaidOnceUntilItWorksAgain() throws {
        let directory = FileManager.default.temporaryDirectory.appending(path: "hark-publisher-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        var rig = Rig(statusFile: directory.appending(path: "status.json").path)
        for second in 0..<3 {
            rig.publisher.publish(listening, line: "listening", now: .seconds(second), force: true) { _ in }
        }
        #expect(rig.logs.all.filter { $0.contains("hark status will not show this daemon") }.count == 1)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        rig.publisher.publish(listening, line: "listening", now: .seconds(3), force: true) { _ in }
        #expect(rig.logs.all.contains { $0.contains("is written again") })
    }
}

/// What the supervisor says of a session's events, as a value.
@Suite struct SessionLogTests {
    @Test func linkFailuresAreMadePrintableAndKeptAsTheLastError() {
        let event = SessionLog.printable(.link(.offline(reason: "down\n", retryIn: .seconds(1))))
        #expect(event == .link(.offline(reason: "down\\n", retryIn: .seconds(1))))
        #expect(SessionLog.said(event, transcripts: false) == .init(lines: [], lastError: "down\\n"))
        let refused = SessionLog.said(
            .link(.rejected(SessionFailure(.untrusted, "self-signed"), retryIn: .seconds(300))),
            transcripts: false
        )
        #expect(refused.lines == [.init(.error, "not connecting to a server that cannot be verified: self-signed")])
        #expect(refused.lastError == "self-signed")
    }

    @Test func transcriptsWordsAreLoggedOnlyWhenAskedAndInterimOnesNever() {
        let final = SessionEvent.transcript(Transcript(role: .user, segment: "1", text: "hello", isFinal: true))
        #expect(SessionLog.said(final, transcripts: true).lines == [.init(.info, "user: hello")])
        #expect(SessionLog.said(final, transcripts: false).lines == [.init(.debug, "user spoke (5 characters)")])
        let interim = SessionEvent.transcript(Transcript(role: .user, segment: "1", text: "hel", isFinal: false))
        #expect(SessionLog.said(interim, transcripts: true).lines.isEmpty)
    }
}
