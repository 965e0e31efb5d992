#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A URL Hark connects to, parsed once (RFC 3986, by `URLComponents`): where it points and what it asks for.
/// A user name or password in it is noted (``hasUserInfo``) and never taken for the host.
public struct EndpointURL: Sendable, Hashable {
    /// The scheme, lowercased (`wss`, `https`, ...).
    public let scheme: String
    /// The host, lowercased, without the brackets of an IPv6 literal.
    public let host: String
    /// The port written in the URL, if any.
    public let port: Int?
    /// The path as written (percent-encoded); empty when the URL has none.
    public let percentEncodedPath: String
    /// The query as written (percent-encoded), without the `?`; nil when the URL has none.
    public let percentEncodedQuery: String?
    /// The URL carries a user name or password (`user:password@host`).
    public let hasUserInfo: Bool

    /// Parses `string`; nil unless it has a scheme and a host made of the characters of a DNS name or an IP
    /// address, and a port (if any) in 1...65535.
    public init?(_ string: String) {
        guard string.utf8.count <= 8192, let components = URLComponents(string: string),
            let scheme = components.scheme?.lowercased(), !scheme.isEmpty,
            var host = components.host?.lowercased(), !host.isEmpty
        else { return nil }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard Self.isPlausibleHost(host) else { return nil }
        if let port = components.port, !(1...65535).contains(port) { return nil }
        self.scheme = scheme
        self.host = host
        self.port = components.port
        self.percentEncodedPath = components.percentEncodedPath
        self.percentEncodedQuery = components.percentEncodedQuery
        self.hasUserInfo = components.user != nil || components.password != nil
    }

    /// `wss` or `https`: the connection is encrypted.
    public var isSecure: Bool { scheme == "wss" || scheme == "https" }

    /// The port to connect to: the written one, else the scheme's (443 for `wss`/`https`, 80 otherwise).
    public var effectivePort: Int { port ?? (isSecure ? 443 : 80) }

    /// The host is an IP address literal (v4 dotted quad or v6), not a name.
    public var hostIsAddress: Bool { IPAddressLiteral.ipv4(host) != nil || IPAddressLiteral.ipv6(host) != nil }

    /// The host is this machine: `localhost`, 127.0.0.0/8 or ::1 (also as an IPv4-mapped address).
    public var isLoopback: Bool { IPAddressLiteral.isLoopback(host) }

    /// `host[:port]` as in a `Host` header (the port only when written; IPv6 in brackets).
    public var authority: String {
        let shown = host.contains(":") ? "[\(host)]" : host
        return port.map { "\(shown):\($0)" } ?? shown
    }

    /// `host:port` with the port always given, for a person (never the path or query).
    public var hostAndPort: String {
        let shown = host.contains(":") ? "[\(host)]" : host
        return "\(shown):\(effectivePort)"
    }

    /// `scheme://host[:port]`: where the URL points, without user-info, path or query.
    public var origin: String { "\(scheme)://\(authority)" }

    /// The HTTP request target: the path (or `/`) and the query.
    public var requestTarget: String {
        let path = percentEncodedPath.isEmpty ? "/" : percentEncodedPath
        return percentEncodedQuery.map { "\(path)?\($0)" } ?? path
    }

    /// `base` with `path` appended to its path, and `query` (`name=value`, already percent-encoded) appended to
    /// its query: a query in `base` stays after the path (`wss://h/v1?key=K` + `/ws` → `wss://h/v1/ws?key=K`).
    /// Trailing slashes of the base path are dropped; a fragment stays last.
    public static func join(_ base: String, path: String, query: String? = nil) -> String {
        var rest = Substring(base)
        var fragment: Substring?
        if let hash = rest.firstIndex(of: "#") {
            fragment = rest[rest.index(after: hash)...]
            rest = rest[..<hash]
        }
        var existingQuery: Substring?
        if let question = rest.firstIndex(of: "?") {
            existingQuery = rest[rest.index(after: question)...]
            rest = rest[..<question]
        }
        while rest.hasSuffix("/") { rest = rest.dropLast() }
        var joined = String(rest)
        if !path.isEmpty, !path.hasPrefix("/") { joined += "/" }
        joined += path
        let queries = [existingQuery.map { String($0) }, query].compactMap { $0 }.filter { !$0.isEmpty }
        if !queries.isEmpty { joined += "?" + queries.joined(separator: "&") }
        if let fragment { joined += "#" + fragment }
        return joined
    }

