import CALSA
import Glibc
import HarkCore
import HarkPlatform

/// Where an ALSA PCM is found: a name alsa-lib resolves through its usual configuration (`hw:1,0`,
/// `plughw:CARD=seeed2micvoicec`, `default`, a PCM from `/etc/asound.conf`), or a name resolved within
/// a configuration text of its own (`snd_pcm_open_lconf`), which is how tests and benchmarks define
/// file-backed devices without touching the machine's configuration.
public struct AudioDevice: Sendable, Hashable, CustomStringConvertible {
    /// The PCM name.
    public var name: String
    /// An alsa-lib configuration text defining `pcm.<name>`; nil to use the global configuration.
    public var configuration: String?

    /// A device named `name`, resolved through `configuration` when given.
    public init(name: String, configuration: String? = nil) {
        self.name = name
        self.configuration = configuration
    }

    /// A device alsa-lib resolves by name through the global configuration.
    public static func named(_ name: String) -> AudioDevice { AudioDevice(name: name) }

    /// ALSA's `file` plugin over the `null` PCM: playback writes raw interleaved frames (in the negotiated
    /// format) to `output`, capture reads them from `input`. It runs the real alsa-lib code paths without
    /// a sound card, and has no clock: reads return at once unless the capture's configuration sets a `pace`;
    /// playback is paced in real time unless its configuration sets another `pace` (0: as fast as it takes).
    public static func rawFile(output: String, input: String? = nil, name: String = "hark_file") -> AudioDevice {
        var text = "pcm.\(name) {\n    type file\n    slave.pcm { type null }\n"
        text += "    file \"\(output)\"\n"
        if let input { text += "    infile \"\(input)\"\n" }
        text += "    format raw\n}\n"
        return AudioDevice(name: name, configuration: text)
    }

    public var description: String { configuration == nil ? name : "\(name) (own configuration)" }
}

/// A sample format on the ALSA side.
public enum SampleFormat: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// Signed 16-bit little-endian (`SND_PCM_FORMAT_S16_LE`).
    case s16LE = "S16_LE"
    /// Signed 32-bit little-endian (`SND_PCM_FORMAT_S32_LE`), what I2S MEMS microphones usually deliver.
    case s32LE = "S32_LE"
    /// Signed 24-bit in the low three bytes of a little-endian 32-bit container (`SND_PCM_FORMAT_S24_LE`).
    case s24LE = "S24_LE"

    /// Bytes one sample occupies.
    public var bytesPerSample: Int { self == .s16LE ? 2 : 4 }

    var alsa: snd_pcm_format_t {
        switch self {
        case .s16LE: SND_PCM_FORMAT_S16_LE
        case .s32LE: SND_PCM_FORMAT_S32_LE
        case .s24LE: SND_PCM_FORMAT_S24_LE
        }
    }

    public var description: String { rawValue }
}

/// What to ask an ALSA PCM for; the device may give something near.
public struct PCMRequest: Sendable, Hashable {
    /// Formats in order of preference; the first the device accepts is taken.
    public var formats: [SampleFormat]
    /// Channels wanted (1–8); the nearest the device offers is taken.
    public var channels: Int
    /// Rates in order of preference; the first the device accepts exactly is taken, else the nearest to the first.
    public var rates: [Int]
    /// Period (the unit of one read or write). 20 ms: one read per captured frame and 50 wake-ups a second
    /// per device (10 ms doubled them, and on small boards wake-ups cost more than the audio); an
    /// interruption still silences the speaker within 20 ms.
    public var period: Duration
    /// Periods in the device buffer.
    public var periods: Int

    public init(
        formats: [SampleFormat] = [.s16LE, .s32LE, .s24LE],
        channels: Int = 1,
        rates: [Int] = [16_000, 48_000, 44_100],
        period: Duration = .milliseconds(20),
        periods: Int = 4
    ) {
        self.formats = formats
        self.channels = channels
        self.rates = rates
        self.period = period
        self.periods = periods
    }
}

