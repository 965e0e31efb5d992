import CFFmpeg
import Glibc
import HarkAudio
import HarkCore
import HarkPlatform
import Synchronization

/// What the controlling side tells a decoding thread: stop, pause; and the wakeup it waits on.
final class MediaControl: Sendable {
    /// Set once to end the thread.
    let stopRequested = Atomic(false)
    /// Reading is paused while set.
    let paused = Atomic(false)
    /// Signalled on every change.
    let wakeup = Wakeup()
}

/// What a decoding thread reports.
enum MediaEvent: Sendable {
    /// The first audio went into the ring; its format.
    case playing(format: String)
    /// The stream's title changed.
    case title(String?)
    /// The thread ended: stopped when asked, at the end of the source, or failed.
    case finished(MediaOutcome)
}

/// How a decoding thread ended.
enum MediaOutcome: Sendable, Equatable {
    case stopped
    case ended
    case failed(MediaFailure)
}

/// The limits a decoding thread works within.
struct MediaLimits: Sendable {
    var outputRate: Int
    var openTimeout: Duration
    var stallTimeout: Duration
    var probeBytes: Int
    var analyzeDuration: Duration
    var maximumStreams: Int
}

/// One source's demuxer, decoder and resampler (libavformat, libavcodec, libswresample), used on its decoding
/// thread only: opens the source under deadlines, decodes its best audio stream, converts it to mono Float in
/// PCM16 scale at the output rate, and writes it into the ring, waiting (bounded sleeps, never a spin) when the
/// ring is full. Owns every FFmpeg handle and frees them in `deinit`.
final class MediaDecoder {
    /// The demuxers a source may be read with: the containers of MP3, AAC (ADTS, MP4), Ogg (Vorbis, Opus), FLAC,
    /// WAV, Matroska/WebM, and HLS with its MPEG-TS segments.
    static let formats = "mp3,aac,ogg,flac,wav,hls,mpegts,mov,mp4,m4a,matroska,webm"
    /// Samples converted per resampler call.
    static let chunk = 4096
    /// Packets in a row the decoder may refuse before the source counts as malformed.
    static let maximumBadPackets = 64
    /// The most bytes read without decoded audio while playing: beyond it the source is not audio (a demuxer's
    /// parser looking for a frame in zeros or noise gathers all it reads, inside one `av_read_frame`).
    static let maximumBytesWithoutAudio: Int64 = 4 << 20

    let target: MediaTarget
    let allow: MediaAllowList
    let limits: MediaLimits
    let ring: SampleRing
    let control: MediaControl
    let report: (MediaEvent) -> Void

    private var watch: MediaWatch
    /// What made the interrupt callback stop libavformat: a deadline's kind.
    private var expired: MediaFailure.Kind?
    /// A nested URL the allow-list refused.
    private var refusedNested: String?
    /// Where the input was when audio last came; nil while opening.
    private var positionAtAudio: Int64?
    /// The input read past ``maximumBytesWithoutAudio`` without audio.
    private var noAudio = false
    private var format: UnsafeMutablePointer<AVFormatContext>?
    private var codec: UnsafeMutablePointer<AVCodecContext>?
    private var resampler: OpaquePointer?
    private var resamplerInput: (rate: Int32, format: Int32, channels: Int32) = (0, -1, 0)
    private var packet: UnsafeMutablePointer<AVPacket>?
    private var frame: UnsafeMutablePointer<AVFrame>?
    private var streamIndex: Int32 = -1
    private var originalOpen: IOOpen?
    private let output: UnsafeMutablePointer<Float>
    private var description = ""
    private var playing = false
    private var badPackets = 0
    private var lastTitlePoll: UInt64 = 0
    private var lastMetadata: [UInt8] = []

    typealias IOOpen =
        @convention(c) (
            UnsafeMutablePointer<AVFormatContext>?, UnsafeMutablePointer<UnsafeMutablePointer<AVIOContext>?>?,
            UnsafePointer<CChar>?, Int32, UnsafeMutablePointer<OpaquePointer?>?
        ) -> Int32

