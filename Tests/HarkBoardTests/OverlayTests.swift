import Foundation
import HarkTestKit
import Testing

/// The repository's `overlays/` folder.
let overlayDirectory: String = {
    var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
    parts.removeLast(3)
    return parts.joined(separator: "/") + "/overlays"
}()

/// `dtc` if it is installed (scripts/setup installs Debian's device-tree-compiler).
let dtcPath: String? = ["/usr/bin/dtc", "/usr/local/bin/dtc"].first { FileManager.default.isExecutableFile(atPath: $0) }

@Suite struct OverlayTests {
    static let sources: [String] = {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: overlayDirectory)) ?? []
        return names.filter { $0.hasSuffix(".dts") }.sorted()
    }()

    @Test func theOverlaysAreThere() {
        #expect(Self.sources == ["hark-i2s-mems-mic.dts", "hark-ptt-button.dts", "hark-status-leds.dts"])
    }

    @Test(
        .enabled(if: dtcPath != nil, "needs dtc (Debian device-tree-compiler; scripts/setup installs it)"),
        arguments: sources
    )
    func compilesWithoutWarnings(_ name: String) async throws {
        let dtc = try #require(dtcPath)
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(getpid()).dtbo")
        defer { try? FileManager.default.removeItem(at: output) }
        let child = try await ChildProcess.run(
            dtc,
            ["-@", "-I", "dts", "-O", "dtb", "-o", output.path, overlayDirectory + "/" + name]
        )
        let text = child.text
        #expect(child.status == 0, "\(name): \(text)")
        #expect(text.isEmpty, "\(name): dtc said: \(text)")
        let size = (try FileManager.default.attributesOfItem(atPath: output.path)[.size] as? Int) ?? 0
        #expect(size > 0)
    }

    @Test func everyOverlayIsDocumentedInTheReadme() throws {
        let readme = try String(contentsOfFile: overlayDirectory + "/README.md", encoding: .utf8)
        for source in Self.sources {
            let name = String(source.dropLast(4))
            #expect(readme.contains("Name:   \(name)\n"), "\(name) has no Name: block")
            #expect(readme.contains("Load:   dtoverlay=\(name)"), "\(name) has no Load: line")
        }
    }
}
