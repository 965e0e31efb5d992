import HarkCore
import HarkTestKit
import Logging
import Synchronization
import Testing

/// The one reconnect loop, as a value and as the runtime runs it on a manual clock.
@Suite struct ReconnectMachineTests {
    private func machine(giveUpOnRejection: Bool = false, limit: Int? = nil) -> ReconnectMachine {
        ReconnectMachine(
            policy: ReconnectPolicy(
                backoff: Backoff(initial: .seconds(1), cap: .seconds(8)),
                rejectedRetryDelay: .seconds(300),
                giveUpOnRejection: giveUpOnRejection,
                maxConsecutiveFailures: limit,
                seed: 7
            )
        )
    }

    private let dropped = SessionFailure(.transient, "connection lost without a close frame (1006)", closeCode: 1006)
    private let refused = SessionFailure(.authentication, "the service refused access (close 1008)", closeCode: 1008)

    private func delay(_ step: ReconnectMachine.Step) -> Duration? {
        switch step {
        case .connect(_, let after, _, _), .startFresh(_, let after, _): after
        default: nil
        }
    }

    @Test func transientFailuresBackOffWithJitterUpToTheCapAndAHealthyConnectionStartsAfresh() {
        var machine = machine()
        #expect(machine.start() == .connect(attempt: 1, after: .zero, link: nil, log: nil))
        var ceilings: [Duration] = []
        for _ in 0..<6 {
            let step = machine.ended(.failed(dropped, healthy: false))
            guard case .connect(_, let after, let link, let log) = step else {
                Issue.record("expected a reconnect, got \(step)")
                return
            }
            ceilings.append(after)
            #expect(log?.level == .warning)
            if case .offline(let reason, let retryIn)? = link {
                #expect(reason == dropped.message)
                #expect(retryIn == after)
            } else {
                Issue.record("expected offline, got \(String(describing: link))")
            }
        }
        // Each delay lies in the upper half of 1, 2, 4, 8, 8, 8 s.
        let bounds: [Int64] = [1, 2, 4, 8, 8, 8]
        for (delay, bound) in zip(ceilings, bounds) {
            #expect(delay >= .milliseconds(bound * 500) && delay <= .seconds(bound))
        }
        #expect(machine.attempts == 7)
        // A connection that had been working resets the backoff: the next wait is under a second again.
        let after = delay(machine.ended(.failed(dropped, healthy: true)))
        #expect(after.map { $0 <= .seconds(1) } == true)
    }

    @Test func aRejectionWaitsTheSlowRetryOrEndsAOneShotRun() {
        var daemon = machine()
        _ = daemon.start()
        let step = daemon.ended(.failed(refused, healthy: false))
        #expect(delay(step) == .seconds(300))
        if case .connect(_, _, .rejected(let failure, let retryIn)?, let log) = step {
            #expect(failure == refused)
            #expect(retryIn == .seconds(300))
            #expect(log?.level == .error)
        } else {
            Issue.record("expected the rejected link, got \(step)")
        }

        var oneShot = machine(giveUpOnRejection: true)
        _ = oneShot.start()
        guard case .giveUp(let failure, .rejected(_, nil), _) = oneShot.ended(.failed(refused, healthy: false)) else {
            Issue.record("a one-shot run must give up on a rejection")
            return
        }
        #expect(failure == refused)
    }

    @Test func aRunWithALimitGivesUpAfterThatManyFailuresInARow() {
        var machine = machine(limit: 3)
        _ = machine.start()
        #expect(delay(machine.ended(.failed(dropped, healthy: false))) != nil)
        #expect(delay(machine.ended(.failed(dropped, healthy: false))) != nil)
        guard case .giveUp = machine.ended(.failed(dropped, healthy: false)) else {
            Issue.record("the third failure in a row must give up")
            return
        }
    }

    @Test func aSwitchResumesAtOnceAndFinishingStops() {
        var machine = machine()
        _ = machine.start()
        _ = machine.ended(.failed(dropped, healthy: false))
        guard case .connect(3, .zero, nil, let log?) = machine.ended(.switched) else {
            Issue.record("a switch must resume at once")
            return
        }
        #expect(log.message.contains("resuming"))
        #expect(machine.ended(.finished) == .stop)
    }

