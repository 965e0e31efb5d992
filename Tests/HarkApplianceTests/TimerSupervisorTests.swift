import HarkAppliance
import HarkCore
import HarkIndicators
import HarkTestKit
import Logging
import Synchronization
import Testing

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The timers and alarms on the supervisor, with scripted devices, a manual clock and a wall clock the test sets:
/// set by a tool, rung through the speaker's alert with the alert overlay, stopped by the button, the wake word,
/// the stop word and the tool; told to an open session; kept across a restart; reported missed.
/// A value behind a lock, shared by reference.
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>

    init(_ value: Value) { mutex = Mutex(value) }

    func withLock<T: Sendable>(_ body: (inout sending Value) -> sending T) -> T { mutex.withLock(body) }
}

@Suite struct TimerSupervisorTests {
    final class Rig: Sendable {
        let clock = ManualClock()
        let wall = Locked<Double>(1_800_000_000)
        let microphone = ScriptedMicrophone()
        let speaker = RecordingSpeaker()
        let sessions = OpenedSessions()
        let shown = Locked<[ShownState]>([])
        let logs = LogCapture()
        let supervisor: Supervisor
        let run: Task<Void, any Error>

        init(
            mode: InteractionMode = .alwaysListening,
            wake: WakeBehaviour? = nil,
            stopWord: StopWordBehaviour? = nil,
            store: TimerStore? = nil,
            ringFor: Duration = .seconds(300),
            statusFile: String? = nil,
            startingAt wallStart: Double = 1_800_000_000,
            wallFollowsClock: Bool = false
        ) {
            wall.withLock { $0 = wallStart }
            let sessions = self.sessions
            let clock = self.clock
            let wall = self.wall
            let shown = self.shown
            var settings = ApplianceMachine.Settings(mode: mode, earcons: [])
            settings.wakeWord = wake != nil
            let behaviour = ApplianceBehaviour(
                settings: settings,
                makeSession: { _, _, _ in
                    let session = ScriptedSession()
                    sessions.list.withLock { $0.append(session) }
                    return session
                },
                tools: .all,
                wake: wake,
                stopWord: stopWord,
                timers: TimerBehaviour(ringFor: ringFor, level: 0.5, store: store, calendar: UTCCalendar()),
                mode: "test",
                backend: "scripted"
            )
            supervisor = Supervisor(
                devices: ApplianceDevices(microphone: microphone, speaker: speaker, board: "test"),
                behaviour: behaviour,
                notifier: SilentNotifier(),
                statusFile: statusFile,
                logger: logs.logger("hark"),
                environment: SupervisorEnvironment(
                    clock: clock,
                    tick: .milliseconds(250),
                    monotonicNanoseconds: { UInt64(clamping: clock.now.offset.nanosecondsClamped) },
                    wallClock: {
                        wall.withLock { $0 }
                            + (wallFollowsClock ? Double(clock.now.offset.nanosecondsClamped) / 1e9 : 0)
                    }
                ),
                onShown: { state in shown.withLock { $0.append(state) } }
            )
            let supervisor = self.supervisor
            run = Task { try await supervisor.run() }
        }

        /// Moves the wall clock on by `seconds` and lets one tick pass.
        func pass(_ seconds: Double) async throws {
            wall.withLock { $0 += seconds }
            let before = await supervisor.ticksHandled
            try await withDeadline(.seconds(10), "the supervisor's tick") { await self.clock.waitForSleepers(1) }
            clock.advance(by: .milliseconds(250))
            try await withDeadline(.seconds(10), "the tick to be handled") {
                while await self.supervisor.ticksHandled == before {
                    await Task.yield()
                    // A wake-up for a due time may sleep beside the tick: let it pass too.
                    self.clock.advance(by: .zero)
                }
            }
        }

        func until(_ what: String, _ condition: @escaping @Sendable () async -> Bool) async throws {
            try await withDeadline(.seconds(10), what) {
                while !(await condition()) { await Task.yield() }
            }
        }

        func tool(_ name: String, _ arguments: JSONValue = [:]) async throws -> JSONValue {
            let tools = DeviceTools.make([.timers], controls: supervisor.controls, timers: supervisor.timerControls)
            let tool = try #require(tools.first { $0.name == name })
            return try await tool.handler(arguments, .ignored)
        }

