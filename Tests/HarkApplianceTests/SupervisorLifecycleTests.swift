import HarkAppliance
import HarkCore
import HarkTestKit
import Synchronization
import Testing

/// The supervisor's children and its first message: what a stop gives a session, and what the voice gate's
/// pre-roll carries.
@Suite struct SupervisorLifecycleTests {
    /// Waits (with a deadline) until the rig opened its first session, and returns it.
    func firstSession(_ rig: SupervisorTests.Rig) async throws -> ScriptedSession {
        try await withDeadline(.seconds(10), "a session to open") {
            while true {
                if let session = rig.sessions.list.withLock({ $0.first }) { return session }
                await Task.yield()
            }
        }
    }

    @Test func aStopFinishesTheSessionAndEndsAsSoonAsItsRunReturns() async throws {
        let rig = SupervisorTests.Rig()
        rig.supervisor.inputs.post(.event(.button(.talkStart)))
        let session = try await firstSession(rig)
        rig.supervisor.stop()
        // No time passes on the clock: a session that closes politely is not waited for any longer.
        try await withDeadline(.seconds(10), "the run to end") { try await rig.run.value }
        #expect(session.isFinished)
        #expect(rig.clock.now.offset == .zero)
    }

    @Test func aSessionThatDoesNotCloseIsGivenTwoSecondsThenCancelled() async throws {
        let rig = SupervisorTests.Rig(sessionsEndOnFinish: false)
        rig.supervisor.inputs.post(.event(.button(.talkStart)))
        let session = try await firstSession(rig)
        let ended = RunEnded()
        let run = rig.run
        let watcher = Task {
            try await run.value
            ended.set()
        }
        rig.supervisor.stop()
        for _ in 0..<7 {
            try await withDeadline(.seconds(10), "the ticks to sleep") { await rig.clock.waitForSleepers(1) }
            rig.clock.advance(by: .milliseconds(250))
        }
        // The seventh tick handled: the stop sleeps for the next one, still waiting for the session (1.75 s).
        try await withDeadline(.seconds(10), "the ticks to sleep") { await rig.clock.waitForSleepers(1) }
        #expect(!ended.isSet)
        #expect(session.isFinished)
        rig.clock.advance(by: .milliseconds(250))
        // Two seconds: the session's run is cancelled, and the loop's task group ends.
        try await withDeadline(.seconds(10), "the run to end") { try await watcher.value }
        #expect(ended.isSet)
    }

    @Test func anIdleApplianceGathersMicrophoneFramesAndASessionTakesThemOneByOne() async throws {
        let rig = SupervisorTests.Rig()
        rig.microphone.pushSilence(frames: 1)
        try await withDeadline(.seconds(10), "the idle pace") {
            while rig.microphone.deliveryBatch != 3 { await Task.yield() }
        }
        rig.supervisor.inputs.post(.event(.button(.talkStart)))
        _ = try await firstSession(rig)
        try await withDeadline(.seconds(10), "each frame at once") {
            while rig.microphone.deliveryBatch != 1 { await Task.yield() }
        }
        rig.supervisor.stop()
        try await withDeadline(.seconds(10), "the run to end") { try await rig.run.value }
    }

    @Test func theFirstMessageAfterSpeechStartsCarriesItsFramesCaptureTimes() async throws {
        let rig = SupervisorTests.Rig(mode: .alwaysListening)
        let quiet = [Int16](repeating: 0, count: 320)
        let loud = (0..<320).map { Int16($0 % 2 == 0 ? 6000 : -6000) }
        // Frame i was captured at (i + 1) × 20 ms.
        @Sendable func stamp(_ index: Int) -> UInt64 { UInt64(index + 1) * 20_000_000 }
        for index in 0..<40 { rig.microphone.push(quiet, capturedAt: stamp(index)) }
        for index in 40..<50 { rig.microphone.push(loud, capturedAt: stamp(index)) }
        let session = try await firstSession(rig)
        let sent = try await withDeadline(.seconds(10), "the pre-roll and the speech to be sent") {
            while true {
                let audio = session.sent.compactMap { input -> AudioChunk? in
                    if case .audio(let chunk) = input { return chunk }
                    return nil
                }
                if audio.last?.capturedAt == stamp(49) { return audio }
                await Task.yield()
            }
        }
        // The pre-roll (half a second before the speech began) and the speech after it, each frame once, in order,
        // each with the time its frame was captured.
        #expect(sent.count >= 26)
        let first = 50 - sent.count
        #expect(sent.map(\.capturedAt) == (first..<50).map { stamp($0) })
        #expect(first < 40)  // the pre-roll reaches back before the first loud frame
        try await rig.stop()
    }
}

/// Set once a run ended.
private final class RunEnded: Sendable {
    private let flag = Atomic(false)
    func set() { flag.store(true, ordering: .relaxed) }
    var isSet: Bool { flag.load(ordering: .relaxed) }
}
