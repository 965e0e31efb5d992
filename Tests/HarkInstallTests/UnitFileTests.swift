import Foundation
import Testing

/// `systemd/hark.service` as systemd 252 reads it, in a staged root that holds the built `hark`.
@Suite struct UnitFileTests {
    /// A staged root: the built hark at /usr/bin/hark, the unit at /etc/systemd/system/hark.service, and
    /// the system base (targets, slices, /bin/kill) that `systemd-analyze --root` resolves against.
    private func stagedRoot(withBinary: Bool = true) async throws -> TemporaryFolder? {
        guard let hark = Workspace.builtHark() else { return nil }
        let root = try TemporaryFolder()
        try stageSystemBase(in: root, under: "root")
        if withBinary { try root.copy(hark, to: "root/usr/bin/hark") }
        try root.copy(
            Workspace.repository.appendingPathComponent("systemd/hark.service").path,
            to: "root/etc/systemd/system/hark.service"
        )
        return root
    }

    /// `systemd-analyze verify` exits 0 even when it warns about an unknown key: any output fails.
    @Test func verifyPrintsNothing() async throws {
        guard let analyze = Workspace.tool("systemd-analyze", package: "systemd"),
            let root = try await stagedRoot()
        else { return }
        let result = try await Workspace.run(
            analyze,
            ["verify", "--root=\(root.path("root"))", "hark.service"],
            in: root.url
        )
        #expect(result.status == 0, "\(result.transcript)")
        #expect(result.output.isEmpty && result.errors.isEmpty, "systemd-analyze verify said:\n\(result.transcript)")
    }

    /// The check above is worth something only if verify looks inside the staged root: without the
    /// binary there, it must complain about ExecStart=.
    @Test func verifyChecksTheBinaryInsideTheStagedRoot() async throws {
        guard let analyze = Workspace.tool("systemd-analyze", package: "systemd"),
            let root = try await stagedRoot(withBinary: false)
        else { return }
        let result = try await Workspace.run(
            analyze,
            ["verify", "--root=\(root.path("root"))", "hark.service"],
            in: root.url
        )
        #expect((result.output + result.errors).contains("/usr/bin/hark"), "\(result.transcript)")
    }

    /// The exposure score of `systemd-analyze security --offline=true` (0 best, 10 worst): reported, not
    /// a gate; the goal is 3.0 or less.
    @Test func securityExposureIsReported() async throws {
        guard let analyze = Workspace.tool("systemd-analyze", package: "systemd"),
            let root = try await stagedRoot()
        else { return }
        let result = try await Workspace.run(
            analyze,
            ["security", "--offline=true", "--root=\(root.path("root"))", "--no-pager", "hark.service"],
            in: root.url
        )
        #expect(result.status == 0, "\(result.transcript)")
        let score = exposureScore(in: result.output)
        #expect(score != nil, "no exposure level in:\n\(result.transcript)")
        if let score {
            print("hark.service exposure (systemd-analyze security --offline=true): \(score) (goal: 3.0 or less)")
        }
    }

    /// Every line of the unit that sets something has a comment saying why, right above it (or above
    /// a pair of related lines such as Wants=/After=).
    @Test func everySettingIsCommented() async throws {
        let unit = try String(
            contentsOf: Workspace.repository.appendingPathComponent("systemd/hark.service"),
            encoding: .utf8
        )
        var settingsSinceComment = 0
        for line in unit.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("#") {
                settingsSinceComment = 0
            } else if line.hasPrefix("[") || line.isEmpty {
                continue
            } else {
                settingsSinceComment += 1
                #expect(settingsSinceComment <= 2, "no comment near: \(line)")
            }
        }
    }
}
