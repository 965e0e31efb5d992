import Foundation
import HarkAudio
import HarkCore
import HarkTestKit
import HarkWake
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A scratch folder, removed by ``remove()``.
struct ScratchFolder {
    let path: String

    init(_ name: String) throws {
        path = FileManager.default.temporaryDirectory.path + "/hark-\(name)-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func file(_ name: String) -> String { path + "/" + name }

    func write(_ name: String, _ text: String) throws -> String {
        try text.write(toFile: file(name), atomically: true, encoding: .utf8)
        return file(name)
    }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// The real native libraries `scripts/setup` put in `.hark-lib` (the tests that damage copies of them are skipped
/// without them, saying so).
enum RealNativeLibraries {
    static let folder: String? = {
        guard let runtime = try? WakeRuntime.locate(environment: ProcessInfo.processInfo.environment) else {
            return nil
        }
        let folder = String(runtime.library.dropLast(WakeRuntime.libraryName.count + 1))
        return FileManager.default.fileExists(atPath: folder + "/liblivekit_ffi.so") ? folder : nil
    }()
    static let missing = "the native runtimes are not installed: scripts/setup puts them in .hark-lib"

    /// A folder like the runtime folder, its libraries copied (and damaged by `damage`, given each copy's path), its
    /// models and, when `sums`, its SHA256SUMS files with it. Nothing is read into this process (its memory stays
    /// what it was, for the peaks measured of later children).
    static func copy(
        into scratch: ScratchFolder,
        sums: Bool = true,
        damage: @Sendable (_ path: String) throws -> Void
    ) throws -> String {
        let source = try #require(folder)
        let target = scratch.file("lib")
        let manager = FileManager.default
        try manager.createDirectory(atPath: target + "/livekit", withIntermediateDirectories: true)
        try manager.copyItem(atPath: source + "/wake", toPath: target + "/wake")
        if sums {
            try manager.copyItem(atPath: source + "/SHA256SUMS", toPath: target + "/SHA256SUMS")
            try manager.copyItem(atPath: source + "/livekit/SHA256SUMS", toPath: target + "/livekit/SHA256SUMS")
        }
        for name in ["libtensorflowlite_c.so", "liblivekit_ffi.so"] {
            try manager.copyItem(atPath: source + "/" + name, toPath: target + "/" + name)
            try damage(target + "/" + name)
        }
        return target
    }

    /// Cuts the file at `path` to `size(original)` bytes.
    static func truncate(_ path: String, to size: (Int) -> Int) throws {
        let length = try #require(FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        #expect(Glibc.truncate(path, off_t(size(length))) == 0)
    }

    /// The library's ELF image with the values of its `.dynamic` section's string and symbol table entries pointing
    /// far outside the file (the dynamic loader would follow them): only those bytes are read and written.
    static func corruptDynamic(_ path: String) throws {
        let fd = open(path, O_RDWR)
        try #require(fd >= 0)
        defer { close(fd) }
        func read(_ offset: Int, _ count: Int) -> [UInt8] {
            var bytes = [UInt8](repeating: 0, count: count)
            _ = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, count, off_t(offset)) }
            return bytes
        }
        func u64(_ bytes: [UInt8], _ at: Int) -> UInt64 {
            (0..<8).reduce(0) { $0 | UInt64(bytes[at + $1]) << (8 * UInt64($1)) }
        }
        func u16(_ bytes: [UInt8], _ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 }
        let header = read(0, 64)
        let programHeaders = Int(u64(header, 0x20))
        let entrySize = u16(header, 0x36)
        for index in 0..<u16(header, 0x38) {
            let entry = read(programHeaders + index * entrySize, entrySize)
            guard u16(entry, 0) == 2 else { continue }  // PT_DYNAMIC
            let offset = Int(u64(entry, 8))
            let dynamic = read(offset, Int(u64(entry, 32)))
            for at in stride(from: 0, to: dynamic.count - 15, by: 16) {
                let tag = u64(dynamic, at)
                if tag == 0 { break }
                guard tag == 5 || tag == 6 else { continue }  // DT_STRTAB, DT_SYMTAB
                let value: [UInt8] = [0x00, 0x00, 0x41, 0x41, 0x41, 0x41, 0x00, 0x00]
                _ = value.withUnsafeBytes { pwrite(fd, $0.baseAddress, 8, off_t(offset + at + 8)) }
            }
        }
    }
}

/// What the commands do with hostile files, damaged libraries and strangers' process ids: a clear message and an
/// exit code, never a crash, a signal sent astray or memory spent before a bound is checked. Run on the built
/// binary, since a crash is what is checked for.
@Suite(
    .timeLimit(.minutes(3)),
    .enabled(
        if: HarkBinaryTests.hark != nil,
        "needs the hark binary: build it with the tests (swift build --build-tests)"
    )
)
struct HostileInputBinaryTests {
    let hark: String

