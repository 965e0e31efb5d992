import Foundation
import Glibc
import HarkTestKit
import Synchronization
import Testing

/// The built `hark` next to this test bundle (`swift build --build-tests` builds it).
func builtHark() throws -> String {
    let executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
    var folder = URL(fileURLWithPath: executable).deletingLastPathComponent()
    // The test bundle may sit inside `harkPackageTests.xctest/...`: climb to the build folder.
    while folder.path != "/" {
        let candidate = folder.path + "/hark"
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: candidate, isDirectory: &isDirectory), !isDirectory.boolValue {
            return candidate
        }
        folder.deleteLastPathComponent()
    }
    throw POSIXError(.ENOENT, userInfo: [NSLocalizedDescriptionKey: "hark is not built: run swift build --build-tests"])
}

/// Runs `hark` with `arguments` to its end and returns what it printed.
func runHark(_ hark: String, _ arguments: [String]) async throws -> String {
    try await ChildProcess.run(hark, arguments).text
}

/// Feeds a FIFO the capture device reads, on its own thread, until paused: a microphone whose stream can be
/// made to stall for real (the capture thread then blocks in its read).
final class MicrophoneFeed: Sendable {
    let path: String
    private let fd: Int32
    private let feeding = Atomic(true)
    private let running = Atomic(true)
    private let finished = DispatchSemaphore(value: 0)

    init(directory: String) throws {
        path = directory + "/mic.fifo"
        guard mkfifo(path, 0o600) == 0 else { throw POSIXError(.EEXIST) }
        // Read-write, so opening never waits for the other end.
        fd = open(path, O_RDWR)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        let thread = Thread { [self] in
            let silence = [UInt8](repeating: 0, count: 640)
            while running.load(ordering: .acquiring) {
                if feeding.load(ordering: .acquiring) {
                    _ = silence.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                } else {
                    usleep(10_000)
                }
            }
            finished.signal()
        }
        thread.start()
    }

    /// Stops (false) or resumes (true) the stream.
    func feed(_ on: Bool) { feeding.store(on, ordering: .releasing) }

    func close() {
        feeding.store(true, ordering: .releasing)
        running.store(false, ordering: .releasing)
        // Unblock a write waiting on a full FIFO.
        var drain = [UInt8](repeating: 0, count: 65_536)
        let reader = open(path, O_RDONLY | O_NONBLOCK)
        if reader >= 0 {
            _ = read(reader, &drain, drain.count)
            Glibc.close(reader)
        }
        finished.wait()
        Glibc.close(fd)
    }
}

