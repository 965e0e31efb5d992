import Foundation
import HarkTestKit
import Testing

/// What a finished command left behind.
struct CommandResult {
    var status: Int32
    var output: String
    var errors: String

    /// Both streams, for failure messages.
    var transcript: String { "exit \(status)\n--- stdout\n\(output)--- stderr\n\(errors)" }
}

/// Where things are: the checkout, the built `hark`, the host tools the scripts use.
enum Workspace {
    /// The checkout: the first folder above this file that holds `Package.swift`.
    static let repository: URL = {
        var folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while folder.path != "/" {
            if FileManager.default.fileExists(atPath: folder.appendingPathComponent("Package.swift").path) {
                return folder
            }
            folder.deleteLastPathComponent()
        }
        return URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    }()

    /// The `hark` built next to this test executable (same build folder, whatever the scratch path), or
    /// nil (recorded as a failure) when it was not built: nothing is built here.
    static func builtHark() -> String? {
        let testExecutable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        let buildFolder = testExecutable.deletingLastPathComponent()
        let hark = buildFolder.appendingPathComponent("hark").path
        guard FileManager.default.isExecutableFile(atPath: hark) else {
            Issue.record(
                """
                no built hark next to the tests (\(hark)): build it with the tests, e.g. \
                swift build --build-tests (with the same --scratch-path as swift test)
                """
            )
            return nil
        }
        return hark
    }

    /// True when scripts/setup unpacked the wake-word runtime into the checkout's `.hark-lib` (the scripts then
    /// install and package it; without it they warn and go on).
    static let hasWakeRuntime = FileManager.default.fileExists(
        atPath: repository.appendingPathComponent(".hark-lib/SHA256SUMS").path
    )

    /// The files the wake-word runtime puts on a device.
    static let wakeRuntimeFiles = [
        "usr/lib/hark/libtensorflowlite_c.so", "usr/lib/hark/SHA256SUMS", "usr/share/hark/wake/melspectrogram.tflite",
        "usr/share/hark/wake/embedding_model.tflite", "usr/share/hark/wake/hey_jarvis.tflite",
        "usr/share/hark/wake/okay_nabu.tflite", "usr/share/hark/wake/LICENSE", "usr/share/doc/hark/copyright",
        "usr/share/hark/wake/micro/okay_nabu.tflite", "usr/share/hark/wake/micro/okay_nabu.json",
        "usr/share/hark/wake/micro/hey_jarvis.json", "usr/share/hark/wake/micro/LICENSE",
    ]

    /// True when scripts/setup unpacked the LiveKit runtime into the checkout's `.hark-lib` (the scripts then
    /// install and package it; without it they warn and go on).
    static let hasLiveKitRuntime = FileManager.default.fileExists(
        atPath: repository.appendingPathComponent(".hark-lib/livekit/SHA256SUMS").path
    )

    /// The files the LiveKit backend's helper and runtime put on a device (the hark-livekit package), with their
    /// modes.
    static let liveKitFiles: [(path: String, mode: Int)] = [
        ("usr/lib/hark/hark-livekit", 0o755), ("usr/lib/hark/liblivekit_ffi.so", 0o644),
        ("usr/lib/hark/livekit/SHA256SUMS", 0o644),
        ("usr/share/hark/livekit/LICENSE.md", 0o644), ("usr/share/doc/hark-livekit/copyright", 0o644),
    ]

