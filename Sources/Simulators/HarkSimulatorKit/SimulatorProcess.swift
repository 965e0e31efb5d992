import Dispatch
import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// What the simulators' commands share: logging to stderr, the "listening on" line, and waiting for a signal.
package enum SimulatorProcess {
    /// Sends every log line to stderr at `level` and more (info when `level` is not a level's name); returns
    /// the logger named `label`.
    package static func bootstrapLogging(label: String, level: String) -> Logger {
        let level = Logger.Level(rawValue: level) ?? .info
        LoggingSystem.bootstrap { name in
            var handler = StreamLogHandler.standardError(label: name)
            handler.logLevel = level
            return handler
        }
        return Logger(label: label)
    }

    /// Prints `listening on URL` to stdout and waits for SIGINT or SIGTERM; returns the signal's number.
    package static func announceAndWait(listening url: String) async -> Int32 {
        writeStandardOutput("listening on \(url)\n")
        return await waitForTerminationSignal()
    }

    /// Writes straight to file descriptor 1 (`write(2)`), so the line is out before anything else happens.
    private static func writeStandardOutput(_ text: String) {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { raw in write(1, raw.baseAddress! + offset, raw.count - offset) }
            if written < 0 {
                if errno == EINTR { continue }
                return
            }
            offset += written
        }
    }

    /// Waits for SIGINT or SIGTERM (ignored by `signal(2)`, watched by dispatch sources); returns its number.
    private static func waitForTerminationSignal() async -> Int32 {
        let signals = [SIGINT, SIGTERM]
        for number in signals { signal(number, SIG_IGN) }
        let (stream, continuation) = AsyncStream<Int32>.makeStream()
        let sources = signals.map { number in
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { continuation.yield(number) }
            source.resume()
            return source
        }
        var iterator = stream.makeAsyncIterator()
        let received = await iterator.next() ?? SIGTERM
        for source in sources { source.cancel() }
        return received
    }
}
