import Foundation
import Testing

/// scripts/check-layers (run by scripts/test) on the real package, and on small packages with a violation planted
/// in each way the layers can be broken: it must pass the first and name the fault in each of the others.
@Suite struct LayerCheckTests {
    /// A package description with the targets given as (name, folder, dependencies), in dump-package's shape.
    private func package(_ targets: [(String, String, [String])]) throws -> String {
        let list: [[String: Any]] = targets.map { name, path, dependencies in
            [
                "name": name, "path": path, "type": "regular",
                "dependencies": dependencies.map { ["byName": [$0, NSNull()]] },
            ]
        }
        let data = try JSONSerialization.data(withJSONObject: ["targets": list])
        return String(decoding: data, as: UTF8.self)
    }

    /// A small package: the core, a device and a backend, each with one file, and `plant` applied to it.
    private func check(
        dependencies: [String: [String]] = [:],
        files: [String: String] = [:]
    ) async throws -> CommandResult {
        let folder = try TemporaryFolder()
        let targets: [(String, String, [String])] = [
            ("HarkCore", "Sources/Core/HarkCore", dependencies["HarkCore"] ?? []),
            ("HarkAudio", "Sources/Devices/HarkAudio", dependencies["HarkAudio"] ?? ["HarkCore"]),
            ("HarkGemini", "Sources/Backends/HarkGemini", dependencies["HarkGemini"] ?? ["HarkCore"]),
        ]
        try folder.write("package.json", try package(targets))
        var sources = [
            "Sources/Core/HarkCore/Core.swift": "public struct Chunk {}\n",
            "Sources/Devices/HarkAudio/Audio.swift": "import HarkCore\n",
            "Sources/Backends/HarkGemini/Gemini.swift": "import HarkCore\nimport Logging\n",
        ]
        sources.merge(files) { $1 }
        for (path, text) in sources { try folder.write(path, text) }
        return try await Workspace.run(
            "/usr/bin/python3",
            [
                Workspace.repository.appendingPathComponent("scripts/check-layers").path, "--package",
                folder.path("package.json"), "--root", folder.path(""),
            ],
            in: folder.url
        )
    }

    @Test func thePackageFollowsItsLayers() async throws {
        let result = try await Workspace.run(
            "/usr/bin/python3",
            [Workspace.repository.appendingPathComponent("scripts/check-layers").path],
            in: Workspace.repository
        )
        #expect(result.status == 0, "\(result.transcript)")
        #expect(result.output.contains("targets follow the layers"), "\(result.transcript)")
    }

    @Test func aCleanSmallPackagePasses() async throws {
        let result = try await check()
        #expect(result.status == 0, "\(result.transcript)")
    }

    @Test func aDependencyOnALaterLayerIsNamed() async throws {
        let result = try await check(dependencies: ["HarkCore": ["HarkAudio"]])
        #expect(result.status == 1, "\(result.transcript)")
        #expect(result.output.contains("HarkCore (Core) depends on HarkAudio (Devices), a later layer"))
    }

    @Test func anImportOfALaterLayerIsNamedWithItsFileAndLine() async throws {
        let result = try await check(files: [
            "Sources/Devices/HarkAudio/Audio.swift": "import HarkCore\nimport HarkGemini\n"
        ])
        #expect(result.status == 1, "\(result.transcript)")
        #expect(
            result.output.contains("Audio.swift:2: HarkAudio (Devices) imports HarkGemini (Backends), a later layer")
        )
    }

    @Test func aBackendThatImportsTheMachineIsRefused() async throws {
        for machine in ["NIOCore", "Glibc", "CALSA", "@preconcurrency import NIOPosix"] {
            let line = machine.contains("import") ? machine : "import \(machine)"
            let result = try await check(files: [
                "Sources/Backends/HarkGemini/Gemini.swift": "import HarkCore\n\(line)\n"
            ])
            #expect(result.status == 1, "\(machine): \(result.transcript)")
            #expect(result.output.contains("Gemini.swift:2: HarkGemini (Backends) imports"), "\(result.transcript)")
        }
    }

    @Test func aDeviceMayUseTheMachine() async throws {
        let result = try await check(files: ["Sources/Devices/HarkAudio/Audio.swift": "import Glibc\nimport HarkCore\n"]
        )
        #expect(result.status == 0, "\(result.transcript)")
    }

    @Test func aTargetOutsideTheLayerFoldersIsNamed() async throws {
        let folder = try TemporaryFolder()
        try folder.write("package.json", try package([("Stray", "Sources/Misc/Stray", [])]))
        let result = try await Workspace.run(
            "/usr/bin/python3",
            [
                Workspace.repository.appendingPathComponent("scripts/check-layers").path, "--package",
                folder.path("package.json"), "--root", folder.path(""),
            ],
            in: folder.url
        )
        #expect(result.status == 1, "\(result.transcript)")
        #expect(result.output.contains("Stray: its folder Sources/Misc/Stray is not Sources/LAYER/NAME"))
    }
}
