import ArgumentParser
import HarkAppliance
import HarkConfig
import HarkCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// `hark status`: what the running daemon is doing.
struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show what the running appliance is doing.",
        discussion: """
            Reads the status file the daemon keeps (status_file in the configuration, /run/hark/status.json by \
            default): the state the LEDs show, uptime, reconnects, dropped frames, xruns and the last latency \
            figures. --json prints the file as it is.
            """
    )

    @Option(help: ArgumentHelp("The configuration file, to find the status file.", valueName: "PATH"))
    var config: String?

    @Option(name: .customLong("file"), help: ArgumentHelp("The status file itself.", valueName: "PATH"))
    var file: String?

    @Flag(help: "Print the raw JSON.")
    var json = false

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        var path = file
        if path == nil {
            do {
                path = try ConfigurationLoader.load(path: config, environment: environment).configuration.statusFile
            } catch {
                printError("hark status: \(error)")
                throw ExitCode(2)
            }
        }
        let statusPath = path!
        let read: (status: ApplianceStatus, text: String)
        do {
            read = try ApplianceStatus.readWithText(from: statusPath)
        } catch {
            printError("hark status: \(error)")
            throw ExitCode(3)
        }
        // The updater's record (hark-update keeps it in the state directory) goes with the daemon's status.
        let stateDirectory =
            (try? ConfigurationLoader.load(path: config, environment: environment))?.configuration.stateDirectory
            ?? ApplianceConfiguration().stateDirectory
        let update = UpdateRecord.read(stateDirectory: stateDirectory)
        if json {
            print(Self.json(read.text, update: update))
        } else {
            let lines = update.map { "\n" + $0.rendered().joined(separator: "\n") } ?? ""
            print(read.status.rendered(now: Date().timeIntervalSince1970) + lines)
        }
    }

    /// The status file's JSON object with `"update"` added when there is a record (its texts made printable when
    /// it was read, so its JSON holds no raw control character).
    static func json(_ text: String, update: UpdateRecord?) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        guard let update, let data = try? encoder.encode(update) else { return text }
        var body = Substring(text)
        while let last = body.last, last.isWhitespace { body = body.dropLast() }
        guard body.last == "}" else { return text }
        body = body.dropLast()
        while let last = body.last, last.isWhitespace { body = body.dropLast() }
        let separator = body.last == "{" ? "" : ","
        return body + separator + "\n  \"update\" : " + String(decoding: data, as: UTF8.self) + "\n}"
    }
}
