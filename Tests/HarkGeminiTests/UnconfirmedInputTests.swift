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

    @Test func anUpdateWithoutAnIndexLeavesWhatWasSentWithinTheLag() {
        var log = UnconfirmedInput(boundSamples: 160_000)
        // A backlog going out faster than real time: 100 ms chunks 25 ms apart.
        for chunk in 0..<8 {
            log.sent(audio(1_600, Int16(chunk)), index: Int64(chunk + 1), at: .milliseconds(25 * chunk))
        }
        // At 190 ms, a 100 ms lag leaves the chunks sent at 100 ms and after (four), more than the
        // 150-sample margin alone would.
        log.confirmed(through: nil, marginSamples: 150, lag: .milliseconds(100), now: .milliseconds(190))
        #expect(log.audioSamples == 4 * 1_600)
        guard case .audio(let first)? = log.takeAll().first else {
            Issue.record("expected audio")
            return
        }
        #expect(first.samples.first == 4)
    }

    @Test func theLagKeepsNothingOnceEverythingIsOlderThanIt() {
        var log = UnconfirmedInput(boundSamples: 16_000)
        log.sent(audio(1_600), index: 1, at: .seconds(1))
        log.confirmed(through: nil, lag: .milliseconds(300), now: .seconds(2))
        #expect(log.isEmpty)
    }
}

@Suite struct CatchUpPacerTests {
    @Test func realTimeInputNeverWaits() {
        var pacer = CatchUpPacer(rate: 4)
        for frame in 0..<500 {
            // 40 ms of audio every 40 ms.
            #expect(pacer.delay(sending: 640, at: .milliseconds(40 * frame)) == .zero)
        }
    }

    @Test func aBacklogGoesOutAtTheRateAfterTheCapacity() {
        var pacer = CatchUpPacer(rate: 4, capacity: .milliseconds(500))
        // 500 ms of audio goes at once; the next 400 ms (6400 samples) waits 100 ms at 4x real time.
        #expect(pacer.delay(sending: 8_000, at: .zero) == .zero)
        #expect(pacer.delay(sending: 6_400, at: .zero) == .milliseconds(100))
        // Sent at 100 ms as told: the bucket is even again, so another 1.6 s chunk waits 400 ms.
        #expect(pacer.delay(sending: 25_600, at: .milliseconds(100)) == .milliseconds(400))
    }

    @Test func aWholeBacklogTakesItsLengthOverTheRate() {
        var pacer = CatchUpPacer(rate: 8, capacity: .zero)
        var now = Duration.zero
        for _ in 0..<80 {  // 8 s of audio in 100 ms chunks
            now += pacer.delay(sending: 1_600, at: now)
        }
        // 8 s at 8x real time: the last chunk waits until 1 s (less its own 12.5 ms).
        #expect(now >= .milliseconds(987) && now <= .milliseconds(1_000))
    }
}
