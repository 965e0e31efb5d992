import Foundation
import HarkTestKit
import Testing

/// `sudo scripts/install` without `--binary` builds in the checkout: as the user who ran sudo, never as
/// root (a root-owned `.build`, package plugins run as root). A copy of the checkout owned by `nobody`, a
/// stand-in `swift` that records who ran it, and a staged root stand in for the real thing.
@Suite struct InstallBuildUserTests {
    /// The checkout's folders the installer reads, copied into `folder` and given to `user`, with a
    /// stand-in `swift` in `bin/` that logs who builds to `build-log` and makes a `hark` script.
    private func checkout(in folder: TemporaryFolder, owner user: String) async throws -> URL {
        let copy = folder.url.appendingPathComponent("checkout")
        try FileManager.default.createDirectory(at: copy, withIntermediateDirectories: true)
        for name in ["scripts", "systemd", "board", "overlays", "config"] {
            let result = try await Workspace.run(
                "/bin/cp",
                ["-a", Workspace.repository.appendingPathComponent(name).path, copy.path],
                in: folder.url
            )
            #expect(result.status == 0, "\(result.transcript)")
        }
        try folder.write(
            "checkout/bin/swift",
            """
            #!/bin/bash
            set -euo pipefail
            case " $* " in
            *" --show-bin-path "*) echo "$PWD/.build/release" ;;
            *)
                product=hark
                previous=""
                for argument in "$@"; do
                    [ "$previous" != --product ] || product="$argument"
                    previous="$argument"
                done
                mkdir -p .build/release
                printf '#!/bin/sh\\necho stand-in %s\\n' "$product" >".build/release/$product"
                chmod 0755 ".build/release/$product"
                echo "$(id -un) HOME=$HOME swift $*" >>build-log
                ;;
            esac

            """
        )
        let chmod = try await Workspace.run(
            "/bin/chmod",
            ["0755", copy.appendingPathComponent("bin/swift").path],
            in: folder.url
        )
        #expect(chmod.status == 0, "\(chmod.transcript)")
        let chown = try await Workspace.run("/bin/chown", ["-R", "\(user):", copy.path], in: folder.url)
        #expect(chown.status == 0, "\(chown.transcript)")
        return copy
    }

    private func install(_ checkout: URL, root: String, environment extra: [String: String]) async throws
        -> CommandResult
    {
        var environment = ChildProcess.inheritedEnvironment
        environment["PATH"] =
            checkout.appendingPathComponent("bin").path + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        environment.merge(extra) { $1 }
        return try await Workspace.run(
            "/bin/bash",
            [
                checkout.appendingPathComponent("scripts/install").path, "--root", root, "--board", "host",
                "--no-start", "--examples", checkout.appendingPathComponent("config").path,
            ],
            in: checkout,
            environment: environment
        )
    }

    private func owner(_ path: String) throws -> Int {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        return (attributes[.ownerAccountID] as? NSNumber)?.intValue ?? -1
    }

    @Test func underSudoTheBuildRunsAsTheUserWhoRanSudo() async throws {
        guard Workspace.tool("dtc", package: "device-tree-compiler") != nil else { return }
        try #require(getuid() == 0, "the installer runs as root; run the tests as root (as CI does)")
        let folder = try TemporaryFolder()
        try folder.write("root/etc/passwd", "root:x:0:0:root:/root:/bin/bash\n")
        try folder.write("root/etc/group", "root:x:0:\naudio:x:29:\n")
        let copy = try await checkout(in: folder, owner: "nobody")

        let result = try await install(copy, root: folder.path("root"), environment: ["SUDO_USER": "nobody"])
        #expect(result.status == 0, "\(result.transcript)")
        let log = try folder.read("checkout/build-log")
        #expect(log.hasPrefix("nobody HOME=/nonexistent swift build -c release --product hark"), "\(log)")
        #expect(!log.contains("root"), "\(log)")
        #expect(try owner(copy.appendingPathComponent(".build").path) == 65534)
        #expect(try owner(copy.appendingPathComponent(".build/release/hark").path) == 65534)
        #expect(result.errors.contains("building as nobody (who ran sudo); installing as root"), "\(result.transcript)")
        // Installed by root, from the user's build.
        #expect(try folder.read("root/usr/bin/hark") == "#!/bin/sh\necho stand-in hark\n")
        // The LiveKit backend's helper is built the same way (installed when the LiveKit runtime is at hand).
        #expect(log.contains("nobody HOME=/nonexistent swift build -c release --product hark-livekit"), "\(log)")
        #expect(try owner(folder.path("root/usr/bin/hark")) == 0)

        // A .build an earlier root build left behind is not written over as root: the fix is named.
        let chown = try await Workspace.run(
            "/bin/chown",
            ["-R", "root:", copy.appendingPathComponent(".build").path],
            in: folder.url
        )
        #expect(chown.status == 0, "\(chown.transcript)")
        let refused = try await install(copy, root: folder.path("root"), environment: ["SUDO_USER": "nobody"])
        #expect(refused.status != 0, "\(refused.transcript)")
        #expect(refused.errors.contains("belongs to root"), "\(refused.transcript)")
        #expect(refused.errors.contains("sudo chown -R nobody \(copy.path)/.build"), "\(refused.transcript)")
        #expect(try folder.read("checkout/build-log") == log, "a build ran as root")
    }
}
