#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A credential. Its description is always redacted, so it cannot reach a log line by accident.
public struct Secret: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    private let value: String

    public init(_ value: String) { self.value = value }

    /// The secret itself, for a header. Never log it.
    public func reveal() -> String { value }

    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }

    /// Where a secret may come from, in the order tried.
    public enum Source: Sendable, Hashable, CustomStringConvertible {
        /// A file holding the secret (surrounding whitespace trimmed).
        case file(String)
        /// An environment variable.
        case environment(String)
        /// A systemd credential: `$CREDENTIALS_DIRECTORY/NAME` (`LoadCredential=`).
        case credential(String)

        public var description: String {
            switch self {
            case .file(let path): "file \(path)"
            case .environment(let name): "environment variable \(name)"
            case .credential(let name): "systemd credential \(name)"
            }
        }
    }

    /// Why a secret could not be loaded.
    public struct LoadError: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// Loads the first secret found among `sources`. A named file that cannot be read is an error
    /// (someone asked for it); an unset variable or credential just moves on.
    public static func load(
        from sources: [Source],
        environment: [String: String]
    ) throws -> Secret? {
        for source in sources {
            switch source {
            case .file(let path):
                let data: Data
                do {
                    data = try Data(contentsOf: URL(filePath: path))
                } catch {
                    throw LoadError(description: "cannot read the key file \(path)")
                }
                let text = String(decoding: data, as: UTF8.self).trimmedWhitespace
                guard !text.isEmpty else { throw LoadError(description: "the key file \(path) is empty") }
                return Secret(text)
            case .environment(let name):
                if let value = environment[name]?.trimmedWhitespace, !value.isEmpty {
                    return Secret(value)
                }
            case .credential(let name):
                guard let directory = environment["CREDENTIALS_DIRECTORY"] else { continue }
                let path = directory + "/" + name
                guard let data = try? Data(contentsOf: URL(filePath: path)) else { continue }
                let text = String(decoding: data, as: UTF8.self).trimmedWhitespace
                if !text.isEmpty { return Secret(text) }
            }
        }
        return nil
    }
}

extension StringProtocol {
    /// The string without leading and trailing whitespace and newlines.
    public var trimmedWhitespace: String {
        guard let first = firstIndex(where: { !$0.isWhitespace }) else { return "" }
        let last = lastIndex(where: { !$0.isWhitespace })!
        return String(self[first...last])
    }
}
