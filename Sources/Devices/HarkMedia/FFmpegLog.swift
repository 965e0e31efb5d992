import CFFmpeg
import Glibc
import HarkCore
import HarkPlatform
import Logging
import Synchronization

/// FFmpeg's log, sent to Hark's: warnings and errors only (`av_log_set_level(AV_LOG_WARNING)`), each line
/// printable and bounded, at most ``burst`` lines per ``window`` (the rest counted and reported with the next
/// line let through); never FFmpeg's own writing to stderr (`av_log_set_callback`).
enum FFmpegLog {
    /// Lines let through per window.
    static let burst = 10
    /// The window, in nanoseconds of the monotonic clock.
    static let window: UInt64 = 10_000_000_000

    /// Where the lines go, and the rate limit's state.
    private struct Sink {
        var logger = Logger(label: "hark.media.ffmpeg")
        var windowStart: UInt64 = 0
        var lines = 0
        var dropped = 0
    }

    private static let sink = Mutex(Sink())

    /// Sets the logger FFmpeg's lines go to. FFmpeg itself is not touched: its libraries are opened when something
    /// first plays (``attach()``), never at start.
    static func install(_ logger: Logger) {
        sink.withLock { $0.logger = logger }
    }

    /// Installs the callback once FFmpeg's libraries are open (the decoder calls it after loading them).
    static func attach() {
        _ = installed
    }

    private static let installed: Bool = {
        // Without FFmpeg's libraries there is nothing to log (the player says why it cannot play).
        guard hark_ffmpeg_load(nil, 0) == 0 else { return false }
        hark_av_log_set_level(AV_LOG_WARNING)
        hark_av_log_set_callback { object, level, format, arguments in
            guard level <= AV_LOG_WARNING, let format, let arguments else { return }
            withUnsafeTemporaryAllocation(of: CChar.self, capacity: 512) { buffer in
                guard let base = buffer.baseAddress else { return }
                base[0] = 0
                _ = hark_av_log_format(object, level, format, arguments, base, Int32(buffer.count))
                base[buffer.count - 1] = 0
                let length = strlen(base)
                let bytes = UnsafeRawBufferPointer(start: base, count: length).map { $0 }
                FFmpegLog.line(RemoteText.printable(bytes: bytes, limit: 300))
            }
        }
        return true
    }()

    /// Logs `text` unless the window's burst is spent.
    static func line(_ text: String) {
        let now = MonotonicClock.nanoseconds()
        let (logger, dropped): (Logger?, Int) = sink.withLock { sink in
            if now &- sink.windowStart >= window {
                sink.windowStart = now
                sink.lines = 0
            }
            guard sink.lines < burst else {
                sink.dropped += 1
                return (nil, 0)
            }
            sink.lines += 1
            defer { sink.dropped = 0 }
            return (sink.logger, sink.dropped)
        }
        guard let logger else { return }
        var message = "ffmpeg: \(text.hasSuffix("\\n") ? String(text.dropLast(2)) : text)"
        if dropped > 0 { message += " (\(dropped) lines before this one not logged)" }
        logger.warning("\(message)")
    }
}
