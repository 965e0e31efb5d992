import HarkAppliance
import HarkCore
import Logging
import ServiceLifecycle
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// The metrics file (`metrics.textfile`) for node_exporter's textfile collector: the status as the control
/// socket's `status` shows it now, with the updater's record, written atomically (a temporary file beside it,
/// renamed over it: the collector never reads half a file) every 15 s from a task of the group, never from a
/// real-time thread. The last write, at exit, is the run's own (``MetricsFile/write(_:to:)`` after the group).
struct MetricsService: Service {
    let core: Supervisor
    let file: MetricsFile
    var interval: Duration = .seconds(15)
    let clock: any Clock<Duration>

    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await file.write(core.currentStatus())
                try await clock.sleep(for: interval)
            }
        }
    }
}

/// Where the metrics go and what goes with them: the version, the state directory's update record.
struct MetricsFile: Sendable {
    /// The `.prom` file.
    let path: String
    /// The state directory, where `hark-update` keeps `update.json`.
    let stateDirectory: String
    let version: String
    let logger: Logger
    /// The wall clock, seconds since 1970.
    var wallClock: @Sendable () -> Double = { Date().timeIntervalSince1970 }
    /// True after a failed write, until one works (a failure is logged once).
    private let failing = Failing()

    init(path: String, stateDirectory: String, version: String, logger: Logger = Logger(label: "hark.metrics")) {
        self.path = path
        self.stateDirectory = stateDirectory
        self.version = version
        self.logger = logger
    }

    /// The text for `status` now.
    func text(_ status: ApplianceStatus) -> String {
        ApplianceMetrics.families(
            status,
            version: version,
            update: UpdateRecord.read(stateDirectory: stateDirectory),
            now: wallClock()
        ).rendered
    }

    /// Writes the metrics of `status`; a failure is logged once (and again after a write worked in between).
    func write(_ status: ApplianceStatus) {
        do {
            try Self.replace(path, with: text(status))
            if failing.set(false) { logger.notice("the metrics file \(path) is written again") }
        } catch {
            if !failing.set(true) { logger.warning("cannot write the metrics file \(path): \(error)") }
        }
    }

    /// Writes `text` to `path.tmp` (never following a link there) and renames it over `path`.
    static func replace(_ path: String, with text: String) throws(MetricsFileError) {
        let temporary = path + ".tmp"
        unlink(temporary)
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw MetricsFileError(step: "open \(temporary)", code: errno) }
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else {
                let code = errno
                close(descriptor)
                unlink(temporary)
                throw MetricsFileError(step: "write \(temporary)", code: code)
            }
            bytes = bytes.dropFirst(written)
        }
        close(descriptor)
        guard rename(temporary, path) == 0 else {
            let code = errno
            unlink(temporary)
            throw MetricsFileError(step: "rename to \(path)", code: code)
        }
    }
}

/// A metrics file that could not be written: the step and the C error.
struct MetricsFileError: Error, CustomStringConvertible {
    let step: String
    let code: Int32
    var description: String {
        RemoteText.printable("\(step): \(String(cString: strerror(code)))", limit: 400)
    }
}

/// A flag shared across copies of ``MetricsFile``.
private final class Failing: Sendable {
    private let state = Mutex(false)

    /// Sets the flag; returns what it was.
    func set(_ value: Bool) -> Bool {
        state.withLock { old in
            defer { old = value }; return old
        }
    }
}
