import HarkCore
import HarkMCP
import HarkPlatform

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// One MCP server of `mcp.servers`: where it is, its credential's source (never the credential itself), which of
/// its tools to offer, and its bounds.
public struct MCPServerConfiguration: Sendable, Hashable {
    /// `name`: the namespace of its tools (`home` → `home__HassTurnOn`).
    public var name: String
    /// `url`: streamable HTTP (https, or http to this machine).
    public var url: String?
    /// `command`: a local server started as a child, speaking over stdio (a program and its arguments).
    public var command: [String]?
    /// `credential_file`: a file holding the bearer token.
    public var credentialFile: String?
    /// `credential`: the systemd credential holding it (`LoadCredential=NAME:PATH`).
    public var credential: String?
    /// `credential_env`: the environment variable holding it.
    public var credentialEnvironment: String?
    /// `tools`: the tools offered, names or globs; empty offers every tool.
    public var tools: [String] = []
    /// `allow_destructive`: tools the server marks destructive that may be offered anyway, names or globs.
    public var allowDestructive: [String] = []
    /// `call_timeout`
    public var callTimeout: Duration = .seconds(30)
    /// `max_result_bytes`: the largest result accepted.
    public var maxResultBytes = 256 << 10
    /// `revision`: `session` (2025-11-25 and earlier), `stateless` (2026-07-28) or `auto`.
    public var revision = MCPClient.Revision.session
    /// `ca_file`: extra CA certificates to trust.
    public var caFile: String?

    /// The bounds of `max_result_bytes` (the HTTP client's own bound is the upper one).
    public static let resultBytesRange = 1024...(4 << 20)
    /// The bounds of `call_timeout`.
    public static let callTimeoutRange: ClosedRange<Duration> = .milliseconds(100)...Duration.seconds(600)

    /// A server called `name`.
    public init(name: String) {
        self.name = name
    }

    /// The settings the tool hub takes, with the credential read from its source (a file that cannot be read is
    /// an error naming it; an unset variable or credential means none).
    public func settings(environment: [String: String]) throws -> MCPServerSettings {
        let endpoint: MCPServerSettings.Endpoint =
            if let command { .command(command) } else { .url(url ?? "") }
        var settings = MCPServerSettings(name: name, endpoint: endpoint)
        var sources: [Secret.Source] = []
        if let credentialFile { sources.append(.file(credentialFile)) }
        if let credential { sources.append(.credential(credential)) }
        if let credentialEnvironment { sources.append(.environment(credentialEnvironment)) }
        settings.credential = try Secret.load(from: sources, environment: environment)
        settings.allow = tools
        settings.allowDestructive = allowDestructive
        settings.callTimeout = callTimeout
        settings.maximumResultBytes = maxResultBytes
        settings.revision = revision
        settings.caFile = caFile
        return settings
    }

    /// Its lines in the rendered configuration (the credential only as where it is read from).
    func rendered() -> [String] {
        var lines = ["    - name: \(name)"]
        if let url { lines.append("      url: \(quoted(URLRedaction.redact(url)))") }
        if let command { lines.append("      command: [\(command.map(quoted).joined(separator: ", "))]") }
        if let credentialFile { lines.append("      credential_file: \(quoted(credentialFile))") }
        if let credential { lines.append("      credential: \(quoted(credential))") }
        if let credentialEnvironment { lines.append("      credential_env: \(quoted(credentialEnvironment))") }
        lines.append("      tools: [\(tools.map(quoted).joined(separator: ", "))]")
        lines.append("      allow_destructive: [\(allowDestructive.map(quoted).joined(separator: ", "))]")
        lines.append("      call_timeout: \(callTimeout.configurationText)")
        lines.append("      max_result_bytes: \(maxResultBytes)")
        lines.append("      revision: \(revision.rawValue)")
        if let caFile { lines.append("      ca_file: \(quoted(caFile))") }
        return lines
    }

    private func quoted(_ text: String) -> String {
        var out = "\""
        for character in text {
            switch character {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            default: out.append(character)
            }
        }
        return out + "\""
    }
}

extension Duration {
    /// `30s`, `1500ms`: as the configuration writes durations.
    var configurationText: String {
        let milliseconds = self.milliseconds
        return milliseconds % 1000 == 0 ? "\(milliseconds / 1000)s" : "\(milliseconds)ms"
    }
}

/// Reads `mcp:` (`servers:`, a list of mappings).
enum MCPConfigurationReader {
    static let serverKeys = [
        "name", "url", "command", "credential_file", "credential", "credential_env", "tools", "allow_destructive",
        "call_timeout", "max_result_bytes", "revision", "ca_file",
    ]

