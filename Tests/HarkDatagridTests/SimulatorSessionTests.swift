import HarkCore
import HarkDatagrid
import HarkDatagridSimulator
import HarkTestKit
import Testing

/// The simulator's service behaviour as a value: messages and time in, actions out; no sockets, no sleeps.
@Suite struct SimulatorSessionTests {
    func audio(_ samples: [Int16]) -> DatagridClientMessage {
        .audio(DatagridAudio(data: PCM16.bytes(samples), mimeType: "audio/pcm;rate=16000"))
    }

    func sent(_ actions: [DatagridSimulatorAction]) -> [DatagridServerMessage] {
        actions.compactMap { if case .send(let message) = $0 { message } else { nil } }
    }

    func session(
        _ store: DatagridStore = DatagridStore(),
        number: Int = 1,
        _ configure: (inout DatagridSimulatorConfiguration) -> Void = { _ in }
    ) -> DatagridSimulatorSession {
        var configuration = DatagridSimulatorConfiguration()
        configuration.greets = false
        configure(&configuration)
        return DatagridSimulatorSession(number: number, configuration: configuration, store: store)
    }

    /// Feeds `samples` in 100 ms messages; returns everything the service did.
    func feed(_ session: inout DatagridSimulatorSession, _ samples: [Int16]) -> [DatagridSimulatorAction] {
        var out: [DatagridSimulatorAction] = []
        var offset = 0
        while offset < samples.count {
            let end = min(offset + 1600, samples.count)
            out += session.received(audio(Array(samples[offset..<end])), wallNow: .zero)
            offset = end
        }
        return out
    }

    @Test func startIsAnsweredWithStartedThenReady() {
        var simulator = session()
        #expect(simulator.received(audio([1, 2, 3]), wallNow: .zero).isEmpty)
        let messages = sent(simulator.received(.start(DatagridStart(agentId: "a")), wallNow: .zero))
        #expect(messages.map(\.type) == ["started", "ready"])
        guard case .started(let started) = messages.first else { return }
        #expect(started.conversationId == simulator.conversationId)
    }

    @Test func aSpokenTurnOnTheAudioClock() {
        var simulator = session()
        _ = simulator.received(.start(DatagridStart()), wallNow: .zero)
        let speech = TestSignals.speech(total: .milliseconds(1600), burst: .milliseconds(1600), gap: .zero)
        let silence = [Int16](repeating: 0, count: 16_000 * 3)
        let messages = sent(feed(&simulator, speech + silence))
        let types = messages.map(\.type)
        // 1.6 s of speech: 4 + round(6.4) = 10 beeps, 20 chunks of 125 ms.
        #expect(types.first == "transcript")
        #expect(types.filter { $0 == "audio" }.count == 20)
        #expect(types.last == "transcript")
        #expect(messages.first == .transcript(DatagridTranscriptLine(role: "user", text: "speech 1 (1.6 s)")))
        #expect(messages.last == .transcript(DatagridTranscriptLine(role: "agent", text: "answer 1")))
        #expect(simulator.clockNanoseconds == 4_600_000_000)
    }

    @Test func silentFramesEndTheSessionAndAMutedMicPausesTheCountdown() {
        var simulator = session()
        let start = DatagridStart(voiceConfig: .init(silenceTimeout: 2))
        _ = simulator.received(.start(start), wallNow: .zero)
        let silence = [Int16](repeating: 0, count: 16_000 * 3 / 2)
        #expect(sent(feed(&simulator, silence)).isEmpty)
        // No frames for a long time (a muted microphone): the countdown waits.
        #expect(sent(simulator.tick(wallNow: .seconds(100))).isEmpty)
        let actions = feed(&simulator, [Int16](repeating: 0, count: 16_000))
        #expect(
            sent(actions) == [
                .error(
                    DatagridError(
                        message: "No audio activity detected; closing the session",
                        code: "client_silence_timeout"
                    )
                )
            ]
        )
        #expect(actions.last == .close(code: 1000, reason: "client_silence_timeout"))
        #expect(simulator.phase == .closed)
    }

    @Test func theSilenceTimeoutIsScaled() {
        var simulator = session { $0.timeScale = 0.01 }
        _ = simulator.received(.start(DatagridStart()), wallNow: .zero)
        // 60 s scaled to 0.6 s.
        let actions = feed(&simulator, [Int16](repeating: 0, count: 16_000))
        #expect(actions.contains(.close(code: 1000, reason: "client_silence_timeout")))
    }

    @Test func stopEndsWithTheConversationsTranscript() {
        var simulator = session()
        _ = simulator.received(.start(DatagridStart()), wallNow: .zero)
        _ = simulator.received(.text("hello"), wallNow: .zero)
        // The wall clock drives a text-only session: thinking, then the answer at twice real time.
        _ = simulator.tick(wallNow: .seconds(1))
        _ = simulator.tick(wallNow: .seconds(2))
        let actions = simulator.received(.stop, wallNow: .seconds(2))
        #expect(
            sent(actions) == [
                .ended(
                    DatagridEnded(
                        creditsConsumed: 0.5,
                        transcript: [.init(role: "user", text: "hello"), .init(role: "agent", text: "answer 1")]
                    )
                )
            ]
        )
        #expect(actions.last == .close(code: 1000, reason: "stopped"))
    }

    @Test func aConversationContinuesOnANewConnection() {
        let store = DatagridStore()
        var first = session(store)
        _ = first.received(.start(DatagridStart()), wallNow: .zero)
        _ = first.received(.text("one"), wallNow: .zero)
        let id = first.conversationId
        var second = session(store, number: 2)
        let actions = second.received(.start(DatagridStart(conversationId: id)), wallNow: .zero)
        #expect(actions.contains { if case .joined(id!, true, _) = $0 { true } else { false } })
        let turn = second.received(.text("two"), wallNow: .zero)
        #expect(turn.contains { if case .turnStarted(let record) = $0 { record.number == 2 } else { false } })
        // An unknown conversation id starts a new conversation.
        var third = session(store, number: 3)
        let fresh = third.received(.start(DatagridStart(conversationId: "conv_unknown")), wallNow: .zero)
        #expect(fresh.contains { if case .joined(_, false, _) = $0 { true } else { false } })
    }

    @Test func unknownClientMessagesAreAnsweredWithAnError() {
        var simulator = session()
        _ = simulator.received(.start(DatagridStart()), wallNow: .zero)
        let messages = sent(simulator.received(.unknown(type: "dance"), wallNow: .zero))
        #expect(messages.first.map(\.type) == "error")
    }
}
