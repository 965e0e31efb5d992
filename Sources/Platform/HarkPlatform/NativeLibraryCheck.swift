import Glibc

/// A native library that is damaged: shorter than it should be, with load segments or a dynamic section that point
/// outside it, or not the file its folder's `SHA256SUMS` names. `dlopen` of such a file may crash the process
/// (SIGBUS in the dynamic loader, a segmentation fault, a panic of the library's own code), so it is checked first
/// and refused with this error, which names the file and how to restore it.
public struct NativeLibraryDamage: Error, CustomStringConvertible, Sendable, Equatable {
    /// The library file.
    public let path: String
    /// What is wrong with it, in a few words.
    public let reason: String

    public init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }

    public var description: String {
        "\(path) is damaged (\(reason)): restore it with scripts/setup in a checkout, or by reinstalling the hark "
            + "package (sudo apt-get install --reinstall hark)"
    }
}

/// Checks a native library before `dlopen`: its ELF structure against its size (every `PT_LOAD` segment, the
/// program and section header tables, the dynamic section and the addresses it holds), and, when a `SHA256SUMS`
/// file beside it (or in its `livekit/` folder) lists it, its SHA-256.
public enum NativeLibraryCheck {
    /// The files of checksums looked in, relative to the library's folder.
    public static let checksumFiles = ["SHA256SUMS", "livekit/SHA256SUMS"]

    /// Throws ``NativeLibraryDamage`` unless the library at `path` is whole (see the type). `checksum: false` checks
    /// its structure only: for a program that its parent starts only after checking the same file whole (the
    /// LiveKit helper), so the SHA-256 of a large library is not computed twice per connection.
    public static func verify(_ path: String, checksum: Bool = true) throws(NativeLibraryDamage) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw NativeLibraryDamage(path: path, reason: "cannot be read: \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
            throw NativeLibraryDamage(path: path, reason: "not a regular file")
        }
        let size = Int(status.st_size)
        do {
            try ELFImage.check(fd: fd, size: size)
        } catch {
            throw NativeLibraryDamage(path: path, reason: error.reason)
        }
        guard checksum, let expected = expectedDigest(of: path) else { return }
        guard let digest = SHA256.digest(fd: fd) else {
            throw NativeLibraryDamage(path: path, reason: "cannot be read: \(String(cString: strerror(errno)))")
        }
        guard digest == expected else {
            throw NativeLibraryDamage(path: path, reason: "its SHA-256 is not the one SHA256SUMS lists")
        }
    }

    /// The SHA-256 (lowercase hex) that a checksum file in the library's folder lists for it, or nil.
    static func expectedDigest(of path: String) -> String? {
        let slash = path.lastIndex(of: "/")
        let folder = slash.map { String(path[..<$0]) } ?? "."
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        for file in checksumFiles {
            guard let text = readSmallFile(folder + "/" + file, limit: 64 * 1024) else { continue }
            for line in text.split(whereSeparator: { $0 == "\n" }) where !line.hasPrefix("#") {
                let fields = line.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
                guard fields.count == 2 else { continue }
                var listed = fields[1].drop { $0 == " " || $0 == "*" }
                if listed.hasPrefix("./") { listed = listed.dropFirst(2) }
                let hex = fields[0].lowercased()
                guard listed == name, hex.count == 64, hex.allSatisfy(\.isHexDigit) else { continue }
                return hex
            }
        }
        return nil
    }

    /// The text of a regular file of at most `limit` bytes, or nil (also for a larger one: nothing is read then).
    public static func readSmallFile(_ path: String, limit: Int) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0, status.st_mode & S_IFMT == S_IFREG, Int(status.st_size) <= limit else {
            return nil
        }
        var bytes = [UInt8](repeating: 0, count: Int(status.st_size))
        var done = 0
        while done < bytes.count {
            let got = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, $0.count - done, off_t(done)) }
            if got < 0, errno == EINTR { continue }
            guard got > 0 else { return nil }
            done += got
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// The structure of a 64-bit little-endian ELF shared object, checked against the file's size without mapping it.
enum ELFImage {
    struct Failure: Error {
        let reason: String
        init(_ reason: String) { self.reason = reason }
    }

    struct Segment {
        var type: UInt32
        var offset: UInt64
        var address: UInt64
        var fileSize: UInt64
        var memorySize: UInt64
    }

    /// The most program headers and dynamic entries read (real libraries have about ten and a few dozen).
    static let maximumProgramHeaders = 256
    static let maximumDynamicEntries = 4096

    /// The dynamic entries whose value is an address in the image the loader reads from.
    static let addressTags: Set<UInt64> = [
        4, 5, 6, 7, 12, 13, 17, 23, 25, 26, 32, 0x6fff_fef5, 0x6fff_fff0, 0x6fff_fffc, 0x6fff_fffe,
    ]

