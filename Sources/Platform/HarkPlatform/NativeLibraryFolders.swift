import Glibc

/// Where Hark's native libraries that Debian lacks are (the wake word's TensorFlow Lite, LiveKit's Rust core): one
/// folder that `scripts/setup` fills in a checkout (`.hark-lib/`) and the package installs (`/usr/lib/hark/`), or
/// the folder `HARK_LIB_DIR` names. Each library is looked for in the same places, in the same order.
public enum NativeLibraryFolders {
    /// The environment variable naming the folder that holds the libraries (when set, only it is looked in).
    public static let variable = "HARK_LIB_DIR"
    /// The development folder `scripts/setup` fills, looked for above the executable and the working folder.
    public static let developmentFolder = ".hark-lib"
    /// The library folder of an installed Hark.
    public static let installedFolder = "/usr/lib/hark"

    /// The folders to look in for `file`, in order: the folder `HARK_LIB_DIR` names (when set, only there); each
    /// `.hark-lib` above `executable` (default: this process's, from `/proc/self/exe`) or above the working folder
    /// that holds `file` (a development checkout); `/usr/lib/hark`.
    public static func candidates(for file: String, environment: [String: String], executable: String? = nil)
        -> [String]
    {
        if let folder = environment[variable], !folder.isEmpty { return [folder] }
        var candidates: [String] = []
        var starts = [executable ?? selfExecutable()].compactMap { $0 }.map(parent)
        if let working = workingFolder() { starts.append(working) }
        for start in starts {
            var folder = start
            for _ in 0..<8 {
                let candidate = join(folder, developmentFolder)
                if !candidates.contains(candidate) && isReadable(join(candidate, file)) {
                    candidates.append(candidate)
                }
                if folder == "/" { break }
                folder = parent(folder)
            }
        }
        candidates.append(installedFolder)
        return candidates
    }

    /// The first of ``candidates(for:environment:executable:)`` that holds a readable `file`, or nil.
    public static func folder(for file: String, environment: [String: String], executable: String? = nil) -> String? {
        candidates(for: file, environment: environment, executable: executable)
            .first { isReadable(join($0, file)) }
    }

    /// True for a regular file this process may read.
    public static func isReadable(_ path: String) -> Bool {
        var status = stat()
        return stat(path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFREG && access(path, R_OK) == 0
    }

    /// `folder/name`.
    public static func join(_ folder: String, _ name: String) -> String {
        folder.hasSuffix("/") ? folder + name : folder + "/" + name
    }

    private static func parent(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// This process's executable (`readlink /proc/self/exe`), or nil.
    private static func selfExecutable() -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The working folder (`getcwd`), or nil.
    private static func workingFolder() -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getcwd(&buffer, buffer.count) != nil else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
