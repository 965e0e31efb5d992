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
        print(json ? read.text : read.status.rendered(now: Date().timeIntervalSince1970))
    }
}
