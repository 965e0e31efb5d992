import HarkCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension ApplianceConfiguration {
    /// Where the Gemini API key is read from, in order: `gemini.api_key_file`, the systemd credential
    /// `gemini-api-key` (`$CREDENTIALS_DIRECTORY`), the environment variable `GEMINI_API_KEY`.
    public var geminiKeySources: [Secret.Source] {
        (gemini.apiKeyFile.map { [.file($0)] } ?? []) + [.credential("gemini-api-key"), .environment("GEMINI_API_KEY")]
    }

    /// Where the Datagrid API key is read from, in order: `datagrid.api_key_file`, the systemd credential
    /// `datagrid-api-key`, the environment variable `DATAGRID_API_KEY`.
    public var datagridKeySources: [Secret.Source] {
        (datagrid.apiKeyFile.map { [.file($0)] } ?? [])
            + [.credential("datagrid-api-key"), .environment("DATAGRID_API_KEY")]
    }

    /// The Gemini API key from the first of ``geminiKeySources`` that has one; nil when none does. A
    /// configured `gemini.api_key_file` that cannot be read is an error (it does not fall through).
    public func geminiAPIKey(environment: [String: String]) throws(ConfigurationError) -> Secret? {
        try Self.key(from: geminiKeySources, key: "gemini.api_key_file", environment: environment)
    }

    /// The Datagrid API key from the first of ``datagridKeySources`` that has one; nil when none does.
    public func datagridAPIKey(environment: [String: String]) throws(ConfigurationError) -> Secret? {
        try Self.key(from: datagridKeySources, key: "datagrid.api_key_file", environment: environment)
    }

    /// The key the chosen backend needs: nil when none is found, or when Gemini fetches ephemeral tokens from
    /// `gemini.token_url` (no key on the device).
    public func backendAPIKey(environment: [String: String]) throws(ConfigurationError) -> Secret? {
        switch backend {
        case .gemini: gemini.tokenURL == nil ? try geminiAPIKey(environment: environment) : nil
        case .datagrid: try datagridAPIKey(environment: environment)
        }
    }

    /// One line per place the chosen backend's key may come from, saying whether it is there and which
    /// one is used, e.g. `gemini key: file /etc/hark/gemini-api-key (present, used)`. Never the key.
    public func describeSecretSources(environment: [String: String]) -> [String] {
        let label = "\(backend.rawValue) key"
        if backend == .gemini, let tokenURL = gemini.tokenURL {
            return ["\(label): not on this device; ephemeral tokens come from \(URLRedaction.redact(tokenURL))"]
        }
        var used = false
        var lines: [String] = []
        for source in backend == .gemini ? geminiKeySources : datagridKeySources {
            var (state, found) = Self.state(of: source, environment: environment)
            if found {
                state += used ? ", not used: an earlier source comes first" : ", used"
                used = true
            } else if case .file = source, !used {
                // A named key file that cannot be read stops the lookup: the later sources are not tried.
                used = true
                state += "; the key cannot be loaded until this is fixed"
            }
            lines.append("\(label): \(source) (\(state))")
        }
        return lines
    }

    private static func key(
        from sources: [Secret.Source],
        key: String,
        environment: [String: String]
    ) throws(ConfigurationError) -> Secret? {
        do {
            return try Secret.load(from: sources, environment: environment)
        } catch {
            throw ConfigurationError(file: nil, key: key, problem: "\(error)")
        }
    }

    /// What is at `source` (never its value) and whether it holds a key.
    private static func state(of source: Secret.Source, environment: [String: String]) -> (String, Bool) {
        func file(_ path: String) -> (String, Bool) {
            guard FileManager.default.fileExists(atPath: path) else { return ("missing", false) }
            guard let data = FileManager.default.contents(atPath: path) else {
                return ("cannot be read by this user", false)
            }
            return String(decoding: data, as: UTF8.self).trimmedWhitespace.isEmpty
                ? ("empty", false) : ("present", true)
        }
        switch source {
        case .file(let path):
            return file(path)
        case .credential(let name):
            guard let directory = environment["CREDENTIALS_DIRECTORY"] else {
                return ("not available here: $CREDENTIALS_DIRECTORY is not set; systemd sets it for the service", false)
            }
            let (state, found) = file(directory + "/" + name)
            return (state == "missing" ? "not set" : state, found)
        case .environment(let name):
            guard let value = environment[name] else { return ("not set", false) }
            return value.trimmedWhitespace.isEmpty ? ("empty", false) : ("set", true)
        }
    }
}
