import FoundationEssentials
import HarkBoard
import HarkCore
import HarkIndicators

/// The board half of `hark doctor`: which board this is, whether its file is valid, whether its button
/// line can be requested, its LEDs driven (a short test pattern) and its SPI device is present.
/// Everything it touches is injected, so the tests run it against fakes and temp folders.
public struct BoardDoctor: Sendable {
    public var boardDirectory: String
    /// The root `/proc` facts are read under (`/` on a device).
    public var systemRoot: String
    public var io: BoardIO

    public init(boardDirectory: String, systemRoot: String = "/", io: BoardIO) {
        self.boardDirectory = boardDirectory
        self.systemRoot = systemRoot
        self.io = io
    }

    /// Finds the board (by `name` if given, else by detection) and checks it. Returns the items and the
    /// profile, if one was found.
    public func run(board name: String?) -> (items: [DoctorItem], profile: BoardProfile?) {
        var items: [DoctorItem] = []
        var profiles: [BoardProfile] = []
        for file in (try? BoardLoader.files(in: boardDirectory)) ?? [] {
            do {
                profiles.append(try BoardLoader.load(path: file))
            } catch {
                items.append(
                    DoctorItem("board file", .failed, "\(error)", fix: "correct the file (see board/README.md)")
                )
            }
        }
        if profiles.isEmpty && items.isEmpty {
            items.append(DoctorItem("board files", .failed, "none in \(boardDirectory)", fix: "pass --board-dir"))
            return (items, nil)
        }
        let facts = SystemFacts.read(root: systemRoot)
        let factText =
            "model \(facts.model.map { "'\($0)'" } ?? "unknown"), HAT \(facts.hatProduct.map { "'\($0)'" } ?? "none"), "
            + "sound cards \(facts.alsaCards.isEmpty ? "none" : facts.alsaCards.joined(separator: ", "))"
        let detected = BoardDetection.detect(profiles, facts: facts)
        let profile: BoardProfile
        if let name {
            guard let named = profiles.first(where: { $0.name == name }) else {
                let known = profiles.map(\.name).joined(separator: ", ")
                items.append(DoctorItem("board", .failed, "no board named '\(name)'", fix: "one of: \(known)"))
                return (items, nil)
            }
            profile = named
            if let detected, detected.name != name {
                items.append(
                    DoctorItem(
                        "board",
                        .warning,
                        "\(name) selected, but this looks like \(detected.name) (\(factText))"
                    )
                )
            } else {
                items.append(DoctorItem("board", .ok, "\(name) selected (\(factText))"))
            }
        } else {
            guard let detected else {
                items.append(
                    DoctorItem("board", .failed, "not detected (\(factText))", fix: "select one with --board NAME")
                )
                return (items, nil)
            }
            profile = detected
            items.append(DoctorItem("board", .ok, "detected \(detected.name) (\(factText))"))
        }
        items += check(profile)
        return (items, profile)
    }

    /// The button, LED and SPI checks of one profile.
    public func check(_ profile: BoardProfile) -> [DoctorItem] {
        var items: [DoctorItem] = []
        switch profile.button {
        case .none:
            items.append(DoctorItem("button", .ok, "none on this board (push-to-talk is unavailable)"))
        case .terminal(let key):
            items.append(DoctorItem("button", .ok, "terminal key '\(key)'"))
        case .gpio(let line, _):
            do {
                let source = try io.buttonSource(for: profile)
                let level = try (source as? any GPIOInputLine)?.value()
                let state = level.map { $0 ? "pressed now" : "released" } ?? "requested"
                items.append(
                    DoctorItem("button", .ok, "line \(line.offset) on \(line.chips.joined(separator: "/")): \(state)")
                )
                if level == true {
                    items.append(
                        DoctorItem(
                            "button level",
                            .warning,
                            "reads pressed while nobody presses it",
                            fix: "check bias and active_low in the board file, or the wiring"
                        )
                    )
                }
            } catch {
                items.append(
                    DoctorItem(
                        "button",
                        .failed,
                        "\(error)",
                        fix: "is the line used by an overlay or another program (gpioinfo)? is the user in group gpio?"
                    )
                )
            }
        case .evdev(let device, let code):
            if FileManager.default.fileExists(atPath: device) {
                items.append(DoctorItem("button", .ok, "input device \(device), key code \(code)"))
            } else {
                items.append(
                    DoctorItem(
                        "button",
                        .failed,
                        "\(device) is missing",
                        fix: "load the overlay: dtoverlay=hark-ptt-button"
                    )
                )
            }
        }
        if case .apa102(_, let device, _, _, _) = profile.leds {
            if FileManager.default.fileExists(atPath: device) {
                items.append(DoctorItem("SPI", .ok, "\(device) present"))
            } else {
                items.append(
                    DoctorItem(
                        "SPI",
                        .failed,
                        "\(device) is missing",
                        fix: "enable SPI: dtparam=spi=on in config.txt, then reboot"
                    )
                )
                return items
            }
        }
        do {
            guard let output = try io.ledOutput(for: profile) else {
                items.append(DoctorItem("LEDs", .ok, "none on this board"))
                return items
            }
            let count = profile.leds.pixelCount
            for color in [RGB(255, 0, 0), RGB(0, 255, 0), RGB(0, 0, 255), .off] {
                try output.show(Array(repeating: color, count: count))
            }
            items.append(DoctorItem("LEDs", .ok, "\(count) driven (test pattern red, green, blue, off)"))
        } catch {
            items.append(
                DoctorItem("LEDs", .failed, "\(error)", fix: "check the board file's LED lines and permissions")
            )
        }
        return items
    }
}