/// `hark run` as systemd runs it: a real process, a test-made `NOTIFY_SOCKET`, `WATCHDOG_USEC`, SIGTERM.
@Suite(.timeLimit(.minutes(2))) struct WatchdogTests {
    @Test func readyAfterTheDevicesOpenPingsOnlyWhileCaptureFlowsAndStopsCleanly() async throws {
        let hark = try builtHark()
        let directory = FileManager.default.temporaryDirectory.path + "/hark-watchdog-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let microphone = try MicrophoneFeed(directory: directory)
        defer { microphone.close() }
        let configuration = """
            mode: speaker
            board: host
            board_dir: \(repositoryRoot)/board
            state_dir: \(directory)
            status_file: \(directory)/status.json
            control_socket: \(directory)/control.sock
            gemini:
              endpoint: ws://127.0.0.1:9
            audio:
              capture_file: \(microphone.path)
              playback_file: \(directory)/speaker.raw
              file_pace: 1
            metrics:
              textfile: \(directory)/hark.prom
            """
        try configuration.write(toFile: directory + "/hark.yaml", atomically: true, encoding: .utf8)
        let socket = try NotifySocket()

        let process = Process()
        process.executableURL = URL(fileURLWithPath: hark)
        process.arguments = ["run", "--config", directory + "/hark.yaml"]
        var environment = ChildProcess.inheritedEnvironment
        environment["NOTIFY_SOCKET"] = socket.path
        environment["WATCHDOG_USEC"] = "300000"  // a ping every 150 ms
        environment.removeValue(forKey: "WATCHDOG_PID")
        process.environment = environment
        process.standardInput = FileHandle(forReadingAtPath: "/dev/null")
        process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        let log = Pipe()
        process.standardError = log
        let (exits, exited) = AsyncStream.makeStream(of: Int32.self)
        process.terminationHandler = { exited.yield($0.terminationStatus) }
        try process.run()
        defer { if process.isRunning { process.terminate() } }

        // READY=1 once the devices are open, with a status a person can read; nothing ready before it.
        var before: [String] = []
        let ready = await socket.receive(until: { $0.contains("READY=1") }, timeout: .seconds(20)) { before.append($0) }
        #expect(ready == "READY=1\nSTATUS=idle", "before: \(before)")
        #expect(before.contains { $0.hasPrefix("STATUS=booting") })

        // Regular pings while every part makes progress.
        var pings = 0
        _ = await socket.receive(until: { _ in pings >= 3 }, timeout: .seconds(10)) {
            if $0 == "WATCHDOG=1" { pings += 1 }
        }
        #expect(pings >= 3)

        // The microphone stalls: the capture thread blocks, and the pings stop.
        microphone.feed(false)
        let clock = ContinuousClock()
        let stalledAt = clock.now
        var lastPing = clock.now
        while clock.now - stalledAt < .seconds(15) {
            guard let message = await socket.receive(timeout: .seconds(1)) else { break }  // a quiet second: stopped
            if message == "WATCHDOG=1" { lastPing = clock.now }
        }
        #expect(clock.now - lastPing >= .seconds(1), "the pings went on while capture stalled")

        // The stream comes back: so do the pings.
        microphone.feed(true)
        let again = await socket.receive(until: { $0 == "WATCHDOG=1" }, timeout: .seconds(10))
        #expect(again == "WATCHDOG=1")

        // `hark status` reads what the daemon is doing.
        let shown = try await runHark(hark, ["status", "--file", directory + "/status.json"])
        #expect(shown.contains("state:       idle"), "\(shown)")
        #expect(shown.contains("mode:        speaker (gemini, board host)"))

        // Music is on by default, but FFmpeg is opened only when something plays: a daemon that plays nothing maps
        // none of it.
        // (Read by cat: a procfs file states no size, and a whole-file read stops at its first page.)
        let maps = try await ChildProcess.run("/bin/cat", ["/proc/\(process.processIdentifier)/maps"]).text
        #expect(maps.contains("libasound"), "the maps read are the daemon's")
        #expect(!maps.contains("libavformat"), "FFmpeg is mapped by a daemon that plays nothing")

        // SIGHUP reloads the configuration in the same process: RELOADING=1, then READY=1 again.
        try configuration.replacingOccurrences(of: "mode: speaker", with: "mode: push-to-talk")
            .write(toFile: directory + "/hark.yaml", atomically: true, encoding: .utf8)
        kill(process.processIdentifier, SIGHUP)
        let reloading = await socket.receive(until: { $0.contains("RELOADING=1") }, timeout: .seconds(10))
        #expect(reloading?.contains("RELOADING=1") == true)
        let readyAgain = await socket.receive(until: { $0.contains("READY=1") }, timeout: .seconds(10))
        #expect(readyAgain == "READY=1\nSTATUS=idle")
        #expect(process.isRunning)
        #expect(
            try await runHark(hark, ["status", "--file", directory + "/status.json"]).contains(
                "mode:        push-to-talk"
            )
        )

        // The control socket: the daemon's user's, mode 0660 (its group may use it), never a network port.
        let controlSocket = directory + "/control.sock"
        let socketFile = try FileManager.default.attributesOfItem(atPath: controlSocket)  // not through a link
        #expect(socketFile[.type] as? FileAttributeType == .typeSocket)
        let permissions = (socketFile[.posixPermissions] as? NSNumber)?.intValue ?? -1
        #expect(permissions == 0o660, "mode \(String(permissions, radix: 8))")
        #expect((socketFile[.ownerAccountID] as? NSNumber)?.uint32Value == geteuid())
        // Timers through the socket: set, rung through the speaker path without any session, stopped. The
        // notifications are read meanwhile: a datagram socket holds 10 unread, and sd_notify then blocks the daemon.
        @Sendable func drainNotifications() async { while await socket.receive(timeout: .milliseconds(20)) != nil {} }
        await drainNotifications()
        let added = try await ChildProcess.run(
            hark,
            ["timers", "add", "1s", "pasta", "--control-socket", controlSocket],
            separateErrors: true
        )
        #expect(added.status == 0, "\(added.text) \(added.errorText)")
        #expect(added.text.contains("The pasta timer is set for 1 second"), "\(added.text)")
        var listing = ""
        let ringBy = ContinuousClock.now + .seconds(10)
        while !listing.contains("ringing: pasta"), ContinuousClock.now < ringBy {
            listing = try await ChildProcess.run(hark, ["timers", "list", "--control-socket", controlSocket]).text
            await drainNotifications()
        }
        #expect(listing.contains("ringing: pasta"), "\(listing)")
        let stopped = try await ChildProcess.run(hark, ["timers", "stop", "--control-socket", controlSocket])
        #expect(stopped.status == 0 && stopped.text.contains("Stopped the pasta timer."), "\(stopped.text)")
        let after = try await ChildProcess.run(hark, ["timers", "list", "--control-socket", controlSocket]).text
        #expect(!after.contains("ringing") && after.contains("no timers"), "\(after)")
        // Nothing rings and no session is open: an update may be installed now (update.ready).
        let updateReady = try await ChildProcess.run(hark, ["update", "ready", "--control-socket", controlSocket])
        #expect(updateReady.status == 0 && updateReady.text == "ready\n", "\(updateReady.text)")
        await drainNotifications()

        // `hark reload` (the unit's ExecReload) asks through the socket and returns once the daemon has answered.
        // A misspelt key is refused with the file, the line and the key, and the running configuration stays.
        let statusFile = directory + "/status.json"
        let pid = "\(process.processIdentifier)"
        let misspelt = configuration.split(separator: "\n").count + 2
        try (configuration + "\nsession:\n  idle_timout: 5s\n")
            .write(toFile: directory + "/hark.yaml", atomically: true, encoding: .utf8)
        let refused = try await ChildProcess.run(
            hark,
            ["reload", "--control-socket", controlSocket, "--pid", pid],
            separateErrors: true
        )
        #expect(refused.status == 1, "\(refused.errorText)")
        #expect(
            refused.errorText.contains("\(directory)/hark.yaml:\(misspelt): session.idle_timout"),
            "\(refused.errorText)"
        )
        #expect(process.isRunning)
        let afterRefusal = try await runHark(hark, ["status", "--file", statusFile])
        #expect(afterRefusal.contains("mode:        push-to-talk"), "\(afterRefusal)")
        #expect(afterRefusal.contains("reloads:     2, the last failed"), "\(afterRefusal)")
        // The file fixed: in force when the command returns.
        try configuration.write(toFile: directory + "/hark.yaml", atomically: true, encoding: .utf8)
        // Another process than --pid serving the socket: not asked.
        let wrongPID = try await ChildProcess.run(
            hark,
            ["reload", "--control-socket", controlSocket, "--pid", "\(getpid())"],
            separateErrors: true
        )
        #expect(wrongPID.status == 1, "\(wrongPID.errorText)")
        #expect(wrongPID.errorText.contains("not by process \(getpid())"), "\(wrongPID.errorText)")
        let applied = try await ChildProcess.run(hark, ["reload", "--control-socket", controlSocket, "--pid", pid])
        #expect(applied.status == 0, "\(applied.text)")
        #expect(applied.text.contains("in force (mode speaker, gemini)"), "\(applied.text)")
        let afterFix = try await runHark(hark, ["status", "--file", statusFile])
        #expect(afterFix.contains("mode:        speaker"), "\(afterFix)")
        #expect(afterFix.contains("reloads:     3, the last applied"), "\(afterFix)")

        // SIGTERM: STOPPING=1, then a clean exit.
        process.terminate()
        let stopping = await socket.receive(until: { $0.contains("STOPPING=1") }, timeout: .seconds(10))
        #expect(stopping?.contains("STOPPING=1") == true)
        let status = try await withDeadline(.seconds(10), "hark to exit") {
            for await status in exits { return status }
            return -1
        }
        let stderr = String(decoding: log.fileHandleForReading.availableData, as: UTF8.self)
        #expect(status == 0, "\(stderr)")
        #expect(process.terminationReason == .exit)
        // The metrics file's last write, at exit, shows the daemon stopped.
        let metrics = (try? String(contentsOfFile: directory + "/hark.prom", encoding: .utf8)) ?? ""
        #expect(metrics.contains("\nhark_state{state=\"stopped\"} 1\n"), "\(metrics)")
        #expect(metrics.contains("\nhark_reloads_total 3\n"), "\(metrics)")
        #expect(!FileManager.default.fileExists(atPath: directory + "/hark.prom.tmp"))
        // The socket went with the daemon: no daemon is a clear error of its own.
        #expect((try? FileManager.default.attributesOfItem(atPath: controlSocket)) == nil)
        let none = try await ChildProcess.run(
            hark,
            ["reload", "--control-socket", controlSocket],
            separateErrors: true
        )
        #expect(none.status == 3, "\(none.errorText)")
        #expect(none.errorText.contains("no daemon: no control socket at \(controlSocket)"), "\(none.errorText)")
    }
}

