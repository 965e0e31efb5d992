import HarkCore
import HarkDatagrid
import Testing

/// Answer audio at a rate a voice service cannot send is skipped and counted, never played at a guess.
@Suite struct DatagridAudioRateTests {
    func events(_ actions: [DatagridSessionMachine.Action]) -> [SessionEvent] {
        actions.compactMap { if case .emit(let event) = $0 { event } else { nil } }
    }

    @Test func theMessageSaysWhatRateItStates() {
        #expect(DatagridAudio(data: PCM16.bytes([1]), mimeType: "audio/pcm;rate=24000").audioRate == .supported(24_000))
        #expect(DatagridAudio(data: PCM16.bytes([1]), mimeType: "audio/pcm;rate=1e9").audioRate == .unsupported("1e9"))
        #expect(DatagridAudio(data: PCM16.bytes([1]), mimeType: "audio/pcm;rate=1e9").rate == nil)
        #expect(DatagridAudio(data: PCM16.bytes([1])).audioRate == .unstated)
    }

    @Test func audioAtAnUnsupportedRateIsSkippedAndCounted() {
        var machine = DatagridSessionMachine()
        _ = machine.receive(.ready)
        let bad = ["4294967296", "0", "-5", "1e9", "abc", "", "1", "96000"]
        for (index, rate) in bad.enumerated() {
            let actions = machine.receive(
                .audio(DatagridAudio(data: PCM16.bytes([1, 2]), mimeType: "audio/pcm;rate=\(rate)"))
            )
            #expect(events(actions).isEmpty, "rate=\(rate)")
            let debug = actions.filter { if case .debug = $0 { true } else { false } }
            #expect(debug.count == (index == 0 ? 1 : 0), "rate=\(rate)")
        }
        #expect(machine.unsupportedRateAudio == bad.count)
        #expect(machine.conversation == .listening && !machine.turnInFlight)
        let good = machine.receive(.audio(DatagridAudio(data: PCM16.bytes([5]), mimeType: "audio/pcm;rate=16000")))
        #expect(events(good) == [.conversation(.speaking), .audio(AudioChunk(samples: [5], sampleRate: 16_000))])
    }
}
