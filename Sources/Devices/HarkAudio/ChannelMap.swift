/// How the channels of a microphone array become one mono signal.
public enum ChannelMap: Sendable, Hashable, CustomStringConvertible {
    /// One channel (0-based).
    case pick(Int)
    /// The mean of several channels.
    case average([Int])
    /// A fixed delay-and-sum beam: each tap delays one channel by whole samples (at the device rate),
    /// then the taps are averaged. Delays steer the beam toward the talker.
    case delayAndSum([BeamTap])

    /// One input of a delay-and-sum beam.
    public struct BeamTap: Sendable, Hashable {
        /// Channel, 0-based.
        public var channel: Int
        /// Delay in samples at the device rate.
        public var delay: Int

        public init(channel: Int, delay: Int) {
            self.channel = channel
            self.delay = delay
        }
    }

    /// Channels the map reads; a device must have more than the largest.
    public var channels: [Int] {
        switch self {
        case .pick(let channel): [channel]
        case .average(let channels): channels
        case .delayAndSum(let taps): taps.map(\.channel)
        }
    }

    /// Parses `0`, `avg:0,1,2,3` or `beam:0@0,1@3` (channel@delay).
    public init?(parsing text: String) {
        if let channel = Int(text) {
            self = .pick(channel)
        } else if text.hasPrefix("avg:") {
            let channels = text.dropFirst(4).split(separator: ",").compactMap { Int($0) }
            guard !channels.isEmpty else { return nil }
            self = .average(channels)
        } else if text.hasPrefix("beam:") {
            var taps: [BeamTap] = []
            for item in text.dropFirst(5).split(separator: ",") {
                let parts = item.split(separator: "@")
                guard parts.count == 2, let channel = Int(parts[0]), let delay = Int(parts[1]), delay >= 0 else {
                    return nil
                }
                taps.append(BeamTap(channel: channel, delay: delay))
            }
            guard !taps.isEmpty else { return nil }
            self = .delayAndSum(taps)
        } else {
            return nil
        }
    }

    public var description: String {
        switch self {
        case .pick(let channel): "\(channel)"
        case .average(let channels): "avg:" + channels.map(String.init).joined(separator: ",")
        case .delayAndSum(let taps): "beam:" + taps.map { "\($0.channel)@\($0.delay)" }.joined(separator: ",")
        }
    }
}

/// Applies a ``ChannelMap`` to interleaved device samples, block by block, with preallocated state
/// (the delay lines of a beam). For the capture thread: no allocation in ``mix(_:frames:into:)``.
final class ChannelMixer {
    private let format: SampleFormat
    private let deviceChannels: Int
    private let taps: [(channel: Int, delay: Int)]
    private let maxDelay: Int
    /// Per tap, the last `maxDelay` samples of its channel (for the beam).
    private let history: UnsafeMutablePointer<Float>

    init(map: ChannelMap, format: SampleFormat, deviceChannels: Int) throws {
        for channel in map.channels where channel < 0 || channel >= deviceChannels {
            throw AudioError.invalid("channel map \(map) needs channel \(channel); the device has \(deviceChannels)")
        }
        self.format = format
        self.deviceChannels = deviceChannels
        switch map {
        case .pick(let channel): taps = [(channel, 0)]
        case .average(let channels): taps = channels.map { ($0, 0) }
        case .delayAndSum(let beam): taps = beam.map { ($0.channel, $0.delay) }
        }
        maxDelay = taps.map(\.delay).max() ?? 0
        history = .allocate(capacity: max(1, taps.count * maxDelay))
        history.initialize(repeating: 0, count: max(1, taps.count * maxDelay))
    }

    deinit { history.deallocate() }

    /// Mono samples (16-bit scale) of `frames` interleaved frames of `raw` into `output`.
    func mix(_ raw: UnsafeRawPointer, frames: Int, into output: UnsafeMutablePointer<Float>) {
        let scale = 1 / Float(taps.count)
        if maxDelay == 0 {
            for frame in 0..<frames {
                var sum: Float = 0
                for tap in taps {
                    sum += SampleConversion.load(raw, frame * deviceChannels + tap.channel, format)
                }
                output[frame] = taps.count == 1 ? sum : sum * scale
            }
            return
        }
        // Delay-and-sum: sample n of a tap delayed by d is sample n - d of its channel, from the history
        // when n - d falls before this block.
        for frame in 0..<frames {
            var sum: Float = 0
            for (index, tap) in taps.enumerated() {
                let source = frame - tap.delay
                if source >= 0 {
                    sum += SampleConversion.load(raw, source * deviceChannels + tap.channel, format)
                } else {
                    sum += history[index * maxDelay + maxDelay + source]
                }
            }
            output[frame] = sum * scale
        }
        // Keep the last maxDelay samples of each tap's channel for the next block.
        for (index, tap) in taps.enumerated() {
            let line = history + index * maxDelay
            if frames >= maxDelay {
                for k in 0..<maxDelay {
                    line[k] = SampleConversion.load(raw, (frames - maxDelay + k) * deviceChannels + tap.channel, format)
                }
            } else {
                line.update(from: line + frames, count: maxDelay - frames)
                for k in 0..<frames {
                    line[maxDelay - frames + k] = SampleConversion.load(
                        raw,
                        k * deviceChannels + tap.channel,
                        format
                    )
                }
            }
        }
    }
}
