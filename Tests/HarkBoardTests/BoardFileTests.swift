import FoundationEssentials
import HarkBoard
import HarkCore
import HarkIndicators
import Testing

/// The repository's `board/` folder.
let boardDirectory: String = {
    var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
    parts.removeLast(3)  // Tests/HarkBoardTests/BoardFileTests.swift
    return parts.joined(separator: "/") + "/board"
}()

@Suite struct BoardFileTests {
    @Test func everyBoardFileMeetsTheSchema() throws {
        let files = try BoardLoader.files(in: boardDirectory)
        #expect(files.count >= 6)
        for file in files {
            let board = try BoardLoader.load(path: file)
            #expect(!board.description.isEmpty, "\(file)")
            #expect(board.audio.capture.channelMap.allSatisfy { $0 < board.audio.capture.channels }, "\(file)")
            #expect(board.microphoneLive.pixel < board.leds.pixelCount, "\(file): mic-live pixel is off the strip")
            // Every state is shown somehow: idle may be dark, but no overlay may look like idle on this board.
            let engine = board.makeLEDEngine()
            #expect(engine.pixelCount == board.leds.pixelCount)
            for overlay in [Overlay.booting, .fatal, .error, .offline] {
                #expect(board.patterns[.overlay(overlay)] != .off, "\(file): \(overlay) is dark")
            }
        }
    }

