import HarkBackends
import HarkCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension ApplianceConfiguration {
    /// The chosen backend's secrets (its API key), with where each is read from.
    public var backendSecrets: [BackendSecret] { Backends.named(backend)?.secrets ?? [] }

    /// The secret `secret` of `backend` (the chosen one when nil) from the first of its sources that has it; nil when none
    /// does. A file the configuration names that cannot be read is an error (it does not fall through).
    public func load(
        _ secret: BackendSecret,
        of backend: String? = nil,
        environment: [String: String]
    ) throws(ConfigurationError) -> Secret? {
        let name = backend ?? self.backend
        let settings = backends[name] ?? BackendSettings(values: [:])
        do {
            return try Secret.load(from: secret.sources(settings), environment: environment)
        } catch {
            throw ConfigurationError(file: nil, key: name + "." + secret.fileKey, problem: "\(error)")
        }
    }

    /// Whether the chosen backend needs `secret` with these settings (a token server or a simulator needs none).
    public func requires(_ secret: BackendSecret) -> Bool {
        Backends.named(backend)?.requires(secret, backendSettings) ?? true
    }

    /// One line per place the chosen backend's secrets may come from, saying whether each is there and which
    /// is used, e.g. `gemini key: file /etc/hark/gemini-api-key (present, used)`. Never the secret.
    public func describeSecretSources(environment: [String: String]) -> [String] {
        var lines: [String] = []
        let label = backend + " key"
        for secret in backendSecrets {
            if !requires(secret),
                backendSettings.text("token_url") != nil || backendSettings.text(secret.fileKey) == nil
            {
                lines.append("\(label): \(Self.whyNotNeeded(backendSettings))")
                continue
            }
            var used = false
            for source in secret.sources(backendSettings) {
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
        }
        return lines
    }

    private static func whyNotNeeded(_ settings: BackendSettings) -> String {
        if let tokenURL = settings.text("token_url") {
            return "not on this device; ephemeral tokens come from \(URLRedaction.redact(tokenURL))"
        }
        return "not needed: the endpoint is not the service's own"
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
