import HarkCore
import Testing

@testable import HarkIndicators

@Suite struct LEDEngineTests {
    let red = RGB(255, 0, 0)
    let blue = RGB(0, 0, 255)

    @Test func colourParsingAndScaling() {
        #expect(RGB(hex: "#ff8000") == RGB(255, 128, 0))
        #expect(RGB(hex: "#FF8000") == RGB(255, 128, 0))
        #expect(RGB(hex: "ff8000") == nil)
        #expect(RGB(hex: "#ff80zz") == nil)
        #expect(RGB(255, 128, 0).scaled(128) == RGB(128, 64, 0))
        #expect(RGB(255, 128, 0).description == "#ff8000")
    }

    @Test func overlaysWinInStrictPriorityOverTheConversationState() {
        var input = IndicatorInput(conversation: .speaking)
        #expect(input.shown == .conversation(.speaking))
        input.overlays = [.buttonHeld, .muted]
        #expect(input.shown == .overlay(.muted))
        input.overlays = [.buttonHeld, .muted, .offline, .error, .fatal, .booting]
        #expect(input.shown == .overlay(.booting))
        input.overlays.remove(.booting)
        #expect(input.shown == .overlay(.fatal))
        #expect(Overlay.allCases.map(\.priority) == [0, 1, 2, 3, 4, 5, 6, 7])
        // The wake animation is the least: any other overlay hides it.
        input.overlays = [.wake, .buttonHeld]
        #expect(input.shown == .overlay(.buttonHeld))
        input.overlays = [.wake]
        #expect(input.shown == .overlay(.wake))
    }

    @Test func solidAndOff() {
        var engine = LEDEngine(pixelCount: 3, table: PatternTable([.conversation(.listening): .solid(blue)]))
        #expect(engine.frame(at: .zero) == [.off, .off, .off])
        engine.update(IndicatorInput(conversation: .listening), at: .seconds(1))
        #expect(engine.frame(at: .seconds(1)) == [blue, blue, blue])
    }

    @Test func blinkFollowsItsPeriodFromTheMomentTheStateIsShown() {
        let table = PatternTable([.overlay(.error): .blink(red, period: .milliseconds(1000), duty: 25)])
        var engine = LEDEngine(pixelCount: 1, table: table)
        engine.update(IndicatorInput(overlays: [.error]), at: .milliseconds(10_100))
        #expect(engine.frame(at: .milliseconds(10_100)) == [red])
        #expect(engine.frame(at: .milliseconds(10_349)) == [red])
        #expect(engine.frame(at: .milliseconds(10_350)) == [.off])
        #expect(engine.frame(at: .milliseconds(11_099)) == [.off])
        #expect(engine.frame(at: .milliseconds(11_100)) == [red])
    }

    @Test func breatheRisesAndFallsEased() {
        let white = RGB(255, 255, 255)
        let table = PatternTable([.conversation(.idle): .breathe(white, period: .milliseconds(1000))])
        let engine = LEDEngine(pixelCount: 1, table: table)
        #expect(engine.frame(at: .zero) == [.off])
        // quarter period: triangle 500/1000, eased to 255 * 0.25 = 63
        #expect(engine.frame(at: .milliseconds(250)) == [RGB(63, 63, 63)])
        #expect(engine.frame(at: .milliseconds(500)) == [white])
        #expect(engine.frame(at: .milliseconds(750)) == [RGB(63, 63, 63)])
        #expect(engine.frame(at: .milliseconds(1000)) == [.off])
    }

    @Test func spinMovesAHeadWithAHalvingTailRoundTheRing() {
        let table = PatternTable([.conversation(.thinking): .spin(blue, period: .milliseconds(1200), tail: 2)])
        var engine = LEDEngine(pixelCount: 12, table: table)
        engine.update(IndicatorInput(conversation: .thinking), at: .zero)
        let half = RGB(0, 0, 127)
        let quarter = RGB(0, 0, 63)
        var expected = Array(repeating: RGB.off, count: 12)
        expected[0] = blue
        expected[11] = half
        expected[10] = quarter
        #expect(engine.frame(at: .zero) == expected)
        expected = Array(repeating: RGB.off, count: 12)
        expected[5] = blue
        expected[4] = half
        expected[3] = quarter
        #expect(engine.frame(at: .milliseconds(500)) == expected)
        // On a single LED a spin is a blink.
        let single = LEDEngine.render(
            .spin(blue, period: .seconds(1), tail: 2),
            pixels: 1,
            elapsed: .milliseconds(600),
            level: 0
        )
        #expect(single == [.off])
    }

