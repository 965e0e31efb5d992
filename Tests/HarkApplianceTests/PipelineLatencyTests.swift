import HarkAppliance
import HarkCore
import Testing

/// The appliance's capture-to-wire figures, as values: each frame of a message is measured back from the
/// newest sample's capture time.
@Suite struct PipelineLatencyTests {
    @Test func eachFrameOfAMessageCountsFromItsOwnCaptureTime() throws {
        let latencies = PipelineLatencies(frameSamples: 320, pace: 1)  // 20 ms frames in real time
        #expect(latencies.captureToWire == nil)
        // Three frames whose newest sample was captured 5 ms before the message went out: 5, 25 and 45 ms.
        let newest: UInt64 = 10_000_000_000
        latencies.sent(
            AudioChunk(samples: [Int16](repeating: 0, count: 960), sampleRate: 16_000, capturedAt: newest),
            now: newest + 5_000_000
        )
        // A pre-roll (no capture time) is not measured.
        latencies.sent(AudioChunk(samples: [Int16](repeating: 0, count: 960), sampleRate: 16_000), now: newest)
        let summary = try #require(latencies.captureToWire)
        #expect(summary.count == 3)
        #expect(abs(summary.p50 - 25) < 0.5)
        #expect(abs(summary.max - 45) < 0.5)
        #expect(latencies.receivedToSpeaker == nil)
    }
}
