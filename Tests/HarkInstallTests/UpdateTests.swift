import Foundation
import Testing

/// hark-update and its units. The script runs through its decisions (scripts/lib/check-hark-update) with the real
/// hark as its judge and a stand-in daemon on the control socket; systemctl, apt-get, apt-cache, apt-mark and
/// dpkg's installing commands are stand-ins on PATH, because this container has no systemd as PID 1 and the
/// tests must not change its packages.
@Suite struct UpdateTests {
    @Test func harkUpdateKeepsGoodReleasesAndRollsBackBadOnes() async throws {
        guard let hark = Workspace.builtHark(), Workspace.tool("python3", package: "python3") != nil else { return }
        let folder = try TemporaryFolder()
        let result = try await Workspace.run(
            "/bin/bash",
            [Workspace.repository.appendingPathComponent("scripts/lib/check-hark-update").path, hark],
            in: folder.url
        )
        #expect(result.status == 0, "\(result.transcript)")
        for fact in [
            "ok: a good release: waited while busy, installed, healthy for health_for, kept (and kept as the next fallback)",
            "ok: a release that restarts: rolled back to the kept package, held (apt-mark hold), recorded with why",
            "ok: hark status and --json show the rollback and why",
            "ok: the held-back release is not tried again",
            "ok: the next good release is taken (the hold lifted)",
            "ok: a power cut mid-unpack: at boot dpkg --configure -a, the previous package back, recorded",
        ] {
            #expect(result.output.contains(fact + "\n"), "missing \(fact):\n\(result.transcript)")
        }
    }

    /// The release and update scripts and their checks pass shellcheck.
    @Test func theScriptsAreShellcheckClean() async throws {
        guard let shellcheck = Workspace.tool("shellcheck", package: "shellcheck") else { return }
        let scripts = [
            "scripts/release", "scripts/lib/hark-update", "scripts/lib/check-hark-update",
            "scripts/lib/check-apt-repository",
        ]
        let result = try await Workspace.run(shellcheck, ["-x"] + scripts, in: Workspace.repository)
        #expect(result.status == 0 && result.output.isEmpty, "\(result.transcript)")
    }

    /// The timer, the updater's unit and the boot unit as systemd 252 reads them, in a staged root that holds
    /// hark, hark-update and hark.service: `systemd-analyze verify` says nothing.
    @Test func theUnitsVerify() async throws {
        guard let analyze = Workspace.tool("systemd-analyze", package: "systemd"), let hark = Workspace.builtHark()
        else { return }
        let root = try TemporaryFolder()
        try stageSystemBase(in: root, under: "root")
        try root.copy(hark, to: "root/usr/bin/hark")
        try root.copy(
            Workspace.repository.appendingPathComponent("scripts/lib/hark-update").path,
            to: "root/usr/lib/hark/hark-update"
        )
        let units = ["hark.service", "hark-update.service", "hark-update.timer", "hark-update-boot.service"]
        for unit in units {
            try root.copy(
                Workspace.repository.appendingPathComponent("systemd/\(unit)").path,
                to: "root/usr/lib/systemd/system/\(unit)"
            )
        }
        let result = try await Workspace.run(
            analyze,
            ["verify", "--root=\(root.path("root"))"] + units.dropFirst(),
            in: root.url
        )
        #expect(result.status == 0, "\(result.transcript)")
        #expect(result.output.isEmpty && result.errors.isEmpty, "systemd-analyze verify said:\n\(result.transcript)")
        // It looks inside the root: without the updater there, it complains about ExecStart=.
        try FileManager.default.removeItem(atPath: root.path("root/usr/lib/hark/hark-update"))
        let missing = try await Workspace.run(
            analyze,
            ["verify", "--root=\(root.path("root"))", "hark-update.service"],
            in: root.url
        )
        #expect((missing.output + missing.errors).contains("hark-update"), "\(missing.transcript)")
    }
}
