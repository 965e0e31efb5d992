import ArgumentParser
import HarkAppliance
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

/// `hark update`: what `hark-update` asks of hark: may an update be installed now, and is the new release
/// healthy. The updater keeps a copy of the hark that was installed before the upgrade and runs the gate with it,
/// so a new release is judged by the one known to work.
struct Update: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "What hark-update asks: may an update be installed now, and is the new release healthy.",
        subcommands: [Ready.self, Gate.self]
    )

    /// `hark update ready`: the control socket's `update.ready`.
    struct Ready: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Ask the daemon whether an update may be installed now.",
            discussion: """
                Exit codes: 0 ready (nothing is going on); 1 busy (a conversation is open, something rings or \
                plays: it says what); 3 no daemon to ask (nothing to interrupt either); 4 permission denied.
                """
        )

        @OptionGroup var socket: ControlSocketOptions

        func run() async throws {
            let reply = try await socket.send(ControlRequest(op: "update.ready"), command: "update ready")
            guard reply.ok, case .object(let data)? = reply.data, case .bool(let ready)? = data["ready"] else {
                printError("hark update ready: \(RemoteText.printable(reply.message, limit: 300))")
                throw ExitCode(ControlExit.refused)
            }
            print(RemoteText.printable(reply.message, limit: 600))
            if !ready { throw ExitCode(ControlExit.refused) }
        }
    }

    /// `hark update gate`: one observation of the health gate (``UpdateGate``), kept in a file between calls.
    struct Gate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Judge the release just installed: one observation of the health gate.",
            discussion: """
                With --begin (before the upgrade): writes a new gate to --state, noting whether the running daemon \
                shows a rejected key or configuration now. Without: reads `systemctl show -p \
                ActiveState,NRestarts,ExecMainStartTimestampMonotonic hark` from standard input, asks the daemon \
                for its status over the control socket, and prints the verdict. Exit codes: 0 healthy for \
                --health-for (keep the release); 1 failed (roll back: it says why); 10 still watching (ask again); \
                2 usage or an unreadable state file.
                """
        )

        @Option(help: ArgumentHelp("The gate's file (the updater's state directory).", valueName: "PATH"))
        var state: String

        @Flag(help: "Begin a new gate (before installing the release).")
        var begin = false

        @Option(help: ArgumentHelp("Seconds the release must stay healthy (with --begin).", valueName: "SECONDS"))
        var healthFor: Double = 600

        @Option(help: ArgumentHelp("Seconds it may take to become ready (with --begin).", valueName: "SECONDS"))
        var readyWithin: Double = 180

        @Option(help: ArgumentHelp("The time now in seconds (default: the monotonic clock).", valueName: "SECONDS"))
        var now: Double?

        @OptionGroup var socket: ControlSocketOptions

        func run() async throws {
            let now = self.now ?? Self.monotonicSeconds()
            guard now.isFinite, healthFor.isFinite, (1...86_400).contains(healthFor), readyWithin.isFinite,
                (1...86_400).contains(readyWithin)
            else {
                printError("hark update gate: --now, --health-for and --ready-within must be finite (1 s to 24 h)")
                throw ExitCode(ControlExit.usage)
            }
            let daemon = await daemonStatus()
            if begin {
                let gate = UpdateGate(
                    healthFor: healthFor,
                    readyWithin: readyWithin,
                    rejectedBefore: daemon?.rejected ?? false,
                    now: now
                )
                try save(gate)
                print(
                    "begun: healthy for \(Int(healthFor)) s needed" + (gate.rejectedBefore ? " (rejected before)" : "")
                )
                return
            }
            var gate = try load()
            let unit = UpdateGate.Unit(systemctlShow: Self.standardInput(limit: 16 * 1024))
            let verdict = gate.observe(unit: unit, daemon: daemon, now: now)
            try save(gate)
            print(verdict.description)
            switch verdict {
            case .healthy: return
            case .failed: throw ExitCode(1)
            case .watching: throw ExitCode(10)
            }
        }

        private func daemonStatus() async -> UpdateGate.Daemon? {
            let client = ControlClient(path: socket.path(), timeout: .seconds(5))
            guard let reply = try? await client.send(ControlRequest(op: "status")), reply.ok, let data = reply.data,
                let encoded = try? JSONEncoder().encode(data),
                let status = try? JSONDecoder().decode(ApplianceStatus.self, from: encoded)
            else { return nil }
            return UpdateGate.Daemon(status)
        }

        private func load() throws -> UpdateGate {
            guard let data = try? Data(contentsOf: URL(fileURLWithPath: state)), data.count <= 16 * 1024,
                let gate = try? JSONDecoder().decode(UpdateGate.self, from: data)
            else {
                printError("hark update gate: no gate in \(RemoteText.printable(state, limit: 200)) (begin one first)")
                throw ExitCode(ControlExit.usage)
            }
            return gate
        }

        private func save(_ gate: UpdateGate) throws {
            do {
                try JSONEncoder().encode(gate).write(to: URL(fileURLWithPath: state), options: .atomic)
            } catch {
                printError("hark update gate: cannot write \(RemoteText.printable(state, limit: 200)): \(error)")
                throw ExitCode(ControlExit.usage)
            }
        }

        /// CLOCK_MONOTONIC in seconds.
        static func monotonicSeconds() -> Double {
            var time = timespec()
            clock_gettime(CLOCK_MONOTONIC, &time)
            return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
        }

        /// Standard input, at most `limit` bytes.
        static func standardInput(limit: Int) -> String {
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while bytes.count < limit {
                let count = buffer.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { break }
                bytes += buffer[..<count]
            }
            return String(decoding: bytes.prefix(limit), as: UTF8.self)
        }
    }
}