    @Test func levelFollowingLightsAFractionOfTheRingOrOfTheBrightness() {
        let ring = LEDEngine.render(.level(blue, floor: 0), pixels: 4, elapsed: .zero, level: 0.5)
        #expect(ring == [blue, blue, .off, .off])
        let floored = LEDEngine.render(.level(blue, floor: 51), pixels: 4, elapsed: .zero, level: 0.25)
        #expect(floored == [blue, RGB(0, 0, 51), RGB(0, 0, 51), RGB(0, 0, 51)])
        let single = LEDEngine.render(.level(blue, floor: 10), pixels: 1, elapsed: .zero, level: 0.2)
        #expect(single == [RGB(0, 0, 51)])
        let silent = LEDEngine.render(.level(blue, floor: 10), pixels: 1, elapsed: .zero, level: .nan)
        #expect(silent == [RGB(0, 0, 10)])
    }

    @Test func theMicrophoneLiveMarkIsOnEveryFrameWhateverIsShown() {
        let mark = MicrophoneLiveMark(pixel: 1, color: RGB(255, 0, 0))
        var engine = LEDEngine(pixelCount: 3, table: .standard, microphoneLiveMark: mark)
        for overlay in Overlay.allCases {
            engine.update(
                IndicatorInput(conversation: .listening, overlays: [overlay], microphoneLive: true),
                at: .zero
            )
            for millis in stride(from: 0, through: 2000, by: 33) {
                #expect(engine.frame(at: .milliseconds(millis))[1] == mark.color, "hidden by \(overlay)")
            }
        }
        engine.update(IndicatorInput(conversation: .idle, microphoneLive: false), at: .zero)
        #expect(engine.frame(at: .zero) == [.off, .off, .off])
        // A mark pixel beyond the strip is drawn on the last pixel, never dropped.
        var single = LEDEngine(pixelCount: 1, table: .standard, microphoneLiveMark: mark)
        single.update(IndicatorInput(conversation: .idle, microphoneLive: true), at: .zero)
        #expect(single.frame(at: .zero) == [mark.color])
    }

    @Test func framesAreOnAFixedGrid() {
        let engine = LEDEngine(pixelCount: 1, frameRate: 25)
        #expect(engine.frameInterval == .milliseconds(40))
        #expect(engine.nextFrameTime(after: .zero) == .milliseconds(40))
        #expect(engine.nextFrameTime(after: .milliseconds(39)) == .milliseconds(40))
        #expect(engine.nextFrameTime(after: .milliseconds(40)) == .milliseconds(80))
        #expect(engine.nextFrameTime(after: .milliseconds(1234)) == .milliseconds(1240))
    }

    @Test func anAnimationRestartsOnlyWhenTheShownStateChanges() {
        let table = PatternTable([
            .conversation(.listening): .blink(red, period: .milliseconds(100), duty: 50),
            .overlay(.muted): .solid(blue),
        ])
        var engine = LEDEngine(pixelCount: 1, table: table)
        engine.update(IndicatorInput(conversation: .listening), at: .zero)
        // A level change is not a state change: the phase continues.
        engine.update(IndicatorInput(conversation: .listening, level: 0.7), at: .milliseconds(60))
        #expect(engine.frame(at: .milliseconds(60)) == [.off])
        engine.update(IndicatorInput(conversation: .listening, overlays: [.muted]), at: .milliseconds(70))
        #expect(engine.frame(at: .milliseconds(70)) == [blue])
        engine.update(IndicatorInput(conversation: .listening), at: .milliseconds(80))
        #expect(engine.frame(at: .milliseconds(80)) == [red])
    }
}
