#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// The firmware's version and the facts the `get_device_status` tool reports.
enum HarkVersion {
    /// The version of this build (`scripts/package` stamps releases through `HARK_VERSION` at build time
    /// of the package; a development build says so).
    static let current = "0.3.0"

    /// `PRETTY_NAME` from `/etc/os-release`, or "Linux".
    static func operatingSystem(root: String = "/") -> String {
        guard let text = try? String(contentsOfFile: root + "etc/os-release", encoding: .utf8) else { return "Linux" }
        for line in text.split(separator: "\n") where line.hasPrefix("PRETTY_NAME=") {
            return String(line.dropFirst("PRETTY_NAME=".count)).trimmingQuotes
        }
        return "Linux"
    }

    /// Which network interfaces are up, from `/sys/class/net` (no addresses: they are nobody's business).
    static func networkSummary(root: String = "/") -> String {
        let folder = root + "sys/class/net"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return "unknown" }
        let up = names.sorted().filter { name in
            guard name != "lo" else { return false }
            let state = (try? String(contentsOfFile: "\(folder)/\(name)/operstate", encoding: .utf8)) ?? ""
            return state.hasPrefix("up")
        }
        return up.isEmpty ? "no network interface is up" : "up: " + up.joined(separator: ", ")
    }
}

extension String {
    fileprivate var trimmingQuotes: String {
        var text = Substring(self)
        while text.first == "\"" || text.first == "'" { text = text.dropFirst() }
        while text.last == "\"" || text.last == "'" { text = text.dropLast() }
        return String(text)
    }
}