/// What a device agreed to.
public struct NegotiatedFormat: Sendable, Hashable, CustomStringConvertible {
    /// Sample format.
    public var format: SampleFormat
    /// Channels per frame.
    public var channels: Int
    /// Frames per second.
    public var rate: Int
    /// Frames per period.
    public var periodFrames: Int
    /// Frames in the device buffer.
    public var bufferFrames: Int

    public init(format: SampleFormat, channels: Int, rate: Int, periodFrames: Int, bufferFrames: Int) {
        self.format = format
        self.channels = channels
        self.rate = rate
        self.periodFrames = periodFrames
        self.bufferFrames = bufferFrames
    }

    /// Bytes per interleaved frame.
    public var bytesPerFrame: Int { format.bytesPerSample * channels }

    public var description: String {
        "\(format) \(channels) ch \(rate) Hz, period \(periodFrames) frames, buffer \(bufferFrames) frames"
    }
}

/// Why an audio device could not be used.
public struct AudioError: Error, CustomStringConvertible, Sendable, Equatable {
    private enum Code: Sendable, Equatable {
        case open, configure, io, invalid
    }

    private let code: Code
    /// The negative errno alsa-lib returned, 0 when none.
    public let alsaCode: Int32
    /// What was being done.
    public let context: String

    private init(_ code: Code, _ context: String, alsaCode: Int32 = 0) {
        self.code = code
        self.context = context
        self.alsaCode = alsaCode
    }

    static func open(_ device: AudioDevice, _ result: Int32) -> AudioError {
        AudioError(.open, "cannot open \(device)", alsaCode: result)
    }

    static func configure(_ what: String, _ result: Int32 = 0) -> AudioError {
        AudioError(.configure, what, alsaCode: result)
    }

    static func io(_ what: String, _ result: Int32) -> AudioError { AudioError(.io, what, alsaCode: result) }

    static func invalid(_ what: String) -> AudioError { AudioError(.invalid, what) }

    /// True when the device could not be opened (absent, busy, unknown name).
    public var isOpenFailure: Bool { code == .open }

    public var description: String {
        guard alsaCode != 0 else { return context }
        return "\(context): \(String(cString: snd_strerror(alsaCode)))"
    }
}

/// Sleeps until `deadline` (monotonic ns): `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`, retried on
/// EINTR. No allocation, safe on audio threads.
@inline(__always)
func sleepUntil(_ deadline: UInt64) {
    var spec = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
    while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &spec, nil) == EINTR {}
}

/// Paces transfers on a device that has no clock of its own (alsa-lib's `file` plugin over `null`) like a
/// sound card running at `pace` times real time: each transfer of n frames completes n frame-times after the
/// previous one, on absolute deadlines from the stream's start, so sleeps never accumulate error. A stream
/// (re)starts at its first transfer after it was prepared. An I/O thread that comes back later than one
/// buffer past due has overrun (capture) or underrun (playback), as on a card: the transfer fails with
/// `-EPIPE` and `snd_pcm_recover` restarts the stream (the file keeps its data: it has no notion of time).
struct Pacer {
    /// Nanoseconds one frame lasts at the pace; 0 when unpaced.
    let nanosecondsPerFrame: Double
    /// Lateness beyond which the stream has run over: the device buffer's duration at the pace.
    let slack: UInt64
    /// When the stream started (monotonic ns); 0 while stopped.
    private(set) var start: UInt64 = 0
    /// Frames transferred since the start.
    private(set) var frames = 0

    /// A pacer for `format` at `pace` (0 or less: unpaced, every call returns at once).
    init(pace: Double, format: NegotiatedFormat) {
        nanosecondsPerFrame = pace > 0 ? 1_000_000_000 / (Double(format.rate) * pace) : 0
        slack = UInt64(Double(format.bufferFrames) * nanosecondsPerFrame)
    }

    /// True when transfers are paced.
    var isPaced: Bool { nanosecondsPerFrame > 0 }

    /// When `count` frames after the start are due.
    private func due(_ count: Int) -> UInt64 { start &+ UInt64(Double(count) * nanosecondsPerFrame) }

