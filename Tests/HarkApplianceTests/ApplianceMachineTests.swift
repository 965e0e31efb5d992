import Foundation
import HarkAppliance
import HarkCore
import HarkIndicators
import Testing

/// The modes as values: events in, actions out, time passed in.
@Suite struct ApplianceMachineTests {
    func machine(_ mode: InteractionMode, idle: Duration = .seconds(30)) -> ApplianceMachine {
        ApplianceMachine(settings: .init(mode: mode, idleTimeout: idle, greeting: "greet"), now: .zero)
    }

    @Test func speakerOpensOnSpeechWithThePreRollAndClosesWhenTheRoomIsQuiet() {
        var machine = machine(.alwaysListening)
        #expect(machine.conversation == .idle)
        let open = machine.handle(.voiceStarted, now: .seconds(1))
        #expect(
            open == [.openSession(fresh: false), .forwardMicrophone(true, preRoll: true), .earcon(.listeningStart)]
        )
        #expect(machine.microphoneLive)
        #expect(machine.overlays == [.offline])  // connecting
        let step1 = machine.handle(.session(.link(.connected)), now: .seconds(1))
        #expect(step1.isEmpty)
        #expect(machine.overlays.isEmpty)
        _ = machine.handle(.session(.conversation(.listening)), now: .seconds(1))
        #expect(machine.conversation == .listening)
        // The answer: speaking lasts until the last sample has been played, not until turnComplete.
        _ = machine.handle(.session(.conversation(.thinking)), now: .seconds(3))
        _ = machine.handle(.session(.audio(AudioChunk(samples: [1], sampleRate: 24_000))), now: .seconds(4))
        _ = machine.handle(.session(.conversation(.speaking)), now: .seconds(4))
        let step2 = machine.handle(.session(.turnComplete), now: .seconds(6))
        #expect(step2 == [.awaitPlaybackDrain])
        _ = machine.handle(.session(.conversation(.listening)), now: .seconds(6))
        #expect(machine.conversation == .speaking)
        let step3 = machine.handle(.playbackDrained, now: .seconds(8))
        #expect(step3.isEmpty)
        #expect(machine.conversation == .listening)
        // Quiet for the idle time: close.
        let step4 = machine.handle(.tick, now: .seconds(37))
        #expect(step4.isEmpty)
        let step5 = machine.handle(.tick, now: .seconds(38))
        #expect(step5 == [.forwardMicrophone(false, preRoll: false), .closeSession])
        #expect(!machine.sessionOpen)
        #expect(machine.conversation == .idle)
        #expect(!machine.microphoneLive)
    }

    @Test func speakerTapMutesAndSendsAudioStreamEnd() {
        var machine = machine(.alwaysListening)
        _ = machine.handle(.voiceStarted, now: .zero)
        let mute = machine.handle(.button(.muteToggle), now: .seconds(1))
        #expect(mute == [.muteCapture(true), .forwardMicrophone(false, preRoll: false), .send(.audioStreamEnd)])
        #expect(machine.overlays.contains(.muted))
        #expect(!machine.microphoneLive)
        // Muted: speech opens nothing.
        let step6 = machine.handle(.voiceStarted, now: .seconds(2))
        #expect(step6.isEmpty)
        let step7 = machine.handle(.button(.muteToggle), now: .seconds(3))
        #expect(
            step7 == [
                .muteCapture(false), .forwardMicrophone(true, preRoll: false),
            ]
        )
        #expect(machine.microphoneLive)
    }

    @Test func speakerBargeInFollowsTheService() {
        var machine = machine(.alwaysListening)
        _ = machine.handle(.voiceStarted, now: .zero)
        _ = machine.handle(.session(.audio(AudioChunk(samples: [1], sampleRate: 24_000))), now: .seconds(1))
        #expect(machine.conversation == .speaking)
        let step8 = machine.handle(.session(.interrupted), now: .seconds(2))
        #expect(step8 == [.interruptPlayback])
        _ = machine.handle(.session(.conversation(.listening)), now: .seconds(2))
        #expect(machine.conversation == .listening)
        // A cancel with nothing to cancel does nothing.
        let step9 = machine.handle(.button(.cancel), now: .seconds(3))
        #expect(step9.isEmpty)
    }

    @Test func pushToTalkPressOpensAndReleaseEnds() {
        var machine = machine(.pushToTalk)
        let step10 = machine.handle(.voiceStarted, now: .zero)
        #expect(step10.isEmpty)
        let press = machine.handle(.button(.talkStart), now: .seconds(1))
        #expect(
            press == [
                .openSession(fresh: false), .send(.activityStart), .forwardMicrophone(true, preRoll: false),
                .earcon(.listeningStart),
            ]
        )
        #expect(machine.conversation == .listening)
        let release = machine.handle(.button(.talkEnd), now: .seconds(3))
        #expect(release == [.forwardMicrophone(false, preRoll: false), .send(.activityEnd)])
        _ = machine.handle(.session(.conversation(.thinking)), now: .seconds(3))
        #expect(machine.conversation == .thinking)
        _ = machine.handle(.session(.audio(AudioChunk(samples: [1], sampleRate: 24_000))), now: .seconds(4))
        // Pressing while the agent speaks interrupts it at once; the session stays open.
        let again = machine.handle(.button(.talkStart), now: .seconds(5))
        #expect(
            again == [
                .interruptPlayback, .send(.activityStart), .forwardMicrophone(true, preRoll: false),
                .earcon(.listeningStart),
            ]
        )
        #expect(machine.conversation == .listening)
    }

    @Test func anAnswerThatFailsPartWayIsSaidWithTheErrorEarcon() {
        var machine = machine(.alwaysListening)
        _ = machine.handle(.voiceStarted, now: .seconds(1))
        _ = machine.handle(.session(.link(.connected)), now: .seconds(1))
        #expect(machine.handle(.session(.answerFailed("HTTP 503")), now: .seconds(2)) == [.earcon(.error)])
        #expect(machine.sessionOpen)
    }

    @Test func anExchangeStillInProgressKeepsThinkingAndStartsNoVisitorTimer() {
        var machine = machine(.kiosk, idle: .seconds(20))
        _ = machine.handle(.voiceStarted, now: .seconds(1))
        _ = machine.handle(.session(.link(.connected)), now: .seconds(1))
        _ = machine.handle(.session(.audio(AudioChunk(samples: [1], sampleRate: 24_000))), now: .seconds(2))
        _ = machine.handle(.session(.conversation(.speaking)), now: .seconds(2))
        // The model's turn ended "in progress" (a tool runs): the session says thinking, not turnComplete.
        _ = machine.handle(.session(.conversation(.thinking)), now: .seconds(3))
        _ = machine.handle(.playbackDrained, now: .seconds(4))
        #expect(machine.conversation == .thinking)
        #expect(machine.handle(.tick, now: .seconds(60)).isEmpty)
        #expect(machine.sessionOpen)
        // The exchange ends: listening, and the visitor's quiet time counts from there.
        _ = machine.handle(.session(.audio(AudioChunk(samples: [1], sampleRate: 24_000))), now: .seconds(61))
        #expect(machine.handle(.session(.turnComplete), now: .seconds(62)) == [.awaitPlaybackDrain])
        _ = machine.handle(.session(.conversation(.listening)), now: .seconds(62))
        _ = machine.handle(.playbackDrained, now: .seconds(63))
        #expect(machine.conversation == .listening)
        #expect(machine.handle(.tick, now: .seconds(80)).isEmpty)
        #expect(machine.handle(.tick, now: .seconds(83)).contains(.closeSession))
    }

    @Test func kioskGreetsEachVisitorAndForgetsThemWhenTheyLeave() {
        var machine = machine(.kiosk, idle: .seconds(20))
        let start = machine.handle(.voiceStarted, now: .seconds(1))
        #expect(start == [.openSession(fresh: true), .send(.text("greet")), .earcon(.listeningStart)])
        // The microphone stays closed while the agent greets, and opens once the greeting has played.
        #expect(!machine.microphoneLive)
        _ = machine.handle(.session(.link(.connected)), now: .seconds(1))
        _ = machine.handle(.session(.audio(AudioChunk(samples: [1], sampleRate: 24_000))), now: .seconds(2))
        let greeted = machine.handle(.session(.turnComplete), now: .seconds(3))
        #expect(greeted == [.awaitPlaybackDrain])
        #expect(!machine.microphoneLive)
        let heard = machine.handle(.playbackDrained, now: .seconds(4))
        #expect(heard == [.forwardMicrophone(true, preRoll: false)])
        #expect(machine.microphoneLive)
        _ = machine.handle(.session(.conversation(.listening)), now: .seconds(4))
        let leave = machine.handle(.tick, now: .seconds(24))
        #expect(leave == [.forwardMicrophone(false, preRoll: false), .closeSession, .forgetConversation])
        // The next visitor starts with the button; a tap during the greeting cuts it short and opens the microphone.
        let next = machine.handle(.button(.cancel), now: .seconds(30))
        #expect(next.first == .openSession(fresh: true))
        _ = machine.handle(.session(.audio(AudioChunk(samples: [1], sampleRate: 24_000))), now: .seconds(31))
        let cut = machine.handle(.button(.cancel), now: .seconds(32))
        #expect(
            cut == [.interruptPlayback, .send(.interrupt), .earcon(.cancel), .forwardMicrophone(true, preRoll: false)]
        )
    }

    @Test func linkTroubleShowsOnceAndErrorsAreTheirOwnState() {
        var machine = machine(.alwaysListening)
        _ = machine.handle(.voiceStarted, now: .zero)
        let offline = LinkState.offline(reason: "connection lost", retryIn: .seconds(8))
        let step13 = machine.handle(.session(.link(offline)), now: .seconds(1))
        #expect(step13 == [.earcon(.offline)])
        let step14 = machine.handle(.session(.link(.connecting(attempt: 2))), now: .seconds(9))
        #expect(step14.isEmpty)
        let step15 = machine.handle(.session(.link(offline)), now: .seconds(10))
        #expect(step15.isEmpty)  // once per outage
        let input = IndicatorInput(conversation: machine.conversation, overlays: machine.overlays)
        #expect(
            ApplianceStatus.line(indicator: input, link: machine.link) == "offline: retrying in 8 s (connection lost)"
        )
        let rejected = LinkState.rejected(SessionFailure(.authentication, "close 1008"), retryIn: .seconds(60))
        let step16 = machine.handle(.session(.link(rejected)), now: .seconds(11))
        #expect(step16 == [.earcon(.error)])
        #expect(machine.overlays == [.error])
        let errorInput = IndicatorInput(conversation: machine.conversation, overlays: machine.overlays)
        #expect(
            ApplianceStatus.line(indicator: errorInput, link: machine.link)
                == "error: API key rejected (close 1008); retrying in 60 s"
        )
        let step17 = machine.handle(.session(.link(.connected)), now: .seconds(80))
        #expect(step17.isEmpty)
        #expect(machine.overlays.isEmpty)
    }

    @Test func switchedOffEarconsDoNotPlay() {
        var machine = ApplianceMachine(settings: .init(mode: .alwaysListening, earcons: []), now: .zero)
        let actions = machine.handle(.voiceStarted, now: .zero)
        #expect(!actions.contains(.earcon(.listeningStart)))
    }

    @Test func aDeviceToolMutesLikeTheButton() {
        var machine = machine(.alwaysListening)
        _ = machine.handle(.voiceStarted, now: .zero)
        let step18 = machine.handle(.setMuted(true), now: .seconds(1))
        #expect(step18.first == .muteCapture(true))
        let step19 = machine.handle(.setMuted(true), now: .seconds(2))
        #expect(step19.isEmpty)
        #expect(machine.muted)
    }
}

