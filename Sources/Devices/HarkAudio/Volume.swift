#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The software volume kept across restarts: one number (0 … 1) in a small text file, written atomically.
public struct VolumeFile: Sendable, Hashable {
    /// Where the volume lives (for the appliance, under the state directory).
    public var path: String

    public init(path: String) {
        self.path = path
    }

    /// The stored volume, or nil when the file is missing or does not hold a number in 0 … 1.
    public func load() -> Float? {
        guard let data = FileManager.default.contents(atPath: path),
            let value = Float(String(decoding: data, as: UTF8.self).filter { !$0.isWhitespace }),
            (0...1).contains(value)
        else { return nil }
        return value
    }

    /// Stores `volume` (clamped to 0 … 1).
    public func save(_ volume: Float) throws {
        let value = max(0, min(1, volume))
        try Data("\(value)\n".utf8).write(to: URL(filePath: path), options: .atomic)
    }
}
