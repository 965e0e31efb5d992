import HarkAppliance
import HarkCore
import HarkIndicators
import HarkTestKit
import Logging
import Synchronization
import Testing

/// The supervisor with scripted devices and a manual clock: its device rules, its watchdog readings, its
/// input lanes. Nothing waits on real time but the deadlines that fail a test that hangs.
@Suite struct SupervisorTests {
    /// A supervisor over a scripted microphone, a recording speaker and scripted sessions, on a manual clock.
    final class Rig: Sendable {
        let clock = ManualClock()
        let microphone = ScriptedMicrophone()
        let speaker = RecordingSpeaker()
        let sessions = OpenedSessions()
        let supervisor: Supervisor
        let run: Task<Void, any Error>

        /// `settings` default to `mode`'s without earcons; `wake` listens for a wake word.
        init(
            mode: InteractionMode = .pushToTalk,
            settings: ApplianceMachine.Settings? = nil,
            wake: WakeBehaviour? = nil,
            stopWord: StopWordBehaviour? = nil,
            logger: Logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() },
            statusFile: String? = nil,
            logTranscripts: Bool = false,
            notifier: any ServiceNotifier = SilentNotifier(),
            sessionsEndOnFinish: Bool = true
        ) {
            let sessions = self.sessions
            let clock = self.clock
            let behaviour = ApplianceBehaviour(
                settings: settings ?? ApplianceMachine.Settings(mode: mode, earcons: []),
                makeSession: { _, _, _ in
                    let session = ScriptedSession(endsOnFinish: sessionsEndOnFinish)
                    sessions.list.withLock { $0.append(session) }
                    return session
                },
                wake: wake,
                stopWord: stopWord,
                logTranscripts: logTranscripts,
                mode: "test",
                backend: "scripted"
            )
            let supervisor = Supervisor(
                devices: ApplianceDevices(microphone: microphone, speaker: speaker, board: "test"),
                behaviour: behaviour,
                notifier: notifier,
                statusFile: statusFile,
                logger: logger,
                environment: SupervisorEnvironment(
                    clock: clock,
                    tick: .milliseconds(250),
                    monotonicNanoseconds: { UInt64(clamping: clock.now.offset.nanosecondsClamped) },
                    wallClock: { 1_800_000_000 + clock.now.offset.seconds }
                )
            )
            self.supervisor = supervisor
            run = Task { try await supervisor.run() }
        }

        /// Moves the clock on a tick at a time, each awaited until the supervisor handled it (with a deadline);
        /// returns true as soon as the supervisor gave up.
        func advance(by duration: Duration) async throws -> Bool {
            var passed = Duration.zero
            while passed < duration {
                if await supervisor.statusLine.hasPrefix("fatal") { return true }
                let before = await supervisor.ticksHandled
                try await withDeadline(.seconds(10), "the supervisor's tick") { await self.clock.waitForSleepers(1) }
                clock.advance(by: .milliseconds(250))
                passed += .milliseconds(250)
                try await withDeadline(.seconds(10), "the tick to be handled") {
                    while await self.supervisor.ticksHandled == before { await Task.yield() }
                }
            }
            return await supervisor.statusLine.hasPrefix("fatal")
        }

        /// The reason the run gave up, or nil when it did not.
        func gaveUp() async throws -> String? {
            do {
                try await withDeadline(.seconds(10), "the run to end") { try await self.run.value }
                return nil
            } catch let error as Supervisor.GaveUp {
                return error.description
            }
        }

