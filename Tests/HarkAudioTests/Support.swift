import Glibc
import HarkAudio
import HarkCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A fresh directory for one test's device files.
func makeTemporaryDirectory() throws -> String {
    let path = FileManager.default.temporaryDirectory.path + "/hark-audio-\(UInt64.random(in: 0...UInt64.max))"
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

/// Raw little-endian interleaved bytes of `frames` (each an array of channel values) in `format`.
func rawBytes(_ frames: [[Int32]], format: SampleFormat) -> Data {
    var data = Data(capacity: frames.count * (frames.first?.count ?? 1) * format.bytesPerSample)
    for frame in frames {
        for value in frame {
            switch format {
            case .s16LE:
                withUnsafeBytes(of: Int16(truncatingIfNeeded: value).littleEndian) { data.append(contentsOf: $0) }
            case .s32LE, .s24LE:
                withUnsafeBytes(of: value.littleEndian) { data.append(contentsOf: $0) }
            }
        }
    }
    return data
}

/// Interleaved channel values read back from raw bytes in `format`.
func readRaw(_ path: String, format: SampleFormat, channels: Int) throws -> [[Int32]] {
    let data = try Data(contentsOf: URL(filePath: path))
    let bytes = [UInt8](data)
    let frameBytes = format.bytesPerSample * channels
    var frames: [[Int32]] = []
    var offset = 0
    while offset + frameBytes <= bytes.count {
        var frame: [Int32] = []
        for channel in 0..<channels {
            let at = offset + channel * format.bytesPerSample
            switch format {
            case .s16LE:
                frame.append(Int32(Int16(bitPattern: UInt16(bytes[at]) | UInt16(bytes[at + 1]) << 8)))
            case .s32LE, .s24LE:
                let word =
                    UInt32(bytes[at]) | UInt32(bytes[at + 1]) << 8 | UInt32(bytes[at + 2]) << 16
                    | UInt32(bytes[at + 3]) << 24
                frame.append(Int32(bitPattern: word))
            }
        }
        frames.append(frame)
        offset += frameBytes
    }
    return frames
}

/// A deterministic test signal: a chirp-like sweep plus a pseudo-random component, full 16-bit range used.
func testSignal(count: Int, seed: UInt64 = 1) -> [Int16] {
    var state = seed
    return (0..<count).map { index in
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        let noise = Int(Int16(truncatingIfNeeded: state >> 48)) / 4
        let tone = Int(12_000 * sin(Double(index) * 0.05 + Double(index * index) * 1e-6))
        return Int16(max(-32768, min(32767, tone + noise)))
    }
}

/// A sine of `frequency` at `rate`, amplitude `amplitude`.
func sine(frequency: Double, rate: Int, count: Int, amplitude: Double) -> [Double] {
    (0..<count).map { amplitude * sin(2 * Double.pi * frequency * Double($0) / Double(rate)) }
}

/// Amplitude of the `frequency` component of `samples` and the RMS of what is left (a least-squares fit).
func fitSine(_ samples: [Double], frequency: Double, rate: Int) -> (amplitude: Double, residual: Double) {
    var ss = 0.0
    var sc = 0.0
    for (index, value) in samples.enumerated() {
        let phase = 2 * Double.pi * frequency * Double(index) / Double(rate)
        ss += value * sin(phase)
        sc += value * cos(phase)
    }
    let a = 2 * ss / Double(samples.count)
    let b = 2 * sc / Double(samples.count)
    var residual = 0.0
    for (index, value) in samples.enumerated() {
        let phase = 2 * Double.pi * frequency * Double(index) / Double(rate)
        let error = value - a * sin(phase) - b * cos(phase)
        residual += error * error
    }
    return ((a * a + b * b).squareRoot(), (residual / Double(samples.count)).squareRoot())
}

/// Runs `operation`; when `timeout` passes first, runs `onTimeout` (which must make the operation
/// return) and fails the returned value with nil.
func withDeadline<T: Sendable>(
    _ timeout: Duration,
    onTimeout: @escaping @Sendable () -> Void = {},
    _ operation: @escaping @Sendable () async -> T?
) async -> T? {
    await withTaskGroup(of: (Bool, T?).self) { group in
        group.addTask { (true, await operation()) }
        group.addTask {
            try? await Task.sleep(for: timeout)
            return (false, nil)
        }
        var result: T?
        for await (finished, value) in group {
            if finished {
                result = value
                group.cancelAll()
                break
            }
            onTimeout()
        }
        return result
    }
}

/// Waits until `condition` holds or `timeout` passes; true when it held.
func eventually(_ timeout: Duration = .seconds(10), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(2))
    }
    return condition()
}

/// Captured samples, at least `count`, from a started capture, checking no frame was skipped.
func collect(_ capture: AudioCapture, count: Int) async -> (samples: [Int16], contiguous: Bool)? {
    await withDeadline(.seconds(20), onTimeout: { capture.stop() }) {
        var samples: [Int16] = []
        var expected = 0
        var contiguous = true
        while samples.count < count {
            guard let frame = await capture.next() else { return nil }
            if frame.sequence != expected { contiguous = false }
            expected = frame.sequence + 1
            samples += frame.samples
        }
        return (samples, contiguous)
    }
}
