import ArgumentParser
import HarkConfig
import HarkControl
import HarkCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// The exit codes of the commands that talk to the daemon.
enum ControlExit {
    /// The daemon did it.
    static let done: Int32 = 0
    /// The daemon refused or could not do it (it says why).
    static let refused: Int32 = 1
    /// Usage: a value that is not what the command takes.
    static let usage: Int32 = 2
    /// No daemon to ask: no socket, a stale one, or no answer in time.
    static let noDaemon: Int32 = 3
    /// This user may not use the socket.
    static let permission: Int32 = 4

    /// The table every such command's help ends with.
    static let table = """
        Exit codes: 0 done; 1 the daemon refused or could not do it (it says why); 2 usage (a value the command \
        does not take); 3 no daemon to ask (no control socket, a stale one left by a daemon that is gone, or no \
        answer in time); 4 permission denied (the socket is the service's user's and group's: add yourself to the \
        group, `sudo usermod -aG hark $USER`, then log in again, or use sudo).
        """
}

/// Where the daemon's control socket is, and how long to wait for it: the options each control command shares.
struct ControlSocketOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "The configuration file, for its control_socket (default: $HARK_CONFIG, else /etc/hark/hark.yaml).",
            valueName: "PATH"
        )
    )
    var config: String?

    @Option(
        help: ArgumentHelp(
            "The control socket itself (default: control_socket in the configuration, else control.sock in "
                + "$RUNTIME_DIRECTORY, else /run/hark/control.sock).",
            valueName: "PATH"
        )
    )
    var controlSocket: String?

    /// The socket's path: --control-socket, else the configuration's (a file that cannot be read still leaves
    /// the default: a reload is also how a broken file is found).
    func path() -> String {
        if let controlSocket { return controlSocket }
        let environment = ProcessInfo.processInfo.environment
        if let loaded = try? ConfigurationLoader.load(path: config, environment: environment) {
            return loaded.configuration.controlSocketPath(environment: environment)
        }
        return ApplianceConfiguration().controlSocketPath(environment: environment)
    }

    /// Sends `request`; prints why and exits with the code the table gives when the daemon cannot be asked.
    func send(
        _ request: ControlRequest,
        command: String,
        timeout: Duration = .seconds(10),
        serverPID: Int32? = nil
    ) async throws -> ControlReply {
        let client = ControlClient(path: path(), timeout: timeout)
        do {
            return try await client.send(request, serverPID: serverPID)
        } catch {
            printError("hark \(command): \(Self.explain(error))")
            throw ExitCode(Self.exitCode(for: error))
        }
    }

    /// A socket error with what to do about it.
    static func explain(_ error: ControlSocketError) -> String {
        switch error.kind {
        case .missing: error.description + " (is it running? systemctl status hark)"
        case .stale: error.description + ": the daemon is gone (systemctl status hark; journalctl -u hark)"
        case .permissionDenied:
            error.description
                + ": it is the service's user's and group's; add yourself to the group (sudo usermod -aG hark "
                + "$USER, then log in again) or use sudo"
        default: error.description
        }
    }

    /// The exit code for a socket error (``ControlExit``).
    static func exitCode(for error: ControlSocketError) -> Int32 {
        switch error.kind {
        case .permissionDenied: ControlExit.permission
        case .missing, .stale, .noReply, .inUse: ControlExit.noDaemon
        case .unusable, .failed: ControlExit.noDaemon
        }
    }
}

/// Prints a reply's message; a refusal goes to standard error and exits 1.
func finishControl(_ reply: ControlReply, command: String) throws {
    let message = RemoteText.printable(reply.message, limit: 2000)
    if reply.ok {
        if !message.isEmpty { print("hark \(command): \(message)") }
        return
    }
    printError("hark \(command): \(message.isEmpty ? "refused" : message)")
    throw ExitCode(ControlExit.refused)
}

/// Sends `op` with the label when there is one (a cancel: by label, or everything without), and finishes.
func sendLabelled(
    _ op: String,
    label: String?,
    through socket: ControlSocketOptions,
    command: String
) async throws {
    var args: [String: JSONValue] = [:]
    if let label { args["label"] = .string(try ControlValues.label(label)) }
    let reply = try await socket.send(ControlRequest(op: op, args: args), command: command)
    try finishControl(reply, command: command)
}

/// A label given on the command line, checked before anything is sent.
func validateLabel(_ label: String?) throws {
    guard let label else { return }
    do { _ = try ControlValues.label(label) } catch { throw ValidationError(error.description) }
}

