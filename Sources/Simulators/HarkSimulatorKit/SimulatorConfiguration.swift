import HarkCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// How the simulator serves TLS.
public enum SimulatorTLS: Sendable, Hashable {
    /// Plain `ws://` and `http://`.
    case none
    /// A self-signed CA and a leaf for `localhost` / `127.0.0.1`, generated at start-up. The CA's PEM is
    /// written to `caOut` when given, and is always available as ``LiveSimulator/caCertificatePEM``.
    case selfSigned(caOut: String?)
    /// A certificate chain and private key read from PEM files.
    case files(certificate: String, key: String)
}

/// A configuration mistake (bad flag, bad scenario file).
public struct SimulatorConfigurationError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Parsing and formatting of the simulator's duration syntax: `1.5` (seconds), `1.5s`, `250ms`, `2m`, `1h`.
public enum SimulatorDurations {
    /// Parses a duration; nil when it is not one.
    public static func parse<S: StringProtocol>(_ text: S) -> Duration? {
        let text = text.trimmedWhitespace.lowercased()
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("", 1)]
        for (suffix, scale) in units where text.hasSuffix(suffix) {
            let number = text.dropLast(suffix.count)
            guard let value = Double(number), value.isFinite, value >= 0, value * scale <= 1e9 else { continue }
            return .nanoseconds(Int64((value * scale * 1e9).rounded()))
        }
        return nil
    }

    /// Formats as seconds with up to three decimals, e.g. `1.5s`.
    public static func format(_ duration: Duration) -> String {
        let millis = duration.nanoseconds / 1_000_000
        if millis % 1000 == 0 { return "\(millis / 1000)s" }
        var text = String(Double(millis) / 1000)
        if text.hasSuffix(".0") { text.removeLast(2) }
        return text + "s"
    }
}
