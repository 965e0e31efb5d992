import Dispatch
import Glibc
import HarkCore
import HarkPlatform
import Synchronization

/// The wake-word detector as the appliance runs it: frames handed over by ``feed(_:at:)`` (from the supervisor's
/// loop, never blocking it) wait in a bounded backlog; a thread of its own runs the detector over them and reports
/// each detection, its end in the feeder's sample count. The detector is owned by that thread once started.
///
/// When the thread falls more than ``backlogLimit`` behind (a starved CPU), the oldest frames are dropped and
/// counted, and the detector restarts at the next frame it gets (a gap would misplace every later detection).
public final class WakeWordListener: WakeWordSpotter, @unchecked Sendable {
    // @unchecked: `detector` is not Sendable. It is used by `init` and then only by the listener's thread.

    /// The most audio waiting for the detector: 2 s.
    public static let backlogLimit = 2 * WakeWordDetector.sampleRate

    public let words: [String]
    private let detector: WakeWordDetector
    private let state = Mutex(State())
    private let signal = DispatchSemaphore(value: 0)
    private let thread = Mutex<DeviceThread?>(nil)

    private struct State {
        var pending: [(samples: [Int16], at: Int)] = []
        var pendingSamples = 0
        var stopping = false
        var started = false
        var counters = WakeCounters()
    }

    /// A listener over `detector` (which it owns from now on: nobody else may use it).
    public init(detector: WakeWordDetector) {
        self.detector = detector
        words = detector.words.map(\.name)
    }

    deinit { stop() }

    public func start(_ onDetection: @escaping @Sendable (WakeDetection) -> Void) throws {
        let first = state.withLock { state -> Bool in
            defer { state.started = true }
            return !state.started
        }
        guard first else { return }
        let created = try DeviceThread(name: "hark-wake") { [self] in self.loop(onDetection) }
        thread.withLock { $0 = created }
    }

    public func feed(_ samples: [Int16], at sample: Int) {
        guard !samples.isEmpty else { return }
        let wake = state.withLock { state -> Bool in
            guard state.started, !state.stopping else { return false }
            state.pending.append((samples, sample))
            state.pendingSamples += samples.count
            while state.pendingSamples > Self.backlogLimit, state.pending.count > 1 {
                let dropped = state.pending.removeFirst()
                state.pendingSamples -= dropped.samples.count
                state.counters.droppedSamples += dropped.samples.count
            }
            return true
        }
        if wake { signal.signal() }
    }

    public var counters: WakeCounters { state.withLock { $0.counters } }

    public func stop() {
        let running = state.withLock { state -> Bool in
            guard state.started, !state.stopping else { return false }
            state.stopping = true
            return true
        }
        guard running else { return }
        signal.signal()
        if let thread = thread.withLock({ $0 }) { thread.join() }
    }

    // MARK: - The detector's thread

    private func loop(_ onDetection: @Sendable (WakeDetection) -> Void) {
        var batch: [(samples: [Int16], at: Int)] = []
        var next: Int?  // the sample the detector expects next, in the feeder's count
        var base = 0  // the feeder's count at the detector's sample 0
        var failed = false
        var found: [WakeDetection] = []
        while true {
            signal.wait()
            let stopping = state.withLock { state -> Bool in
                swap(&batch, &state.pending)
                state.pendingSamples = 0
                return state.stopping
            }
            if stopping { return }
            guard !failed else {
                batch.removeAll(keepingCapacity: true)
                continue
            }
            let cpuBefore = Self.threadCPUTime()
            var error: String?
            for frame in batch {
                do throws(WakeError) {
                    if frame.at != next {
                        if next != nil { try detector.reset() }
                        base = frame.at
                    }
                    try frame.samples.withUnsafeBufferPointer { (buffer) throws(WakeError) in
                        try detector.process(buffer) { [words, wakeWords = detector.words] score in
                            guard score.isDetection else { return }
                            found.append(
                                WakeDetection(
                                    word: words[score.word],
                                    score: score.probability,
                                    endSample: base + score.endSample,
                                    wordEndSample: score.riseSample.map {
                                        base + wakeWords[score.word].wordEndSample(risenAt: $0)
                                    }
                                )
                            )
                        }
                    }
                    // Counted frame by frame, not per batch: on a machine too slow for the detector a batch can
                    // take longer than the watchdog waits, and a detector that falls behind (its backlog is
                    // bounded, and counted as unheard) still shows progress.
                    state.withLock { $0.counters.samplesHeard += frame.samples.count }
                    next = frame.at + frame.samples.count
                } catch let failure {
                    error = failure.description
                    failed = true
                    break
                }
            }
            batch.removeAll(keepingCapacity: true)
            let spent = Self.threadCPUTime() &- cpuBefore
            state.withLock { state in
                state.counters.cpuNanoseconds &+= spent
                state.counters.detections += found.count
                if let error { state.counters.lastError = error }
            }
            for detection in found { onDetection(detection) }
            found.removeAll(keepingCapacity: true)
        }
    }

    /// CPU time of the calling thread, ns.
    private static func threadCPUTime() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }
}
