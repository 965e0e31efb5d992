import HarkCore
import HarkGemini
import Testing

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Answer audio at a rate a Live model cannot send is skipped and counted, never played at a guess.
@Suite struct GeminiAudioRateTests {
    func audio(_ mimeType: String, _ samples: [Int16] = [1, 2, 3]) -> ServerMessage {
        ServerMessage(
            .serverContent(
                ServerContent(
                    modelTurn: Content(
                        role: "model",
                        parts: [Part(inlineData: Blob(mimeType: mimeType, data: PCM16.bytes(samples)))]
                    )
                )
            )
        )
    }

    func events(_ actions: [LiveSessionMachine.Action]) -> [SessionEvent] {
        actions.compactMap { if case .emit(let event) = $0 { event } else { nil } }
    }

    @Test func theBlobSaysWhatRateItStates() {
        #expect(Blob(mimeType: "audio/pcm;rate=16000", data: Data()).audioRate == .supported(16_000))
        #expect(Blob(mimeType: "audio/pcm;rate=4294967296", data: Data()).audioRate == .unsupported("4294967296"))
        #expect(Blob(mimeType: "audio/pcm;rate=4294967296", data: Data()).pcmRate == nil)
        #expect(Blob(mimeType: "audio/pcm", data: Data()).audioRate == .unstated)
    }

    @Test func audioAtAnUnsupportedRateIsSkippedAndCounted() {
        var machine = LiveSessionMachine(manualActivity: false)
        _ = machine.receive(ServerMessage(.setupComplete(SetupComplete())))
        let bad = ["4294967296", "0", "-5", "1e9", "abc", "", "1", "96000"]
        for (index, rate) in bad.enumerated() {
            let actions = machine.receive(audio("audio/pcm;rate=\(rate)"))
            #expect(events(actions).isEmpty, "rate=\(rate)")
            // Said once, then only counted.
            let debug = actions.filter { if case .debug = $0 { true } else { false } }
            #expect(debug.count == (index == 0 ? 1 : 0), "rate=\(rate)")
        }
        #expect(machine.unsupportedRateAudio == bad.count)
        #expect(machine.conversation == .listening)
        // The turn is still the model's: good audio after plays at its rate, an unstated one at the default.
        #expect(
            events(machine.receive(audio("audio/pcm;rate=16000", [7])))
                == [.conversation(.speaking), .audio(AudioChunk(samples: [7], sampleRate: 16_000))]
        )
        #expect(
            events(machine.receive(audio("audio/pcm", [8]))) == [.audio(AudioChunk(samples: [8], sampleRate: 24_000))]
        )
        #expect(machine.unsupportedRateAudio == bad.count)
    }
}
