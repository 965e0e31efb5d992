import Foundation
import Testing

/// `scripts/install` into a staged root (`--root`): nothing on this machine changes.
@Suite struct InstallScriptTests {
    /// config.txt as a Raspberry Pi OS image has it, ending inside a conditional section.
    static let bootConfig = """
        # For more options and information see http://rptl.io/configtxt
        dtparam=audio=on
        camera_auto_detect=1
        [cm5]
        dtoverlay=dwc2,dr_mode=host

        """

    /// The lines the installer adds for rpi5-respeaker-2mic plus the push-to-talk overlay.
    static let boardLines = [
        "dtparam=i2c_arm=on", "dtparam=i2s=on", "dtparam=spi=on", "dtoverlay=wm8960-soundcard",
        "dtoverlay=hark-ptt-button,gpio_pin=23",
    ]

    /// A root with the accounts and boot partition of a fresh image (group audio, no gpio or spi).
    private func stagedImage() async throws -> TemporaryFolder {
        let image = try TemporaryFolder()
        try image.write("root/etc/passwd", "root:x:0:0:root:/root:/bin/bash\npi:x:1000:1000::/home/pi:/bin/bash\n")
        try image.write("root/etc/group", "root:x:0:\naudio:x:29:pi\npi:x:1000:\n")
        try image.write("root/boot/firmware/config.txt", Self.bootConfig)
        return image
    }

    private func install(_ image: TemporaryFolder, _ extra: [String]) async throws -> CommandResult {
        try await Workspace.script("install", ["--root", image.path("root")] + extra, in: image.url)
    }

    /// How often each line occurs in config.txt.
    private func count(_ line: String, in config: String) -> Int {
        config.split(separator: "\n", omittingEmptySubsequences: false).filter { $0 == line }.count
    }

    @Test func installTwiceThenUninstall() async throws {
        guard let hark = Workspace.builtHark(),
            Workspace.tool("dtc", package: "device-tree-compiler") != nil
        else { return }
        let image = try await stagedImage()
        let examples = try image.examples()
        let arguments = [
            "--binary", hark, "--board", "rpi5-respeaker-2mic", "--overlay", "hark-ptt-button,gpio_pin=23",
            "--examples", examples,
        ]

        let first = try await install(image, arguments)
        #expect(first.status == 0, "\(first.transcript)")
        var files: [(String, Int)] = [
            ("usr/bin/hark", 0o755),
            ("etc/systemd/system/hark.service", 0o644),
            ("etc/udev/rules.d/70-hark.rules", 0o644),
            ("usr/share/hark/board/rpi5-respeaker-2mic.yaml", 0o644),
            ("usr/share/hark/examples/hark.yaml", 0o644),
            ("usr/share/doc/hark/README.md", 0o644),
            ("etc/hark/hark.yaml", 0o644),
            ("etc/credstore", 0o700),
            ("boot/firmware/overlays/hark-ptt-button.dtbo", 0o644),
            ("boot/firmware/overlays/hark-status-leds.dtbo", 0o644),
            ("boot/firmware/overlays/hark-i2s-mems-mic.dtbo", 0o644),
        ]
        if Workspace.hasWakeRuntime { files += Workspace.wakeRuntimeFiles.map { ($0, 0o644) } }
        // The LiveKit backend's helper built beside hark, and its runtime, go in as the hark-livekit package has them.
        if Workspace.hasLiveKitRuntime { files += Workspace.liveKitFiles.map { ($0.path, $0.mode) } }
        for (file, mode) in files {
            #expect(image.exists("root/\(file)"), "missing /\(file)")
            if image.exists("root/\(file)") {
                let actual = try image.mode("root/\(file)")
                #expect(actual == mode, "/\(file): mode \(String(actual, radix: 8))")
            }
        }
        for example in try FileManager.default.contentsOfDirectory(atPath: examples) {
            #expect(image.exists("root/usr/share/hark/examples/\(example)"), "example \(example) not installed")
        }
        let wants = image.path("root/etc/systemd/system/multi-user.target.wants/hark.service")
        #expect(
            (try? FileManager.default.destinationOfSymbolicLink(atPath: wants)) == "/etc/systemd/system/hark.service"
        )
        let passwd = try image.read("root/etc/passwd")
        #expect(passwd.contains("\nhark:x:"), "\(passwd)")
        #expect(passwd.contains(":/nonexistent:/usr/sbin/nologin"))
        let group = try image.read("root/etc/group")
        for name in ["audio", "gpio", "spi", "input"] {
            let line = group.split(separator: "\n").first { $0.hasPrefix("\(name):") } ?? ""
            #expect(line.split(separator: ":").last?.split(separator: ",").contains("hark") == true, "\(group)")
        }
        #expect(group.contains("audio:x:29:pi,hark"))