    init(
        target: MediaTarget,
        allow: MediaAllowList,
        limits: MediaLimits,
        ring: SampleRing,
        control: MediaControl,
        report: @escaping (MediaEvent) -> Void
    ) {
        self.target = target
        self.allow = allow
        self.limits = limits
        self.ring = ring
        self.control = control
        self.report = report
        watch = MediaWatch(openTimeout: limits.openTimeout, stallTimeout: limits.stallTimeout)
        output = .allocate(capacity: Self.chunk)
    }

    deinit {
        if codec != nil { hark_avcodec_free_context(&codec) }
        if format != nil { hark_avformat_close_input(&format) }
        if resampler != nil { hark_swr_free(&resampler) }
        if packet != nil { hark_av_packet_free(&packet) }
        if frame != nil { hark_av_frame_free(&frame) }
        output.deallocate()
    }

    /// Opens, decodes and writes until stopped, ended or failed.
    func run() -> MediaOutcome {
        do throws(MediaFailure) {
            try open()
            return try stream()
        } catch {
            return control.stopRequested.load(ordering: .acquiring) ? .stopped : .failed(error)
        }
    }

    // MARK: Opening

    private func open() throws(MediaFailure) {
        try Self.loadFFmpeg()
        guard let context = hark_avformat_alloc_context(), let packet = hark_av_packet_alloc(),
            let frame = hark_av_frame_alloc()
        else { throw MediaFailure(.device, "out of memory opening \(target.shown)") }
        self.packet = packet
        self.frame = frame
        let opaque = Unmanaged.passUnretained(self).toOpaque()
        context.pointee.interrupt_callback = AVIOInterruptCB(
            callback: { opaque in
                guard let opaque else { return 0 }
                return Unmanaged<MediaDecoder>.fromOpaque(opaque).takeUnretainedValue().interrupted() ? 1 : 0
            },
            opaque: opaque
        )
        context.pointee.opaque = opaque
        originalOpen = context.pointee.io_open
        context.pointee.io_open = { context, pb, url, flags, options in
            guard let context, let opaque = context.pointee.opaque, let url else { return -EACCES }
            let decoder = Unmanaged<MediaDecoder>.fromOpaque(opaque).takeUnretainedValue()
            return decoder.openNested(context, pb, url, flags, options)
        }
        format = context
        var options: OpaquePointer?
        defer { hark_av_dict_free(&options) }
        let microseconds = { (duration: Duration) in String(MediaWatch.nanoseconds(duration) / 1000) }
        hark_av_dict_set(&options, "protocol_whitelist", target.protocols, 0)
        hark_av_dict_set(&options, "format_whitelist", Self.formats, 0)
        hark_av_dict_set(&options, "probesize", String(limits.probeBytes), 0)
        hark_av_dict_set(&options, "analyzeduration", microseconds(limits.analyzeDuration), 0)
        hark_av_dict_set(&options, "max_streams", String(limits.maximumStreams), 0)
        hark_av_dict_set(&options, "rw_timeout", microseconds(limits.stallTimeout), 0)
        hark_av_dict_set(&options, "icy", "1", 0)
        hark_av_dict_set(&options, "user_agent", "Hark", 0)
        watch.opening(now: MonotonicClock.nanoseconds())
        // On failure avformat_open_input frees the context and sets it to nil.
        var opened = format
        let result = hark_avformat_open_input(&opened, target.url, nil, &options)
        format = opened
        guard result >= 0, let format = opened else { throw failure(result, opening: true) }
        try checkRedirect(format)
        let probed = hark_avformat_find_stream_info(format, nil)
        guard probed >= 0 else { throw failure(probed, opening: true) }
        guard Int(format.pointee.nb_streams) <= limits.maximumStreams else {
            throw MediaFailure(.unsupported, "\(target.shown) holds \(format.pointee.nb_streams) streams")
        }
        var decoder: UnsafePointer<AVCodec>?
        streamIndex = hark_av_find_best_stream(format, AVMEDIA_TYPE_AUDIO, -1, -1, &decoder, 0)
        guard streamIndex >= 0, let decoder, let stream = format.pointee.streams[Int(streamIndex)] else {
            throw MediaFailure(.unsupported, "\(target.shown) holds no audio a decoder here reads")
        }
        for index in 0..<Int(format.pointee.nb_streams) where index != Int(streamIndex) {
            format.pointee.streams[index]?.pointee.discard = AVDISCARD_ALL
        }
        guard let codec = hark_avcodec_alloc_context3(decoder) else {
            throw MediaFailure(.device, "out of memory opening the decoder")
        }
        self.codec = codec
        guard hark_avcodec_parameters_to_context(codec, stream.pointee.codecpar) >= 0 else {
            throw MediaFailure(.malformed, "\(target.shown): the audio stream's parameters are unreadable")
        }
        codec.pointee.thread_count = 1
        let openedCodec = hark_avcodec_open2(codec, decoder, nil)
        guard openedCodec >= 0 else { throw failure(openedCodec, opening: true) }
        let rate = codec.pointee.sample_rate
        let channels = codec.pointee.ch_layout.nb_channels
        guard (1...768_000).contains(rate), (1...16).contains(channels) else {
            throw MediaFailure(.unsupported, "\(target.shown): \(rate) Hz with \(channels) channels")
        }
        let name = RemoteText.printable(String(cString: decoder.pointee.name), limit: 48)
        description = "\(name), \(rate) Hz, \(channels) channel\(channels == 1 ? "" : "s")"
        watch.heard(now: MonotonicClock.nanoseconds())
    }