    @Test func refusedResumptionsStartFreshAtOnceThenBackOff() {
        var machine = machine()
        _ = machine.start()
        let refusal = SessionFailure(.configuration, "close 1007", closeCode: 1007)
        for _ in 0..<machine.refusalsBeforeBackoff {
            let step = machine.ended(.resumptionRefused(refusal))
            guard case .startFresh(_, .zero, _) = step else {
                Issue.record("expected a fresh start at once, got \(step)")
                return
            }
        }
        let step = machine.ended(.resumptionRefused(refusal))
        guard case .startFresh(_, let after, _) = step, after > .zero else {
            Issue.record("a service that keeps refusing must be backed off from, got \(step)")
            return
        }
    }
}

@Suite struct SessionRuntimeLoopTests {
    private func runtime(_ clock: ManualClock) -> SessionRuntime {
        SessionRuntime(inputBound: .seconds(1), clock: clock, logger: LogCapture().logger())
    }

    private func settings(giveUp: Bool = false) -> ReconnectMachine {
        ReconnectMachine(
            policy: ReconnectPolicy(
                backoff: Backoff(initial: .seconds(2), cap: .seconds(2)),
                rejectedRetryDelay: .seconds(60),
                giveUpOnRejection: giveUp,
                maxConsecutiveFailures: nil,
                seed: 1
            )
        )
    }

    @Test func theLoopSleepsTheBackoffOnTheClockBeforeEachReconnect() async throws {
        let clock = ManualClock()
        let runtime = runtime(clock)
        let attempts = Mutex<[Int]>([])
        let run = Task {
            try await runtime.runConnections(machine: settings()) { attempt in
                attempts.withLock { $0.append(attempt) }
                return .failed(SessionFailure(.transient, "refused"), healthy: false)
            }
        }
        for expected in 2...4 {
            try await withDeadline(.seconds(10), "the backoff sleep") { await clock.waitForSleepers(1) }
            // Not before its time: half the ceiling at least. The clock wakes a sleeper as it is advanced past its
            // deadline, so the backoff still sleeping afterwards is the proof (an attempt would come later).
            clock.advance(by: .milliseconds(999))
            #expect(clock.sleeperCount == 1)
            #expect(attempts.withLock { $0.count } == expected - 1)
            clock.advance(by: .milliseconds(1001))
            try await withDeadline(.seconds(10), "attempt \(expected)") {
                while attempts.withLock({ $0.count }) < expected { await Task.yield() }
            }
        }
        #expect(attempts.withLock { $0 } == [1, 2, 3, 4])
        #expect(runtime.statistics.failures >= 3)
        runtime.finish(connected: false)
        try await withDeadline(.seconds(10), "the run to end") { try await run.value }
    }

    @Test func aRunThatGivesUpThrowsTheFailureAndEndsTheEvents() async throws {
        let clock = ManualClock()
        let runtime = runtime(clock)
        let rejected = SessionFailure(.authentication, "credential rejected (HTTP 401)")
        await #expect(throws: SessionFailure.self) {
            try await runtime.runConnections(machine: settings(giveUp: true)) { _ in
                .failed(rejected, healthy: false)
            }
        }
        var links: [LinkState] = []
        for await event in runtime.events { if case .link(let link) = event { links.append(link) } }
        #expect(links == [.connecting(attempt: 1), .rejected(rejected, retryIn: nil), .ended])
    }

    @Test func finishingWhileBackingOffStopsAtOnce() async throws {
        let clock = ManualClock()
        let runtime = runtime(clock)
        let run = Task {
            try await runtime.runConnections(machine: settings()) { _ in
                .failed(SessionFailure(.transient, "refused"), healthy: false)
            }
        }
        try await withDeadline(.seconds(10), "the backoff sleep") { await clock.waitForSleepers(1) }
        runtime.finish(connected: false)
        try await withDeadline(.seconds(10), "the run to end without the clock moving") { try await run.value }
    }

    @Test func aRefusedResumptionForgetsTheConversationAndCountsIt() async throws {
        let clock = ManualClock()
        let runtime = runtime(clock)
        let forgotten = Mutex(0)
        let ends: [ConnectionEnd] = [.resumptionRefused(SessionFailure(.configuration, "1007")), .finished]
        let index = Mutex(0)
        try await withDeadline(.seconds(10), "the run") {
            try await runtime.runConnections(machine: self.settings()) { _ in
                index.withLock { index in
                    defer { index += 1 }
                    return ends[index]
                }
            } startFresh: {
                forgotten.withLock { $0 += 1 }
            }
        }
        #expect(forgotten.withLock { $0 } == 1)
        #expect(runtime.statistics.resumptionsRefused == 1)
    }
}

