import HarkCore
import HarkGemini
import Testing

@Suite struct UnconfirmedInputTests {
    private func audio(_ samples: Int, _ value: Int16 = 1) -> SessionInput {
        .audio(AudioChunk(samples: [Int16](repeating: value, count: samples), sampleRate: 16_000))
    }

    @Test func everythingSentSinceTheLastUpdateIsHeldInOrder() {
        var log = UnconfirmedInput(boundSamples: 16_000)
        log.sent(.activityStart, index: 1)
        log.sent(audio(160, 1), index: 2)
        log.sent(.interrupt, index: 3)  // never on the wire: not held
        log.sent(audio(160, 2), index: 3)
        log.sent(.activityEnd, index: 4)
        #expect(log.audioSamples == 320)
        #expect(log.holdsActivityStart)
        let held = log.takeAll()
        #expect(held == [.activityStart, audio(160, 1), audio(160, 2), .activityEnd])
        #expect(log.isEmpty && log.audioSamples == 0 && !log.holdsActivityStart)
    }

    @Test func anUpdateWithoutAnIndexConfirmsEverythingSentBeforeIt() {
        var log = UnconfirmedInput(boundSamples: 16_000)
        log.sent(audio(160), index: 1)
        log.sent(.audioStreamEnd, index: 2)
        log.confirmed(through: nil)
        #expect(log.isEmpty && log.audioSamples == 0)
        log.sent(audio(80), index: 3)
        #expect(log.takeAll() == [audio(80)])
    }

    @Test func anUpdateWithAnIndexKeepsOnlyWhatFollowsIt() {
        var log = UnconfirmedInput(boundSamples: 16_000)
        for index in 1...4 { log.sent(audio(100, Int16(index)), index: Int64(index)) }
        log.confirmed(through: 2)
        #expect(log.audioSamples == 200)
        log.confirmed(through: 0)  // an older update changes nothing
        #expect(log.takeAll() == [audio(100, 3), audio(100, 4)])
    }

    @Test func theOldestAudioGoesWhenOverTheBoundAndControlInputsStay() {
        var log = UnconfirmedInput(boundSamples: 250)
        log.sent(audio(100, 1), index: 1)
        log.sent(.activityStart, index: 2)
        log.sent(audio(100, 2), index: 3)
        log.sent(audio(100, 3), index: 4)
        #expect(log.audioSamples == 200)
        #expect(log.droppedSamples == 100)
        #expect(log.takeAll() == [.activityStart, audio(100, 2), audio(100, 3)])
    }

    @Test func anUpdateWithoutAnIndexLeavesTheNewestMarginOfAudio() {
        var log = UnconfirmedInput(boundSamples: 16_000)
        log.sent(audio(100, 1), index: 1)
        log.sent(audio(100, 2), index: 2)
        log.sent(.audioStreamEnd, index: 3)
        log.sent(audio(100, 3), index: 4)
        // The newest 150 samples may still have been in flight: the chunks holding them stay.
        log.confirmed(through: nil, marginSamples: 150)
        #expect(log.audioSamples == 200)
        guard case .audio(let first)? = log.takeAll().first else {
            Issue.record("expected audio")
            return
        }
        #expect(first.samples.first == 2)
    }
}
