import HarkCore
import Testing

@testable import HarkIndicators

@Suite struct GestureTests {
    let timing = GestureTiming(
        debounce: .milliseconds(20),
        doubleTapWindow: .milliseconds(300),
        longHold: .milliseconds(800)
    )

    @Test func pressIsReportedAtOnceAndBounceIsIgnored() {
        var recognizer = GestureRecognizer(timing: timing)
        #expect(recognizer.edge(pressed: true, at: .milliseconds(1000)) == [.press])
        #expect(recognizer.edge(pressed: false, at: .milliseconds(1003)) == [])
        #expect(recognizer.edge(pressed: true, at: .milliseconds(1007)) == [])
        #expect(recognizer.tick(at: .milliseconds(1020)) == [])
        #expect(recognizer.isPressed)
    }

    @Test func aChangeInsideTheDebounceWindowIsNotLost() {
        var recognizer = GestureRecognizer(timing: timing, detectsDoubleTap: false)
        #expect(recognizer.edge(pressed: true, at: .zero) == [.press])
        #expect(recognizer.edge(pressed: false, at: .milliseconds(15)) == [])
        #expect(recognizer.nextDeadline == .milliseconds(20))
        #expect(recognizer.tick(at: .milliseconds(20)) == [.release, .tap])
        #expect(!recognizer.isPressed)
    }

    @Test func tapWaitsForTheDoubleTapWindow() {
        var recognizer = GestureRecognizer(timing: timing)
        #expect(recognizer.edge(pressed: true, at: .zero) == [.press])
        #expect(recognizer.edge(pressed: false, at: .milliseconds(100)) == [.release])
        #expect(recognizer.nextDeadline == .milliseconds(400))
        #expect(recognizer.tick(at: .milliseconds(399)) == [])
        #expect(recognizer.tick(at: .milliseconds(400)) == [.tap])
        #expect(recognizer.nextDeadline == nil)
    }

    @Test func twoQuickTapsAreADoubleTapAndNotTwoTaps() {
        var recognizer = GestureRecognizer(timing: timing)
        var events: [ButtonEvent] = []
        events += recognizer.edge(pressed: true, at: .zero)
        events += recognizer.edge(pressed: false, at: .milliseconds(80))
        events += recognizer.edge(pressed: true, at: .milliseconds(200))
        events += recognizer.edge(pressed: false, at: .milliseconds(280))
        events += recognizer.tick(at: .seconds(2))
        #expect(events == [.press, .release, .press, .release, .doubleTap])
    }

    @Test func longHoldIsReportedWhileHeldAndItsReleaseIsNoTap() {
        var recognizer = GestureRecognizer(timing: timing)
        #expect(recognizer.edge(pressed: true, at: .zero) == [.press])
        #expect(recognizer.nextDeadline == .milliseconds(800))
        #expect(recognizer.tick(at: .milliseconds(799)) == [])
        #expect(recognizer.tick(at: .milliseconds(800)) == [.longHold])
        #expect(recognizer.tick(at: .milliseconds(5000)) == [])
        #expect(recognizer.edge(pressed: false, at: .milliseconds(5000)) == [.release])
        #expect(recognizer.tick(at: .seconds(10)) == [])
    }

    @Test func aMediumPressIsNeitherTapNorHold() {
        var recognizer = GestureRecognizer(timing: timing)
        _ = recognizer.edge(pressed: true, at: .zero)
        #expect(recognizer.edge(pressed: false, at: .milliseconds(500)) == [.release])
        #expect(recognizer.tick(at: .seconds(5)) == [])
    }

    @Test func theGestureMapIsPerMode() {
        let map = GestureMap.standard
        #expect(map.action(for: .press, in: .pushToTalk) == .talkStart)
        #expect(map.action(for: .release, in: .pushToTalk) == .talkEnd)
        #expect(map.action(for: .press, in: .alwaysListening) == ButtonAction.none)
        #expect(map.action(for: .tap, in: .alwaysListening) == .cancel)
        #expect(map.usesDoubleTap(in: .pushToTalk))
        #expect(!map.usesDoubleTap(in: .kiosk))
    }
}
