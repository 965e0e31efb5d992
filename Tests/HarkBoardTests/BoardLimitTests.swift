import FoundationEssentials
import Glibc
import HarkBoard
import HarkCore
import HarkIndicators
import Testing

/// Board files at their edges: an LED index the board does not have, a byte order mark, sizes, and values
/// echoed into errors.
@Suite struct BoardLimitTests {
    /// A board file for `name` with `leds` as its `leds:` block.
    private func board(_ name: String = "probe", leds: String) -> String {
        """
        name: \(name)
        description: a probe
        audio:
          capture: {pcm: default, channels: 1, rate: 16000, channel_map: [0]}
          playback: {pcm: default, channels: 1, rate: 24000, channel_map: [0]}
          default_volume: 50
        button: {kind: none}
        leds:
        \(leds)
        """
    }

    private func parseError(_ text: String, name: String = "probe") -> BoardFileError? {
        do {
            _ = try BoardLoader.parse(text, file: "/b/\(name).yaml", name: name)
            return nil
        } catch {
            return error as? BoardFileError
        }
    }

    @Test func theMicrophoneLivePixelIsOneOfTheBoardsLEDs() throws {
        let three = "  kind: terminal\n  count: 3\n  mic_live: {pixel: 99}\n"
        let error = try #require(parseError(board(leds: three)))
        #expect(error.key == "leds.mic_live.pixel" && error.line == 11)
        #expect(error.problem == "is 99; the board has 3 LEDs (leds), counted from 0: allowed: 0...2")
        let last = try BoardLoader.parse(
            board(leds: "  kind: terminal\n  count: 3\n  mic_live: {pixel: 2}\n"),
            file: "/b/probe.yaml",
            name: "probe"
        )
        #expect(last.microphoneLive.pixel == 2)
        // Kinds with one pixel (none) or a list of lines: the same rule.
        let none = try #require(parseError(board(leds: "  kind: none\n  mic_live: {pixel: 1}\n")))
        #expect(none.problem.contains("the board has 1 LED (leds)"))
        let sysfs = try #require(parseError(board(leds: "  kind: sysfs\n  names: [a, b]\n  mic_live: {pixel: 2}\n")))
        #expect(sysfs.problem.hasSuffix("allowed: 0...1"))
    }

    @Test func aByteOrderMarkIsAccepted() throws {
        let profile = try BoardLoader.parse(
            "\u{FEFF}" + board(leds: "  kind: terminal\n  count: 2\n"),
            file: "/b/probe.yaml",
            name: "probe"
        )
        #expect(profile.leds == .terminal(count: 2))
    }

    @Test func aHugeOrSpecialBoardFileIsRefusedUnread() throws {
        let folder = FileManager.default.temporaryDirectory.path + "/hark-board-\(UInt64.random(in: 0...UInt64.max))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let huge = folder + "/huge.yaml"
        #expect(FileManager.default.createFile(atPath: huge, contents: Data()))
        #expect(truncate(huge, 200 * 1024 * 1024) == 0)
        let size = #expect(throws: BoardFileError.self) { try BoardLoader.load(path: huge) }
        #expect(
            size?.description == "\(huge): is 209715200 bytes, larger than 64 KiB; a board file is a few KiB of text"
        )
        let fifo = folder + "/fifo.yaml"
        #expect(mkfifo(fifo, 0o600) == 0)
        let special = #expect(throws: BoardFileError.self) { try BoardLoader.load(path: fifo) }
        #expect(special?.description == "\(fifo): is not a regular file")
    }

    @Test func echoedValuesAreBoundedAndPrintable() throws {
        let long = String(repeating: "q", count: 100_000)
        let kind = try #require(parseError(board(leds: "  kind: \(long)\n")))
        #expect(kind.description.utf8.count < 400)
        #expect(kind.description.contains("…[cut, 100000 bytes in all]'; allowed: none, apa102"))
        let hostile = try #require(parseError(board(leds: "  kind: \"x\\n\\e[31m\"\n")))
        #expect(hostile.description.contains("is 'x\\n\\u{1B}[31m'; allowed:"), "\(hostile.description)")
        #expect(!hostile.description.contains("\n") && !hostile.description.contains("\u{1B}"))
        let name = try #require(
            parseError(board("probe", leds: "  kind: none\n").replacing("name: probe", with: "name: \"a\\rb\""))
        )
        #expect(name.description.contains("is 'a\\rb' but the file is probe.yaml"), "\(name.description)")
    }
}