        func stop() async throws {
            supervisor.stop()
            let clock = self.clock
            Task {
                for _ in 0..<40 {
                    await clock.waitForSleepers(1)
                    clock.advance(by: .milliseconds(250))
                }
            }
            try await withDeadline(.seconds(10), "the run to stop") { try await self.run.value }
        }
    }

    @Test func aTimerSetByTheToolRingsOnTimeAndATapStopsItAndDoesNothingElse() async throws {
        let rig = Rig()
        let set = try await rig.tool("set_timer", ["seconds": 90, "label": "pasta"])
        #expect(set["result"] == "The pasta timer is set for 1 minute 30 seconds; it rings at 08:01.")
        try await rig.pass(89)
        #expect(!rig.speaker.isAlerting)
        try await rig.pass(1)
        try await rig.until("the alert") { rig.speaker.isAlerting }
        try await rig.until("the alert overlay") { rig.shown.withLock { $0.last == .overlay(.alert) } }
        let sound = try #require(rig.speaker.alerts.last ?? nil)
        #expect(sound.samples.count == 24_000 * 14 / 10)  // the 1.4 s loop
        #expect(rig.logs.all.contains { $0.contains("the pasta timer rings") })
        let listed = try await rig.tool("list_timers")
        #expect(listed["ringing"] == ["pasta"])
        // A tap: the ring stops; the tap's own action (cancel) goes no further.
        rig.supervisor.inputs.post(.event(.button(.cancel)))
        try await rig.until("the alert to stop") { !rig.speaker.isAlerting }
        #expect(rig.logs.all.contains { $0.contains("stopped the pasta timer (the button)") })
        #expect(rig.speaker.interruptCount == 0)
        try await rig.until("the overlay to go") { rig.shown.withLock { $0.last != .overlay(.alert) } }
        try await rig.stop()
    }

    @Test func aRingStartsAtItsDeadlineBetweenTicksNotAtTheNextTick() async throws {
        let rig = Rig(wallFollowsClock: true)
        try await withDeadline(.seconds(10), "the first tick's sleep") { await rig.clock.waitForSleepers(1) }
        // A tenth of a second after the start, a one-second timer: due at 1.1 s; the ticks at 0.25, 0.5, 0.75, 1.0
        // and 1.25 s.
        rig.clock.advance(by: .milliseconds(100))
        _ = try await rig.tool("set_timer", ["seconds": 1])
        for step in [150, 250, 250, 250] {
            let before = await rig.supervisor.ticksHandled
            try await withDeadline(.seconds(10), "the tick's sleep") { await rig.clock.waitForSleepers(1) }
            rig.clock.advance(by: .milliseconds(Int64(step)))
            try await rig.until("the tick") { await rig.supervisor.ticksHandled > before }
            #expect(!rig.speaker.isAlerting)
        }
        let before = await rig.supervisor.ticksHandled
        try await withDeadline(.seconds(10), "the wake-up's sleep") { await rig.clock.waitForSleepers(2) }
        rig.clock.advance(by: .milliseconds(100))  // 1.1 s
        try await rig.until("the ring at 1.1 s") { rig.speaker.isAlerting }
        #expect(await rig.supervisor.ticksHandled == before)  // no tick came between
        try await rig.stop()
    }

    @Test func theWakeWordStopsARingAndOpensNothing() async throws {
        let spotter = ScriptedWakeSpotter(words: ["hey_jarvis"])
        let rig = Rig(wake: WakeBehaviour(spotter: spotter))
        _ = try await rig.tool("set_timer", ["seconds": 5])
        try await rig.pass(5)
        try await rig.until("the alert") { rig.speaker.isAlerting }
        #expect(spotter.fire(WakeDetection(word: "hey_jarvis", score: 0.9, endSample: 0)))
        try await rig.until("the alert to stop") { !rig.speaker.isAlerting }
        #expect(rig.logs.all.contains { $0.contains("stopped the 5 seconds timer (the wake word)") })
        #expect(rig.sessions.list.withLock { $0.isEmpty })
        try await rig.stop()
    }

