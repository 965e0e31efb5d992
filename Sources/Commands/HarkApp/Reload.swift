import ArgumentParser
import HarkAppliance
import HarkConfig

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// `hark reload`: asks the running daemon to reload its configuration and waits until it has.
struct Reload: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Reload the running appliance's configuration, and wait until it is in force.",
        discussion: """
            Sends SIGHUP to the daemon (--pid, else the process the status file names) and waits until the daemon \
            has applied the configuration or refused it. The process is signalled only when it is the hark daemon: \
            it runs a hark executable and, when the status file records it, started when the daemon did. A refused file changes nothing: the daemon keeps running \
            the configuration it had, and this prints why (the file, the line and the key).

            The unit's ExecReload runs it, so `systemctl reload hark` returns once the new settings are in force, \
            and fails, with the reason in `systemctl status`, when the file cannot run.

            Exit codes: 0 applied; 1 refused (the running configuration stays); 3 no daemon to ask (or the process \
            named is not the daemon), or none answered within --timeout.
            """
    )

    @Option(
        help: ArgumentHelp(
            "The configuration file, to find the status file (default: $HARK_CONFIG, else /etc/hark/hark.yaml).",
            valueName: "PATH"
        )
    )
    var config: String?

    @Option(name: .customLong("file"), help: ArgumentHelp("The status file itself.", valueName: "PATH"))
    var file: String?

    @Option(help: ArgumentHelp("The daemon's process id (systemd passes $MAINPID).", valueName: "PID"))
    var pid: Int32?

    @Option(help: ArgumentHelp("Seconds to wait for the daemon to answer.", valueName: "SECONDS"))
    var timeout: Double = 60

    func validate() throws {
        if let pid, pid < 2 { throw ValidationError("--pid must be a process id above 1") }
        _ = try CommandLineDuration.seconds(timeout, option: "--timeout", in: 0.1...3600)
    }

    func run() async throws {
        let path = statusPath()
        let before: ApplianceStatus
        do {
            before = try ApplianceStatus.read(from: path)
        } catch {
            printError("hark reload: \(error)")
            throw ExitCode(3)
        }
        let target = pid ?? before.pid
        // The file is the service user's to write: the process it names is signalled only once it is known to be
        // the daemon (its executable, and its start time when the file records it).
        do {
            try DaemonProcess.verify(target, recordedStart: before.pid == target ? before.processStartTicks : nil)
        } catch {
            printError("hark reload: \(error.description)")
            throw ExitCode(3)
        }
        guard kill(target, SIGHUP) == 0 else {
            printError(
                "hark reload: cannot signal the daemon (process \(target)): \(String(cString: strerror(errno)))"
            )
            throw ExitCode(3)
        }
        // Reloads the daemon had handled before this one (none, when the file is another process's: a daemon
        // that started since the file was written counts from zero).
        let asked = before.pid == target ? (before.reloads?.count ?? 0) : 0
        let deadline =
            ContinuousClock.now + (try CommandLineDuration.seconds(timeout, option: "--timeout", in: 0.1...3600))
        // The daemon rewrites the file atomically once it has applied or refused the reload: look every 50 ms.
        while ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
            guard let status = try? ApplianceStatus.read(from: path), status.pid == target,
                let reloads = status.reloads, reloads.count > asked
            else { continue }
            if let failure = reloads.failure {
                printError("hark reload: refused, the daemon keeps its running configuration: \(failure)")
                throw ExitCode(1)
            }
            print("hark reload: in force (mode \(status.mode), \(status.backend))")
            return
        }
        printError(
            "hark reload: the daemon (pid \(target)) did not say within \(Int(timeout.rounded(.up))) s "
                + "whether it applied the configuration; `journalctl -u hark` shows what it is doing"
        )
        throw ExitCode(3)
    }

    /// --file, else the configuration's status file, else the default one (a reload is also how a broken file is
    /// found: the path is still wanted when the file cannot be read).
    private func statusPath() -> String {
        if let file { return file }
        let environment = ProcessInfo.processInfo.environment
        if let loaded = try? ConfigurationLoader.load(path: config, environment: environment) {
            return loaded.configuration.statusFile
        }
        return ApplianceConfiguration().statusFile
    }
}
