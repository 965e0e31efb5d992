import Foundation
import Testing

/// `scripts/package` builds a .deb with the expected files, control fields and maintainer scripts.
@Suite struct PackageScriptTests {
    /// Packages a small executable (the packaging does not care what the binary is; keeps this fast).
    private func package(in folder: TemporaryFolder) async throws -> String? {
        guard Workspace.tool("dpkg-deb", package: "dpkg") != nil,
            Workspace.tool("dtc", package: "device-tree-compiler") != nil
        else { return nil }
        let result = try await Workspace.script(
            "package",
            ["--binary", "/bin/true", "--output", folder.path("out"), "--examples", try folder.examples()],
            in: folder.url
        )
        #expect(result.status == 0, "\(result.transcript)")
        let debs = (try? FileManager.default.contentsOfDirectory(atPath: folder.path("out"))) ?? []
        let deb = debs.first { $0.hasSuffix(".deb") }
        #expect(deb != nil, "no .deb in the output folder:\n\(result.transcript)")
        return deb.map { folder.path("out/\($0)") }
    }

    @Test func debHoldsTheFilesAndControlFields() async throws {
        let folder = try TemporaryFolder()
        guard let deb = try await package(in: folder), let dpkgDeb = Workspace.tool("dpkg-deb", package: "dpkg") else {
            return
        }
        let contents = try await Workspace.run(dpkgDeb, ["-c", deb], in: folder.url)
        #expect(contents.status == 0, "\(contents.transcript)")
        for path in [
            "./usr/bin/hark", "./usr/lib/systemd/system/hark.service", "./usr/lib/udev/rules.d/70-hark.rules",
            "./etc/hark/hark.yaml", "./usr/share/hark/examples/hark.yaml",
            "./usr/share/hark/board/rpi5-respeaker-2mic.yaml", "./usr/share/hark/board/host.yaml",
            "./usr/share/hark/overlays/hark-ptt-button.dtbo", "./usr/share/hark/overlays/hark-status-leds.dtbo",
            "./usr/share/hark/overlays/hark-i2s-mems-mic.dtbo", "./usr/share/doc/hark/README.md",
        ] + (Workspace.hasWakeRuntime ? Workspace.wakeRuntimeFiles.map { "./\($0)" } : [])
            + (Workspace.hasLiveKitRuntime ? Workspace.liveKitRuntimeFiles.map { "./\($0)" } : [])
        {
            #expect(
                contents.output.split(separator: "\n").contains { $0.hasSuffix(" \(path)") },
                "\(path) is not in the package:\n\(contents.output)"
            )
        }
        #expect(contents.output.contains("-rwxr-xr-x root/root"), "the binary is not root-owned 0755")
        for example in try FileManager.default.contentsOfDirectory(atPath: try folder.examples()) {
            #expect(
                contents.output.contains(" ./usr/share/hark/examples/\(example)\n"),
                "example \(example) is not in the package"
            )
        }

        let info = try await Workspace.run(dpkgDeb, ["-I", deb], in: folder.url)
        #expect(info.status == 0, "\(info.transcript)")
        for field in ["Package: hark", "Version: ", "Architecture: ", "Maintainer: ", "Description: ", "Depends: "] {
            #expect(info.output.contains(" \(field)"), "no \(field) in:\n\(info.output)")
        }
        #expect(info.output.contains("libc6"), "Depends: misses the C library:\n\(info.output)")
        if Workspace.hasWakeRuntime {
            // The wake word's TensorFlow Lite library is C++: its libraries are the package's dependencies too.
            #expect(info.output.contains("libstdc++6"), "Depends: misses the wake word's C++ runtime:\n\(info.output)")
        }
        for member in ["postinst", "prerm", "postrm", "conffiles"] {
            #expect(info.output.contains(" \(member) "), "no \(member) in:\n\(info.output)")
        }

        let extracted = try await Workspace.run(dpkgDeb, ["-e", deb, folder.path("control")], in: folder.url)
        #expect(extracted.status == 0, "\(extracted.transcript)")
        #expect(try folder.read("control/conffiles") == "/etc/hark/hark.yaml\n")
        let version = try String(contentsOf: Workspace.repository.appendingPathComponent("VERSION"), encoding: .utf8)
        #expect(
            try folder.read("control/control").contains(
                "Version: \(version.trimmingCharacters(in: .whitespacesAndNewlines))\n"
            )
        )
    }

    /// `scripts/install --deb FILE --root DIR`: the package unpacked into a staged image, the user made
    /// and the service enabled there; --uninstall takes it out again.
    @Test func installerTakesThePackage() async throws {
        let folder = try TemporaryFolder()
        guard let deb = try await package(in: folder) else { return }
        try folder.write("root/etc/passwd", "root:x:0:0:root:/root:/bin/bash\n")
        try folder.write("root/etc/group", "root:x:0:\naudio:x:29:\n")
        try folder.write("root/boot/firmware/config.txt", "dtparam=audio=on\n")
        let result = try await Workspace.script(
            "install",
            ["--root", folder.path("root"), "--deb", deb, "--board", "rpi-usb-audio", "--overlay", "hark-status-leds"],
            in: folder.url
        )
        #expect(result.status == 0, "\(result.transcript)")
        #expect(folder.exists("root/usr/bin/hark"))
        #expect(folder.exists("root/etc/hark/hark.yaml"))
        #expect(folder.exists("root/boot/firmware/overlays/hark-status-leds.dtbo"))
        #expect(try folder.read("root/boot/firmware/config.txt").contains("\ndtoverlay=hark-status-leds\n"))
        #expect(try folder.read("root/etc/passwd").contains("\nhark:x:"))
        let wants = folder.path("root/etc/systemd/system/multi-user.target.wants/hark.service")
        #expect(
            (try? FileManager.default.destinationOfSymbolicLink(atPath: wants))
                == "/usr/lib/systemd/system/hark.service"
        )

        let removed = try await Workspace.script(
            "install",
            ["--root", folder.path("root"), "--uninstall"],
            in: folder.url
        )
        #expect(removed.status == 0, "\(removed.transcript)")
        #expect(!folder.exists("root/usr/bin/hark"))
        #expect(!folder.exists("root/usr/lib/systemd/system/hark.service"))
        #expect(!folder.exists("root/usr/lib/hark"))
        #expect(!folder.exists("root/usr/share/hark"))
        #expect(try folder.read("root/boot/firmware/config.txt") == "dtparam=audio=on\n")
    }
}
