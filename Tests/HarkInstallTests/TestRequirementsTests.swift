import Foundation
import Testing

/// scripts/check-test-requirements, which CI runs before the tests so that a run cannot pass by skipping them: it
/// passes on this checkout (scripts/setup has run), and names each missing part in a checkout that lacks them.
@Suite struct TestRequirementsTests {
    private func copyOfTheScripts() throws -> TemporaryFolder {
        let folder = try TemporaryFolder()
        for file in [
            "scripts/check-test-requirements", "scripts/lib/wake-runtime.sh", "scripts/lib/livekit-runtime.sh",
        ] {
            try folder.copy(Workspace.repository.appendingPathComponent(file).path, to: file)
        }
        return folder
    }

    @Test func thisCheckoutHasEverythingTheTestsUse() async throws {
        let result = try await Workspace.run(
            "/bin/bash",
            [Workspace.repository.appendingPathComponent("scripts/check-test-requirements").path],
            in: Workspace.repository
        )
        #expect(result.status == 0, "\(result.transcript)")
    }

    @Test func aCheckoutWithoutTheRuntimesAndTheStandInIsRefusedWithWhatIsMissing() async throws {
        let folder = try copyOfTheScripts()
        let result = try await Workspace.run(
            "/bin/bash",
            [folder.path("scripts/check-test-requirements")],
            in: folder.url
        )
        #expect(result.status == 1, "\(result.transcript)")
        #expect(result.output.contains("5 part(s) the tests need are missing"), "\(result.transcript)")
        for part in [
            "the wake-word runtime", "the wake-word references", "the LiveKit runtime", "the LiveKit stand-in",
            "the MCP test server",
        ] {
            #expect(result.output.contains(part), "\(part): \(result.transcript)")
        }
    }

    @Test func aDamagedRuntimeIsMissing() async throws {
        let folder = try copyOfTheScripts()
        let copy = try await Workspace.run(
            "/bin/cp",
            ["-RL", Workspace.repository.appendingPathComponent(".hark-lib").path, folder.path(".hark-lib")],
            in: folder.url
        )
        #expect(copy.status == 0, "\(copy.transcript)")
        // A microWakeWord manifest changed is as missing as an openWakeWord model changed.
        for damaged in [".hark-lib/wake/micro/okay_nabu.json", ".hark-lib/wake/okay_nabu.tflite"] {
            try folder.write(damaged, "damaged")
            let result = try await Workspace.run(
                "/bin/bash",
                [folder.path("scripts/check-test-requirements")],
                in: folder.url
            )
            #expect(result.status == 1, "\(result.transcript)")
            #expect(result.output.contains("the wake-word runtime in .hark-lib"), "\(result.transcript)")
            #expect(!result.output.contains("the LiveKit runtime in .hark-lib"), "\(result.transcript)")
        }
    }
}
