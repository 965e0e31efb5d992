import FoundationEssentials
import HarkCore
import HarkIndicators
import HarkPlatform

/// A board file that cannot be used: names the file, the key (a dotted path), the line where libyaml
/// knows it, and what is allowed.
public struct BoardFileError: YAMLFieldError, CustomStringConvertible, Sendable {
    /// The board file.
    public var file: String
    /// The dotted key path, e.g. `button.bias`; empty for the document itself.
    public var key: String
    /// 1-based line in the file, when known.
    public var line: Int?
    /// What is wrong and what is allowed.
    public var problem: String

    /// An error about `key` of `file` at `line`.
    public init(file: String, key: String, line: Int?, problem: String) {
        self.file = file
        self.key = key
        self.line = line
        self.problem = problem
    }

    /// One line, `FILE:LINE: KEY: PROBLEM`, with control characters escaped and its length bounded
    /// (``RemoteText``).
    public var description: String {
        let place = line.map { "\(file):\($0)" } ?? file
        return RemoteText.printable(key.isEmpty ? "\(place): \(problem)" : "\(place): \(key): \(problem)", limit: 1000)
    }
}

/// Reads and validates board files.
public enum BoardLoader {
    /// The largest board file read (64 KiB; the largest shipped is about 2 KiB).
    public static let fileLimit = 64 * 1024

