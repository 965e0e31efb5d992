import ArgumentParser
import HarkAudio
import HarkBackends
import HarkCore
import HarkHTTP
import HarkNet
import HarkPlatform
import Logging
import UnixSignals

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// `hark`: the voice appliance and its tools.
public struct HarkCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "hark",
        abstract: "A voice appliance that holds a live spoken conversation with a cloud voice agent.",
        discussion: """
            On a board, systemd runs `hark run` (configured in /etc/hark/hark.yaml; check it with \
            `hark config check`, watch it with `hark status`).

            Try it without hardware or an API key: scripts/run starts the bundled simulator and runs the \
            appliance on file-backed audio. One conversation from a file:
              hark-live-sim --port 9000 &
              hark converse --input question.wav --output answer.wav --endpoint ws://127.0.0.1:9000
            """,
        subcommands: [
            Run.self, Converse.self, Status.self, Reload.self, Timers.self, Alarms.self, Media.self, Announce.self,
            ConfigCommand.self, Doctor.self, Wake.self, Update.self,
        ]
    )

    public init() {}
}

/// Seconds given on the command line, as a duration: a finite number in a range, else a usage error naming the
/// option (`inf`, `nan` and `1e300` are refused, never converted).
enum CommandLineDuration {
    static func seconds(_ value: Double, option: String, in range: ClosedRange<Double>) throws -> Duration {
        guard value.isFinite, range.contains(value) else {
            throw ValidationError(
                "\(option) must be a number of seconds from \(DurationText.number(range.lowerBound)) to "
                    + "\(DurationText.number(range.upperBound)) (got \(value))"
            )
        }
        return .nanoseconds(Int64((value * 1e9).rounded()))
    }
}

extension HarkCommand {
    /// Parses the process's arguments and runs the chosen command (the executable's whole `main`); never returns.
    ///
    /// A synchronous `main` that waits for the command, not an async one: an async `main` ends the main thread
    /// in `dispatch_main()`, and Dispatch then drains the main queue on a worker thread of the main queue's high
    /// priority. On Linux it gives such a worker a negative nice value, which takes CAP_SYS_NICE or an
    /// RLIMIT_NICE that neither the hardened unit nor an ordinary user has, and says "Failed to set thread
    /// priority for worker thread ... errno=13" in the journal on every start. The command's task runs at the
    /// default priority for the same reason (Task.sleep's timers run on a worker of the sleeping task's priority).
    public static func start() -> Never {
        // One thread runs the tasks and the sockets (see ConcurrencyExecutor); the audio and GPIO threads
        // stay their own.
        ConcurrencyExecutor.installEventLoop()
        // A write to a pipe or socket whose reader went away (a speaker FIFO, the journal's stream, a file
        // device's sink) must fail with EPIPE, which each part handles, not end the process. NIO ignores
        // SIGPIPE only once it opens its first socket.
        signal(SIGPIPE, SIG_IGN)
        let finished = Wakeup()
        Task.detached(priority: .medium) {
            await main(nil)
            finished.signal()
        }
        finished.wait()
        Glibc.exit(0)
    }

    /// Runs the command `arguments` name (the process's when nil). A usage error exits 2, as the exit code
    /// tables say (ArgumentParser's own code for it is 64).
    static func main(_ arguments: [String]?) async {
        do {
            var command = try parseAsRoot(arguments)
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch {
            if exitCode(for: error) == .validationFailure {
                writeAll(STDERR_FILENO, fullMessage(for: error) + "\n")
                Glibc.exit(2)
            }
            exit(withError: error)
        }
    }
}
