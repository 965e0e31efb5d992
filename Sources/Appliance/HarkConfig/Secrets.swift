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

    /// Where the chosen backend's secrets come from: for each, every place it may be read from, whether something
    /// is there and which is used; or why it is not needed. Never the secret.
    public func secretReport(environment: [String: String]) -> [SecretReportLine] {
        var lines: [SecretReportLine] = []
        let label = backend + " key"
        for secret in backendSecrets {
            switch Backends.named(backend)?.need(secret, backendSettings) ?? .required {
            case .unused(let why):
                lines.append(SecretReportLine(label: label, source: nil, state: why, verdict: .notNeeded))
                continue
            case .optional(let why) where backendSettings.text(secret.fileKey) == nil:
                lines.append(SecretReportLine(label: label, source: nil, state: why, verdict: .notNeeded))
                continue
            case .optional, .required:
                break
            }
            var used = false
            for source in secret.sources(backendSettings) {
                var (state, found) = Self.state(of: source, environment: environment)
                var verdict = SecretReportLine.Verdict.absent
                if found {
                    state += used ? ", not used: an earlier source comes first" : ", used"
                    verdict = used ? .notUsed : .used
                    used = true
                } else if case .file = source, !used {
                    // A named key file that cannot be read stops the lookup: the later sources are not tried.
                    used = true
                    state += "; the key cannot be loaded until this is fixed"
                    verdict = .blocking
                }
                lines.append(SecretReportLine(label: label, source: "\(source)", state: state, verdict: verdict))
            }
        }
        return lines
    }

    /// ``secretReport(environment:)`` as lines for a person, e.g. `gemini key: file /etc/hark/gemini-api-key (present,
    /// used)`.
    public func describeSecretSources(environment: [String: String]) -> [String] {
        secretReport(environment: environment).map(\.description)
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

/// One line of ``ApplianceConfiguration/secretReport(environment:)``: a place a secret may be read from and what is
/// there, or why the secret is not needed.
public struct SecretReportLine: Sendable, Hashable, CustomStringConvertible {
    /// What the line says of the secret.
    public enum Verdict: Sendable, Hashable {
        /// The secret is read from here.
        case used
        /// Something is here, but an earlier place comes first.
        case notUsed
        /// Nothing is here.
        case absent
        /// A named file that cannot be read: the lookup stops here, and the secret cannot be loaded.
        case blocking
        /// The secret is not needed with these settings (``state`` says why).
        case notNeeded
    }

    /// The secret's name for a person (`gemini key`).
    public var label: String
    /// The place (`file /etc/hark/gemini-api-key`), or nil when the secret is not needed.
    public var source: String?
    /// What is there (`present, used`), or why it is not needed.
    public var state: String
    public var verdict: Verdict

    public var description: String {
        guard let source else { return "\(label): \(state)" }
        return "\(label): \(source) (\(state))"
    }
}