    /// Before a transfer: starts the stream if stopped; false when the thread came back too late (an xrun:
    /// the stream is then stopped until ``reset()``).
    mutating func begin(now: UInt64) -> Bool {
        guard isPaced else { return true }
        if start == 0 {
            start = now
            frames = 0
            return true
        }
        guard now <= due(frames) &+ slack else {
            start = 0
            return false
        }
        return true
    }

    /// When the transfer of `count` more frames completes.
    func deadline(adding count: Int) -> UInt64 { due(frames + count) }

    /// Counts `count` frames transferred.
    mutating func advance(_ count: Int) { frames += max(0, count) }

    /// The stream stopped (prepared, dropped, recovered): the next transfer starts it again.
    mutating func reset() { start = 0 }
}

/// One open ALSA PCM (`snd_pcm_t`), interleaved read/write access. One owner; closed in `deinit`.
final class PCM {
    let handle: OpaquePointer
    let format: NegotiatedFormat
    let isCapture: Bool
    /// The number of the sound card the PCM plays on or records from (`snd_pcm_info_get_card`); -1 for
    /// none (a plugin that is no card's, such as `null`, `file` over it, or `pulse`).
    let card: Int32
    private let configuration: OpaquePointer?
    private var pacer: Pacer
    /// True until the writes show whether the device has a clock of its own (`pace` nil).
    private var checksClock: Bool
    /// Frames written while the device reported nothing queued, since `firstUnqueuedWrite` (monotonic ns).
    private var unqueuedFrames = 0
    private var firstUnqueuedWrite: UInt64 = 0

    /// Opens `device` and negotiates `request`; with `pace` > 0 transfers are paced at that multiple of real
    /// time (see ``Pacer``; for devices without a clock). With `pace` nil, the device's own clock paces the
    /// transfers, unless it shows it has none (playback: it takes two buffers and reports nothing queued); it is
    /// then paced in real time. Stands for `snd_pcm_open` / `snd_pcm_open_lconf`, `snd_pcm_hw_params_*` and
    /// `snd_pcm_sw_params_*`.
    init(device: AudioDevice, capture: Bool, request: PCMRequest, pace: Double? = 0) throws {
        guard (1...8).contains(request.channels) else { throw AudioError.invalid("channels must be 1–8") }
        _ = hark_alsa_set_quiet_errors(1)
        let stream = capture ? SND_PCM_STREAM_CAPTURE : SND_PCM_STREAM_PLAYBACK
        var pcm: OpaquePointer?
        var config: OpaquePointer?
        if let text = device.configuration {
            var top: OpaquePointer?
            guard snd_config_top(&top) == 0, let top else { throw AudioError.configure("snd_config_top failed") }
            var input: OpaquePointer?
            var result = text.withCString { snd_input_buffer_open(&input, $0, strlen($0)) }
            if result == 0, let input {
                result = snd_config_load(top, input)
                snd_input_close(input)
            }
            guard result == 0 else {
                snd_config_delete(top)
                throw AudioError.configure("cannot parse the configuration of \(device.name)", result)
            }
            result = snd_pcm_open_lconf(&pcm, device.name, stream, 0, top)
            guard result == 0 else {
                snd_config_delete(top)
                throw AudioError.open(device, result)
            }
            config = top
        } else {
            let result = snd_pcm_open(&pcm, device.name, stream, 0)
            guard result == 0 else { throw AudioError.open(device, result) }
        }
        guard let pcm else { throw AudioError.open(device, -EINVAL) }
        let negotiated: NegotiatedFormat
        do {
            negotiated = try PCM.negotiate(pcm, request: request, capture: capture)
        } catch {
            snd_pcm_close(pcm)
            if let config { snd_config_delete(config) }
            throw error
        }
        self.format = negotiated
        self.handle = pcm
        var info: OpaquePointer?
        if snd_pcm_info_malloc(&info) == 0, let info {
            card = snd_pcm_info(pcm, info) == 0 ? snd_pcm_info_get_card(info) : -1
            snd_pcm_info_free(info)
        } else {
            card = -1
        }
        self.configuration = config
        self.isCapture = capture
        self.pacer = Pacer(pace: pace ?? 0, format: negotiated)
        self.checksClock = pace == nil && !capture
    }