@Suite struct TranscriptSegmentTests {
    @Test func fragmentsGrowOneSegmentThatFinishingCloses() {
        var segments = TranscriptSegments()
        let first = segments.append(.agent, "Hel")
        let second = segments.append(.agent, "lo")
        #expect(first == Transcript(role: .agent, segment: "agent-1", text: "Hel", isFinal: false))
        #expect(second == Transcript(role: .agent, segment: "agent-1", text: "Hello", isFinal: false))
        #expect(segments.closeAll() == [Transcript(role: .agent, segment: "agent-1", text: "Hello", isFinal: true)])
        #expect(segments.append(.agent, "Again", finished: true)?.segment == "agent-2")
        #expect(segments.closeAll().isEmpty)
    }

    @Test func aFloodOfTranscriptTextIsBoundedPerSegment() {
        var segments = TranscriptSegments(limit: 100)
        var last: Transcript?
        for _ in 0..<10_000 { last = segments.append(.user, "0123456789") ?? last }
        #expect(last?.text.count == 100)
        #expect(segments.droppedCharacters == 10_000 * 10 - 100)
        #expect(segments.close(.user)?.text.count == 100)
    }

    @Test func utterancesAreNumberedAndCloseAnOpenSegment() {
        var segments = TranscriptSegments()
        _ = segments.append(.user, "partial")
        let closed = segments.utterance(.user, "whole")
        #expect(closed.map(\.segment) == ["user-1", "user-2"])
        #expect(closed.allSatisfy { $0.isFinal })
    }
}

/// One link policy for every backend: the settings made from how the sessions are used, and the audio a session
/// reports as sent.
@Suite struct LinkSettingsTests {
    private let refused = SessionFailure(.authentication, "the service refused access (close 1008)", closeCode: 1008)
    private let dropped = SessionFailure(.transient, "connection lost without a close frame (1006)", closeCode: 1006)

    @Test func theDaemonRetriesARejectionSlowlyAndNeverGivesUp() {
        let settings = LinkSettings(usage: .daemon(stateDirectory: "/var/lib/hark", pace: 1))
        #expect(!settings.giveUpOnRejection && settings.maxConsecutiveFailures == nil)
        var machine = settings.reconnectMachine()
        _ = machine.start()
        guard case .connect(_, let after, _, _) = machine.ended(.failed(refused, healthy: false)) else {
            Issue.record("a rejection must be retried")
            return
        }
        #expect(after == .seconds(300))
        for _ in 0..<50 {
            guard case .connect = machine.ended(.failed(dropped, healthy: false)) else {
                Issue.record("the daemon must never give up")
                return
            }
        }
    }

    @Test func aOneShotRunGivesUpOnARejectionAndAfterItsRetries() {
        let settings = LinkSettings(usage: .oneShot(maxRetries: 3, fast: false))
        var rejected = settings.reconnectMachine()
        _ = rejected.start()
        guard case .giveUp = rejected.ended(.failed(refused, healthy: false)) else {
            Issue.record("a one-shot run gives up on a rejection")
            return
        }
        var machine = settings.reconnectMachine()
        _ = machine.start()
        var steps: [ReconnectMachine.Step] = []
        for _ in 0..<3 { steps.append(machine.ended(.failed(dropped, healthy: false))) }
        guard case .connect = steps[0], case .connect = steps[1], case .giveUp = steps[2] else {
            Issue.record("three failures in a row end the run: \(steps)")
            return
        }
    }

