import Foundation
import Testing

/// scripts/release's signed apt repository, proven with real reprepro, gpg and apt-get on loopback
/// (scripts/lib/check-apt-repository: throwaway keys, tiny packages, a private apt state).
@Suite struct AptRepositoryTests {
    @Test func aptTakesTheMakersReleasesAndRefusesAStrangersSignature() async throws {
        for (tool, package) in [("reprepro", "reprepro"), ("gpg", "gnupg"), ("apt-get", "apt"), ("python3", "python3")]
        {
            guard Workspace.tool(tool, package: package) != nil else { return }
        }
        let folder = try TemporaryFolder()
        let result = try await Workspace.run(
            "/bin/bash",
            [Workspace.repository.appendingPathComponent("scripts/lib/check-apt-repository").path],
            in: folder.url
        )
        #expect(result.status == 0, "\(result.transcript)")
        for fact in [
            "ok: amd64 and arm64 side by side",
            "ok: signed (InRelease, Release.gpg), the public key exported, no secret in the repository",
            "ok: the maker's key: apt-get update, download (the same bytes) and install --simulate",
            "ok: a stranger's key: apt-get update refuses the repository, nothing is downloaded",
        ] {
            #expect(result.output.contains(fact + "\n"), "missing \(fact):\n\(result.transcript)")
        }
    }

    /// The release script refuses to run without a key: a repository is never left unsigned.
    @Test func releaseNeedsAKey() async throws {
        let folder = try TemporaryFolder()
        let result = try await Workspace.script(
            "release",
            ["--repo", folder.path("repo"), "--deb", "/nonexistent.deb"],
            in: folder.url
        )
        #expect(result.status == 2, "\(result.transcript)")
        #expect(result.errors.contains("--key FILE or --key-id ID"), "\(result.transcript)")
        #expect(!folder.exists("repo/dists"))
    }
}

/// The package built with a repository (scripts/release --url) and scripts/install --apt-source add the same
/// deb822 source, verified with the maker's key; the package carries hark-update and its units.
@Suite struct AptSourceTests {
    @Test func thePackageAndTheInstallerAddTheSignedSource() async throws {
        guard Workspace.tool("dpkg-deb", package: "dpkg") != nil,
            Workspace.tool("dtc", package: "device-tree-compiler") != nil
        else { return }
        let folder = try TemporaryFolder()
        try folder.write("maker.gpg", "a stand-in for the maker's public key\n")
        let url = "https://releases.example/hark"
        let packaged = try await Workspace.script(
            "package",
            [
                "--binary", "/bin/true", "--livekit-binary", "/bin/true", "--output", folder.path("out"),
                "--examples", try folder.examples(), "--fast", "--apt-source", url, "--apt-key",
                folder.path("maker.gpg"),
            ],
            in: folder.url
        )
        #expect(packaged.status == 0, "\(packaged.transcript)")
        let debs = try FileManager.default.contentsOfDirectory(atPath: folder.path("out"))
        let deb = folder.path("out/" + (try #require(debs.first { $0.hasPrefix("hark_") })))
        let dpkgDeb = try #require(Workspace.tool("dpkg-deb", package: "dpkg"))
        let conffiles = try await Workspace.run(dpkgDeb, ["-I", deb, "conffiles"], in: folder.url)
        #expect(
            conffiles.output == "/etc/hark/hark.yaml\n/etc/apt/sources.list.d/hark.sources\n",
            "\(conffiles.transcript)"
        )
        _ = try await Workspace.run(dpkgDeb, ["-x", deb, folder.path("unpacked")], in: folder.url)
        let source = try folder.read("unpacked/etc/apt/sources.list.d/hark.sources")
        for line in [
            "Types: deb", "URIs: \(url)", "Suites: stable", "Components: main",
            "Signed-By: /usr/share/keyrings/hark-archive-keyring.gpg",
        ] {
            #expect(source.split(separator: "\n").contains(Substring(line)), "no \(line) in:\n\(source)")
        }
        #expect(
            try folder.read("unpacked/usr/share/keyrings/hark-archive-keyring.gpg") == (try folder.read("maker.gpg"))
        )
        #expect(try folder.mode("unpacked/usr/lib/hark/hark-update") == 0o755)
        for unit in ["hark-update.service", "hark-update.timer", "hark-update-boot.service"] {
            #expect(folder.exists("unpacked/usr/lib/systemd/system/\(unit)"), "\(unit) is not in the package")
        }

        // The installer, into a staged root, from the package: the same source, and the package kept for a rollback.
        try folder.write("root/etc/passwd", "root:x:0:0:root:/root:/bin/bash\n")
        try folder.write("root/etc/group", "root:x:0:\n")
        let installed = try await Workspace.script(
            "install",
            ["--root", folder.path("root"), "--deb", deb, "--apt-source", url, "--apt-key", folder.path("maker.gpg")],
            in: folder.url
        )
        #expect(installed.status == 0, "\(installed.transcript)")
        #expect(try folder.read("root/etc/apt/sources.list.d/hark.sources") == source)
        #expect(folder.exists("root/var/cache/hark/" + URL(fileURLWithPath: deb).lastPathComponent))
        let again = try await Workspace.script(
            "install",
            ["--root", folder.path("root"), "--deb", deb, "--apt-source", url, "--apt-key", folder.path("maker.gpg")],
            in: folder.url
        )
        #expect(again.output.contains("already installed: nothing changed"), "\(again.transcript)")
        let refused = try await Workspace.script(
            "install",
            ["--root", folder.path("root"), "--apt-source", url],
            in: folder.url
        )
        #expect(refused.status == 2 && refused.errors.contains("--apt-key"), "\(refused.transcript)")
    }
}