    deinit {
        snd_pcm_close(handle)
        if let configuration { snd_config_delete(configuration) }
    }

    private static func negotiate(_ pcm: OpaquePointer, request: PCMRequest, capture: Bool) throws -> NegotiatedFormat {
        var hw: OpaquePointer?
        guard snd_pcm_hw_params_malloc(&hw) == 0, let hw else { throw AudioError.configure("out of memory") }
        defer { snd_pcm_hw_params_free(hw) }
        var result = snd_pcm_hw_params_any(pcm, hw)
        guard result >= 0 else { throw AudioError.configure("no configurations available", result) }
        result = snd_pcm_hw_params_set_access(pcm, hw, SND_PCM_ACCESS_RW_INTERLEAVED)
        guard result == 0 else { throw AudioError.configure("interleaved access not available", result) }
        guard let format = request.formats.first(where: { snd_pcm_hw_params_test_format(pcm, hw, $0.alsa) == 0 })
        else {
            throw AudioError.configure("none of \(request.formats.map(\.rawValue)) is available")
        }
        result = snd_pcm_hw_params_set_format(pcm, hw, format.alsa)
        guard result == 0 else { throw AudioError.configure("cannot set \(format)", result) }
        var channels = UInt32(request.channels)
        result = snd_pcm_hw_params_set_channels_near(pcm, hw, &channels)
        guard result == 0, (1...8).contains(channels) else {
            throw AudioError.configure("cannot set \(request.channels) channels (nearest \(channels))", result)
        }
        var rate = UInt32(request.rates.first ?? 16_000)
        if let exact = request.rates.first(where: { snd_pcm_hw_params_test_rate(pcm, hw, UInt32($0), 0) == 0 }) {
            rate = UInt32(exact)
        }
        var direction: Int32 = 0
        result = snd_pcm_hw_params_set_rate_near(pcm, hw, &rate, &direction)
        guard result == 0 else { throw AudioError.configure("cannot set rate \(rate)", result) }
        var period = snd_pcm_uframes_t(max(16, Int(rate) * Int(request.period.milliseconds) / 1000))
        direction = 0
        result = snd_pcm_hw_params_set_period_size_near(pcm, hw, &period, &direction)
        guard result == 0 else { throw AudioError.configure("cannot set period \(period)", result) }
        var buffer = period * snd_pcm_uframes_t(max(2, request.periods))
        result = snd_pcm_hw_params_set_buffer_size_near(pcm, hw, &buffer)
        guard result == 0 else { throw AudioError.configure("cannot set buffer \(buffer)", result) }
        result = snd_pcm_hw_params(pcm, hw)
        guard result == 0 else { throw AudioError.configure("cannot apply hardware parameters", result) }
        snd_pcm_hw_params_get_period_size(hw, &period, &direction)
        snd_pcm_hw_params_get_buffer_size(hw, &buffer)

        var sw: OpaquePointer?
        guard snd_pcm_sw_params_malloc(&sw) == 0, let sw else { throw AudioError.configure("out of memory") }
        defer { snd_pcm_sw_params_free(sw) }
        snd_pcm_sw_params_current(pcm, sw)
        // Capture starts with the first read; playback once one period is queued, so short sounds play too.
        snd_pcm_sw_params_set_start_threshold(pcm, sw, capture ? 1 : period)
        snd_pcm_sw_params_set_avail_min(pcm, sw, period)
        result = snd_pcm_sw_params(pcm, sw)
        guard result == 0 else { throw AudioError.configure("cannot apply software parameters", result) }
        result = snd_pcm_prepare(pcm)
        guard result == 0 else { throw AudioError.configure("cannot prepare", result) }
        return NegotiatedFormat(
            format: format,
            channels: Int(channels),
            rate: Int(rate),
            periodFrames: Int(period),
            bufferFrames: Int(buffer)
        )
    }

