import HarkCore
import HarkTestKit
import Synchronization
import Testing

@testable import HarkApp

/// `hark converse`'s feeder on the scripted devices and a manual clock: what goes to the session, in what order,
/// for how long, and when "sent" is true.
@Suite struct ConverseFeederTests {
    func frame(_ value: Int16) -> [Int16] { [Int16](repeating: value, count: 320) }

    func audio(_ session: ScriptedSession) -> [[Int16]] {
        session.sent.compactMap { input in
            if case .audio(let chunk) = input { return chunk.samples }
            return nil
        }
    }

    @Test func everyFrameGoesInOrderThenTheEndOfTheInput() async throws {
        let microphone = ScriptedMicrophone()
        let session = ScriptedSession()
        for value in 1...3 { microphone.push(frame(Int16(value))) }
        microphone.stop()
        let fed = try await withDeadline(.seconds(10), "the feed") {
            await ConverseFeeder().run(microphone, into: session, clock: ManualClock())
        }
        #expect(fed == 960)
        #expect(audio(session) == [frame(1), frame(2), frame(3)])
        #expect(session.sent.last == .audioStreamEnd)
        #expect(session.sent.count == 4)
    }

    @Test func aGreetingAndManualActivityFrameTheSpeech() async throws {
        let microphone = ScriptedMicrophone()
        let session = ScriptedSession()
        microphone.push(frame(1))
        microphone.stop()
        let feeder = ConverseFeeder(greeting: "hello", manualActivity: true)
        _ = try await withDeadline(.seconds(10), "the feed") {
            await feeder.run(microphone, into: session, clock: ManualClock())
        }
        let kinds = session.sent.map { input -> String in
            if case .audio = input { return "audio" }
            return "\(input)"
        }
        #expect(kinds == ["text(\"hello\")", "activityStart", "audio", "activityEnd"])
    }

    @Test func theMicrophoneIsListenedToForTheListenTimeOnTheClock() async throws {
        let microphone = ScriptedMicrophone()
        let session = ScriptedSession()
        let clock = ManualClock()
        let feeder = ConverseFeeder(listen: .seconds(5))
        let run = Task { await feeder.run(microphone, into: session, clock: clock) }
        microphone.push(frame(1))
        microphone.push(frame(2))
        try await withDeadline(.seconds(10), "two frames sent") {
            while self.audio(session).count < 2 { await Task.yield() }
        }
        clock.advance(by: .seconds(5))
        // The frame it was waiting for goes; then the time is up, and the next one stays unheard.
        microphone.push(frame(3))
        microphone.push(frame(4))
        let fed = try await withDeadline(.seconds(10), "the feed to end") { await run.value }
        #expect(fed == 960)
        #expect(audio(session) == [frame(1), frame(2), frame(3)])
        #expect(session.sent.last == .audioStreamEnd)
    }

    @Test func itReturnsOnlyOnceTheSessionPutEverythingOnTheWire() async throws {
        let microphone = ScriptedMicrophone()
        let session = ScriptedSession()
        let clock = ManualClock()
        // A sender 640 samples behind: what it has taken is not yet on the wire.
        session.statistics.audioSamplesSent = -640
        microphone.push(frame(1))
        microphone.push(frame(2))
        microphone.stop()
        let done = Flag()
        let run = Task {
            let fed = await ConverseFeeder().run(microphone, into: session, clock: clock)
            done.set()
            return fed
        }
        try await withDeadline(.seconds(10), "the feeder to wait for the wire") { await clock.waitForSleepers(1) }
        #expect(!done.isSet)
        session.statistics.audioSamplesSent = 640
        clock.advance(by: .milliseconds(20))
        #expect(try await withDeadline(.seconds(10), "the feed to end") { await run.value } == 640)
    }
}

/// The file microphone: a recording said in frames, paced on the clock or as fast as taken.
@Suite struct FileMicrophoneTests {
    final class Taken: Sendable {
        let frames = Mutex<[CapturedFrame]>([])
        var count: Int { frames.withLock { $0.count } }
    }

    /// Reads every frame of `microphone` into `taken` until it ends.
    func readAll(_ microphone: FileMicrophone, into taken: Taken) -> Task<Void, Never> {
        Task {
            while let frame = await microphone.next() { taken.frames.withLock { $0.append(frame) } }
        }
    }