    /// Letters, digits, `.`, `-` and `_` (a name), or an IP literal (hex digits, `:`, `.`, and a `%zone`).
    private static func isPlausibleHost(_ host: String) -> Bool {
        guard host.utf8.count <= 253 else { return false }
        if host.contains(":") { return IPAddressLiteral.ipv6(host) != nil }
        return host.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."),
                UInt8(ascii: "-"), UInt8(ascii: "_"):
                true
            default: false
            }
        }
    }
}

/// Which endpoints Hark may connect to.
public enum EndpointPolicy {
    /// Why Hark will not connect to `url`, as one line for a person (the URL redacted), or nil when it may.
    /// A URL must parse, use `ws`, `wss`, `http` or `https`, and carry no user name or password (credentials go
    /// in headers). Plain `ws://` and `http://` would send the API key in clear text: they are allowed only to
    /// this machine (127.0.0.0/8, ::1, `localhost`), unless `allowInsecure` is set.
    public static func check(url: String, allowInsecure: Bool = false) -> String? {
        guard let endpoint = EndpointURL(url) else {
            return "not a valid URL: \(URLRedaction.redact(url))"
        }
        guard ["ws", "wss", "http", "https"].contains(endpoint.scheme) else {
            return "\(URLRedaction.redact(url)) is not a ws://, wss://, http:// or https:// URL"
        }
        if endpoint.hasUserInfo {
            return "\(URLRedaction.redact(url)) carries a user name or password before the host; "
                + "Hark does not send them: remove them (credentials go in the key settings)"
        }
        if !endpoint.isSecure, !endpoint.isLoopback, !allowInsecure {
            let secure = endpoint.scheme == "ws" ? "wss://" : "https://"
            return "\(endpoint.scheme):// to \(endpoint.hostAndPort) would send the key in clear text: use \(secure), "
                + "or a loopback address (127.0.0.1, ::1, localhost), or allow insecure connections explicitly"
        }
        return nil
    }
}

/// Hides credentials in URLs before they reach a log line or an error: the user name and password, every query
/// value and the fragment become `REDACTED`. Works on any text, URL or not; the result has no control
/// characters and at most 512 characters.
public enum URLRedaction {
    /// `url` with its user-info, query values and fragment replaced by `REDACTED`
    /// (`wss://u:pw@h/p?key=K&alt=sse#f` → `wss://REDACTED@h/p?key=REDACTED&alt=REDACTED#REDACTED`).
    public static func redact(_ url: String) -> String {
        var rest = Substring(url)
        var fragment: Substring?
        if let hash = rest.firstIndex(of: "#") {
            fragment = rest[rest.index(after: hash)...]
            rest = rest[..<hash]
        }
        var query: Substring?
        if let question = rest.firstIndex(of: "?") {
            query = rest[rest.index(after: question)...]
            rest = rest[..<question]
        }
        // The authority runs from after `scheme://` (or `//`, or the start when there is no scheme) to the
        // first slash; user-info is everything in it up to the last `@`.
        let authorityStart: Substring.Index
        if let separator = rest.firstRange(of: "://") {
            authorityStart = separator.upperBound
        } else if rest.hasPrefix("//") {
            authorityStart = rest.index(rest.startIndex, offsetBy: 2)
        } else {
            authorityStart = rest.startIndex
        }
        let authorityEnd = rest[authorityStart...].firstIndex { $0 == "/" || $0 == "\\" } ?? rest.endIndex
        let authority = rest[authorityStart..<authorityEnd]
        var out = String(rest[..<authorityStart])
        if let at = authority.lastIndex(of: "@") {
            out += "REDACTED@" + authority[authority.index(after: at)...]
        } else {
            out += authority
        }
        out += rest[authorityEnd...]
        if let query {
            let parts = query.split(separator: "&", omittingEmptySubsequences: false).map { part -> String in
                if let equals = part.firstIndex(of: "=") {
                    return String(part[..<equals]) + (part.index(after: equals) == part.endIndex ? "=" : "=REDACTED")
                }
                return part.isEmpty ? "" : "REDACTED"
            }
            out += "?" + parts.joined(separator: "&")
        }
        if let fragment, !fragment.isEmpty { out += "#REDACTED" }
        return printable(out, limit: 512)
    }