    init() throws { hark = try #require(HarkBinaryTests.hark) }

    func run(
        _ arguments: [String],
        environment extra: [String: String] = [:],
        directory: String? = nil
    ) async throws -> ChildProcess {
        var environment = ChildProcess.inheritedEnvironment.filter { !$0.key.hasPrefix("HARK_") }
        for (key, value) in extra { environment[key] = value }
        return try await ChildProcess.run(hark, arguments, environment: environment, directory: directory)
    }

    // MARK: hark reload

    /// `hark reload` reads no process id from a file and signals nothing: it asks through the control socket, and
    /// with --pid only a socket that process serves (SO_PEERCRED). A stranger is never touched.
    @Test func reloadSignalsNoProcessButTheDaemon() async throws {
        let scratch = try ScratchFolder("reload")
        defer { scratch.remove() }
        let stranger = Process()
        stranger.executableURL = URL(fileURLWithPath: "/bin/sleep")
        stranger.arguments = ["60"]
        try stranger.run()
        defer { if stranger.isRunning { stranger.terminate() } }
        let path = scratch.path + "/control.sock"
        // No socket: no daemon, exit 3, and nothing signalled.
        let none = try await run(["reload", "--control-socket", path, "--pid", "\(stranger.processIdentifier)"])
        #expect(none.status == 3, "\(none.text)")
        #expect(none.text.contains("no daemon: no control socket at \(path)"), "\(none.text)")
        #expect(stranger.isRunning)
        // A socket this test process listens on (never answering): not the process --pid names, so not asked.
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        #expect(bound == 0 && listen(listener, 4) == 0)
        let other = try await run([
            "reload", "--control-socket", path, "--pid", "\(stranger.processIdentifier)", "--timeout", "1",
        ])
        #expect(other.status == 1, "\(other.text)")
        #expect(
            other.text.contains("served by process \(getpid()), not by process \(stranger.processIdentifier)"),
            "\(other.text)"
        )
        #expect(stranger.isRunning, "hark reload touched a process that is not the daemon")
        // A process id of 0 or 1 is no daemon's: a usage error, not "(Success)".
        for pid in ["0", "1", "-5"] {
            let nobody = try await run(["reload", "--control-socket", path, "--pid=\(pid)"])
            #expect(nobody.status == 2, "\(nobody.text)")
            #expect(!nobody.text.contains("Success"), "\(nobody.text)")
        }
    }

    // MARK: Damaged native libraries

    static let damages: [(String, @Sendable (String) throws -> Void)] = [
        ("truncated to half", { try RealNativeLibraries.truncate($0) { $0 / 2 } }),
        ("without its last 4 KiB", { try RealNativeLibraries.truncate($0) { $0 - 4096 } }),
        ("with a corrupt .dynamic", { try RealNativeLibraries.corruptDynamic($0) }),
    ]