    @Test func pacedFramesComeWhenTheirTimeComesABurstAtATime() async throws {
        let clock = ManualClock()
        let input = ConverseInput(samples: (0..<3200).map { Int16($0 % 1000) })
        let microphone = FileMicrophone(input: input, frameSamples: 320, pace: 1, burst: 3, clock: clock)
        let taken = Taken()
        let reader = readAll(microphone, into: taken)
        // The first burst (frames 0-2) goes when frame 2 begins: 40 ms in.
        try await withDeadline(.seconds(10), "the first wait") { await clock.waitForSleepers(1) }
        #expect(taken.count == 0)
        clock.advance(by: .milliseconds(39))
        #expect(taken.count == 0)
        clock.advance(by: .milliseconds(1))
        try await withDeadline(.seconds(10), "the second wait") {
            while taken.count < 3 { await Task.yield() }
            await clock.waitForSleepers(1)
        }
        #expect(taken.count == 3)
        // The next bursts at 100 ms (frames 3-5) and 160 ms (6-8); the last, frame 9 alone, when the input's last
        // sample is due (199.9375 ms: a burst's last frame beyond the end counts as the end).
        for (advance, count) in [(60, 6), (60, 9)] {
            clock.advance(by: .milliseconds(advance))
            try await withDeadline(.seconds(10), "\(count) frames") {
                while taken.count < count { await Task.yield() }
                await clock.waitForSleepers(1)
            }
        }
        clock.advance(by: .milliseconds(40))
        try await withDeadline(.seconds(10), "the end") { await reader.value }
        let frames = taken.frames.withLock { $0 }
        #expect(frames.count == 10)
        #expect(frames.flatMap(\.samples) == (0..<3200).map { Int16($0 % 1000) })
        #expect(
            clock.requestedSleeps == [
                .milliseconds(40), .milliseconds(60), .milliseconds(60), .microseconds(39_937.5),
            ]
        )
    }

    @Test func atPaceZeroFramesComeAsFastAsTakenAndTheLastIsWhatIsLeft() async throws {
        let clock = ManualClock()
        let microphone = FileMicrophone(
            input: ConverseInput(samples: [Int16](repeating: 7, count: 1000)),
            frameSamples: 320,
            pace: 0,
            clock: clock
        )
        var sizes: [Int] = []
        while let frame = await microphone.next() { sizes.append(frame.samples.count) }
        #expect(sizes == [320, 320, 320, 40])
        #expect(clock.requestedSleeps.isEmpty)
        #expect(microphone.counters.frames == 4)
    }

    @Test func whileMutedTheRecordingGoesOnUnheardAndStopEndsIt() async {
        let microphone = FileMicrophone(
            input: ConverseInput(samples: (0..<1280).map { Int16($0 / 320) }),
            frameSamples: 320,
            pace: 0,
            clock: ManualClock()
        )
        #expect(await microphone.next()?.samples.first == 0)
        microphone.isMuted = true
        microphone.isMuted = false
        #expect(await microphone.next()?.samples.first == 1)
        microphone.isMuted = true
        let task = Task { await microphone.next() }
        #expect(await task.value == nil)  // frames 2 and 3 went by unheard; the recording ended
        let stopped = FileMicrophone(
            input: ConverseInput(samples: [1, 2, 3]),
            frameSamples: 320,
            pace: 0,
            clock: ManualClock()
        )
        stopped.stop()
        #expect(await stopped.next() == nil)
    }
}

/// When a converse run ends, as a value over its progress.
@Suite struct QuietWatcherTests {
    let watcher = QuietWatcher(idleTimeout: .seconds(2), timeout: .seconds(300))

    func progress(inputDoneAt: Duration? = nil, lastEventAt: Duration = .zero, turns: Int = 0) -> ConverseProgress {
        var progress = ConverseProgress()
        progress.inputDone = inputDoneAt != nil
        progress.inputDoneAt = inputDoneAt
        progress.lastEventAt = lastEventAt
        progress.turnsCompleted = turns
        return progress
    }