    /// Loads `board/NAME.yaml` (or any path ending in `.yaml`).
    public static func load(path: String) throws -> BoardProfile {
        // A regular file of sane size: never a device or a FIFO that would hang or fill memory (a link is followed).
        if let attributes = try? ReadableFile.attributes(atPath: path) {
            guard (attributes[.type] as? FileAttributeType) == .typeRegular else {
                throw BoardFileError(file: path, key: "", line: nil, problem: "is not a regular file")
            }
            let size = (attributes[.size] as? Int) ?? (attributes[.size] as? UInt64).map { Int(clamping: $0) } ?? 0
            guard size <= fileLimit else {
                throw BoardFileError(file: path, key: "", line: nil, problem: tooLarge(size))
            }
        }
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw BoardFileError(file: path, key: "", line: nil, problem: "cannot read the file (\(error))")
        }
        guard data.count <= fileLimit else {
            throw BoardFileError(file: path, key: "", line: nil, problem: tooLarge(data.count))
        }
        var name = String(path.split(separator: "/").last ?? Substring(path))
        if name.hasSuffix(".yaml") { name.removeLast(5) }
        return try parse(String(decoding: data, as: UTF8.self), file: path, name: name)
    }

    private static func tooLarge(_ size: Int) -> String {
        "is \(size) bytes, larger than \(fileLimit / 1024) KiB; a board file is a few KiB of text"
    }

    /// Every `*.yaml` in `directory`, sorted by name.
    public static func files(in directory: String) throws -> [String] {
        let names = try FileManager.default.contentsOfDirectory(atPath: directory)
        return names.filter { $0.hasSuffix(".yaml") }.sorted().map { directory + "/" + $0 }
    }

    /// Loads every board in `directory`.
    public static func loadAll(directory: String) throws -> [BoardProfile] {
        try files(in: directory).map { try load(path: $0) }
    }

    /// Parses one board file's text; `file` names it in errors, `name` is the profile's name.
    public static func parse(_ text: String, file: String, name: String) throws -> BoardProfile {
        guard let top = try Field.document(text, file: file) else {
            throw BoardFileError(file: file, key: "", line: nil, problem: "the file is empty")
        }
        try top.allow(["name", "description", "detect", "audio", "button", "leds", "gestures", "patterns"])
        let declared = try top.required("name").string()
        guard declared == name else {
            throw try top.required("name").error("is '\(echo(declared))' but the file is \(name).yaml; they must match")
        }
        let leds = try top.required("leds")
        let ledSpec = try ledSpec(leds)
        return BoardProfile(
            name: name,
            description: try top.required("description").string(),
            detect: try detection(top.optional("detect")),
            audio: try audio(top.required("audio")),
            button: try button(top.required("button")),
            leds: ledSpec,
            gestures: try gestures(top.optional("gestures")),
            patterns: try patterns(top.optional("patterns")),
            microphoneLive: try microphoneLive(leds.optional("mic_live"), pixels: ledSpec.pixelCount),
            frameRate: try leds.optional("frame_rate")?.int(in: 1...120) ?? 30
        )
    }

    private static func detection(_ field: Field?) throws -> DetectionRule {
        guard let field else { return DetectionRule() }
        try field.allow(["model", "hat_product", "alsa_card"])
        return DetectionRule(
            model: try field.optional("model")?.strings() ?? [],
            hatProduct: try field.optional("hat_product")?.strings() ?? [],
            alsaCard: try field.optional("alsa_card")?.strings() ?? []
        )
    }

    private static func audio(_ field: Field) throws -> AudioDevices {
        try field.allow(["capture", "playback", "default_volume"])
        return AudioDevices(
            capture: try pcm(field.required("capture")),
            playback: try pcm(field.required("playback")),
            defaultVolume: try field.required("default_volume").int(in: 0...100)
        )
    }

    private static func pcm(_ field: Field) throws -> PCMSpec {
        try field.allow(["pcm", "channels", "rate", "channel_map"])
        let channels = try field.required("channels").int(in: 1...16)
        let mapField = try field.required("channel_map")
        let map = try mapField.ints(in: 0...(channels - 1))
        guard !map.isEmpty else { throw mapField.error("must name at least one channel") }
        let names = try field.required("pcm").strings()
        guard !names.isEmpty else { throw try field.required("pcm").error("must name at least one ALSA PCM") }
        return PCMSpec(
            alternatives: names,
            channels: channels,
            rate: try field.required("rate").oneOf([8000, 16000, 22050, 24000, 32000, 44100, 48000]),
            channelMap: map
        )
    }

    private static func line(_ field: Field) throws -> GPIOLineSpec {
        try field.allow(["chip", "line", "bias", "active_low"])
        let chips = try field.required("chip").strings()
        guard !chips.isEmpty else { throw try field.required("chip").error("must name at least one chip label") }
        return GPIOLineSpec(
            chips: chips,
            offset: try field.required("line").int(in: 0...511),
            bias: try field.optional("bias")?.enumeration(Bias.self) ?? .asIs,
            activeLow: try field.optional("active_low")?.bool() ?? false
        )
    }

    private static func button(_ field: Field) throws -> ButtonSpec {
        let kind = try field.required("kind").oneOf(ButtonSpec.kinds)
        switch kind {
        case "gpio":
            try field.allow(["kind", "chip", "line", "bias", "active_low", "debounce_ms"])
            let spec = try line(field.subset(["chip", "line", "bias", "active_low"]))
            let debounce = try field.optional("debounce_ms")?.int(in: 0...1000) ?? 20
            return .gpio(spec, debounce: .milliseconds(debounce))
        case "evdev":
            try field.allow(["kind", "device", "key_code"])
            return .evdev(
                device: try field.required("device").string(),
                keyCode: try field.required("key_code").int(in: 1...0x2ff)
            )
        case "terminal":
            try field.allow(["kind", "key"])
            return .terminal(key: try field.optional("key")?.string() ?? " ")
        default:
            try field.allow(["kind"])
            return ButtonSpec.none
        }
    }

    private static func ledSpec(_ field: Field) throws -> LEDSpec {
        let kind = try field.required("kind").oneOf(LEDSpec.kinds)
        let common = ["kind", "mic_live", "frame_rate"]
        switch kind {
        case "apa102":
            try field.allow(common + ["count", "spi_device", "speed_hz", "brightness", "power_enable"])
            return .apa102(
                count: try field.required("count").int(in: 1...256),
                spiDevice: try field.required("spi_device").string(),
                speedHz: try field.optional("speed_hz")?.int(in: 100_000...32_000_000) ?? 8_000_000,
                brightness: try field.optional("brightness")?.int(in: 0...31) ?? 31,
                powerEnable: try field.optional("power_enable").map(line)
            )
        case "gpio":
            try field.allow(common + ["lines"])
            let lines = try field.required("lines").list().map(line)
            guard !lines.isEmpty else { throw try field.required("lines").error("must list at least one line") }
            return .gpio(lines: lines)
        case "sysfs":
            try field.allow(common + ["names"])
            let names = try field.required("names").strings()
            for name in names where name.contains("/") || name.isEmpty || name == "." || name == ".." {
                throw try field.required("names").error("'\(echo(name))' is not an LED class device name")
            }
            guard !names.isEmpty else { throw try field.required("names").error("must list at least one LED") }
            return .sysfs(names: names)
        case "terminal":
            try field.allow(common + ["count"])
            return .terminal(count: try field.optional("count")?.int(in: 1...64) ?? 1)
        default:
            try field.allow(common)
            return LEDSpec.none
        }
    }

    /// `leds.mic_live`; its pixel is one of the board's `pixels` LEDs (counted from 0).
    private static func microphoneLive(_ field: Field?, pixels: Int) throws -> MicrophoneLiveMark {
        guard let field else { return MicrophoneLiveMark() }
        try field.allow(["pixel", "color"])
        var pixel = 0
        if let pixelField = try field.optional("pixel") {
            pixel = try pixelField.int(in: 0...255)
            guard pixel < pixels else {
                let leds = pixels == 1 ? "1 LED" : "\(pixels) LEDs"
                throw pixelField.error(
                    "is \(pixel); the board has \(leds) (leds), counted from 0: allowed: 0...\(pixels - 1)"
                )
            }
        }
        return MicrophoneLiveMark(
            pixel: pixel,
            color: try field.optional("color")?.color() ?? RGB(255, 0, 0)
        )
    }

    private static func gestures(_ field: Field?) throws -> GestureMap {
        guard let field else { return .standard }
        try field.allow(InteractionMode.allCases.map(\.rawValue))
        var map = GestureMap([:])
        for mode in InteractionMode.allCases {
            guard let modeField = try field.optional(mode.rawValue) else { continue }
            try modeField.allow(ButtonEvent.allCases.map(\.rawValue))
            var actions: [ButtonEvent: ButtonAction] = [:]
            for event in ButtonEvent.allCases {
                if let action = try modeField.optional(event.rawValue) {
                    actions[event] = try action.enumeration(ButtonAction.self)
                }
            }
            map.actions[mode] = actions
        }
        return map
    }

    private static func patterns(_ field: Field?) throws -> PatternTable {
        guard let field else { return .standard }
        try field.allow(ShownState.all.map(\.name))
        var table = PatternTable.standard
        for state in ShownState.all {
            if let entry = try field.optional(state.name) { table[state] = try pattern(entry) }
        }
        return table
    }

    private static func pattern(_ field: Field) throws -> LEDPattern {
        let kind = try field.required("pattern").oneOf(LEDPattern.kinds)
        func period() throws -> Duration { .milliseconds(try field.required("period_ms").int(in: 50...60_000)) }
        switch kind {
        case "solid":
            try field.allow(["pattern", "color"])
            return .solid(try field.required("color").color())
        case "blink":
            try field.allow(["pattern", "color", "period_ms", "duty"])
            return .blink(
                try field.required("color").color(),
                period: try period(),
                duty: try field.optional("duty")?.int(in: 1...99) ?? 50
            )
        case "breathe":
            try field.allow(["pattern", "color", "period_ms"])
            return .breathe(try field.required("color").color(), period: try period())
        case "spin":
            try field.allow(["pattern", "color", "period_ms", "tail"])
            return .spin(
                try field.required("color").color(),
                period: try period(),
                tail: try field.optional("tail")?.int(in: 0...16) ?? 2
            )
        case "level":
            try field.allow(["pattern", "color", "floor"])
            return .level(
                try field.required("color").color(),
                floor: try field.optional("floor")?.int(in: 0...255) ?? 0
            )
        default:
            try field.allow(["pattern"])
            return .off
        }
    }
}

/// A node of a board file: errors are ``BoardFileError``s.
typealias Field = YAMLField<BoardFileError>

extension YAMLField {
    /// The node as a colour written `#rrggbb`.
    func color() throws(Failure) -> RGB {
        let text = try string()
        guard let color = RGB(hex: text) else { throw error("is '\(echo(text))'; allowed: a colour as #rrggbb") }
        return color
    }
}
