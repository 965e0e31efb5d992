import HarkCore
import HarkLiveKitAgent
import HarkLiveKitWire
import Testing

/// The LiveKit session's decisions as a value: each test breaks if its rule is broken.
@Suite struct LiveKitSessionMachineTests {
    typealias Action = LiveKitSessionMachine.Action

    static let agent = LiveKitPeer(identity: "agent-1", isAgent: true, attributes: ["lk.agent.state": "listening"])
    static let room = LiveKitJoined(room: "r1", localIdentity: "hark", microphoneTrack: "TR_mic", participants: [])

    func chunk(_ count: Int, value: Int16 = 1000, rate: Int = 16_000) -> AudioChunk {
        AudioChunk(samples: [Int16](repeating: value, count: count), sampleRate: rate)
    }

    func events(_ actions: [Action]) -> [SessionEvent] {
        actions.compactMap { if case .emit(let event) = $0 { event } else { nil } }
    }

    func sent(_ actions: [Action]) -> [LiveKitCommand] {
        actions.compactMap { if case .send(let command) = $0 { command } else { nil } }
    }

    func captured(_ actions: [Action]) -> [AudioChunk] {
        actions.compactMap { if case .capture(let chunk) = $0 { chunk } else { nil } }
    }

    func preConnect(_ actions: [Action]) -> (samples: [Int16], to: String, attributes: [String: String])? {
        for case .sendPreConnect(let samples, let to, let attributes) in actions { return (samples, to, attributes) }
        return nil
    }

    func audio(_ value: Int16, count: Int = 480, track: String = "TR_agent") -> LiveKitEvent {
        .audio(
            LiveKitTrackAudio(
                trackSid: track,
                sampleRate: 24_000,
                channels: 1,
                samples: [Int16](repeating: value, count: count)
            )
        )
    }

    /// A machine in the room with the agent there and its track played.
    func withAgent(_ settings: LiveKitSessionMachine.Settings = .init()) -> LiveKitSessionMachine {
        var machine = LiveKitSessionMachine(settings: settings)
        _ = machine.joined(Self.room)
        _ = machine.event(.participantJoined(Self.agent))
        _ = machine.event(.trackSubscribed(trackSid: "TR_agent", participant: "agent-1"))
        return machine
    }

    @Test func whatIsSaidBeforeTheAgentComesGoesToItFirstThenTheTrackCarriesOn() {
        var machine = LiveKitSessionMachine()
        let joined = machine.joined(Self.room, waiting: [chunk(320, value: 1)])
        #expect(events(joined).first == .link(.connected))
        #expect(joined.contains(.heldForAgent(samples: 320)))
        // Before the agent: kept, not sent to the room.
        let early = machine.input(.audio(chunk(320, value: 2)))
        #expect(early == [.heldForAgent(samples: 320)])
        let arrived = machine.event(.participantJoined(Self.agent))
        let buffer = preConnect(arrived)
        #expect(buffer != nil)
        #expect(buffer?.samples == [Int16](repeating: 1, count: 320) + [Int16](repeating: 2, count: 320))
        #expect(buffer?.to == "agent-1")
        #expect(buffer?.attributes == ["trackId": "TR_mic", "sampleRate": "16000", "channels": "1"])
        #expect(events(arrived).contains(.conversation(.listening)))
        // After: the microphone goes to the room, nothing more is kept.
        let later = chunk(320, value: 3)
        #expect(captured(machine.input(.audio(later))) == [later])
        #expect(machine.preConnect.count == 0)
        // A second agent (or the same one announced again) changes nothing.
        #expect(preConnect(machine.event(.participantJoined(Self.agent))) == nil)
    }

    @Test func anAgentAlreadyInTheRoomGetsWhatWaitedForTheRoom() {
        var machine = LiveKitSessionMachine()
        let present = LiveKitJoined(
            room: "r1",
            localIdentity: "hark",
            microphoneTrack: "TR_mic",
            participants: [Self.agent]
        )
        let actions = machine.joined(present, waiting: [chunk(160)])
        #expect(preConnect(actions)?.samples.count == 160)
        #expect(machine.agentPresent)
        // Someone who is not an agent does not count.
        var other = LiveKitSessionMachine()
        let person = LiveKitPeer(identity: "person", isAgent: false, attributes: [:])
        _ = other.joined(
            LiveKitJoined(room: "r1", localIdentity: "hark", microphoneTrack: "TR", participants: [person])
        )
        #expect(!other.agentPresent)
        #expect(other.input(.audio(chunk(160))) == [.heldForAgent(samples: 160)])
    }

