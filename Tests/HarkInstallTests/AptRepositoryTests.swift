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