        // The owner edits the configuration; a second run keeps it and changes nothing at all.
        try image.write("root/etc/hark/hark.yaml", "# edited by the owner\n")
        let second = try await install(image, arguments)
        #expect(second.status == 0, "\(second.transcript)")
        #expect(second.output.contains("already installed"), "\(second.transcript)")
        #expect(try image.read("root/etc/hark/hark.yaml") == "# edited by the owner\n")
        #expect(try image.read("root/etc/passwd") == passwd)
        #expect(try image.read("root/etc/group") == group)
        let config = try image.read("root/boot/firmware/config.txt")
        for line in Self.boardLines {
            #expect(count(line, in: config) == 1, "\(line) in:\n\(config)")
        }
        #expect(config.hasPrefix(Self.bootConfig), "the existing lines changed:\n\(config)")

        // The staged image's unit still verifies against the binary the installer put there.
        if let analyze = Workspace.tool("systemd-analyze", package: "systemd") {
            try stageSystemBase(in: image, under: "root")
            let verify = try await Workspace.run(
                analyze,
                ["verify", "--root=\(image.path("root"))", "hark.service"],
                in: image.url
            )
            #expect(verify.status == 0 && verify.output.isEmpty && verify.errors.isEmpty, "\(verify.transcript)")
        }

        let removed = try await install(image, ["--uninstall"])
        #expect(removed.status == 0, "\(removed.transcript)")
        for (file, _) in files where !file.hasPrefix("etc/hark") && file != "etc/credstore" {
            #expect(!image.exists("root/\(file)"), "/\(file) survived --uninstall")
        }
        #expect(!image.exists("root/etc/systemd/system/multi-user.target.wants/hark.service"))
        #expect(try image.read("root/boot/firmware/config.txt") == Self.bootConfig)
        #expect(
            try image.read("root/etc/hark/hark.yaml") == "# edited by the owner\n",
            "--uninstall keeps the configuration"
        )

        let purged = try await install(image, ["--uninstall", "--purge"])
        #expect(purged.status == 0, "\(purged.transcript)")
        #expect(!image.exists("root/etc/hark"))
        #expect(!(try image.read("root/etc/passwd")).contains("hark:"))
        #expect(try image.read("root/etc/group").contains("audio:x:29:pi\n"))
    }

    /// A line the owner already has is not repeated in Hark's block, and stays when Hark is removed.
    @Test func existingLinesAreNotRepeated() async throws {
        guard let hark = Workspace.builtHark(),
            Workspace.tool("dtc", package: "device-tree-compiler") != nil
        else { return }
        let image = try await stagedImage()
        let ownConfig = Self.bootConfig + "[all]\ndtparam=spi=on\n"
        try image.write("root/boot/firmware/config.txt", ownConfig)
        let result = try await install(
            image,
            ["--binary", hark, "--board", "rpizero2w-respeaker-2mic", "--no-start", "--examples", try image.examples()]
        )
        #expect(result.status == 0, "\(result.transcript)")
        let config = try image.read("root/boot/firmware/config.txt")
        #expect(count("dtparam=spi=on", in: config) == 1, "\(config)")
        #expect(count("dtoverlay=wm8960-soundcard", in: config) == 1, "\(config)")
        let removed = try await install(image, ["--uninstall"])
        #expect(removed.status == 0, "\(removed.transcript)")
        #expect(try image.read("root/boot/firmware/config.txt") == ownConfig)
    }

    /// Before bookworm the boot partition is /boot; a machine without one (a development host) gets no
    /// overlays and no config.txt, and is told so.
    @Test func bootPartitionIsFoundOrSkipped() async throws {
        guard let hark = Workspace.builtHark(),
            Workspace.tool("dtc", package: "device-tree-compiler") != nil
        else { return }
        let older = try await stagedImage()
        try FileManager.default.removeItem(atPath: older.path("root/boot/firmware"))
        try older.write("root/boot/config.txt", "dtparam=audio=on\n")
        let arguments = ["--binary", hark, "--board", "rpi-usb-audio", "--overlay", "hark-ptt-button"]
        let result = try await install(older, arguments + ["--examples", try older.examples()])
        #expect(result.status == 0, "\(result.transcript)")
        #expect(older.exists("root/boot/overlays/hark-ptt-button.dtbo"))
        #expect(count("dtoverlay=hark-ptt-button", in: try older.read("root/boot/config.txt")) == 1)

        let host = try TemporaryFolder()
        try host.write("root/etc/passwd", "root:x:0:0:root:/root:/bin/bash\n")
        try host.write("root/etc/group", "root:x:0:\n")
        let hostResult = try await install(
            host,
            ["--binary", hark, "--board", "host", "--examples", try host.examples()]
        )
        #expect(hostResult.status == 0, "\(hostResult.transcript)")
        #expect(hostResult.output.contains("no Raspberry Pi boot partition"), "\(hostResult.transcript)")
        #expect(!host.exists("root/boot"))
    }

    @Test func helpTeachesAndBadInputIsRefused() async throws {
        let folder = try TemporaryFolder()
        let help = try await Workspace.script("install", ["--help"], in: folder.url)
        #expect(help.status == 0)
        for word in ["--root", "--binary", "--deb", "--board", "--uninstall", "--purge", "config.txt", "credstore"] {
            #expect(help.output.contains(word), "--help does not mention \(word)")
        }
        let unknownBoard = try await Workspace.script(
            "install",
            ["--root", folder.path(""), "--board", "nope"],
            in: folder.url
        )
        #expect(unknownBoard.status == 2)
        #expect(unknownBoard.errors.contains("rpi5-respeaker-2mic"), "\(unknownBoard.transcript)")
    }

    /// Every script here passes shellcheck (including the package's maintainer scripts).
    @Test func scriptsAreShellcheckClean() async throws {
        guard let shellcheck = Workspace.tool("shellcheck", package: "shellcheck") else { return }
        let scripts = [
            "scripts/install", "scripts/package", "scripts/lib/common.sh", "scripts/lib/wake-runtime.sh",
            "scripts/lib/livekit-runtime.sh", "scripts/generate-livekit-protos",
            "scripts/lib/deb/postinst", "scripts/lib/deb/prerm", "scripts/lib/deb/postrm", "scripts/setup",
            "scripts/test", "scripts/check-test-requirements", ".ci/run",
        ]
        let result = try await Workspace.run(shellcheck, ["-x"] + scripts, in: Workspace.repository)
        #expect(result.status == 0 && result.output.isEmpty, "\(result.transcript)")
    }

    /// The wake-word runtime helper: a folder made from the pinned wheel is recognised as such (so setup, install
    /// and package skip the download), and any changed file makes it unrecognised (so it is fetched again).
    @Test(.enabled(if: Workspace.hasWakeRuntime, "no wake-word runtime in .hark-lib: scripts/setup fetches it"))
    func wakeRuntimeIsCheckedFileByFile() async throws {
        let folder = try TemporaryFolder()
        // -L: the copy is changed below; a checkout's .hark-lib may be a link to a runtime shared with others.
        let copy = try await Workspace.run(
            "/bin/cp",
            ["-RL", Workspace.repository.appendingPathComponent(".hark-lib").path, folder.path("lib")],
            in: folder.url
        )
        #expect(copy.status == 0, "\(copy.transcript)")
        let helper = Workspace.repository.appendingPathComponent("scripts/lib/wake-runtime.sh").path
        func check(_ command: String) async throws -> CommandResult {
            try await Workspace.run(
                "/bin/bash",
                ["-c", "set -euo pipefail; repo=\"$1\"; . \"$2\"; \(command)", "check", folder.path("repo"), helper],
                in: folder.url
            )
        }
        let fetched = try await check("hark_wake_fetch \(folder.path("lib"))")
        #expect(fetched.status == 0, "\(fetched.transcript)")
        #expect(fetched.errors.contains("already in"), "\(fetched.transcript)")
        #expect(try await check("hark_wake_verified \(folder.path("lib")) $(uname -m)").status == 0)
        try folder.write("lib/wake/micro/hey_jarvis.json", "changed")
        #expect(try await check("hark_wake_verified \(folder.path("lib")) $(uname -m)").status == 1)
        #expect(try await check("hark_wake_wheel sparc64").status == 1)
        #expect(try await check("hark_wake_micro_wheel sparc64").status == 1)
    }

    /// The LiveKit runtime helper, likewise: the folder scripts/setup made is recognised (no download), a changed
    /// library is not, and an architecture without a wheel is refused.
    @Test(.enabled(if: Workspace.hasLiveKitRuntime, "no LiveKit runtime in .hark-lib: scripts/setup fetches it"))
    func liveKitRuntimeIsCheckedFileByFile() async throws {
        let folder = try TemporaryFolder()
        let library = Workspace.repository.appendingPathComponent(".hark-lib")
        try folder.copy(library.appendingPathComponent("liblivekit_ffi.so").path, to: "lib/liblivekit_ffi.so")
        for name in ["LICENSE.md", "SHA256SUMS"] {
            try folder.copy(library.appendingPathComponent("livekit/\(name)").path, to: "lib/livekit/\(name)")
        }
        let helper = Workspace.repository.appendingPathComponent("scripts/lib/livekit-runtime.sh").path
        func check(_ command: String) async throws -> CommandResult {
            try await Workspace.run(
                "/bin/bash",
                ["-c", "set -euo pipefail; repo=\"$1\"; . \"$2\"; \(command)", "check", folder.path("repo"), helper],
                in: folder.url
            )
        }
        let fetched = try await check("hark_livekit_fetch \(folder.path("lib"))")
        #expect(fetched.status == 0, "\(fetched.transcript)")
        #expect(fetched.errors.contains("already in"), "\(fetched.transcript)")
        #expect(try await check("hark_livekit_verified \(folder.path("lib")) $(uname -m)").status == 0)
        try folder.write("lib/livekit/LICENSE.md", "changed")
        #expect(try await check("hark_livekit_verified \(folder.path("lib")) $(uname -m)").status == 1)
        #expect(try await check("hark_livekit_wheel sparc64").status == 1)
    }
}