    @Test func aLateAgentGetsOnlyTheNewestAudioAndTheLogSaysHowMuchWasDropped() {
        var settings = LiveKitSessionMachine.Settings()
        settings.preConnectLimit = .seconds(1)
        var machine = LiveKitSessionMachine(settings: settings)
        _ = machine.joined(Self.room)
        for value in 0..<30 { _ = machine.input(.audio(chunk(1600, value: Int16(value)))) }  // 3 s
        let arrived = machine.event(.participantJoined(Self.agent))
        let samples = preConnect(arrived)?.samples ?? []
        #expect(samples.count == 16_000)
        #expect(samples.first == 20 && samples.last == 29)
        #expect(arrived.contains { if case .log(let line) = $0 { line.message.contains("oldest 2 s") } else { false } })
        // Without pre-connect audio nothing is kept or sent.
        settings.preConnectAudio = false
        var off = LiveKitSessionMachine(settings: settings)
        _ = off.joined(Self.room)
        _ = off.input(.audio(chunk(1600)))
        #expect(off.preConnect.count == 0)
        #expect(preConnect(off.event(.participantJoined(Self.agent))) == nil)
    }

    @Test func typedInputWaitsForTheAgentToBePastStarting() {
        var machine = LiveKitSessionMachine()
        _ = machine.joined(Self.room)
        #expect(sent(machine.input(.text("hello"))).isEmpty)
        let starting = LiveKitPeer(identity: "agent-1", isAgent: true, attributes: ["lk.agent.state": "initializing"])
        #expect(sent(machine.event(.participantJoined(starting))).isEmpty)
        #expect(sent(machine.input(.text("again"))).isEmpty)
        let ready = machine.event(.attributesChanged(identity: "agent-1", attributes: ["lk.agent.state": "listening"]))
        #expect(
            sent(ready) == [.sendText(topic: "lk.chat", text: "hello"), .sendText(topic: "lk.chat", text: "again")]
        )
        #expect(sent(machine.input(.text("now"))) == [.sendText(topic: "lk.chat", text: "now")])
        // Bounded while waiting: the oldest go.
        var waiting = LiveKitSessionMachine()
        for index in 0..<40 { _ = waiting.input(.text("t\(index)")) }
        #expect(waiting.pendingTexts.count == LiveKitSessionMachine.pendingTextLimit)
        #expect(waiting.pendingTexts.last == "t39")
    }

    @Test func theAgentsStatesBecomeTheConversationAndTheEndOfSpeakingEndsTheTurn() {
        var machine = withAgent()
        func state(_ value: String) -> [SessionEvent] {
            events(machine.event(.attributesChanged(identity: "agent-1", attributes: ["lk.agent.state": value])))
        }
        #expect(state("thinking") == [.conversation(.thinking)])
        #expect(state("speaking") == [.conversation(.speaking)])
        #expect(state("speaking") == [])
        #expect(state("listening") == [.turnComplete, .conversation(.listening)])
        #expect(state("idle") == [.conversation(.idle)])
        // Another participant's attributes are not the agent's state.
        #expect(
            events(machine.event(.attributesChanged(identity: "x", attributes: ["lk.agent.state": "speaking"]))).isEmpty
        )
        // A state nobody knows is noted once per kind (the runtime's bounded set), and changes nothing.
        let unknown = machine.event(.attributesChanged(identity: "agent-1", attributes: ["lk.agent.state": "dancing"]))
        #expect(unknown.count == 1)
        guard case .noteOnce(let kind, _) = unknown.first else {
            Issue.record("\(unknown)")
            return
        }
        #expect(kind == "state dancing")
        #expect(machine.conversation == .idle)
    }

    @Test func anInterruptedAnswerIsDroppedUntilTheAgentsTurnEnds() {
        var machine = withAgent()
        _ = machine.event(.attributesChanged(identity: "agent-1", attributes: ["lk.agent.state": "speaking"]))
        #expect(events(machine.event(audio(3000))).count == 1)
        #expect(events(machine.input(.interrupt)) == [.interrupted])
        #expect(events(machine.event(audio(3000))).isEmpty)
        _ = machine.event(.attributesChanged(identity: "agent-1", attributes: ["lk.agent.state": "listening"]))
        _ = machine.event(.attributesChanged(identity: "agent-1", attributes: ["lk.agent.state": "speaking"]))
        #expect(events(machine.event(audio(3000))).count == 1, "the next answer plays")
        // An interruption while the agent is not speaking is nothing.
        var quiet = withAgent()
        #expect(quiet.input(.interrupt).isEmpty)
        #expect(!quiet.droppingAnswer)
    }

    @Test func silenceOnTheTrackIsNotAnswerAudioButSoundIsWhateverTheState() {
        var machine = withAgent()
        #expect(events(machine.event(audio(0))).isEmpty)
        #expect(events(machine.event(audio(16))).isEmpty)
        let sound = events(machine.event(audio(17)))
        #expect(sound == [.audio(AudioChunk(samples: [Int16](repeating: 17, count: 480), sampleRate: 24_000))])
        _ = machine.event(.attributesChanged(identity: "agent-1", attributes: ["lk.agent.state": "speaking"]))
        #expect(events(machine.event(audio(0))).count == 1, "while it speaks, its pauses are part of the answer")
        // Only mono frames of a played track.
        let stereo = LiveKitEvent.audio(
            LiveKitTrackAudio(trackSid: "TR_agent", sampleRate: 24_000, channels: 2, samples: [1, 1])
        )
        #expect(machine.event(stereo).isEmpty)
        #expect(machine.event(audio(3000, track: "TR_other")).isEmpty)
    }

    @Test func onlyTheAgentsAudioTracksArePlayed() {
        var machine = LiveKitSessionMachine()
        _ = machine.joined(Self.room)
        // Before the agent is known, a remote track is taken (it may be the agent's, announced first).
        #expect(
            sent(machine.event(.trackSubscribed(trackSid: "TR_1", participant: "agent-1"))) == [.play(trackSid: "TR_1")]
        )
        _ = machine.event(.participantJoined(Self.agent))
        #expect(sent(machine.event(.trackSubscribed(trackSid: "TR_2", participant: "someone"))).isEmpty)
        #expect(sent(machine.event(.trackSubscribed(trackSid: "TR_3", participant: "hark"))).isEmpty)
        _ = machine.event(.trackUnsubscribed(trackSid: "TR_1"))
        #expect(machine.playing.isEmpty)
        #expect(machine.event(audio(3000, track: "TR_1")).isEmpty)
    }

    @Test func pushToTalkSendsOnlyWhileTheButtonIsHeldAndMutesTheTrackBetween() {
        var settings = LiveKitSessionMachine.Settings()
        settings.manualActivity = true
        var machine = LiveKitSessionMachine(settings: settings)
        let joined = machine.joined(
            LiveKitJoined(room: "r", localIdentity: "hark", microphoneTrack: "TR", participants: [Self.agent])
        )
        #expect(sent(joined).contains(.setMuted(true)))
        #expect(machine.input(.audio(chunk(320))).isEmpty, "not held: not sent, not kept")
        #expect(sent(machine.input(.activityStart)) == [.setMuted(false)])
        #expect(captured(machine.input(.audio(chunk(320)))).count == 1)
        #expect(machine.input(.activityEnd) == [.sendSilence, .muteWhenQuiet])
        #expect(machine.input(.audio(chunk(320))).isEmpty)
        // Hands-free: always held, never muted.
        var free = withAgent()
        #expect(free.input(.activityEnd).isEmpty)
        #expect(captured(free.input(.audio(chunk(320)))).count == 1)
        #expect(free.input(.audioStreamEnd) == [.sendSilence])
    }

    @Test func microphoneAudioAtAnotherRateIsNotedOnceAndSkipped() {
        var machine = withAgent()
        let actions = machine.input(.audio(chunk(480, rate: 24_000)))
        #expect(actions.count == 1)
        guard case .noteOnce(let kind, _)? = actions.first else {
            Issue.record("\(actions)")
            return
        }
        #expect(kind == "rate")
    }

    @Test func theAgentLeavingEndsTheSessionExceptDuringARejoin() {
        var machine = withAgent()
        let left = machine.event(.participantLeft(identity: "agent-1", reason: "CLIENT_INITIATED"))
        #expect(left.last == .endSession)
        #expect(events(left) == [.notice("the agent left the room")])
        // Someone else leaving is nothing.
        var other = withAgent()
        #expect(other.event(.participantLeft(identity: "someone", reason: "X")).isEmpty)
        // A full rejoin reports the agent as gone: it comes back, and gets what was said meanwhile.
        var rejoining = withAgent()
        #expect(events(rejoining.event(.reconnecting)) == [.link(.connecting(attempt: 2))])
        #expect(rejoining.event(.participantLeft(identity: "agent-1", reason: "X")).isEmpty)
        #expect(!rejoining.agentPresent)
        #expect(rejoining.input(.audio(chunk(320))) == [.heldForAgent(samples: 320)])
        #expect(events(rejoining.event(.reconnected)) == [.link(.connected)])
        #expect(preConnect(rejoining.event(.participantJoined(Self.agent)))?.samples.count == 320)
    }

    @Test func howTheRoomWasLeftDecidesWhatFollows() {
        func end(_ event: LiveKitEvent) -> Action? {
            var machine = withAgent()
            return machine.event(event).last
        }
        func end(_ reason: String) -> Action? { end(.disconnected(reason: reason)) }
        for reason in ["ROOM_DELETED", "ROOM_CLOSED", "PARTICIPANT_REMOVED", "CLIENT_INITIATED"] {
            #expect(end(reason) == .endSession, "\(reason)")
        }
        guard case .endConnection(.failed(let duplicate, healthy: true))? = end("DUPLICATE_IDENTITY"),
            case .endConnection(.failed(let lost, healthy: true))? = end("SIGNAL_CLOSE"),
            case .endConnection(.failed(let helper, healthy: true))? = end(LiveKitEvent.failed(.transient, "gone"))
        else {
            Issue.record("the room's end was not a failure")
            return
        }
        #expect(duplicate.kind == .configuration && duplicate.message.contains("livekit.identity"))
        #expect(lost.kind == .transient && lost.message.contains("SIGNAL_CLOSE"))
        #expect(helper.kind == .transient && helper.message == "gone")
    }

    @Test func transcriptsAreReadChunkByChunkBoundedAndKeptWhenAStreamFails() {
        var machine = withAgent()
        _ = machine.event(.textOpened(id: 1, sender: "agent-1", attributes: ["lk.segment_id": "seg-a"]))
        let first = events(machine.event(.textChunk(id: 1, text: "Hello ")))
        #expect(first == [.transcript(Transcript(role: .agent, segment: "seg-a", text: "Hello ", isFinal: false))])
        _ = machine.event(.textChunk(id: 1, text: "there."))
        let closed = events(machine.event(.textClosed(id: 1, error: nil)))
        #expect(
            closed == [.transcript(Transcript(role: .agent, segment: "seg-a", text: "Hello there.", isFinal: true))]
        )
        // The user's (from this device's identity): whole texts, final as marked, nothing interim per chunk.
        _ = machine.event(
            .textOpened(id: 2, sender: "hark", attributes: ["lk.segment_id": "u1", "lk.transcription_final": "true"])
        )
        #expect(machine.event(.textChunk(id: 2, text: "what time")).isEmpty)
        let failed = machine.event(.textClosed(id: 2, error: "stream closed abnormally"))
        #expect(
            events(failed) == [.transcript(Transcript(role: .user, segment: "u1", text: "what time", isFinal: true))]
        )
        #expect(failed.contains { if case .noteOnce(let kind, _) = $0 { kind == "transcript" } else { false } })
        // Bounded: a flood of text keeps at most the limit.
        _ = machine.event(.textOpened(id: 3, sender: "agent-1", attributes: [:]))
        for _ in 0..<100 { _ = machine.event(.textChunk(id: 3, text: String(repeating: "a", count: 1000))) }
        guard case .transcript(let long)? = events(machine.event(.textClosed(id: 3, error: nil))).first else {
            Issue.record("no transcript")
            return
        }
        #expect(long.text.count <= LiveKitSessionMachine.transcriptLimit + 40)
        #expect(long.segment == "stream-3")
        // And so is the number of streams open at once.
        for id in 10..<(10 + UInt32(LiveKitSessionMachine.openStreamLimit)) {
            _ = machine.event(.textOpened(id: id, sender: "agent-1", attributes: [:]))
        }
        let refused = machine.event(.textOpened(id: 999, sender: "agent-1", attributes: [:]))
        #expect(refused.count == 1)
        #expect(machine.event(.textChunk(id: 999, text: "x")).isEmpty)
    }

    @Test func theWaitForTheAgentIsSaidOnlyWhileInTheRoomWithoutOne() {
        var machine = LiveKitSessionMachine()
        #expect(machine.agentWaitElapsed(.seconds(20)).isEmpty, "not in a room")
        _ = machine.joined(Self.room)
        #expect(machine.agentWaitElapsed(.seconds(20)).count == 1)
        _ = machine.event(.participantJoined(Self.agent))
        #expect(machine.agentWaitElapsed(.seconds(20)).isEmpty)
    }

    @Test func theEndOfAConnectionForgetsTheRoomButKeepsWhatTheUserSaidAndTyped() {
        var machine = LiveKitSessionMachine()
        _ = machine.joined(Self.room)
        _ = machine.input(.text("later"))
        _ = machine.input(.audio(chunk(320)))
        machine.connectionEnded()
        #expect(!machine.connected && machine.room.isEmpty && machine.microphoneTrack.isEmpty)
        #expect(machine.pendingTexts == ["later"])
        #expect(machine.preConnect.count == 320)
        let rejoined = machine.joined(Self.room)
        #expect(events(rejoined).first == .link(.connected))
    }
}

