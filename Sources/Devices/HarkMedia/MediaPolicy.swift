import HarkCore

/// Which sources the media player may open: the schemes and hosts the configuration allows (`media.allow`).
///
/// A URL must parse, be at most ``maximumURLLength`` bytes without control characters or spaces, carry no user
/// name or password, and use an allowed scheme: `https` by default; `http` only where the configuration lists it
/// (or to this machine: 127.0.0.0/8, ::1, `localhost`); `file` (an absolute path, or a `file:` URL) only where it
/// is listed. When ``hosts`` is not empty a network URL's host must be one of them or a subdomain of one. The same
/// check runs again on every URL libavformat opens on the source's behalf (an HLS playlist's segments, a
/// redirect's target), and its own protocols are limited to those of the allowed schemes, so a playlist cannot
/// reach `file:`, `concat:` or `subfile:` from a network URL.
public struct MediaAllowList: Sendable, Equatable {
    /// The schemes the configuration may allow.
    public static let knownSchemes: Set<String> = ["https", "http", "file"]
    /// The longest URL or path accepted, in bytes.
    public static let maximumURLLength = 2048
    /// The most hosts a list holds.
    public static let maximumHosts = 64

    /// The allowed schemes (of ``knownSchemes``).
    public var schemes: Set<String>
    /// The allowed hosts, lowercased (a host or any subdomain of it); empty allows every host.
    public var hosts: [String]

    /// `https` to any host: the default.
    public static let standard = MediaAllowList(schemes: ["https"], hosts: [])

    /// An allow-list of `schemes` and `hosts` (hosts are lowercased, a leading dot dropped).
    public init(schemes: Set<String>, hosts: [String]) {
        self.schemes = Set(schemes.map { $0.lowercased() })
        self.hosts = hosts.map { host in
            let lowered = host.lowercased()
            return lowered.hasPrefix(".") ? String(lowered.dropFirst()) : lowered
        }
    }

    /// What `source` (a URL, or an absolute path for a local file) opens, or why it is refused.
    public func target(_ source: String) throws(MediaFailure) -> MediaTarget {
        guard source.utf8.count <= Self.maximumURLLength else {
            throw MediaFailure(.refused, "the address is longer than \(Self.maximumURLLength) bytes")
        }
        guard !source.isEmpty, source.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value != 0x7F }) else {
            throw MediaFailure(.refused, "the address is empty or holds spaces or control characters")
        }
        let shown = URLRedaction.redact(source)
        if source.hasPrefix("/") || source.lowercased().hasPrefix("file:") {
            guard schemes.contains("file") else {
                throw MediaFailure(.refused, "\(shown): local files are not allowed (media.allow_schemes)")
            }
            var path = source
            if source.lowercased().hasPrefix("file://") {
                path = String(source.dropFirst("file://".count))
            } else if source.lowercased().hasPrefix("file:") {
                path = String(source.dropFirst("file:".count))
            }
            guard path.hasPrefix("/"), !path.contains("?"), !path.contains("#") else {
                throw MediaFailure(.refused, "\(shown): a local file is named by its absolute path")
            }
            return MediaTarget(url: "file:" + path, shown: RemoteText.printable(path, limit: 200), protocols: "file")
        }
        guard let endpoint = EndpointURL(source) else {
            throw MediaFailure(.refused, "not a valid URL: \(shown)")
        }
        guard endpoint.scheme == "https" || endpoint.scheme == "http" else {
            throw MediaFailure(.refused, "\(shown): only https:// and http:// streams play (not \(endpoint.scheme):)")
        }
        guard !endpoint.hasUserInfo else {
            throw MediaFailure(.refused, "\(shown) carries a user name or password before the host")
        }
        try checkNetwork(endpoint, shown: shown)
        var protocols = ["https", "tls", "tcp", "crypto"]
        if schemes.contains("http") || endpoint.isLoopback { protocols.append("http") }
        return MediaTarget(
            url: source,
            shown: RemoteText.printable(shown, limit: 200),
            protocols: protocols.joined(separator: ",")
        )
    }

    /// Whether a URL libavformat opens for a source (a playlist's segment, a key) is allowed: the same rules,
    /// with libavformat's `crypto+` prefix taken off.
    public func allowsNested(_ url: String) -> Bool {
        var rest = url
        for prefix in ["crypto+", "crypto:"] where rest.lowercased().hasPrefix(prefix) {
            rest = String(rest.dropFirst(prefix.count))
        }
        guard let target = try? target(rest) else { return false }
        return !target.isFile || schemes.contains("file")
    }

    private func checkNetwork(_ endpoint: EndpointURL, shown: String) throws(MediaFailure) {
        if endpoint.scheme == "http", !schemes.contains("http"), !endpoint.isLoopback {
            throw MediaFailure(
                .refused,
                "\(shown): plain http:// is not allowed here (media.allow_schemes); use https://"
            )
        }
        if endpoint.scheme == "https", !schemes.contains("https") {
            throw MediaFailure(.refused, "\(shown): https:// is not allowed here (media.allow_schemes)")
        }
        if !hosts.isEmpty, !hosts.contains(where: { endpoint.host == $0 || endpoint.host.hasSuffix("." + $0) }) {
            throw MediaFailure(.refused, "\(endpoint.host) is not an allowed host (media.allow_hosts)")
        }
    }
}

/// A source the allow-list let through: what libavformat opens, and how it is shown.
public struct MediaTarget: Sendable, Equatable {
    /// The URL handed to libavformat (`file:/path` for a local file).
    public let url: String
    /// The source as logs and the status show it (redacted, printable).
    public let shown: String
    /// libavformat's `protocol_whitelist` for it.
    public let protocols: String

    /// A local file.
    public var isFile: Bool { protocols == "file" }
}