    @Test func theSupportedBoardsAreAllThere() throws {
        let names = Set(try BoardLoader.loadAll(directory: boardDirectory).map(\.name))
        #expect(
            names.isSuperset(of: [
                "host", "rpi4-respeaker-2mic", "rpi5-respeaker-2mic", "rpizero2w-respeaker-2mic",
                "rpi4-respeaker-4mic", "rpi-usb-audio",
            ])
        )
    }

    @Test func theRespeakerProfilesSayWhatTheHardwareIs() throws {
        let pi5 = try BoardLoader.load(path: boardDirectory + "/rpi5-respeaker-2mic.yaml")
        guard case .gpio(let line, let debounce) = pi5.button else {
            Issue.record("the Pi 5 button is not a GPIO line")
            return
        }
        #expect(line == GPIOLineSpec(chips: ["pinctrl-rp1"], offset: 17, bias: .pullUp, activeLow: true))
        #expect(debounce == .milliseconds(20))
        #expect(
            pi5.leds
                == .apa102(count: 3, spiDevice: "/dev/spidev0.1", speedHz: 8_000_000, brightness: 10, powerEnable: nil)
        )
        #expect(pi5.gestures.action(for: .press, in: .pushToTalk) == .talkStart)
        #expect(pi5.patterns[.conversation(.thinking)] == .spin(RGB(0, 160, 255), period: .milliseconds(900), tail: 1))

        let array = try BoardLoader.load(path: boardDirectory + "/rpi4-respeaker-4mic.yaml")
        guard case .apa102(let count, _, _, _, let power) = array.leds else {
            Issue.record("the 4-mic array's LEDs are not APA102")
            return
        }
        #expect(count == 12)
        #expect(power == GPIOLineSpec(chips: ["pinctrl-bcm2711"], offset: 5, bias: .asIs, activeLow: false))
        #expect(array.audio.capture.channelMap == [0, 1, 2, 3])
    }

    @Test func errorsNameTheFileTheKeyTheLineAndWhatIsAllowed() throws {
        let good = try String(contentsOfFile: boardDirectory + "/rpi4-respeaker-2mic.yaml", encoding: .utf8)
        func failure(_ text: String) -> BoardFileError? {
            do {
                _ = try BoardLoader.parse(text, file: "board/rpi4-respeaker-2mic.yaml", name: "rpi4-respeaker-2mic")
                return nil
            } catch let error as BoardFileError {
                return error
            } catch {
                return nil
            }
        }
        #expect(failure(good) == nil)

        let bias = try #require(failure(good.replacingFirst("bias: pull-up", with: "bias: pullup")))
        #expect(bias.key == "button.bias")
        #expect(bias.line == 25)
        #expect(
            bias.description
                == "board/rpi4-respeaker-2mic.yaml:25: button.bias: is 'pullup'; allowed: as-is, disabled, pull-up, pull-down"
        )

        let unknown = try #require(failure(good.replacingFirst("  debounce_ms: 20", with: "  debounce: 20")))
        #expect(unknown.key == "button.debounce")
        #expect(unknown.description.contains("allowed here: kind, chip, line, bias, active_low, debounce_ms"))

        let volume = try #require(failure(good.replacingFirst("default_volume: 70", with: "default_volume: 170")))
        #expect(volume.description.hasSuffix("audio.default_volume: is 170; allowed: 0...100"))

        let channel = try #require(
            failure(good.replacingFirst("channel_map: [0, 1]      # left", with: "channel_map: [0, 2] # x"))
        )
        #expect(channel.key == "audio.capture.channel_map[1]")

        let color = try #require(failure(good.replacingFirst("\"#0000ff\"", with: "blue")))
        #expect(color.key == "patterns.listening.color")
        #expect(color.problem == "is 'blue'; allowed: a colour as #rrggbb")

        let pattern = try #require(failure(good.replacingFirst("pattern: spin", with: "pattern: twirl")))
        #expect(pattern.problem == "is 'twirl'; allowed: off, solid, blink, breathe, spin, level")

        let missing = try #require(failure(good.replacingFirst("  line: 17", with: "")))
        #expect(missing.key == "button.line")
        #expect(missing.problem == "is required")

        let renamed = try #require(failure(good.replacingFirst("name: rpi4-respeaker-2mic", with: "name: other")))
        #expect(renamed.key == "name")

        let yaml = try #require(failure("name: [unclosed"))
        #expect(yaml.problem.hasPrefix("not valid YAML"))
    }

    @Test func detectionUsesTheModelTheHatAndTheSoundCards() throws {
        let boards = try BoardLoader.loadAll(directory: boardDirectory)
        func detect(_ facts: SystemFacts) -> String? { BoardDetection.detect(boards, facts: facts)?.name }

        #expect(
            detect(SystemFacts(model: "Raspberry Pi 5 Model B Rev 1.0", alsaCards: ["vc4hdmi0", "seeed2micvoicec"]))
                == "rpi5-respeaker-2mic"
        )
        #expect(
            detect(SystemFacts(model: "Raspberry Pi 4 Model B Rev 1.4", alsaCards: ["Headphones", "seeed4micvoicec"]))
                == "rpi4-respeaker-4mic"
        )
        #expect(
            detect(SystemFacts(model: "Raspberry Pi Zero 2 W Rev 1.0", alsaCards: ["seeed2micvoicec"]))
                == "rpizero2w-respeaker-2mic"
        )
        #expect(detect(SystemFacts(model: "Raspberry Pi 5 Model B Rev 1.0", alsaCards: ["Device"])) == "rpi-usb-audio")
        #expect(detect(SystemFacts(model: "Raspberry Pi 5 Model B Rev 1.0", alsaCards: ["vc4hdmi0"])) == nil)
        // host is never detected: a laptop with a USB dongle is still selected by name.
        #expect(detect(SystemFacts(model: nil, alsaCards: ["PCH", "Device"])) == nil)
    }

    @Test func systemFactsAreReadFromAnInjectableRoot() throws {
        let root = FileManager.default.temporaryDirectory.path + "/hark-board-\(UInt64.random(in: 0...UInt64.max))"
        defer { try? FileManager.default.removeItem(atPath: root) }
        func write(_ path: String, _ text: String) throws {
            let full = root + path
            try FileManager.default.createDirectory(
                atPath: String(full[..<full.lastIndex(of: "/")!]),
                withIntermediateDirectories: true
            )
            try Data(text.utf8).write(to: URL(fileURLWithPath: full))
        }
        try write("/proc/device-tree/model", "Raspberry Pi 4 Model B Rev 1.4\0")
        try write("/proc/device-tree/hat/product", "Some HAT\0")
        try write("/proc/asound/card0/id", "Headphones\n")
        try write("/proc/asound/card10/id", "Device\n")
        try write("/proc/asound/card2/id", "seeed2micvoicec\n")
        try write("/proc/asound/cards", " 0 [Headphones     ]: bcm2835_headpho - bcm2835 Headphones\n")
        let facts = SystemFacts.read(root: root)
        #expect(
            facts
                == SystemFacts(
                    model: "Raspberry Pi 4 Model B Rev 1.4",
                    hatProduct: "Some HAT",
                    alsaCards: ["Headphones", "seeed2micvoicec", "Device"]
                )
        )
        #expect(SystemFacts.read(root: root + "/nothing") == SystemFacts())
    }
}

extension String {
    /// This text with the first `target` replaced (the test fails to find its error if `target` is absent).
    func replacingFirst(_ target: String, with replacement: String) -> String {
        guard let range = firstRange(of: target) else { return self }
        var copy = self
        copy.replaceSubrange(range, with: replacement)
        return copy
    }
}

@Suite struct PCMAlternativeTests {
    @Test func theCardThatIsPresentIsOpened() throws {
        let profile = try BoardLoader.load(path: boardDirectory + "/rpi5-respeaker-2mic.yaml")
        let capture = profile.audio.capture
        #expect(capture.alternatives.count == 2)
        #expect(capture.resolved(cards: ["vc4hdmi0", "wm8960soundcard"]) == "plughw:CARD=wm8960soundcard,DEV=0")
        #expect(capture.resolved(cards: ["seeed2micvoicec"]) == "plughw:CARD=seeed2micvoicec,DEV=0")
        // Neither present: the first, so the error names what the board file prefers.
        #expect(capture.resolved(cards: []) == "plughw:CARD=seeed2micvoicec,DEV=0")
        let host = try BoardLoader.load(path: boardDirectory + "/host.yaml")
        #expect(host.audio.capture.resolved(cards: ["Device"]) == "default")
    }
}