    /// The path of a host tool, or nil (recorded as a failure naming the Debian package scripts/setup installs).
    static func tool(_ name: String, package: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/sbin:/usr/bin:/sbin:/bin"
        for folder in path.split(separator: ":") + ["/usr/sbin", "/usr/bin", "/sbin", "/bin"] {
            let candidate = "\(folder)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        Issue.record("\(name) not found: install the Debian package \(package) (scripts/setup does)")
        return nil
    }

    /// Runs a command to completion in `folder` (with `environment`, else this process's); its output goes
    /// through temporary files, so no pipe can fill up.
    static func run(
        _ executable: String,
        _ arguments: [String],
        in folder: URL,
        environment: [String: String]? = nil
    ) async throws -> CommandResult {
        let child = try await ChildProcess.run(
            executable,
            arguments,
            environment: environment,
            directory: folder.path,
            separateErrors: true
        )
        return CommandResult(status: child.status, output: child.text, errors: child.errorText)
    }

    /// A checkout script (`scripts/NAME`), run with bash.
    static func script(_ name: String, _ arguments: [String], in folder: URL) async throws -> CommandResult {
        try await run("/bin/bash", [repository.appendingPathComponent("scripts/\(name)").path] + arguments, in: folder)
    }
}

/// A temporary folder, removed when the value goes away.
final class TemporaryFolder {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("hark-install-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: url) }

    /// A path inside the folder.
    func path(_ relative: String) -> String { url.appendingPathComponent(relative).path }

    /// Writes a text file, creating its folders.
    func write(_ relative: String, _ text: String) throws {
        let file = url.appendingPathComponent(relative)
        try FileManager.default.createDirectory(
            at: file.deletingLastPathComponent(),
            withIntermediateDirectories: true
        )
        try text.write(to: file, atomically: true, encoding: .utf8)
    }

    /// Reads a text file.
    func read(_ relative: String) throws -> String { try String(contentsOfFile: path(relative), encoding: .utf8) }

    /// Copies a file in, creating its folders.
    func copy(_ source: String, to relative: String) throws {
        let destination = url.appendingPathComponent(relative)
        try FileManager.default.createDirectory(
            at: destination.deletingLastPathComponent(),
            withIntermediateDirectories: true
        )
        try? FileManager.default.removeItem(at: destination)
        try FileManager.default.copyItem(atPath: source, toPath: destination.path)
    }

    /// Whether a file exists (a dangling symlink counts).
    func exists(_ relative: String) -> Bool {
        (try? FileManager.default.attributesOfItem(atPath: path(relative))) != nil
    }

    /// The permission bits of a file, e.g. 0o644.
    func mode(_ relative: String) throws -> Int {
        let attributes = try FileManager.default.attributesOfItem(atPath: path(relative))
        return ((attributes[.posixPermissions] as? NSNumber)?.intValue ?? -1) & 0o7777
    }

    /// The folder of example configurations the scripts install: the checkout's `config/` once it has
    /// `hark.yaml`, else a stand-in written here.
    func examples() throws -> String {
        let real = Workspace.repository.appendingPathComponent("config")
        if FileManager.default.fileExists(atPath: real.appendingPathComponent("hark.yaml").path) {
            return real.path
        }
        try write("examples/hark.yaml", "# stand-in for config/hark.yaml\nmode: push_to_talk\n")
        return path("examples")
    }
}

/// A root filesystem with what `systemd-analyze --root` needs besides Hark: the host's unit files
/// (default dependencies such as sysinit.target; the targets the unit orders after). `systemd-analyze`
/// resolves every path inside the root (ExecStart= and ExecReload= name Hark's own binary), so these are copies.
func stageSystemBase(in root: TemporaryFolder, under folder: String) throws {
    let fileManager = FileManager.default
    for source in ["/usr/lib/systemd/system", "/lib/systemd/system"] where fileManager.fileExists(atPath: source) {
        let names = try fileManager.contentsOfDirectory(atPath: source)
        for name in names where name.hasSuffix(".target") || name.hasSuffix(".slice") {
            let relative = "\(folder)/usr/lib/systemd/system/\(name)"
            if !root.exists(relative) { try root.copy("\(source)/\(name)", to: relative) }
        }
        break
    }
}

/// The exposure score in `systemd-analyze security` output ("Overall exposure level for X: 1.5 OK").
func exposureScore(in output: String) -> Double? {
    guard let line = output.split(separator: "\n").first(where: { $0.contains("Overall exposure level") }),
        let afterColon = line.split(separator: ":").last
    else { return nil }
    return afterColon.split(separator: " ").first.flatMap { Double($0) }
}