    static func check(fd: Int32, size: Int) throws(Failure) {
        let header = try read(fd, at: 0, count: 64, size: size, what: "its ELF header")
        guard header[0..<4].elementsEqual([0x7F, 0x45, 0x4C, 0x46]) else { throw Failure("not an ELF file") }
        guard header[4] == 2, header[5] == 1 else { throw Failure("not a 64-bit little-endian ELF file") }
        guard u16(header, 16) == 3 else { throw Failure("not a shared library (ELF type \(u16(header, 16)))") }
        let programOffset = u64(header, 0x20)
        let sectionOffset = u64(header, 0x28)
        let programEntry = UInt64(u16(header, 0x36))
        let programCount = UInt64(u16(header, 0x38))
        let sectionEntry = UInt64(u16(header, 0x3A))
        let sectionCount = UInt64(u16(header, 0x3C))
        let fileSize = UInt64(size)
        guard programEntry >= 56, programCount > 0, programCount <= UInt64(maximumProgramHeaders),
            within(programOffset, programEntry * programCount, fileSize)
        else { throw Failure("its program headers are not within its \(size) bytes") }
        if sectionCount > 0 {
            guard sectionEntry >= 64, within(sectionOffset, sectionEntry * sectionCount, fileSize) else {
                throw Failure("its section headers are not within its \(size) bytes (cut short)")
            }
        }
        let table = try read(
            fd,
            at: Int(programOffset),
            count: Int(programEntry * programCount),
            size: size,
            what: "its program headers"
        )
        var loads: [Segment] = []
        var dynamic: Segment?
        for index in 0..<Int(programCount) {
            let at = index * Int(programEntry)
            let segment = Segment(
                type: UInt32(u16(table, at)) | UInt32(u16(table, at + 2)) << 16,
                offset: u64(table, at + 8),
                address: u64(table, at + 16),
                fileSize: u64(table, at + 32),
                memorySize: u64(table, at + 40)
            )
            switch segment.type {
            case 1:  // PT_LOAD
                guard within(segment.offset, segment.fileSize, fileSize) else {
                    throw Failure("a load segment runs past its end (cut short)")
                }
                guard segment.fileSize <= segment.memorySize else { throw Failure("a load segment is malformed") }
                loads.append(segment)
            case 2:  // PT_DYNAMIC
                dynamic = segment
            case 3:  // PT_INTERP: a program, which the dynamic loader refuses to open (and may crash on)
                throw Failure("a program, not a library")
            default:
                break
            }
        }
        guard !loads.isEmpty else { throw Failure("no load segment") }
        guard let dynamic else { throw Failure("no dynamic section") }
        guard within(dynamic.offset, dynamic.fileSize, fileSize), dynamic.fileSize >= 16 else {
            throw Failure("its dynamic section is not within its \(size) bytes")
        }
        func mapped(_ address: UInt64) -> Bool {
            loads.contains { address >= $0.address && address - $0.address < $0.memorySize }
        }
        guard mapped(dynamic.address) else { throw Failure("its dynamic section is outside its load segments") }
        let count = min(Int(dynamic.fileSize / 16), maximumDynamicEntries)
        let entries = try read(fd, at: Int(dynamic.offset), count: count * 16, size: size, what: "its dynamic section")
        var ended = false
        for index in 0..<count {
            let tag = u64(entries, index * 16)
            let value = u64(entries, index * 16 + 8)
            if tag == 0 {
                ended = true
                break
            }
            if addressTags.contains(tag), !mapped(value) {
                throw Failure("its dynamic section is corrupt (entry \(tag) points outside the library)")
            }
            if tag == 10, value > fileSize {  // DT_STRSZ
                throw Failure("its dynamic section is corrupt (a string table larger than the file)")
            }
        }
        guard ended else { throw Failure("its dynamic section is corrupt (no end)") }
    }

    /// `offset + count <= size`, without overflow.
    static func within(_ offset: UInt64, _ count: UInt64, _ size: UInt64) -> Bool {
        offset <= size && count <= size - offset
    }

    static func read(_ fd: Int32, at offset: Int, count: Int, size: Int, what: String) throws(Failure) -> [UInt8] {
        guard offset >= 0, count >= 0, offset <= size, count <= size - offset else {
            throw Failure("\(what) are not within its \(size) bytes (cut short)")
        }
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let got = bytes.withUnsafeMutableBytes {
                pread(fd, $0.baseAddress! + done, count - done, off_t(offset + done))
            }
            if got < 0, errno == EINTR { continue }
            guard got > 0 else { throw Failure("cannot read \(what)") }
            done += got
        }
        return bytes
    }

    static func u16(_ bytes: [UInt8], _ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 }

    static func u64(_ bytes: [UInt8], _ at: Int) -> UInt64 {
        var value: UInt64 = 0
        for index in (0..<8).reversed() { value = value << 8 | UInt64(bytes[at + index]) }
        return value
    }
}