/// Dispatch gives a worker thread of a priority above the default a negative nice value; refused, that is a line in
/// the journal each time. A command run by an ordinary user (no capability, RLIMIT_NICE 0) must not ask. (The
/// daemon's Dispatch event thread asks for nice -4 and gets it from the unit's LimitNICE=-4, which this machine's
/// hard limit cannot grant a test: scripts/board-vm checks the journal of the real unit.)
@Suite(.timeLimit(.minutes(1))) struct ThreadPriorityTests {
    /// Runs `hark arguments` without any capability (root's too: an empty bounding set) and RLIMIT_NICE 0, Dispatch
    /// logging to standard error; returns what it wrote there.
    func withoutCapabilities(_ arguments: [String]) async throws -> String {
        let hark = try builtHark()
        // Root gives up every capability first; another user has none to give up.
        let dropped = getuid() == 0 ? ["/usr/bin/setpriv", "--bounding-set=-all", "--inh-caps=-all"] : []
        let command = ["/usr/bin/prlimit", "--nice=0"] + dropped + [hark] + arguments
        var environment = ChildProcess.inheritedEnvironment
        environment["LIBDISPATCH_LOG"] = "stderr"
        environment["GEMINI_API_KEY"] = "test-key"
        let run = try await ChildProcess.run(
            command[0],
            Array(command.dropFirst()),
            environment: environment,
            separateErrors: true
        )
        return run.errorText
    }

    @Test func aCommandAsAnOrdinaryUserAsksForNoPriorityItCannotHave() async throws {
        let errors = try await withoutCapabilities(["status", "--file", "/nonexistent/status.json"])
        #expect(errors.contains("no status file"), "\(errors)")
        #expect(!errors.contains("Failed to set thread priority"), "\(errors)")
    }
}