    /// An HTTP redirect is followed inside libavformat's http protocol: where it led must be allowed too.
    private func checkRedirect(_ format: UnsafeMutablePointer<AVFormatContext>) throws(MediaFailure) {
        guard !target.isFile, let location = option(format, "location") else { return }
        let text = String(decoding: location, as: UTF8.self)
        guard text != target.url, !allow.allowsNested(text) else { return }
        throw MediaFailure(.refused, "\(target.shown) redirected to \(URLRedaction.redact(text)), which is not allowed")
    }

    private func openNested(
        _ context: UnsafeMutablePointer<AVFormatContext>,
        _ pb: UnsafeMutablePointer<UnsafeMutablePointer<AVIOContext>?>?,
        _ url: UnsafePointer<CChar>,
        _ flags: Int32,
        _ options: UnsafeMutablePointer<OpaquePointer?>?
    ) -> Int32 {
        let text = String(cString: url)
        guard text == target.url || allow.allowsNested(text), let originalOpen else {
            refusedNested = text
            return -EACCES
        }
        return originalOpen(context, pb, url, flags, options)
    }

    /// libavformat's interrupt callback: stop when asked, or when the phase's deadline passed.
    private func interrupted() -> Bool {
        if control.stopRequested.load(ordering: .relaxed) { return true }
        if let kind = watch.expired(now: MonotonicClock.nanoseconds()) {
            expired = kind
            return true
        }
        if let positionAtAudio, let position = format?.pointee.pb?.pointee.pos,
            position - positionAtAudio > Self.maximumBytesWithoutAudio
        {
            noAudio = true
            return true
        }
        return false
    }

    /// The failure an FFmpeg error `code` stands for.
    private func failure(_ code: Int32, opening: Bool) -> MediaFailure {
        if noAudio {
            return MediaFailure(
                .malformed,
                "\(target.shown): \(Self.maximumBytesWithoutAudio >> 20) MiB read without audio in them"
            )
        }
        if let expired {
            return switch expired {
            case .stalled:
                MediaFailure(.stalled, "\(target.shown) sent no audio for \(limits.stallTimeout)")
            default:
                MediaFailure(.timedOut, "\(target.shown) did not open within \(limits.openTimeout)")
            }
        }
        if let refusedNested {
            return MediaFailure(
                .refused,
                "\(target.shown) led to \(URLRedaction.redact(refusedNested)), which is not allowed"
            )
        }
        let reason = Self.errorText(code)
        if code == hark_averror_invaliddata() || code == hark_averror_eof() && opening {
            return MediaFailure(.malformed, "\(target.shown) is not audio that can be read here (\(reason))")
        }
        if code == hark_averror_decoder_not_found() {
            return MediaFailure(.unsupported, "\(target.shown): no decoder for its audio")
        }
        if code == hark_averror_protocol_not_found() {
            return MediaFailure(.refused, "\(target.shown): the protocol is not allowed")
        }
        return MediaFailure(
            opening ? .unreachable : .malformed,
            "\(target.shown): \(reason)"
        )
    }

