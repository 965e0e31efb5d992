#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// The package's executables as `swift build` left them, for tests that run one in a child process.
public enum BuiltProducts {
    /// The path of executable `name` next to the test bundle (or one folder up), nil when not built.
    public static func executable(_ name: String) -> String? {
        var directory = CommandLine.arguments[0]
        for _ in 0..<2 {
            guard let slash = directory.lastIndex(of: "/") else { return nil }
            directory = String(directory[..<slash])
            let path = directory + "/" + name
            if access(path, X_OK) == 0 { return path }
        }
        return nil
    }
}