/// `hark timers`: the daemon's timers (and its alarms and what rings), kept on the device.
struct Timers: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List, set, cancel and stop the appliance's timers.",
        discussion: """
            Timers live on the device: they ring with no network and no session, through the speaker, and survive \
            a restart. Each command asks the running daemon through its control socket.

              hark timers                       list the timers, the alarms and what rings now
              hark timers add 10m pasta         a timer of 10 minutes labelled pasta (1h30m, 90s, 1h 5m ...; 1 s to 24 h)
              hark timers cancel pasta          cancel the timer labelled pasta (no label: every timer)
              hark timers stop                  stop what rings now

            \(ControlExit.table)
            """,
        subcommands: [List.self, Add.self, Cancel.self, Stop.self],
        defaultSubcommand: List.self
    )

    /// `hark timers list`.
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the timers, the alarms and what rings now.",
            discussion: ControlExit.table
        )

        @OptionGroup var socket: ControlSocketOptions

        @Flag(help: "Print the daemon's reply as JSON.")
        var json = false

        func run() async throws {
            let reply = try await socket.send(ControlRequest(op: "timers.list"), command: "timers")
            guard reply.ok else { return try finishControl(reply, command: "timers") }
            if json {
                print(String(decoding: ControlReplyLine.encode(reply).dropLast(), as: UTF8.self))
                return
            }
            print(TimerListing.render(reply.data, now: Date().timeIntervalSince1970))
        }
    }

    /// `hark timers add DURATION [LABEL]`.
    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Set a timer.",
            discussion: """
                DURATION is 90s, 10m, 1h30m, 1h 5m 3s or a number of seconds, from 1 s to 24 h. LABEL (up to 64 \
                characters) names it, so it can be cancelled by name and is said when it rings.

                \(ControlExit.table)
                """
        )

        @Argument(help: ArgumentHelp("How long: 90s, 10m, 1h30m (1 s to 24 h).", valueName: "DURATION"))
        var duration: String

        @Argument(help: ArgumentHelp("A name for it (pasta, tea, ...).", valueName: "LABEL"))
        var label: String?

        @OptionGroup var socket: ControlSocketOptions

        func validate() throws {
            do {
                _ = try ControlValues.duration(duration)
                if let label { _ = try ControlValues.label(label) }
            } catch {
                throw ValidationError(error.description)
            }
        }

        func run() async throws {
            var args: [String: JSONValue] = ["seconds": .number(Double(try ControlValues.duration(duration)))]
            if let label { args["label"] = .string(try ControlValues.label(label)) }
            let reply = try await socket.send(ControlRequest(op: "timers.add", args: args), command: "timers add")
            try finishControl(reply, command: "timers add")
        }
    }

    /// `hark timers cancel [LABEL]`.
    struct Cancel: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Cancel the timer with a label, or every timer.",
            discussion: ControlExit.table
        )

        @Argument(help: ArgumentHelp("The timer's label (none: every timer).", valueName: "LABEL"))
        var label: String?

        @OptionGroup var socket: ControlSocketOptions

        func validate() throws { try validateLabel(label) }

        func run() async throws {
            try await sendLabelled("timers.cancel", label: label, through: socket, command: "timers cancel")
        }
    }

    /// `hark timers stop`.
    struct Stop: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop what rings now (a timer or an alarm).",
            discussion: ControlExit.table
        )

        @OptionGroup var socket: ControlSocketOptions

        func run() async throws {
            let reply = try await socket.send(ControlRequest(op: "timers.stop"), command: "timers stop")
            try finishControl(reply, command: "timers stop")
        }
    }
}

