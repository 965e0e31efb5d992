import HarkCore
import HarkDatagrid
import Testing

/// The state machine as a value: no I/O, no clock.
@Suite struct MachineTests {
    func events(_ actions: [DatagridSessionMachine.Action]) -> [SessionEvent] {
        actions.compactMap { if case .emit(let event) = $0 { event } else { nil } }
    }

    @Test func readyConnectsAndListens() {
        var machine = DatagridSessionMachine()
        machine.connectionOpened()
        #expect(machine.phase == .starting)
        _ = machine.receive(.started(DatagridStarted(sessionId: "s", conversationId: "c1")))
        #expect(machine.conversationId == "c1")
        #expect(events(machine.receive(.ready)) == [.link(.connected), .conversation(.listening)])
        #expect(machine.phase == .ready)
        #expect(machine.startPayload(template: DatagridStart(agentId: "a")).conversationId == "c1")
    }

    @Test func aTurnThenInterruptions() {
        var machine = DatagridSessionMachine()
        _ = machine.receive(.ready)
        #expect(
            events(machine.receive(.transcript(.init(role: "user", text: "hi"))))
                == [
                    .transcript(Transcript(role: .user, segment: "user-1", text: "hi", isFinal: true)),
                    .conversation(.thinking),
                ]
        )
        let audio = events(machine.receive(.audio(DatagridAudio(data: PCM16.bytes([1, 2])))))
        #expect(audio == [.conversation(.speaking), .audio(AudioChunk(samples: [1, 2], sampleRate: 24_000))])
        #expect(
            events(machine.receive(.transcript(.init(role: "agent", text: "hello"))))
                == [
                    .transcript(Transcript(role: .agent, segment: "agent-1", text: "hello", isFinal: true)),
                    .turnComplete,
                    .conversation(.listening),
                ]
        )
        // The service interrupts.
        _ = machine.receive(.audio(DatagridAudio(data: PCM16.bytes([1]))))
        #expect(events(machine.receive(.interrupted)) == [.interrupted, .conversation(.listening)])
        // A local interrupt: `interrupt` goes out, the rest of the answer is dropped.
        _ = machine.receive(.audio(DatagridAudio(data: PCM16.bytes([1]))))
        let (message, actions) = machine.send(.interrupt)
        #expect(message == .interrupt)
        #expect(events(actions) == [.interrupted, .conversation(.listening)])
        #expect(events(machine.receive(.audio(DatagridAudio(data: PCM16.bytes([3]))))).isEmpty)
        #expect(events(machine.receive(.transcript(.init(role: "agent", text: "cut")))).isEmpty)
        #expect(machine.send(.text("typed")).message == .text("typed"))
    }

    @Test func toolStatusesDriveThinking() {
        var machine = DatagridSessionMachine()
        _ = machine.receive(.ready)
        #expect(
            events(machine.receive(.toolCall(.init(toolName: "search", status: "started"))))
                == [.tool(.started(id: "", name: "search")), .conversation(.thinking)]
        )
        #expect(
            events(machine.receive(.toolCall(.init(toolName: "search", status: "failed"))))
                == [.tool(.finished(id: "", name: "search", succeeded: false))]
        )
        #expect(machine.conversation == .thinking)
        #expect(machine.runningTools.isEmpty)
    }

    @Test func errorCodesAreClassified() {
        #expect(DatagridSessionMachine.classify(.init(message: "m", code: "client_silence_timeout")).kind == .transient)
        #expect(DatagridSessionMachine.classify(.init(message: "m", code: "unauthorized")).kind == .authentication)
        #expect(DatagridSessionMachine.classify(.init(message: "m", code: "agent_not_found")).kind == .configuration)
        #expect(DatagridSessionMachine.classify(.init(message: "m")).kind == .transient)
        var machine = DatagridSessionMachine()
        let actions = machine.receive(.error(.init(message: "quiet", code: "client_silence_timeout")))
        #expect(actions.contains { if case .fail(let failure) = $0 { failure.kind == .transient } else { false } })
    }

    @Test func endedTranscriptRepeatsNothingAlreadyDelivered() {
        var machine = DatagridSessionMachine()
        _ = machine.receive(.ready)
        _ = machine.receive(.transcript(.init(role: "user", text: "one")))
        let ended = machine.receive(
            .ended(DatagridEnded(transcript: [.init(role: "user", text: "one"), .init(role: "agent", text: "two")]))
        )
        #expect(events(ended).transcripts == [Transcript(role: .agent, segment: "agent-1", text: "two", isFinal: true)])
        #expect(ended.last == .conversationEnded)
    }

    @Test func aTurnCutByItsConnectionIsReportedEnded() {
        var machine = DatagridSessionMachine()
        _ = machine.receive(.ready)
        _ = machine.receive(.toolCall(.init(toolName: "search", status: "started")))
        _ = machine.receive(.audio(DatagridAudio(data: PCM16.bytes([5]))))
        let closed = events(machine.connectionClosed())
        #expect(closed == [.turnComplete, .tool(.cancelled(id: "")), .conversation(.listening)])
        machine.connectionOpened()
        #expect(machine.phase == .starting)
        #expect(!machine.turnInFlight)
    }

    @Test func unknownTypesOnlyLog() {
        var machine = DatagridSessionMachine()
        #expect(events(machine.receive(.unknown(type: "viseme"))).isEmpty)
    }
}