    @Test func sentAudioCountsWhatIsNewAndWhatIsRepeatedApartAndReportsOnlyTheNew() {
        let reported = Mutex<[Int]>([])
        let runtime = SessionRuntime(
            inputBound: .seconds(1),
            clock: ManualClock(),
            logger: Logger(label: "test"),
            audioSent: { chunk in reported.withLock { $0.append(chunk.samples.first.map(Int.init) ?? -1) } }
        )
        let chunk = AudioChunk(samples: (0..<320).map { Int16($0) }, sampleRate: 16_000)
        runtime.sentAudio(chunk)
        runtime.sentAudio(chunk, resent: 100)
        runtime.sentAudio(chunk, resent: 320)
        runtime.sentAudio(chunk, resent: 1_000)
        let statistics = runtime.statistics
        #expect(statistics.audioSamplesSent == 320 + 220)
        #expect(statistics.audioSamplesResent == 100 + 320 + 320)
        // The whole first message, the new part of the second (from sample 100), nothing of the repeats.
        #expect(reported.withLock { $0 } == [0, 100])
    }
}

/// A secondary link (the cascade's speech socket) kept by the same rule, without the session's link events and
/// without ever giving up.
@Suite struct SecondaryLinkTests {
    @Test func aSecondaryLinkBacksOffLikeTheMainOneSwitchesAtOnceAndNeverGivesUp() async throws {
        let clock = ManualClock()
        let capture = LogCapture()
        let runtime = SessionRuntime(inputBound: .seconds(1), clock: clock, logger: capture.logger())
        // A one-shot run's settings: the main link would give up after two failures; this one goes on.
        let link = LinkSettings(
            backoff: Backoff(initial: .seconds(2), cap: .seconds(2)),
            giveUpOnRejection: true,
            maxConsecutiveFailures: 2,
            randomSeed: 3
        )
        let attempts = Mutex<[Int]>([])
        let ends: [ConnectionEnd] = [
            .switched, .failed(SessionFailure(.transient, "dropped"), healthy: false),
            .failed(SessionFailure(.authentication, "refused"), healthy: false),
            .failed(SessionFailure(.transient, "dropped"), healthy: false),
        ]
        let kept = Task {
            await runtime.keepLink("speech socket", link: link) { attempt in
                let count = attempts.withLock {
                    $0.append(attempt)
                    return $0.count
                }
                return count <= ends.count ? ends[count - 1] : .finished
            }
        }
        // A switch: the next connection at once, no sleep.
        try await withDeadline(.seconds(10), "the first backoff") { await clock.waitForSleepers(1) }
        #expect(attempts.withLock { $0 } == [1, 2])
        #expect(clock.requestedSleeps.last.map { $0 <= .seconds(2) && $0 >= .seconds(1) } == true)
        clock.advance(by: .seconds(2))
        // A rejection: the slow retry delay (five minutes), not the end of the session.
        try await withDeadline(.seconds(10), "the slow retry") {
            while clock.requestedSleeps.count < 2 { await Task.yield() }
        }
        #expect(attempts.withLock { $0 } == [1, 2, 3])
        #expect(clock.requestedSleeps.last == .seconds(300))
        clock.advance(by: .seconds(300))
        try await withDeadline(.seconds(10), "the fourth connection's backoff") {
            while clock.requestedSleeps.count < 3 { await Task.yield() }
        }
        #expect(attempts.withLock { $0 } == [1, 2, 3, 4], "past the one-shot limit of two failures")
        #expect(capture.all.contains { $0.contains("speech socket: offline: dropped") }, "\(capture.all)")
        // The session finishes: the loop returns, its sleep cut short.
        runtime.finish(connected: false)
        clock.advance(by: .seconds(2))
        try await withDeadline(.seconds(10), "the loop to return") { await kept.value }
        #expect(attempts.withLock { $0.count } == 4)
    }
}