    static func read(
        _ section: YAMLField<ConfigurationError>,
        resolve: (String) -> String
    ) throws(ConfigurationError) -> [MCPServerConfiguration] {
        try section.allow(["servers"])
        guard let list = try section.optional("servers"), !list.isNull else { return [] }
        var servers: [MCPServerConfiguration] = []
        let items = try list.list()
        guard items.count <= 16 else { throw list.error("holds \(items.count) servers; at most 16") }
        for item in items {
            try item.allow(serverKeys)
            let nameField = try item.required("name")
            let name = try nameField.string()
            guard MCPServerSettings.isValidName(name) else {
                throw nameField.error(
                    "must be 1-24 letters, digits or _, starting with a letter (it prefixes the tools' names) \(got(name))"
                )
            }
            guard !servers.contains(where: { $0.name == name }) else {
                throw nameField.error("names a second server \(name); each name once")
            }
            var server = MCPServerConfiguration(name: name)
            let url = try item.optional("url").flatMap { $0.isNull ? nil : $0 }
            let command = try item.optional("command").flatMap { $0.isNull ? nil : $0 }
            switch (url, command) {
            case (let url?, nil):
                let text = try url.string()
                guard let endpoint = EndpointURL(text), endpoint.scheme == "https" || endpoint.scheme == "http" else {
                    throw url.error("must be an https:// URL \(got(text))")
                }
                guard endpoint.isSecure || endpoint.isLoopback else {
                    throw url.error("must be https:// (plain http only to this machine) \(got(text))")
                }
                guard !endpoint.hasUserInfo, endpoint.percentEncodedQuery == nil else {
                    throw url.error(
                        "must carry no credential (user, query): put the token in credential_file, credential or "
                            + "credential_env"
                    )
                }
                server.url = text
            case (nil, let command?):
                let words = try command.strings()
                guard let program = words.first, !program.isEmpty, words.count <= 64 else {
                    throw command.error("must be a program and its arguments (a list)")
                }
                server.command = words.enumerated().map {
                    $0.offset == 0 && program.contains("/") ? resolve($0.element) : $0.element
                }
            case (nil, nil):
                throw item.error("needs url (streamable HTTP) or command (a local server over stdio)")
            case (let url?, _?):
                throw url.error("and command are both set; a server is one or the other")
            }
            if let field = try item.optional("credential_file"), !field.isNull {
                server.credentialFile = resolve(try field.string())
            }
            if let field = try item.optional("credential"), !field.isNull {
                let text = try field.string()
                guard !text.contains("/"), !text.isEmpty, text.count <= 64 else {
                    throw field.error("must be a systemd credential's name \(got(text))")
                }
                server.credential = text
            }
            if let field = try item.optional("credential_env"), !field.isNull {
                let text = try field.string()
                guard !text.isEmpty, text.count <= 64,
                    text.unicodeScalars.allSatisfy({
                        $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "_")
                    })
                else {
                    throw field.error("must be an environment variable's name \(got(text))")
                }
                server.credentialEnvironment = text
            }
            if server.command != nil,
                server.credentialFile != nil || server.credential != nil
                    || server.credentialEnvironment != nil
            {
                throw item.error("a local server (command) takes no credential; it is sent only over HTTP")
            }
            if let field = try item.optional("tools"), !field.isNull { server.tools = try patterns(field) }
            if let field = try item.optional("allow_destructive"), !field.isNull {
                server.allowDestructive = try patterns(field)
            }
            if let field = try item.optional("call_timeout"), !field.isNull {
                let text = try field.string()
                guard let duration = DurationText.parse(text),
                    MCPServerConfiguration.callTimeoutRange.contains(duration)
                else {
                    throw field.error("must be a duration from 100ms to 600s \(got(text))")
                }
                server.callTimeout = duration
            }
            if let field = try item.optional("max_result_bytes"), !field.isNull {
                server.maxResultBytes = try field.int(in: MCPServerConfiguration.resultBytesRange)
            }
            if let field = try item.optional("revision"), !field.isNull {
                server.revision = try field.enumeration(MCPClient.Revision.self)
            }
            if let field = try item.optional("ca_file"), !field.isNull { server.caFile = resolve(try field.string()) }
            servers.append(server)
        }
        return servers
    }

    private static func patterns(_ field: YAMLField<ConfigurationError>) throws(ConfigurationError) -> [String] {
        let list = try field.strings()
        guard list.count <= 256, list.allSatisfy({ !$0.isEmpty && $0.utf8.count <= 128 }) else {
            throw field.error("must be at most 256 names or globs of at most 128 bytes each")
        }
        return list
    }
}