@Suite struct SupervisionTests {
    @Test func theWatchdogPingsOnlyWhenEveryServiceProgressed() {
        var watchdog = ProgressWatchdog()
        let first: [String: ProgressWatchdog.Reading] = [
            "capture": .init(counter: 10), "session": .init(counter: 0, idleByDesign: true),
        ]
        let verdicts = [
            watchdog.check(first),
            watchdog.check(["capture": .init(counter: 20), "session": .init(counter: 0, idleByDesign: true)]),
            // Capture stalls: no ping, and the stalled service is named.
            watchdog.check(["capture": .init(counter: 20), "session": .init(counter: 5)]),
            watchdog.check(["capture": .init(counter: 21), "session": .init(counter: 6)]),
        ]
        #expect(verdicts == [.ping, .ping, .stalled(["capture"]), .ping])
    }

    @Test func theFailureBudgetCountsOnlyWithinItsWindow() {
        var budget = FailureBudget(limit: 2, window: .seconds(10))
        let early = [budget.record(at: .seconds(0)), budget.record(at: .seconds(5))]
        #expect(early == [false, false])
        #expect(budget.count(at: .seconds(12)) == 1)
        let late = [budget.record(at: .seconds(12)), budget.record(at: .seconds(13))]
        #expect(late == [false, true])
    }

