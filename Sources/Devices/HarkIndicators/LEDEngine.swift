import HarkCore

/// The LED engine: turns what the appliance is doing (``IndicatorInput``) into frames of pixel
/// colours at a fixed frame rate. A plain value: the owner passes `now` in (time since any fixed
/// start, from an injected clock) and writes the frames to a backend.
///
/// Rules: the highest overlay present wins over the conversation state; an animation starts from its
/// beginning when the shown state changes; the microphone-live mark is drawn over every frame while the
/// microphone is live, so it can never be hidden.
public struct LEDEngine: Sendable {
    /// How many pixels the board has (1 for a single LED).
    public let pixelCount: Int
    /// Frames per second.
    public let frameRate: Int
    public var table: PatternTable
    public var microphoneLiveMark: MicrophoneLiveMark

    public private(set) var input = IndicatorInput()
    private var shownSince: Duration = .zero

    public init(
        pixelCount: Int,
        frameRate: Int = 30,
        table: PatternTable = .standard,
        microphoneLiveMark: MicrophoneLiveMark = MicrophoneLiveMark()
    ) {
        precondition(pixelCount > 0 && frameRate > 0)
        self.pixelCount = pixelCount
        self.frameRate = frameRate
        self.table = table
        self.microphoneLiveMark = microphoneLiveMark
    }

    /// True when the frame cannot change until the input does: the shown pattern is dark or a steady
    /// colour (the driver then sleeps until the next input instead of drawing the same frame 30 times a
    /// second).
    public var isStatic: Bool {
        switch table[input.shown] {
        case .off, .solid: true
        default: false
        }
    }

    /// The interval between frames.
    public var frameInterval: Duration { .nanoseconds(1_000_000_000 / Int64(frameRate)) }

    /// The first frame time strictly after `now` on the fixed grid (multiples of ``frameInterval``).
    public func nextFrameTime(after now: Duration) -> Duration {
        let interval = frameInterval
        let ticks = now.nanoseconds / interval.nanoseconds
        return .nanoseconds((ticks + 1) * interval.nanoseconds)
    }

    /// Takes a new input at `now`; the shown pattern restarts if the shown state changed.
    public mutating func update(_ newInput: IndicatorInput, at now: Duration) {
        if newInput.shown != input.shown { shownSince = now }
        input = newInput
    }

    /// The frame to show at `now`: one colour per pixel.
    public func frame(at now: Duration) -> [RGB] {
        let elapsed = max(.zero, now - shownSince)
        var pixels = Self.render(table[input.shown], pixels: pixelCount, elapsed: elapsed, level: input.level)
        if input.microphoneLive {
            let mark = microphoneLiveMark
            pixels[min(max(0, mark.pixel), pixelCount - 1)] = mark.color
        }
        return pixels
    }

    /// One pattern drawn on `pixels` pixels, `elapsed` after it started.
    public static func render(_ pattern: LEDPattern, pixels: Int, elapsed: Duration, level: Double) -> [RGB] {
        switch pattern {
        case .off:
            return Array(repeating: .off, count: pixels)
        case .solid(let color):
            return Array(repeating: color, count: pixels)
        case .blink(let color, let period, let duty):
            let phase = phasePermille(elapsed, period)
            return Array(repeating: phase < max(0, min(100, duty)) * 10 ? color : .off, count: pixels)
        case .breathe(let color, let period):
            // Triangle 0→255→0 over the period, eased quadratically (perceived brightness is not linear).
            let phase = phasePermille(elapsed, period)
            let triangle = phase < 500 ? phase * 2 : (1000 - phase) * 2  // 0...1000
            let eased = triangle * triangle * 255 / 1_000_000
            return Array(repeating: color.scaled(eased), count: pixels)
        case .spin(let color, let period, let tail):
            let phase = phasePermille(elapsed, period)
            if pixels == 1 { return [phase < 500 ? color : .off] }
            let periodNs = max(1, period.nanoseconds)
            let head = Int((elapsed.nanoseconds % periodNs) * Int64(pixels) / periodNs)
            var frame = Array(repeating: RGB.off, count: pixels)
            for step in 0...max(0, min(tail, pixels - 1)) {
                frame[(head - step + pixels) % pixels] = color.scaled(255 >> step)
            }
            return frame
        case .level(let color, let floor):
            let clamped = max(0, min(1, level.isNaN ? 0 : level))
            if pixels == 1 {
                let brightness = max(floor, Int((clamped * 255).rounded()))
                return [color.scaled(brightness)]
            }
            let lit = Int((clamped * Double(pixels)).rounded())
            return (0..<pixels).map { $0 < lit ? color : color.scaled(floor) }
        }
    }

    /// Where `elapsed` falls in a repeating `period`, in thousandths.
    private static func phasePermille(_ elapsed: Duration, _ period: Duration) -> Int {
        let periodNs = max(1, period.nanoseconds)
        return Int((elapsed.nanoseconds % periodNs) * 1000 / periodNs)
    }
}

/// Where the engine's frames go: a set of LEDs (APA102 over SPI, GPIO lines, sysfs LEDs, a terminal).
public protocol LEDOutput: Sendable {
    /// Shows one frame. Called from the LED thread at the frame rate, only when the frame changed.
    func show(_ frame: [RGB]) throws
}
