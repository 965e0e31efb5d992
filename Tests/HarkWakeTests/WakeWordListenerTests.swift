import HarkCore
import HarkTestKit
import HarkWake
import Synchronization
import Testing

/// The detector on its own thread, as the appliance runs it: frames handed over one at a time, detections
/// placed in the feeder's count.
@Suite(.enabled(if: WakeFixtures.runtime != nil, "\(WakeFixtures.missing)"))
struct WakeWordListenerTests {
    final class Heard: Sendable {
        let list = Mutex<[WakeDetection]>([])
        func wait(for count: Int) async throws -> [WakeDetection] {
            try await withDeadline(.seconds(20), "\(count) detection(s)") {
                while self.list.withLock({ $0.count }) < count { await Task.yield() }
            }
            return list.withLock { $0 }
        }
    }

    /// Feeds `samples` from `origin` in 20 ms frames, as a microphone does: never more than the listener's backlog
    /// ahead of what it has heard (faster than that, it drops the oldest audio, as it should).
    func feed(_ listener: WakeWordListener, _ samples: [Int16], at origin: Int) async throws {
        let before = listener.counters.samplesHeard
        for start in stride(from: 0, to: samples.count, by: 320) {
            listener.feed(Array(samples[start..<min(start + 320, samples.count)]), at: origin + start)
            if start % 8000 == 0 {
                try await withDeadline(.seconds(20), "the listener to keep up") {
                    while listener.counters.samplesHeard < before + start { await Task.yield() }
                }
            }
        }
    }

    /// The detection a whole-clip run gives (the reference's numbers, by the detector tests).
    func direct(_ clip: [Int16]) throws -> WakeScore {
        let detector = try WakeFixtures.detector(["oww_hey_jarvis"])
        let scores = try detector.process(clip)
        let first = scores.first(where: \.isDetection)
        return try #require(first)
    }

    @Test func framesFedOneByOneDetectAtTheSameSampleInTheFeedersCount() async throws {
        let clip = try WakeFixtures.samples("hey-jarvis")
        let expected = try direct(clip)
        let listener = WakeWordListener(detector: try WakeFixtures.detector(["oww_hey_jarvis"]))
        let heard = Heard()
        try listener.start { detection in heard.list.withLock { $0.append(detection) } }
        let origin = 1_000_000  // the appliance has been listening a while
        try await feed(listener, clip, at: origin)
        let detections = try await heard.wait(for: 1)
        #expect(detections.first?.word == "oww_hey_jarvis")
        #expect(detections.first?.endSample == origin + expected.endSample)
        try await withDeadline(.seconds(20), "the whole clip to be heard") {
            while listener.counters.samplesHeard < clip.count { await Task.yield() }
        }
        let counters = listener.counters
        #expect(counters.detections == 1)
        #expect(counters.droppedSamples == 0)
        #expect(counters.cpuNanoseconds > 0)
        #expect(counters.lastError == nil)
        listener.stop()
    }

    @Test func aGapRestartsTheDetectorSoLaterDetectionsAreStillPlacedRight() async throws {
        let clip = try WakeFixtures.samples("hey-jarvis")
        let expected = try direct(clip)
        let listener = WakeWordListener(detector: try WakeFixtures.detector(["oww_hey_jarvis"]))
        let heard = Heard()
        try listener.start { detection in heard.list.withLock { $0.append(detection) } }
        // Half a second of other audio, then frames lost (a muted microphone), then the clip.
        let noise = try WakeFixtures.samples("hello-there")
        try await feed(listener, Array(noise.prefix(8000)), at: 0)
        let resumed = 50_000
        try await feed(listener, clip, at: resumed)
        let detections = try await heard.wait(for: 1)
        #expect(detections.first?.endSample == resumed + expected.endSample)
        listener.stop()
        // Stopped: frames are ignored, and stopping again is harmless.
        listener.feed(clip, at: 0)
        listener.stop()
    }
}
