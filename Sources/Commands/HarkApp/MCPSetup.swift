import HarkConfig
import HarkCore
import HarkMCP
import Logging
import ServiceLifecycle

/// The MCP servers of the configuration (or the command line) as a tool hub on the process's network clients.
public enum MCPSetup {
    /// A hub over `configuration`'s servers (nil without any); a credential file that cannot be read is an error
    /// naming the server.
    static func hub(
        _ servers: [MCPServerConfiguration],
        environment: [String: String],
        network: NetworkClients,
        logTranscripts: Bool = false,
        logger: Logger
    ) throws -> MCPToolHub? {
        guard !servers.isEmpty else { return nil }
        var settings: [MCPServerSettings] = []
        for server in servers {
            do {
                settings.append(try server.settings(environment: environment))
            } catch {
                throw ApplianceSetupError(description: "mcp.servers \(server.name): \(error)")
            }
        }
        return hub(settings, environment: environment, network: network, logTranscripts: logTranscripts, logger: logger)
    }

    /// A hub over `settings`.
    static func hub(
        _ settings: [MCPServerSettings],
        environment: [String: String],
        network: NetworkClients,
        logTranscripts: Bool = false,
        logger: Logger
    ) -> MCPToolHub {
        MCPToolHub(
            servers: settings,
            environment: environment,
            logger: logger,
            logContent: logTranscripts
        ) { server in network.http(server.caFile, false) }
    }

    /// `NAME=URL` of `hark converse --mcp`.
    public static func commandLineServer(_ text: String) throws -> MCPServerSettings {
        guard let equals = text.firstIndex(of: "=") else {
            throw ConverseUsageError("--mcp must be NAME=URL (got \(RemoteText.printable(text, limit: 80)))")
        }
        let name = String(text[..<equals])
        let url = String(text[text.index(after: equals)...])
        guard MCPServerSettings.isValidName(name) else {
            throw ConverseUsageError(
                "--mcp \(RemoteText.printable(name, limit: 40)): a name is 1-24 letters, digits or _, starting with a letter"
            )
        }
        guard let endpoint = EndpointURL(url), endpoint.scheme == "https" || endpoint.scheme == "http",
            endpoint.isSecure || endpoint.isLoopback
        else {
            throw ConverseUsageError("--mcp \(name): the URL must be https:// (plain http only to this machine)")
        }
        return MCPServerSettings(name: name, endpoint: .url(url))
    }
}

/// The MCP tool hub as a service: its links kept until the group shuts down.
struct MCPService: Service {
    let hub: MCPToolHub
    func run() async throws {
        await cancelWhenGracefulShutdown { await hub.run() }
    }
}

/// `hark config check` and `hark doctor` on the MCP servers: each connected once, its tools listed, what is offered
/// and what is not, and why.
public enum MCPCheck {
    /// One item per server (nothing without servers); an unreachable server is a warning (the daemon keeps trying),
    /// a credential that cannot be read a failure.
    public static func items(
        configPath: String?,
        environment: [String: String],
        within deadline: Duration = .seconds(10)
    ) async -> [DoctorItem] {
        let loaded: LoadedConfiguration
        do {
            loaded = try ConfigurationLoader.load(path: configPath, environment: environment)
        } catch {
            return []  // the configuration's own item says why
        }
        return await items(loaded.configuration.mcpServers, environment: environment, within: deadline)
    }

    /// One item per server of `servers`.
    public static func items(
        _ servers: [MCPServerConfiguration],
        environment: [String: String],
        within deadline: Duration = .seconds(10)
    ) async -> [DoctorItem] {
        guard !servers.isEmpty else { return [] }
        let quiet = Logger(label: "hark-mcp-check") { _ in SwiftLogNoOpLogHandler() }
        var items: [DoctorItem] = []
        var settings: [MCPServerSettings] = []
        for server in servers {
            do {
                settings.append(try server.settings(environment: environment))
            } catch {
                items.append(
                    DoctorItem("MCP server \(server.name)", .failed, "\(error)", fix: "make the credential readable")
                )
            }
        }
        let hub = MCPSetup.hub(settings, environment: environment, network: .nio(logger: quiet), logger: quiet)
        for report in await hub.check(within: deadline) {
            switch report.outcome {
            case .success(let info):
                var detail =
                    "\(info.name.isEmpty ? "a server" : info.name) speaking \(info.protocolVersion); "
                    + "offers \(report.offered.count) tool\(report.offered.count == 1 ? "" : "s")"
                if !report.offered.isEmpty {
                    detail += ": " + report.offered.prefix(40).map(\.declared).joined(separator: ", ")
                }
                for refusal in report.notOffered.prefix(40) { detail += "\n    not offered: \(refusal)" }
                items.append(DoctorItem("MCP server \(report.name)", .ok, detail))
            case .failure(let error):
                items.append(
                    DoctorItem(
                        "MCP server \(report.name)",
                        error.kind == .unauthorized ? .failed : .warning,
                        "not reachable now: \(error.message)",
                        fix: error.kind == .unauthorized
                            ? "check the token in its credential" : "the daemon keeps trying; check the URL or command"
                    )
                )
            }
        }
        return items
    }
}
