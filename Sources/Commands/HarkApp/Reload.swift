import ArgumentParser
import HarkControl
import HarkCore

/// `hark reload`: asks the running daemon, through its control socket, to reload its configuration, and waits until
/// it is in force.
struct Reload: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Reload the running appliance's configuration, and wait until it is in force.",
        discussion: """
            Asks the daemon through its control socket to read its configuration file again, and returns once \
            the daemon has applied it or refused it. A refused file changes nothing: the daemon keeps running the \
            configuration it had, and this prints why (the file, the line and the key). No process id is read \
            from a file and no signal is sent; SIGHUP still reloads the daemon the same way.

            The unit's ExecReload runs it with --pid $MAINPID, so `systemctl reload hark` returns once the new \
            settings are in force, and fails, with the reason in `systemctl status`, when the file cannot run; \
            with --pid, the socket must be served by that process (SO_PEERCRED), else nothing is asked.

            Exit codes: 0 applied; 1 refused (the running configuration stays), or the socket is served by \
            another process than --pid; 3 no daemon to ask (no control socket, a stale one, or no answer within \
            --timeout); 4 permission denied (the socket is the service's user's and group's).
            """
    )

    @OptionGroup var socket: ControlSocketOptions

    @Option(
        help: ArgumentHelp(
            "The daemon's process id (systemd passes $MAINPID): the socket must be served by it.",
            valueName: "PID"
        )
    )
    var pid: Int32?

    @Option(help: ArgumentHelp("Seconds to wait for the daemon to answer.", valueName: "SECONDS"))
    var timeout: Double = 60

    func validate() throws {
        if let pid, pid < 2 { throw ValidationError("--pid must be a process id above 1") }
        _ = try CommandLineDuration.seconds(timeout, option: "--timeout", in: 0.1...3600)
    }

    func run() async throws {
        let wait = try CommandLineDuration.seconds(timeout, option: "--timeout", in: 0.1...3600)
        let reply: ControlReply
        do {
            reply = try await ControlClient(path: socket.path(), timeout: wait)
                .send(ControlRequest(op: "reload"), serverPID: pid)
        } catch {
            printError("hark reload: \(ControlSocketOptions.explain(error))")
            // A socket served by another process than --pid was not asked: not the daemon systemd means.
            throw ExitCode(error.kind == .unusable ? ControlExit.refused : ControlSocketOptions.exitCode(for: error))
        }
        try finishControl(reply, command: "reload")
    }
}
