#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Why a file operation of Foundation failed, in a few words for a person: the errno behind its error
/// (`permission denied`, `the folder does not exist`), not the error value's dump.
public enum FileFailure {
    /// A few words for `error` (a `CocoaError` with an underlying `POSIXError`, or a `POSIXError`); for any
    /// other error its description, printable and bounded.
    public static func reason(_ error: any Error) -> String {
        var posix = error as? POSIXError
        var folder = false
        if let cocoa = error as? CocoaError {
            posix = cocoa.underlying as? POSIXError
            // Foundation marks a missing folder (as opposed to file) this way.
            folder = (cocoa.userInfo["NSUserStringVariant"] as? [String])?.contains("Folder") == true
            if posix == nil { return "error \(cocoa.code.rawValue) of the file system" }
        }
        guard let posix else { return RemoteText.printable(String(describing: error), limit: 200) }
        // The code by its name (`ENOENT`): this module sees the error type, not the C library's constants.
        let name = String(describing: posix.code)
        switch name {
        case "ENOENT": return folder ? "the folder does not exist" : "no such file"
        case "EACCES", "EPERM": return "permission denied"
        case "ENOTDIR": return "a part of the path is not a folder"
        case "EISDIR": return "it is a folder"
        case "ENOSPC": return "no space left on the device"
        case "EDQUOT": return "disk quota exceeded"
        case "EROFS": return "read-only file system"
        case "EIO": return "input/output error"
        case "ENAMETOOLONG": return "the name is too long"
        case "ELOOP": return "too many symbolic links"
        case "EMFILE", "ENFILE": return "too many open files"
        default: return "error " + RemoteText.printable(name, limit: 40)
        }
    }
}
