#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A file Hark reads (a configuration, a board, a recording, a status file, a CA): a symbolic link to it is followed
/// (configuration management commonly makes `/etc/hark/hark.yaml` one), and the type and size checked are its
/// target's. Where Hark writes, links stay refused (the writers open with `O_NOFOLLOW` or rename over them).
public enum ReadableFile {
    /// The most links followed in a row.
    public static let maximumLinks = 32

    /// A chain of links that does not end within ``ReadableFile/maximumLinks``.
    public struct LinkLoop: Error, CustomStringConvertible {
        public var path: String
        public var description: String { "\(path): too many symbolic links" }
    }

    /// The attributes of what `path` names, its symbolic links followed; throws what `FileManager` throws (the
    /// path or a link's target does not exist, ...), or ``LinkLoop``.
    public static func attributes(atPath path: String) throws -> [FileAttributeKey: Any] {
        var current = path
        for _ in 0...maximumLinks {
            let attributes = try FileManager.default.attributesOfItem(atPath: current)
            guard (attributes[.type] as? FileAttributeType) == .typeSymbolicLink else { return attributes }
            let target = try FileManager.default.destinationOfSymbolicLink(atPath: current)
            if target.hasPrefix("/") {
                current = target
            } else {
                let folder = current.lastIndex(of: "/").map { String(current[..<$0]) } ?? "."
                current = folder + "/" + target
            }
        }
        throw LinkLoop(path: path)
    }
}
