import Foundation
import HarkTestKit
import Testing

/// `scripts/package` builds a .deb with the expected files, control fields and maintainer scripts.
@Suite struct PackageScriptTests {
    /// Packages a small executable as both binaries (the packaging does not care what they are; keeps this fast),
    /// uncompressed (`--fast`: xz of LiveKit's library took most of the time; `defaultPackagesAreXZ` checks the
    /// default): hark's package, and hark-livekit's when the LiveKit runtime is in the checkout.
    private func packages(in folder: TemporaryFolder) async throws -> (hark: String, livekit: String?)? {
        guard Workspace.tool("dpkg-deb", package: "dpkg") != nil,
            Workspace.tool("dtc", package: "device-tree-compiler") != nil
        else { return nil }
        let result = try await Workspace.script(
            "package",
            [
                "--binary", "/bin/true", "--livekit-binary", "/bin/true", "--output", folder.path("out"),
                "--examples", try folder.examples(), "--fast",
            ],
            in: folder.url
        )
        #expect(result.status == 0, "\(result.transcript)")
        let debs = (try? FileManager.default.contentsOfDirectory(atPath: folder.path("out"))) ?? []
        let hark = debs.first { $0.hasPrefix("hark_") && $0.hasSuffix(".deb") }
        let livekit = debs.first { $0.hasPrefix("hark-livekit_") && $0.hasSuffix(".deb") }
        #expect(hark != nil, "no hark .deb in the output folder:\n\(result.transcript)")
        #expect((livekit != nil) == Workspace.hasLiveKitRuntime, "\(debs):\n\(result.transcript)")
        return hark.map { (folder.path("out/\($0)"), livekit.map { folder.path("out/\($0)") }) }
    }

    private func package(in folder: TemporaryFolder) async throws -> String? {
        try await packages(in: folder)?.hark
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
        ] + (Workspace.hasWakeRuntime ? Workspace.wakeRuntimeFiles.map { "./\($0)" } : []) {
            #expect(
                contents.output.split(separator: "\n").contains { $0.hasSuffix(" \(path)") },
                "\(path) is not in the package:\n\(contents.output)"
            )
        }
        #expect(contents.output.contains("-rwxr-xr-x root/root"), "the binary is not root-owned 0755")
        // LiveKit is the hark-livekit package's, never hark's.
        #expect(!contents.output.contains("livekit"), "\(contents.output)")
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

    /// Without `--fast` the packages are compressed with xz, with it stored (the other tests' packages): what
    /// scripts/package asks of dpkg-deb, recorded by a stand-in dpkg-deb first on `PATH` (xz of LiveKit's library
    /// would take a minute on a loaded machine).
    @Test func defaultPackagesAreXZAndFastOnesStored() async throws {
        let folder = try TemporaryFolder()
        guard Workspace.tool("dtc", package: "device-tree-compiler") != nil else { return }
        try folder.write(
            "bin/dpkg-deb",
            """
            #!/bin/sh
            echo "$*" >>"\(folder.path("dpkg-deb.args"))"
            for last; do :; done
            : >"$last"

            """
        )
        chmod(folder.path("bin/dpkg-deb"), 0o755)
        let path = folder.path("bin") + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        var environment = ChildProcess.inheritedEnvironment
        environment["PATH"] = path
        for (options, compression) in [([String](), "-Zxz"), (["--fast"], "-Znone")] {
            unlink(folder.path("dpkg-deb.args"))
            let result = try await Workspace.run(
                "/bin/bash",
                [Workspace.repository.appendingPathComponent("scripts/package").path]
                    + ["--binary", "/bin/true", "--livekit-binary", "/bin/true", "--output", folder.path("out")]
                    + ["--examples", try folder.examples()] + options,
                in: folder.url,
                environment: environment
            )
            #expect(result.status == 0, "\(result.transcript)")
            let builds = ((try? folder.read("dpkg-deb.args")) ?? "").split(separator: "\n").filter {
                $0.contains("--build")
            }
            #expect(builds.count == (Workspace.hasLiveKitRuntime ? 2 : 1), "\(builds)\n\(result.transcript)")
            #expect(builds.allSatisfy { $0.split(separator: " ").contains(Substring(compression)) }, "\(builds)")
        }
    }

    /// The LiveKit backend's helper and LiveKit's library are a package of their own that needs hark of the same
    /// version.
    @Test(.enabled(if: Workspace.hasLiveKitRuntime, "no LiveKit runtime in .hark-lib: scripts/setup fetches it"))
    func liveKitIsAPackageOfItsOwn() async throws {
        let folder = try TemporaryFolder()
        guard let (hark, livekit) = try await packages(in: folder), let livekit,
            let dpkgDeb = Workspace.tool("dpkg-deb", package: "dpkg")
        else { return }
        let contents = try await Workspace.run(dpkgDeb, ["-c", livekit], in: folder.url)
        #expect(contents.status == 0, "\(contents.transcript)")
        for (path, mode) in Workspace.liveKitFiles {
            let line = contents.output.split(separator: "\n").first { $0.hasSuffix(" ./\(path)") }
            #expect(line != nil, "\(path) is not in the package:\n\(contents.output)")
            #expect(line?.hasPrefix(mode == 0o755 ? "-rwxr-xr-x root/root" : "-rw-r--r-- root/root") == true, "\(path)")
        }
        #expect(!contents.output.contains("./usr/bin/hark"), "\(contents.output)")
        let version = try String(contentsOf: Workspace.repository.appendingPathComponent("VERSION"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let info = try await Workspace.run(dpkgDeb, ["-f", livekit, "Package", "Version", "Depends"], in: folder.url)
        #expect(info.output.contains("Package: hark-livekit\n"), "\(info.output)")
        #expect(info.output.contains("Version: \(version)\n"), "\(info.output)")
        #expect(info.output.contains("hark (= \(version))"), "\(info.output)")
        #expect(info.output.contains("libc6"), "the library's own needs: \(info.output)")
        let suggests = try await Workspace.run(dpkgDeb, ["-f", hark, "Suggests"], in: folder.url)
        #expect(suggests.output.contains("hark-livekit"), "\(suggests.output)")
    }

    /// `scripts/install --deb FILE --root DIR`: the package unpacked into a staged image, the user made
    /// and the service enabled there; --uninstall takes it out again.
    @Test func installerTakesThePackage() async throws {
        let folder = try TemporaryFolder()
        guard let (deb, livekit) = try await packages(in: folder) else { return }
        try folder.write("root/etc/passwd", "root:x:0:0:root:/root:/bin/bash\n")
        try folder.write("root/etc/group", "root:x:0:\naudio:x:29:\n")
        try folder.write("root/boot/firmware/config.txt", "dtparam=audio=on\n")
        let result = try await Workspace.script(
            "install",
            ["--root", folder.path("root"), "--deb", deb] + (livekit.map { ["--deb", $0] } ?? [])
                + ["--board", "rpi-usb-audio", "--overlay", "hark-status-leds"],
            in: folder.url
        )
        #expect(result.status == 0, "\(result.transcript)")
        #expect(folder.exists("root/usr/bin/hark"))
        #expect(folder.exists("root/usr/lib/hark/hark-livekit") == (livekit != nil))
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