    /// `snd_pcm_readi`: frames read, or a negative errno. Paced, it first sleeps until the period would have
    /// been captured.
    @inline(__always)
    func read(_ buffer: UnsafeMutableRawPointer, frames: Int) -> Int {
        guard pacer.isPaced else { return Int(snd_pcm_readi(handle, buffer, snd_pcm_uframes_t(frames))) }
        guard pacer.begin(now: monotonicNanoseconds()) else { return -Int(EPIPE) }
        sleepUntil(pacer.deadline(adding: frames))
        let count = Int(snd_pcm_readi(handle, buffer, snd_pcm_uframes_t(frames)))
        pacer.advance(count)
        return count
    }

    /// `snd_pcm_writei`: frames written, or a negative errno. Paced, it then sleeps until they would have
    /// been played.
    @inline(__always)
    func write(_ buffer: UnsafeRawPointer, frames: Int) -> Int {
        guard pacer.isPaced else {
            let count = Int(snd_pcm_writei(handle, buffer, snd_pcm_uframes_t(frames)))
            if checksClock && count > 0 { checkClock(written: count) }
            return count
        }
        guard pacer.begin(now: monotonicNanoseconds()) else { return -Int(EPIPE) }
        let count = Int(snd_pcm_writei(handle, buffer, snd_pcm_uframes_t(frames)))
        pacer.advance(count)
        if count > 0 { sleepUntil(pacer.deadline(adding: 0)) }
        return count
    }

    /// True when transfers are paced by the wall clock (a `pace`, or a device found to have no clock).
    var isPaced: Bool { pacer.isPaced }

    /// After a write of `count` frames to a device whose clock is to be found out. One that reports frames
    /// queued has a clock (a card, or a sound server once its stream runs: the first writes may find it still
    /// reporting none). One that has taken two device buffers and never reported any holds nothing, whatever
    /// is written (a card would have made the writer wait): it has no clock, and from then on the wall clock
    /// paces it, counting what it took since the first of those writes.
    private func checkClock(written count: Int) {
        var delay: snd_pcm_sframes_t = 0
        guard snd_pcm_delay(handle, &delay) == 0 else { return }
        guard delay <= 0 else {
            checksClock = false
            return
        }
        let now = monotonicNanoseconds()
        if unqueuedFrames == 0 { firstUnqueuedWrite = now }
        unqueuedFrames += count
        guard unqueuedFrames > 2 * format.bufferFrames else { return }
        checksClock = false
        pacer = Pacer(pace: 1, format: format)
        // Started when the first of those frames was written, or as late as lets them all have been played
        // by now (a long pause between the writes is no underrun).
        let length = UInt64(unqueuedFrames) * 1_000_000_000 / UInt64(max(1, format.rate))
        _ = pacer.begin(now: max(firstUnqueuedWrite, now &- min(now, length)))
        pacer.advance(unqueuedFrames)
        sleepUntil(pacer.deadline(adding: 0))
    }

    /// `snd_pcm_recover` (silent): 0 when the stream was recovered from an xrun, suspend or signal.
    func recover(_ error: Int) -> Int32 {
        pacer.reset()
        return snd_pcm_recover(handle, Int32(error), 1)
    }

    /// `snd_pcm_drop` then `snd_pcm_prepare`: stops at once, discarding what the device still holds.
    func dropAndPrepare() {
        pacer.reset()
        snd_pcm_drop(handle)
        snd_pcm_prepare(handle)
    }

    /// `snd_pcm_delay`: frames between the application and the converter (0 when it cannot say).
    func delayFrames() -> Int {
        var delay: snd_pcm_sframes_t = 0
        return snd_pcm_delay(handle, &delay) == 0 ? max(0, Int(delay)) : 0
    }

    /// True while the stream runs (`snd_pcm_state` is RUNNING).
    var isRunning: Bool { snd_pcm_state(handle) == SND_PCM_STATE_RUNNING }

    /// True when prepared but not started (`snd_pcm_state` is PREPARED).
    var isPrepared: Bool { snd_pcm_state(handle) == SND_PCM_STATE_PREPARED }

    /// `snd_pcm_start`.
    func start() { snd_pcm_start(handle) }
}