    /// The Debian packages of the libraries ``loadFFmpeg()`` opens (FFmpeg 5.1, bookworm).
    public static let runtimePackages = "libavformat59 libavcodec59 libswresample4 libavutil57"

    /// Opens FFmpeg's libraries (once per process); a clear error when they are not installed: only music and radio
    /// need them.
    static func loadFFmpeg() throws(MediaFailure) {
        var reason = [CChar](repeating: 0, count: 512)
        guard hark_ffmpeg_load(&reason, reason.count) != 0 else {
            FFmpegLog.attach()
            return
        }
        let bytes = reason.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        let why = RemoteText.printable(String(decoding: bytes, as: UTF8.self), limit: 300)
        throw MediaFailure(
            .unsupported,
            "music and radio need FFmpeg's libraries, which are not installed: \(why) (apt-get install \(runtimePackages))"
        )
    }

    static func errorText(_ code: Int32) -> String {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: 128) { buffer in
            guard let base = buffer.baseAddress else { return "error \(code)" }
            base[0] = 0
            _ = hark_av_strerror(code, base, buffer.count)
            base[buffer.count - 1] = 0
            return RemoteText.printable(String(cString: base), limit: 100)
        }
    }

    // MARK: Streaming

    private func stream() throws(MediaFailure) -> MediaOutcome {
        guard let format, let packet else { return .stopped }
        while true {
            if control.stopRequested.load(ordering: .acquiring) { return .stopped }
            if control.paused.load(ordering: .acquiring) {
                watch.rest()
                while control.paused.load(ordering: .acquiring), !control.stopRequested.load(ordering: .acquiring) {
                    control.wakeup.wait(nanoseconds: 200_000_000)
                }
                watch.heard(now: MonotonicClock.nanoseconds())
                continue
            }
            let result = hark_av_read_frame(format, packet)
            if result < 0 {
                if control.stopRequested.load(ordering: .acquiring) { return .stopped }
                if result == hark_averror_eof(), expired == nil, !noAudio {
                    try drainDecoder()
                    guard playing else {
                        throw MediaFailure(.malformed, "\(target.shown) ended before any audio could be decoded")
                    }
                    return .ended
                }
                throw failure(result, opening: false)
            }
            defer { hark_av_packet_unref(packet) }
            if packet.pointee.stream_index == streamIndex { try decode(packet) }
            pollTitle(format)
        }
    }

    private func decode(_ packet: UnsafeMutablePointer<AVPacket>?) throws(MediaFailure) {
        guard let codec, let frame else { return }
        let sent = hark_avcodec_send_packet(codec, packet)
        if sent < 0, sent != hark_averror_eagain() {
            if sent == hark_averror_eof() { return }
            badPackets += 1
            guard badPackets < Self.maximumBadPackets else {
                throw MediaFailure(.malformed, "\(target.shown): the audio cannot be decoded (\(Self.errorText(sent)))")
            }
            return
        }
        while true {
            let received = hark_avcodec_receive_frame(codec, frame)
            if received == hark_averror_eagain() || received == hark_averror_eof() { return }
            guard received >= 0 else {
                badPackets += 1
                guard badPackets < Self.maximumBadPackets else {
                    throw MediaFailure(
                        .malformed,
                        "\(target.shown): the audio cannot be decoded (\(Self.errorText(received)))"
                    )
                }
                return
            }
            badPackets = 0
            defer { hark_av_frame_unref(frame) }
            try convert(frame)
        }
    }

    private func drainDecoder() throws(MediaFailure) {
        try decode(nil)
    }

    /// Resamples `frame` to mono Float at the output rate and writes it into the ring.
    private func convert(_ frame: UnsafeMutablePointer<AVFrame>) throws(MediaFailure) {
        let input = (
            rate: frame.pointee.sample_rate, format: frame.pointee.format, channels: frame.pointee.ch_layout.nb_channels
        )
        guard (1...768_000).contains(input.rate), (1...16).contains(input.channels) else {
            throw MediaFailure(.unsupported, "\(target.shown): a frame of \(input.rate) Hz, \(input.channels) channels")
        }
        if resampler == nil || input != resamplerInput { try makeResampler(frame) }
        guard let resampler else { return }
        var inputCount = frame.pointee.nb_samples
        var inputData = UnsafeMutableRawPointer(frame.pointee.extended_data).map {
            UnsafeMutablePointer<UnsafePointer<UInt8>?>(OpaquePointer($0))
        }
        while true {
            var outputData: UnsafeMutablePointer<UInt8>? = UnsafeMutableRawPointer(output).assumingMemoryBound(
                to: UInt8.self
            )
            let converted = hark_swr_convert(resampler, &outputData, Int32(Self.chunk), inputData, inputCount)
            guard converted >= 0 else {
                throw MediaFailure(
                    .malformed,
                    "\(target.shown): cannot convert its audio (\(Self.errorText(converted)))"
                )
            }
            if converted > 0 { try write(Int(converted)) }
            if converted < Int32(Self.chunk) { return }
            // The output was full: take what the resampler still holds.
            inputData = nil
            inputCount = 0
        }
    }

    private func makeResampler(_ frame: UnsafeMutablePointer<AVFrame>) throws(MediaFailure) {
        if resampler != nil { hark_swr_free(&resampler) }
        var mono = AVChannelLayout()
        hark_channel_layout_mono(&mono)
        var layout = AVChannelLayout()
        if frame.pointee.ch_layout.order == AV_CHANNEL_ORDER_UNSPEC {
            hark_av_channel_layout_default(&layout, frame.pointee.ch_layout.nb_channels)
        } else {
            guard hark_av_channel_layout_copy(&layout, &frame.pointee.ch_layout) >= 0 else {
                throw MediaFailure(.device, "out of memory for the resampler")
            }
        }
        defer { hark_av_channel_layout_uninit(&layout) }
        let result = hark_swr_alloc_set_opts2(
            &resampler,
            &mono,
            AV_SAMPLE_FMT_FLT,
            Int32(limits.outputRate),
            &layout,
            AVSampleFormat(frame.pointee.format),
            frame.pointee.sample_rate,
            0,
            nil
        )
        guard result >= 0, let resampler, hark_swr_init(resampler) >= 0 else {
            throw MediaFailure(.unsupported, "\(target.shown): its audio cannot be converted to mono")
        }
        resamplerInput = (frame.pointee.sample_rate, frame.pointee.format, frame.pointee.ch_layout.nb_channels)
    }

    /// Writes `count` converted samples into the ring in PCM16 scale, waiting while it is full.
    private func write(_ count: Int) throws(MediaFailure) {
        for index in 0..<count { output[index] = max(-32_768, min(32_767, output[index] * 32_768)) }
        var offset = 0
        while offset < count {
            let written = ring.write(output + offset, count: count - offset)
            offset += written
            if written == 0 {
                if control.stopRequested.load(ordering: .acquiring) { return }
                watch.rest()
                control.wakeup.wait(nanoseconds: 10_000_000)
            }
        }
        watch.heard(now: MonotonicClock.nanoseconds())
        positionAtAudio = format?.pointee.pb?.pointee.pos ?? 0
        if !playing {
            playing = true
            report(.playing(format: description))
        }
    }

    /// Reads the ICY metadata (`icy_metadata_packet` of the http protocol) at most once a second.
    private func pollTitle(_ format: UnsafeMutablePointer<AVFormatContext>) {
        guard !target.isFile else { return }
        let now = MonotonicClock.nanoseconds()
        guard now &- lastTitlePoll >= 1_000_000_000 else { return }
        lastTitlePoll = now
        guard let packet = option(format, "icy_metadata_packet"), packet != lastMetadata else { return }
        lastMetadata = packet
        report(.title(ICYMetadata.title(packet)))
    }

    /// The string option `name` of the context or its children (the http protocol's), at most 4 KiB of it.
    private func option(_ format: UnsafeMutablePointer<AVFormatContext>, _ name: String) -> [UInt8]? {
        var value: UnsafeMutablePointer<UInt8>?
        guard hark_av_opt_get(format, name, AV_OPT_SEARCH_CHILDREN, &value) >= 0, let value else { return nil }
        defer { hark_av_free(value) }
        let length = strnlen(UnsafeRawPointer(value).assumingMemoryBound(to: CChar.self), 4096)
        guard length > 0 else { return nil }
        return Array(UnsafeBufferPointer(start: value, count: length))
    }
}
