import HarkAudio
import HarkPlatform
import Synchronization
import Testing

/// The lock-free ring a decoder writes and the playback thread reads: bounds, wrap-around, and order across threads.
struct SampleRingTests {
    @Test func aFullRingTakesOnlyItsRoomAndAnEmptyOneGivesNothing() {
        let ring = SampleRing(capacity: 5)
        #expect(ring.read(count: 3).isEmpty)
        #expect(ring.write([1, 2, 3, 4, 5, 6, 7]) == 5)
        #expect(ring.count == 5 && ring.room == 0)
        #expect(ring.write([8]) == 0)
        #expect(ring.read(count: 2) == [1, 2])
        // Wraps around the end of its storage.
        #expect(ring.write([8, 9, 10]) == 2)
        #expect(ring.read(count: 10) == [3, 4, 5, 8, 9])
        #expect(ring.count == 0)
        #expect(ring.write([11, 12]) == 2)
        #expect(ring.drain() == 2)
        #expect(ring.read(count: 4).isEmpty)
    }

    @Test func samplesCrossThreadsInOrderWithNoneLostOrRepeated() async throws {
        let ring = SampleRing(capacity: 64)
        let total = 200_000
        let done = Atomic(false)
        let writer = try DeviceThread(name: "ring-writer") {
            var next = 0
            var block = [Float](repeating: 0, count: 37)
            while next < total {
                let n = min(block.count, total - next)
                for k in 0..<n { block[k] = Float(next + k) }
                let wrote = block.withUnsafeBufferPointer { ring.write($0.baseAddress!, count: n) }
                next += wrote
            }
            done.store(true, ordering: .releasing)
        }
        var expected = 0
        var out = [Float](repeating: 0, count: 29)
        var disorder = 0
        let deadline = ContinuousClock.now + .seconds(30)
        while expected < total && ContinuousClock.now < deadline {
            let got = out.withUnsafeMutableBufferPointer { ring.read(into: $0.baseAddress!, count: 29) }
            for k in 0..<got where out[k] != Float(expected + k) { disorder += 1 }
            expected += got
        }
        writer.join()
        let finished = done.load(ordering: .acquiring)
        #expect(finished)
        #expect(expected == total)
        #expect(disorder == 0)
    }
}