    /// `text` with control characters replaced by `?`, cut to `limit` characters (then ending in `…`).
    package static func printable(_ text: String, limit: Int) -> String {
        var out = ""
        var count = 0
        for scalar in text.unicodeScalars {
            if count == limit {
                out += "…"
                break
            }
            let isControl = scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
            out.unicodeScalars.append(isControl ? "?" : scalar)
            count += 1
        }
        return out
    }
}

/// IP address literals as written in URLs, parsed strictly (what `inet_pton` accepts), without the C library.
enum IPAddressLiteral {
    /// The four octets of a dotted quad (`127.0.0.1`; no leading zeros, no shorthand), or nil.
    static func ipv4(_ text: some StringProtocol) -> [UInt8]? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var octets: [UInt8] = []
        for part in parts {
            guard (1...3).contains(part.count), part.allSatisfy({ $0.isASCII && $0.isNumber }),
                part.count == 1 || part.first != "0", let value = UInt8(part)
            else { return nil }
            octets.append(value)
        }
        return octets
    }

    /// The eight groups of an IPv6 address (`::1`, `fe80::1%eth0`, `::ffff:127.0.0.1`), or nil. A zone is ignored.
    static func ipv6(_ text: some StringProtocol) -> [UInt16]? {
        var address = Substring(text)
        if let percent = address.firstIndex(of: "%") { address = address[..<percent] }
        guard address.contains(":"), address.count <= 45 else { return nil }
        guard let gap = address.firstRange(of: "::") else {
            guard let groups = groups(address, ipv4Tail: true), groups.count == 8 else { return nil }
            return groups
        }
        let after = address[gap.upperBound...]
        guard after.firstRange(of: "::") == nil, let head = groups(address[..<gap.lowerBound], ipv4Tail: false),
            let tail = groups(after, ipv4Tail: true), head.count + tail.count <= 7
        else { return nil }
        return head + Array(repeating: 0, count: 8 - head.count - tail.count) + tail
    }

    /// The colon-separated hex groups of one side of an IPv6 address (an IPv4 tail counts two).
    private static func groups(_ text: Substring, ipv4Tail: Bool) -> [UInt16]? {
        guard !text.isEmpty else { return [] }
        let pieces = text.split(separator: ":", omittingEmptySubsequences: false)
        var groups: [UInt16] = []
        for (index, piece) in pieces.enumerated() {
            if ipv4Tail, index == pieces.count - 1, piece.contains(".") {
                guard let octets = ipv4(piece) else { return nil }
                groups += [UInt16(octets[0]) << 8 | UInt16(octets[1]), UInt16(octets[2]) << 8 | UInt16(octets[3])]
                continue
            }
            guard (1...4).contains(piece.count), piece.allSatisfy(\.isHexDigit), let value = UInt16(piece, radix: 16)
            else { return nil }
            groups.append(value)
        }
        return groups
    }

    /// `localhost`, 127.0.0.0/8, ::1 or ::ffff:127.0.0.0/104.
    static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" { return true }
        if let octets = ipv4(host) { return octets[0] == 127 }
        guard let groups = ipv6(host) else { return false }
        if groups == [0, 0, 0, 0, 0, 0, 0, 1] { return true }
        return groups[0..<5].allSatisfy { $0 == 0 } && groups[5] == 0xFFFF && groups[6] >> 8 == 127
    }
}