/// `hark alarms`: the daemon's alarms, at a local time, once or on weekdays.
struct Alarms: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List, set and cancel the appliance's alarms.",
        discussion: """
            Alarms live on the device and follow its local time zone (and daylight saving); they ring with no \
            network and no session. Each command asks the running daemon through its control socket.

              hark alarms                              list the alarms (and the timers, and what rings)
              hark alarms add 07:30 wake --days weekdays    at 07:30 Monday to Friday, labelled wake
              hark alarms add 6:45                     once, at the next 06:45
              hark alarms cancel wake                  cancel the alarm labelled wake (no label: every alarm)

            `hark timers stop` stops an alarm that rings.

            \(ControlExit.table)
            """,
        subcommands: [List.self, Add.self, Cancel.self],
        defaultSubcommand: List.self
    )

    /// `hark alarms list`.
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the alarms, the timers and what rings now.",
            discussion: ControlExit.table
        )

        @OptionGroup var socket: ControlSocketOptions

        func run() async throws {
            let reply = try await socket.send(ControlRequest(op: "timers.list"), command: "alarms")
            guard reply.ok else { return try finishControl(reply, command: "alarms") }
            print(TimerListing.render(reply.data, now: Date().timeIntervalSince1970))
        }
    }

    /// `hark alarms add HH:MM [LABEL] [--days mon,tue]`.
    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Set an alarm at a local time, once or on some days.",
            discussion: """
                TIME is HH:MM on the 24-hour clock (00:00 to 23:59), the device's local time. Without --days it \
                rings once, at the next such time; with --days it repeats on those days (mon,tue,wed,thu,fri,sat,\
                sun, or weekdays, weekend, daily).

                \(ControlExit.table)
                """
        )

        @Argument(help: ArgumentHelp("The local time, 24-hour clock.", valueName: "HH:MM"))
        var time: String

        @Argument(help: ArgumentHelp("A name for it (up to 64 characters).", valueName: "LABEL"))
        var label: String?

        @Option(help: ArgumentHelp("Repeat on these days: mon,tue,... or weekdays, weekend, daily.", valueName: "DAYS"))
        var days: String?

        @OptionGroup var socket: ControlSocketOptions

        func validate() throws {
            do {
                _ = try ControlValues.time(time)
                if let label { _ = try ControlValues.label(label) }
                if let days { _ = try ControlValues.days(days) }
            } catch {
                throw ValidationError(error.description)
            }
        }

        func run() async throws {
            var args: [String: JSONValue] = ["time": .string(try ControlValues.time(time))]
            if let label { args["label"] = .string(try ControlValues.label(label)) }
            if let days { args["days"] = .array(try ControlValues.days(days).map { .string($0) }) }
            let reply = try await socket.send(ControlRequest(op: "alarms.add", args: args), command: "alarms add")
            try finishControl(reply, command: "alarms add")
        }
    }

    /// `hark alarms cancel [LABEL]`.
    struct Cancel: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Cancel the alarm with a label, or every alarm.",
            discussion: ControlExit.table
        )

        @Argument(help: ArgumentHelp("The alarm's label (none: every alarm).", valueName: "LABEL"))
        var label: String?

        @OptionGroup var socket: ControlSocketOptions

        func validate() throws { try validateLabel(label) }

        func run() async throws {
            try await sendLabelled("alarms.cancel", label: label, through: socket, command: "alarms cancel")
        }
    }
}

/// `timers.list`'s data as lines for a person: `{"timers": [{"label", "remaining_s", "deadline"}], "alarms":
/// [{"label", "time", "days", "next"}], "ringing": [labels]}`. Whatever the daemon sent is shown printable and
/// bounded; a field missing is left out, never a crash.
enum TimerListing {
    /// At most this many entries of each kind are shown.
    static let shown = 64

    static func render(_ data: JSONValue?, now: Double) -> String {
        var lines: [String] = []
        let ringing = (data?["ringing"]?.arrayValue ?? []).prefix(shown).map(text)
        if !ringing.isEmpty { lines.append("ringing: " + ringing.joined(separator: ", ")) }
        let timers = (data?["timers"]?.arrayValue ?? []).prefix(shown)
        if timers.isEmpty {
            lines.append("no timers")
        } else {
            lines.append("timers:")
            for timer in timers {
                var line = "  " + (timer["label"].map(text) ?? "(no label)")
                if let remaining = timer["remaining_s"]?.numberValue, remaining.isFinite {
                    line +=
                        "  " + ControlValues.spoken(seconds: Int(clamping: Int64(max(0, min(1e9, remaining)))))
                        + " left"
                }
                if let deadline = timer["deadline"]?.numberValue { line += "  (at \(clock(deadline, now: now)))" }
                lines.append(line)
            }
        }
        let alarms = (data?["alarms"]?.arrayValue ?? []).prefix(shown)
        if alarms.isEmpty {
            lines.append("no alarms")
        } else {
            lines.append("alarms:")
            for alarm in alarms {
                var line = "  " + (alarm["time"].map(text) ?? "--:--")
                let days = (alarm["days"]?.arrayValue ?? []).prefix(7).map(text)
                line += "  " + (days.isEmpty ? "once" : days.joined(separator: ","))
                line += "  " + (alarm["label"].map(text) ?? "(no label)")
                if let next = alarm["next"]?.numberValue { line += "  (next: \(clock(next, now: now)))" }
                lines.append(line)
            }
        }
        return lines.joined(separator: "\n")
    }

    private static func text(_ value: JSONValue) -> String {
        switch value {
        case .string(let string): RemoteText.printable(string, limit: 80)
        case .number(let number): number.isFinite ? "\(number)" : "?"
        default: "?"
        }
    }

    /// A Unix time as the local `HH:MM`, with the date when it is not within the next day.
    static func clock(_ time: Double, now: Double) -> String {
        guard time.isFinite, abs(time) < 1e11 else { return "?" }
        var seconds = time_t(time.rounded(.down))
        var parts = tm()
        guard localtime_r(&seconds, &parts) != nil else { return "?" }
        let hhmm = String(format2(Int(parts.tm_hour))) + ":" + format2(Int(parts.tm_min))
        if time - now < 86_400, time >= now - 60 { return hhmm }
        return "\(Int(parts.tm_year) + 1900)-\(format2(Int(parts.tm_mon) + 1))-\(format2(Int(parts.tm_mday))) \(hhmm)"
    }

    private static func format2(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
}