    @Test func earconsAreShortSoftEdgedAndDistinct() {
        for earcon in Earcon.allCases {
            let samples = earcon.samples(sampleRate: 24_000, level: 0.5)
            #expect(samples.count > 24_000 / 10 && samples.count < 24_000 / 2, "\(earcon)")
            #expect(abs(Int(samples.first!)) < 500 && abs(Int(samples.last!)) < 500, "\(earcon) clicks")
            #expect(samples.map { abs(Int($0)) }.max()! <= Int(Double(Int16.max) * 0.5) + 1)
        }
        #expect(Set(Earcon.allCases.map { $0.samples() }).count == Earcon.allCases.count)
    }

    @Test func theStatusFileRoundTripsAndReads() throws {
        let path = "/tmp/hark-status-\(UInt64.random(in: 0...UInt64.max)).json"
        defer { try? FileManager.default.removeItem(atPath: path) }
        var status = ApplianceStatus(state: "listening", line: "listening", mode: "speaker", startedAt: 1000)
        status.updatedAt = 1000 + 3725
        status.lastInterruptMilliseconds = 8.46
        status.captureToWire = LatencySummary(p50: 20.61, p99: 40.96, max: 120.8, count: 5939)
        status.receivedToSpeaker = LatencySummary(p50: 61.2, p99: 83.0, max: 90.1, count: 20)
        try status.write(to: path)
        let read = try ApplianceStatus.read(from: path)
        #expect(read == status)
        let text = read.rendered(now: 1000 + 3725)
        #expect(text.contains("state:       listening"))
        #expect(text.contains("uptime:      01:02:05"))
        #expect(text.contains("latency:     interrupt to silence 8.5 ms"))
        #expect(text.contains("\n             capture to wire p50 20.6 ms, p99 41.0 ms (max 120.8 ms, 5939 measured)"))
        #expect(text.contains("\n             received to speaker p50 61.2 ms, p99 83.0 ms (max 90.1 ms, 20 measured)"))
        #expect(!text.contains("is the daemon running"))
        #expect(read.rendered(now: 1000 + 3800).contains("is the daemon running"))
        // The interruption comes first and carries the label, none or not.
        var fresh = ApplianceStatus(state: "idle", line: "idle", startedAt: 1000, updatedAt: 1000)
        fresh.captureToWire = status.captureToWire
        #expect(fresh.rendered(now: 1000).contains("latency:     interrupt to silence: none yet\n"))
        #expect(fresh.rendered(now: 1000).contains("\n             capture to wire p50 20.6 ms"))
        #expect(!fresh.rendered(now: 1000).contains("wake word"))
        // The wake word's counters, and its CPU as a share of the audio it heard.
        fresh.wake = WakeStatus(
            words: ["hey_jarvis", "alexa"],
            detections: 1,
            falseStarts: 2,
            cpuSeconds: 3.6,
            audioSeconds: 120,
            droppedSeconds: 0
        )
        #expect(
            fresh.rendered(now: 1000).contains(
                "\nwake word:   hey_jarvis, alexa: 1 detection, 2 false starts; 3.6 s CPU (3.0 % of one core)"
            )
        )
        try fresh.write(to: path)
        #expect(try ApplianceStatus.read(from: path).wake == fresh.wake)
    }
}