        func stop() async throws {
            supervisor.stop()
            let clock = self.clock
            // Shutting down waits up to two seconds (on the clock) for sessions to close.
            Task {
                for _ in 0..<40 {
                    await clock.waitForSleepers(1)
                    clock.advance(by: .milliseconds(250))
                }
            }
            try await withDeadline(.seconds(10), "the run to stop") { try await self.run.value }
        }
    }

    @Test func aSpeakerOwingAudioIsGivenUpAfterTwentySeconds() async throws {
        let rig = Rig()
        rig.speaker.condition = DeviceCondition(failingFor: .seconds(1), outages: 1, lastError: "write failed")
        rig.speaker.enqueue(AudioChunk(samples: [Int16](repeating: 0, count: 24_000), sampleRate: 24_000))
        #expect(try await rig.advance(by: .seconds(19)) == false)
        #expect(try await rig.advance(by: .seconds(2)) == true)
        let reason = try await rig.gaveUp()
        #expect(reason?.contains("speaker") == true)
    }

    @Test func anIdleSpeakerGoneSinceAnOldOutageOwesNothingUntilAudioComes() async throws {
        let rig = Rig()
        // Gone for five minutes already, with nothing to play: no reason to give up.
        rig.speaker.condition = DeviceCondition(failingFor: .seconds(300), outages: 1, lastError: "gone")
        #expect(try await rig.advance(by: .seconds(40)) == false)
        // Audio arrives: the twenty seconds count from now, not from the outage's start.
        rig.speaker.enqueue(AudioChunk(samples: [Int16](repeating: 0, count: 24_000), sampleRate: 24_000))
        #expect(try await rig.advance(by: .seconds(15)) == false)
        #expect(try await rig.advance(by: .seconds(10)) == true)
        #expect(try await rig.gaveUp()?.contains("speaker") == true)
    }

    @Test func aMicrophoneGoneForTwentySecondsIsGivenUp() async throws {
        let rig = Rig()
        rig.microphone.condition = DeviceCondition(failingFor: .seconds(19), outages: 1, lastError: "read failed")
        #expect(try await rig.advance(by: .seconds(5)) == false)
        rig.microphone.condition = DeviceCondition(failingFor: .seconds(20), outages: 1, lastError: "read failed")
        #expect(try await rig.advance(by: .seconds(1)) == true)
        #expect(try await rig.gaveUp()?.contains("microphone") == true)
    }

    @Test func devicesThatKeepComingBackSpendTheFailureBudget() async throws {
        // Five outages in two minutes are tolerated; the sixth within the window gives up.
        let rig = Rig()
        for outage in 1...5 {
            rig.microphone.condition = DeviceCondition(failingFor: nil, outages: outage)
            #expect(try await rig.advance(by: .seconds(10)) == false)
        }
        rig.microphone.condition = DeviceCondition(failingFor: nil, outages: 6, lastError: "gone again")
        #expect(try await rig.advance(by: .seconds(1)) == true)
        #expect(try await rig.gaveUp()?.contains("keep failing") == true)
    }

    @Test func outagesSpreadOverTimeDoNotSpendTheBudget() {
        var rules = DeviceSupervisor()
        let fine = DeviceCondition()
        for outage in 1...20 {
            let verdict = rules.check(
                microphone: DeviceCondition(outages: outage),
                speaker: fine,
                speakerOwes: false,
                buttonErrors: nil,
                now: .seconds(Int64(outage) * 30)
            )
            #expect(verdict.fatal == nil, "outage \(outage)")
        }
    }

    @Test func aButtonThatKeepsFailingSpendsTheBudgetOnceForEachNewError() {
        var rules = DeviceSupervisor()
        let fine = DeviceCondition()
        func check(_ errors: Int?, at seconds: Int64) -> DeviceSupervisor.Verdict {
            rules.check(
                microphone: fine,
                speaker: fine,
                speakerOwes: false,
                buttonErrors: errors,
                now: .seconds(seconds)
            )
        }
        #expect(check(1, at: 0).lastError == "the button could not be read")
        // The same count again is no new error.
        for second in 1...10 { #expect(check(1, at: Int64(second)).fatal == nil) }
        for errors in 2...5 { #expect(check(errors, at: 10 + Int64(errors)).fatal == nil, "error \(errors)") }
        #expect(check(6, at: 20).fatal == "the button keeps failing")
    }

    @Test func aDeviceThatGoesAndComesBackIsLoggedOnceEachWay() {
        var rules = DeviceSupervisor()
        let gone = DeviceCondition(failingFor: .seconds(1), outages: 1, lastError: "unplugged")
        let first = rules.check(microphone: gone, speaker: .init(), speakerOwes: false, buttonErrors: nil, now: .zero)
        #expect(first.lines.map(\.level) == [.warning])
        #expect(first.lastError == "unplugged")
        let again = rules.check(
            microphone: gone,
            speaker: .init(),
            speakerOwes: false,
            buttonErrors: nil,
            now: .seconds(1)
        )
        #expect(again.lines.isEmpty)
        let back = rules.check(
            microphone: DeviceCondition(outages: 1),
            speaker: .init(),
            speakerOwes: false,
            buttonErrors: nil,
            now: .seconds(2)
        )
        #expect(back.lines.map(\.message) == ["audio device back: the microphone works again"])
    }

    @Test func theWatchdogIsNotFedWhileThePartsStallAndIsFedWhenTheyMoveAgain() async throws {
        let rig = Rig()
        var watchdog = ProgressWatchdog()
        rig.microphone.pushSilence(frames: 5)
        #expect(try await rig.advance(by: .seconds(1)) == false)
        _ = watchdog.check(await rig.supervisor.readings())
        // The microphone delivers nothing for a while: the capture is stalled, however busy the loop's ticks are.
        #expect(try await rig.advance(by: .seconds(1)) == false)
        #expect(watchdog.check(await rig.supervisor.readings()) == .stalled(["capture"]))
        rig.microphone.pushSilence(frames: 5)
        #expect(try await rig.advance(by: .seconds(1)) == false)
        #expect(watchdog.check(await rig.supervisor.readings()) == .ping)
        try await rig.stop()
    }
}

/// The sessions a rig's supervisor opened.
final class OpenedSessions: Sendable {
    let list = Mutex<[ScriptedSession]>([])
}

/// The supervisor's two input lanes, with nobody reading: a stalled loop.
@Suite struct ApplianceInputsTests {
    private func frame(_ sequence: Int) -> CapturedFrame {
        CapturedFrame(samples: [0], sequence: sequence, capturedAt: 0, readAt: 0, enqueuedAt: 0, level: -90)
    }

    @Test func aStalledLoopDropsTheOldestFramesAndNoControlInput() async {
        let inputs = ApplianceInputs(frameBound: 50)
        for index in 0..<1_000 {
            inputs.post(frame: frame(index))
            if index % 100 == 0 { inputs.post(.event(.button(.talkStart))) }
        }
        inputs.post(.drained(turn: 3))
        inputs.post(.stop)
        #expect(inputs.droppedFrames == 950)
        var controls: [String] = []
        var frames: [Int] = []
        while inputs.waiting.frames + inputs.waiting.controls > 0 {
            switch await inputs.next() {
            case .frame(let frame): frames.append(frame.sequence)
            case .control(.event): controls.append("button")
            case .control(.drained): controls.append("drained")
            case .control(.stop): controls.append("stop")
            case .control: controls.append("other")
            }
        }
        #expect(controls == [String](repeating: "button", count: 10) + ["drained", "stop"])
        #expect(frames == Array(950..<1_000))
    }

    @Test func aFloodOfSessionEventsWaitsForRoomInsteadOfGrowingOrDropping() async throws {
        let inputs = ApplianceInputs(frameBound: 10, controlBound: 8)
        let delivered = Atomic(0)
        let producer = Task {
            for _ in 0..<100 {
                await inputs.deliver(.session(generation: 1, .turnComplete))
                delivered.add(1, ordering: .relaxed)
            }
        }
        try await withDeadline(.seconds(10), "the producer to fill the lane and wait for room") {
            while inputs.deliveriesWaiting == 0 { await Task.yield() }
        }
        #expect(inputs.waiting.controls == 8)
        #expect(delivered.load(ordering: .relaxed) == 8)
        var taken = 0
        while taken < 100 {
            if case .control(.session) = await inputs.next() { taken += 1 }
        }
        await producer.value
        #expect(delivered.load(ordering: .relaxed) == 100)
    }
}

extension Duration {
    var nanosecondsClamped: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
