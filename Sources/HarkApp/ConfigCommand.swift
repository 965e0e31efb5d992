import ArgumentParser

/// `hark config`: the configuration file's tools.
struct ConfigCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config",
        abstract: "Check and show the appliance's configuration."
    )
}