    @Test func theStopWordIsHeardWhileSomethingRingsAndStopsIt() async throws {
        let stop = ScriptedWakeSpotter(words: ["stop"])
        let rig = Rig(wake: WakeBehaviour(spotter: ScriptedWakeSpotter()), stopWord: StopWordBehaviour(spotter: stop))
        _ = try await rig.tool("set_alarm", ["time": "08:00", "label": "wake up"])  // 08:00 UTC: 1_800_000_000 + 0
        // Nothing rings: the stop word hears nothing.
        rig.microphone.pushSilence(frames: 3)
        try await rig.pass(1)
        #expect(stop.samplesFed == 0)
        try await rig.pass(86_400)
        try await rig.until("the alarm") { rig.speaker.isAlerting }
        rig.microphone.pushSilence(frames: 3)
        try await rig.until("the stop word to hear") { stop.samplesFed >= 3 * 320 }
        #expect(stop.fire(WakeDetection(word: "stop", score: 0.8, endSample: 960)))
        try await rig.until("the alarm to stop") { !rig.speaker.isAlerting }
        #expect(rig.logs.all.contains { $0.contains("stopped the wake up alarm (the stop word stop (0.8))") })
        #expect(rig.sessions.list.withLock { $0.isEmpty })
        try await rig.stop()
    }

    @Test func anOpenSessionHearsOfTheRingAndTheToolStopsIt() async throws {
        let rig = Rig()
        for _ in 0..<30 { rig.microphone.push([Int16](repeating: 6000, count: 320)) }
        try await rig.until("the session") { !rig.sessions.list.withLock { $0.isEmpty } }
        let session = try #require(rig.sessions.list.withLock { $0.first })
        session.emit(.link(.connected))
        _ = try await rig.tool("set_timer", ["seconds": 60, "label": "tea"])
        try await rig.pass(60)
        try await rig.until("the session to be told") {
            session.sent.contains {
                if case .text(let text) = $0 { return text.contains("the tea timer is ringing now on this device") }
                return false
            }
        }
        let stopped = try await rig.tool("stop_ringing")
        #expect(stopped["result"] == "Stopped the tea timer.")
        #expect(!rig.speaker.isAlerting)
        #expect(rig.sessions.list.withLock { $0.count } == 1)
        try await rig.stop()
    }

    @Test func aRingUnheardForItsTimeStopsAndIsMissedInTheStatus() async throws {
        let folder = FileManager.default.temporaryDirectory.path + "/hark-timers-\(UInt64.random(in: 0...UInt64.max))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let rig = Rig(ringFor: .seconds(60), statusFile: folder + "/status.json")
        _ = try await rig.tool("set_timer", ["seconds": 10, "label": "eggs"])
        try await rig.pass(10)
        try await rig.until("the alert") { rig.speaker.isAlerting }
        try await rig.pass(59)
        #expect(rig.speaker.isAlerting)
        try await rig.pass(1)
        try await rig.until("the alert to stop by itself") { !rig.speaker.isAlerting }
        #expect(rig.logs.all.contains { $0.contains("the eggs timer rang for 1 minute unheard and stopped (missed)") })
        try await rig.pass(6)  // the status file is written every few seconds
        try await rig.until("the status file") {
            (try? ApplianceStatus.read(from: folder + "/status.json"))?.timers?.missed == ["eggs timer (rang unheard)"]
        }
        let status = try ApplianceStatus.read(from: folder + "/status.json")
        #expect(status.rendered(now: 1_800_000_100).contains("missed:      eggs timer (rang unheard)"))
        try await rig.stop()
    }

    @Test func aRestartKeepsTheTimersAndRingsWhatPassedWhileOffOnceAsMissed() async throws {
        let folder = FileManager.default.temporaryDirectory.path + "/hark-timers-\(UInt64.random(in: 0...UInt64.max))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = TimerStore(path: folder + "/timers.json")
        let first = Rig(store: store)
        _ = try await first.tool("set_timer", ["seconds": 600, "label": "bread"])
        _ = try await first.tool("set_timer", ["seconds": 3600, "label": "laundry"])
        try await first.stop()
        // Off for 20 minutes: the bread timer passed meanwhile, the laundry did not.
        let second = Rig(store: store, startingAt: 1_800_000_000 + 1200)
        try await second.until("the missed ring") { second.speaker.isAlerting }
        #expect(second.logs.all.contains { $0.contains("the bread timer rings late: it was due at 08:10") })
        let listed = try await second.tool("list_timers")
        #expect(listed["ringing"] == ["bread"])
        #expect(listed["timers"] == [["label": "laundry", "remaining_s": 2400, "deadline": 1_800_003_600]])
        try await second.stop()
        // The damaged file: a clear line, an empty book, the file kept aside; the daemon runs.
        try Data("{not json".utf8).write(to: URL(filePath: store.path))
        let third = Rig(store: store)
        try await third.until("the damage to be said") {
            third.logs.all.contains { $0.contains("are lost: it cannot be read") }
        }
        #expect(FileManager.default.fileExists(atPath: store.path + ".damaged"))
        #expect(try await third.tool("list_timers")["timers"] == [])
        try await third.stop()
    }