/// What the user said before the agent came, bounded by duration.
@Suite struct PreConnectBufferTests {
    @Test func itKeepsTheNewestAudioUpToItsDurationAndCountsWhatWent() {
        var buffer = PreConnectBuffer(sampleRate: 16_000, limit: .milliseconds(500))
        #expect(buffer.capacity == 8000)
        var expected: [Int16] = []
        for value in 0..<50 {
            let chunk = [Int16](repeating: Int16(value), count: 300)
            buffer.append(chunk)
            expected += chunk
        }
        #expect(buffer.count == 8000)
        #expect(buffer.duration == .milliseconds(500))
        let (samples, dropped) = buffer.take()
        #expect(samples == Array(expected.suffix(8000)))
        #expect(dropped == 15_000 - 8000)
        #expect(buffer.count == 0 && buffer.dropped == 0)
        #expect(buffer.take().samples.isEmpty)
    }

    @Test func aChunkLargerThanTheBufferKeepsItsNewestPart() {
        var buffer = PreConnectBuffer(sampleRate: 1000, limit: .seconds(1))
        buffer.append([1, 2, 3])
        buffer.append(Array(0..<2500).map { Int16($0) })
        let (samples, dropped) = buffer.take()
        #expect(samples == Array(1500..<2500).map { Int16($0) })
        #expect(dropped == 1503)
    }

    @Test func noRoomKeepsNothingAndAbsurdBoundsDoNotTrap() {
        var none = PreConnectBuffer(sampleRate: 16_000, limit: .zero)
        none.append([1, 2, 3])
        #expect(none.take() == ([], 3))
        var negative = PreConnectBuffer(sampleRate: -5, limit: .seconds(-3))
        negative.append([1])
        #expect(negative.count == 0)
        var huge = PreConnectBuffer(sampleRate: Int.max, limit: .seconds(Int64.max))
        huge.append([1, 2])
        #expect(huge.take().samples == [1, 2])
    }
}