    @Test(
        .enabled(if: RealNativeLibraries.folder != nil, "\(RealNativeLibraries.missing)"),
        arguments: [true, false]
    )
    func aDamagedLibraryIsAClearErrorNamingTheFileNeverACrash(withSums: Bool) async throws {
        for (what, damage) in Self.damages {
            let scratch = try ScratchFolder("damaged")
            defer { scratch.remove() }
            let folder = try RealNativeLibraries.copy(into: scratch, sums: withSums, damage: damage)
            let environment = ["HARK_LIB_DIR": folder, "GEMINI_API_KEY": "not-a-key"]
            let wav = scratch.file("question.wav")
            try WAVFile.write(path: wav, samples: TestSignals.speech(total: .seconds(1)), sampleRate: 16_000)
            let library = folder + "/libtensorflowlite_c.so"
            let livekit = folder + "/liblivekit_ffi.so"

            let wake = try await run(["wake", "--input", wav], environment: environment)
            #expect(wake.signal == nil && wake.status != 0, "hark wake, \(what): \(wake)")
            #expect(wake.text.contains(library), "hark wake, \(what): \(wake.text)")

            let configuration = try scratch.write(
                "hark.yaml",
                "mode: speaker\nboard: host\nboard_dir: \(repositoryRoot)/board\nsession:\n  trigger: wake\n"
                    + "state_dir: \(scratch.path)\nstatus_file: \(scratch.path)/status.json\n"
                    + "audio:\n  capture_file: /dev/zero\n  playback_file: \(scratch.path)/speaker.raw\n"
            )
            let check = try await run(["config", "check", "--config", configuration], environment: environment)
            #expect(check.signal == nil && check.status == 2, "hark config check, \(what): \(check)")
            #expect(check.text.contains(library), "hark config check, \(what): \(check.text)")

            let daemon = try await run(["run", "--config", configuration], environment: environment)
            #expect(daemon.signal == nil && daemon.status == 78, "hark run, \(what): \(daemon)")
            #expect(daemon.text.contains(library), "hark run, \(what): \(daemon.text)")

            let livekitConfiguration = try scratch.write(
                "livekit.yaml",
                "backend: livekit\nboard: host\nboard_dir: \(repositoryRoot)/board\nsession:\n  trigger: voice\n"
                    + "livekit:\n  sandbox_id: hark-test\n"
            )
            let livekitCheck = try await run(
                ["config", "check", "--config", livekitConfiguration],
                environment: environment
            )
            #expect(livekitCheck.signal == nil && livekitCheck.status == 2, "LiveKit, \(what): \(livekitCheck)")
            #expect(livekitCheck.text.contains(livekit), "LiveKit, \(what): \(livekitCheck.text)")

            let doctor = try await run(
                ["doctor", "--board", "host", "--board-dir", "\(repositoryRoot)/board"],
                environment: environment
            )
            #expect(doctor.signal == nil, "hark doctor, \(what): \(doctor)")
            #expect(
                doctor.text.contains(library) && doctor.text.contains(livekit),
                "hark doctor, \(what): \(doctor.text)"
            )
            for output in [wake.text, check.text, daemon.text, doctor.text] {
                #expect(output.contains("scripts/setup") || output.contains("reinstall"), "\(output)")
            }
        }
    }

    // MARK: Symbolic links

    @Test func aConfigurationFileAndAnInputThatAreSymbolicLinksAreFollowed() async throws {
        let scratch = try ScratchFolder("links")
        defer { scratch.remove() }
        let target = try scratch.write("real.yaml", "mode: speaker\nboard: host\nboard_dir: \(repositoryRoot)/board\n")
        try FileManager.default.createSymbolicLink(atPath: scratch.file("hark.yaml"), withDestinationPath: target)
        let check = try await run(["config", "check", "--config", scratch.file("hark.yaml")])
        #expect(check.status == 0, "\(check.text)")
        let wav = scratch.file("real.wav")
        try WAVFile.write(path: wav, samples: TestSignals.speech(total: .seconds(1)), sampleRate: 16_000)
        try FileManager.default.createSymbolicLink(atPath: scratch.file("link.wav"), withDestinationPath: wav)
        let wake = try await run(["wake", "--input", scratch.file("link.wav"), "--scores"])
        #expect(!wake.text.contains("not a regular file"), "\(wake.text)")
        if RealNativeLibraries.folder != nil { #expect(wake.status == 0, "\(wake.text)") }
        // A link to something that is not a regular file is still refused.
        try FileManager.default.createSymbolicLink(
            atPath: scratch.file("folder.yaml"),
            withDestinationPath: scratch.path
        )
        let folder = try await run(["config", "check", "--config", scratch.file("folder.yaml")])
        #expect(folder.status == 2, "\(folder.text)")
    }

    // MARK: Reading before bounding

    /// A 128 MiB 8-bit 8 kHz recording (sparse: its samples are silence): four and a half hours, more than
    /// `hark wake` converts; refused from its header, not after it was read and decoded.
    @Test func aHugeRecordingIsRefusedFromItsHeaderBeforeItIsRead() async throws {
        let scratch = try ScratchFolder("huge-wav")
        defer { scratch.remove() }
        let path = scratch.file("huge.wav")
        let dataBytes = 128 << 20
        var header = Data("RIFF".utf8)
        func put32(_ value: Int) { withUnsafeBytes(of: UInt32(value).littleEndian) { header.append(contentsOf: $0) } }
        func put16(_ value: Int) { withUnsafeBytes(of: UInt16(value).littleEndian) { header.append(contentsOf: $0) } }
        put32(36 + dataBytes)
        header.append(contentsOf: Array("WAVEfmt ".utf8))
        put32(16)
        put16(1)
        put16(1)
        put32(8000)
        put32(8000)
        put16(1)
        put16(8)
        header.append(contentsOf: Array("data".utf8))
        put32(dataBytes)
        try header.write(to: URL(fileURLWithPath: path))
        #expect(truncate(path, off_t(header.count + dataBytes)) == 0)

        let wake = try await run(["wake", "--input", path])
        #expect(wake.signal == nil && wake.status == 2, "\(wake)")
        #expect(wake.peakKiB < 200 * 1024, "hark wake took \(wake.peakKiB) KiB")
        let key = try scratch.write("key", "not-a-key")
        let converse = try await run([
            "converse", "--input", path, "--output", scratch.file("out.wav"), "--endpoint", "ws://127.0.0.1:9",
            "--api-key-file", key, "--timeout", "3",
        ])
        #expect(converse.signal == nil, "\(converse)")
        #expect(converse.peakKiB < 200 * 1024, "hark converse took \(converse.peakKiB) KiB")
    }

    // MARK: Usage errors

    @Test func aWordWithAnEmptyThresholdIsAUsageError() async throws {
        let scratch = try ScratchFolder("word")
        defer { scratch.remove() }
        let wav = scratch.file("question.wav")
        try WAVFile.write(path: wav, samples: TestSignals.speech(total: .seconds(1)), sampleRate: 16_000)
        for word in ["alexa:", "alexa:x", ":0.5"] {
            let result = try await run(["wake", "--input", wav, "--word", word])
            #expect(result.status == 2, "--word \(word): \(result)")
        }
    }
}