    @Test func untilTheInputIsSentItLooksAgainEveryQuarterSecond() {
        #expect(
            watcher.check(progress(turns: 1), now: .seconds(10), stopPulled: false)
                == .wait(until: .milliseconds(10_250))
        )
    }

    @Test func itEndsAfterTheIdleTimeoutOfQuietOnceTheAnswerIsIn() {
        let answered = progress(inputDoneAt: .seconds(4), lastEventAt: .seconds(6), turns: 1)
        #expect(watcher.check(answered, now: .seconds(7), stopPulled: false) == .wait(until: .seconds(8)))
        #expect(watcher.check(answered, now: .seconds(8), stopPulled: false) == .done)
        // The quiet counts from the input's end when that came last.
        let late = progress(inputDoneAt: .seconds(9), lastEventAt: .seconds(6), turns: 1)
        #expect(watcher.check(late, now: .seconds(10), stopPulled: false) == .wait(until: .seconds(11)))
        // An answer under way is not the end, however quiet.
        var speaking = answered
        speaking.turnInFlight = true
        #expect(watcher.check(speaking, now: .seconds(60), stopPulled: false) == .wait(until: .milliseconds(60_250)))
    }

    @Test func aFailureEndsItAtOnceAStopInterruptsItAndTheTimeoutCapsIt() {
        var failed = progress()
        failed.failure = SessionFailure(.authentication, "no")
        #expect(watcher.check(failed, now: .zero, stopPulled: false) == .done)
        #expect(watcher.check(progress(), now: .zero, stopPulled: true) == .interrupted)
        #expect(watcher.check(progress(), now: .seconds(300), stopPulled: false) == .timedOut)
        #expect(
            watcher.check(progress(), now: .milliseconds(299_900), stopPulled: false) == .wait(until: .seconds(300))
        )
    }

    @Test func watchingOnTheClockRecordsATimeout() async throws {
        let clock = ManualClock()
        let box = ConverseProgressBox()
        let elapsed = clock.stopwatch()
        let quick = QuietWatcher(idleTimeout: .seconds(2), timeout: .seconds(1))
        let watch = Task { await quick.watch(box, stop: ConverseStop(), clock: clock, elapsed: elapsed) }
        for _ in 0..<4 {
            try await withDeadline(.seconds(10), "the watcher to sleep") { await clock.waitForSleepers(1) }
            clock.advance(by: .milliseconds(250))
        }
        try await withDeadline(.seconds(10), "the watcher to end") { await watch.value }
        #expect(box.withLock { $0.timedOut })
    }
}

/// How a run's end becomes its exit code and message.
@Suite struct ConverseOutcomeTests {
    func outcome(_ change: (inout ConverseProgress) -> Void, writeError: String? = nil) -> ConverseOutcome {
        var progress = ConverseProgress()
        progress.outputSamples = 24_000
        change(&progress)
        var statistics = SessionStatistics()
        statistics.audioSamplesSent = 16_000
        return ConverseOutcome(
            progress,
            writeError: writeError,
            statistics: statistics,
            output: "out.wav",
            timeout: .seconds(300)
        )
    }

    @Test func eachEndHasItsExitCode() {
        let done = outcome {
            $0.inputDone = true; $0.turnsCompleted = 1
        }
        #expect(done.exitCode == 0 && done.message == nil)
        #expect(done.outputSamples == 24_000 && done.inputSamplesSent == 16_000)
        #expect(outcome({ _ in }, writeError: "disk full").exitCode == 2)
        let stopped = outcome { $0.interrupted = true }
        #expect(stopped.exitCode == 130 && stopped.message == "interrupted; the answer received so far is in out.wav")
        let kinds: [(SessionFailure.Kind, Int32)] = [
            (.authentication, 3), (.configuration, 2), (.transient, 4), (.untrusted, 5),
        ]
        for (kind, code) in kinds {
            let failed = outcome { $0.failure = SessionFailure(kind, "why") }
            #expect(failed.exitCode == code && failed.message == "why", "\(kind)")
        }
        // A failure after the answer was in does not fail the run.
        #expect(
            outcome {
                $0.inputDone = true; $0.turnsCompleted = 1; $0.failure = SessionFailure(.transient, "x")
            }.exitCode == 0
        )
        let late = outcome { $0.timedOut = true }
        #expect(late.exitCode == 4 && late.message == "timed out after 300 s without a finished answer")
    }
}

/// A flag tasks share.
private final class Flag: Sendable {
    private let flag = Atomic(false)
    func set() { flag.store(true, ordering: .relaxed) }
    var isSet: Bool { flag.load(ordering: .relaxed) }
}