    @Test func anAnnouncementPlaysAtOnceWhenNothingPlaysAndWaitsForTheAgentsAnswer() async throws {
        let rig = Rig()
        let bell = AudioChunk(samples: [Int16](repeating: 700, count: 2400), sampleRate: 24_000)
        let now = await rig.supervisor.announce(bell, chime: false)
        #expect(now.ok && now.message == "playing")
        #expect(rig.speaker.chunks.last == bell)
        // The agent speaks: the next announcement waits until its answer has played.
        for _ in 0..<30 { rig.microphone.push([Int16](repeating: 6000, count: 320)) }
        try await rig.until("the session") { !rig.sessions.list.withLock { $0.isEmpty } }
        let session = try #require(rig.sessions.list.withLock { $0.first })
        session.emit(.link(.connected))
        let answer = AudioChunk(samples: [Int16](repeating: 100, count: 24_000), sampleRate: 24_000)
        session.emit(.audio(answer))
        try await rig.until("the answer to play") { rig.speaker.chunks.last == answer }
        let later = await rig.supervisor.announce(bell, chime: true)
        #expect(later.ok && later.message == "queued: it plays when the agent has finished speaking")
        #expect(rig.speaker.chunks.last == answer)
        session.emit(.turnComplete)
        try await rig.until("the announcement after the answer") {
            rig.speaker.playAll()  // the answer's last sample played (once the supervisor waits for it)
            return rig.speaker.chunks.last == bell
        }
        let chunks = rig.speaker.chunks
        #expect(chunks.count >= 4 && chunks[chunks.count - 3] == answer)  // the answer, the chime, the bell
        #expect(await rig.supervisor.announce(AudioChunk(samples: [], sampleRate: 24_000), chime: false).ok == false)
        try await rig.stop()
    }

    @Test func theControlSocketsOperationsValidateTheirArguments() async throws {
        let rig = Rig()
        let service = rig.supervisor.timerService
        let added = await service.handle(ControlRequest(op: "timers.add", args: ["seconds": 300, "label": "pizza"]))
        #expect(added.ok)
        #expect(added.message == "The pizza timer is set for 5 minutes; it rings at 08:05.")
        let alarm = await service.handle(
            ControlRequest(op: "alarms.add", args: ["time": "7:05", "days": ["mon", "friday"]])
        )
        #expect(alarm.ok, "\(alarm.message)")
        let list = await service.handle(ControlRequest(op: "timers.list"))
        #expect(list.data?["timers"] == [["label": "pizza", "remaining_s": 300, "deadline": 1_800_000_300]])
        guard case .array(let alarms)? = list.data?["alarms"], let first = alarms.first else {
            Issue.record("no alarms in \(String(describing: list.data))")
            return
        }
        #expect(first["days"] == ["mon", "fri"])
        #expect(first["time"] == "07:05")
        #expect(first["label"] == "alarm 07:05")
        // Friday 2027-01-15 08:00 UTC now: next Monday 07:05.
        #expect(first["next"] == .number(1_800_000_000 + 3 * 86_400 - 3300))
        for (op, args, expected) in [
            ("timers.add", ["seconds": "300"] as [String: JSONValue], "timers.add: seconds must be a whole number"),
            ("timers.add", ["seconds": 1e300], "timers.add: seconds must be a whole number from 1 to 86400"),
            ("timers.add", ["seconds": 10, "label": 5], "timers.add: label must be a string"),
            ("alarms.add", ["time": "25:00"], "alarms.add: time must be a 24-hour time HH:MM"),
            ("alarms.add", ["time": "07:00", "days": ["someday"]], "alarms.add: days must name weekdays"),
            ("timers.explode", [:], "unknown operation timers.explode"),
        ] {
            let reply = await service.handle(ControlRequest(op: op, args: args))
            #expect(!reply.ok)
            #expect(reply.message.hasPrefix(expected), "\(reply.message)")
        }
        let cancel = await service.handle(ControlRequest(op: "timers.cancel", args: ["label": "soup"]))
        #expect(!cancel.ok && cancel.message == "There is no timer called soup; there is pizza.")
        #expect(await service.handle(ControlRequest(op: "timers.stop")).message == "Nothing is ringing.")
        try await rig.stop()
    }
}
