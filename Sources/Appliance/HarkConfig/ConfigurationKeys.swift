import HarkBackends
import HarkCore
import HarkMedia
import HarkWake

/// A value that does not fit a key: the problem, without where it came from (the loader adds that).
struct InvalidValue: Error {
    var problem: String
}

/// A value as the rendered configuration writes it.
enum RenderedValue: Equatable {
    /// YAML's null (`~`): not set.
    case null
    /// Written as is: numbers, booleans, durations, enumeration values.
    case plain(String)
    /// Free text: quoted or written as a block when it needs it.
    case text(String)
}

/// One key of the configuration file. The file key (`session.idle_timeout`) and the environment
/// variable that overrides it (`HARK_SESSION_IDLE_TIMEOUT`) both come from `path`, so they cannot drift.
struct ConfigurationKey {
    /// The dotted key path.
    var path: String
    /// The value is a file or folder: a relative path is taken relative to the configuration file's
    /// folder (in the file) or the current directory (in the environment). In a list, each item with a `/`.
    var isPath = false
    /// The value is a list: comma-separated text, or a YAML sequence of single values.
    var isList = false
    /// Sets the value from its text; nil is YAML's null (or an empty environment variable).
    var set: (inout ApplianceConfiguration, String?) throws -> Void
    /// The value as the rendered configuration shows it.
    var render: (ApplianceConfiguration) -> RenderedValue

    /// The section (`gemini`), or "" for a top-level key.
    var section: String {
        guard let dot = path.firstIndex(of: ".") else { return "" }
        return String(path[..<dot])
    }

    /// The key's name inside its section (`idle_timeout`).
    var name: String {
        guard let dot = path.firstIndex(of: ".") else { return path }
        return String(path[path.index(after: dot)...])
    }

    /// The environment variable that overrides the key: `HARK_` and the path, uppercased, dots as `_`.
    var environmentName: String { ConfigurationKey.environmentName(path) }

    static func environmentName(_ path: String) -> String {
        "HARK_" + path.uppercased().map { $0 == "." ? "_" : String($0) }.joined()
    }
}

/// The longest value an error message echoes, in Unicode scalars; a longer one is cut with a marker.
let echoLimit = 120

/// `(got "value")`, or `(got nothing)` for null: the value printable and bounded (``RemoteText``), so a
/// huge or hostile value cannot flood or forge the one-line error.
func got(_ text: String?) -> String {
    guard let text else { return "(got nothing)" }
    return "(got \"\(RemoteText.printable(text, limit: echoLimit))\")"
}

extension ConfigurationKey {
    typealias Path<Value> = WritableKeyPath<ApplianceConfiguration, Value>

    /// A key of a backend's section, read through its ``SettingKey``.
    static func setting(_ section: String, _ key: SettingKey) -> ConfigurationKey {
        ConfigurationKey(
            path: section + "." + key.name,
            isPath: key.isPath,
            set: { configuration, text in
                do {
                    configuration.backends[section, default: BackendSettings(values: [:])][key.name] = try key.parse(
                        text
                    )
                } catch {
                    throw InvalidValue(problem: (error as? SettingError)?.problem ?? "\(error)")
                }
            },
            render: { configuration in
                switch configuration.backends[section]?[key.name] {
                case nil: .null
                case .text(let text)?:
                    if case .choice = key.kind { .plain(text) } else { .text(text) }
                case let value?: .plain(value.written)
                }
            }
        )
    }

    /// Wake words: built-in names or paths of models (a microWakeWord manifest `.json`, or a `.tflite`), separated by
    /// commas (or a YAML list), at least one (`required`) and at most `limit`. A path is taken relative to the
    /// configuration file's folder; the models' presence is checked where the runtime is (`hark config check`,
    /// `hark run`).
    static func wakeWords(
        _ path: String,
        _ keyPath: Path<[String]>,
        required: Bool = true,
        limit: Int = WakeSettings.wordLimit
    ) -> ConfigurationKey {
        ConfigurationKey(
            path: path,
            isPath: true,
            isList: true,
            set: { configuration, text in
                let items = SettingKey.items(text ?? "")
                guard !required || !items.isEmpty else {
                    throw InvalidValue(problem: "must name at least one wake word \(got(text))")
                }
                guard items.count <= limit else {
                    throw InvalidValue(problem: "names more than \(limit) wake words")
                }
                for item in items {
                    let word: String
                    do {
                        word = try WakeRuntime.splitThreshold(item).nameOrPath
                    } catch {
                        throw InvalidValue(problem: "\(error) \(got(item))")
                    }
                    let isModel = WakeRuntime.isModelPath(word)
                    guard isModel || WakeRuntime.builtInWords.contains(word) else {
                        throw InvalidValue(
                            problem:
                                "must be built-in wake words (\(WakeRuntime.builtInWords.joined(separator: ", "))) "
                                + "or paths of models (a microWakeWord manifest .json, or a .tflite), each with its "
                                + "own threshold if wanted (alexa:0.7) \(got(item))"
                        )
                    }
                    guard !isModel || word.hasSuffix(".tflite") || word.hasSuffix(".json") else {
                        throw InvalidValue(
                            problem: "a wake-word model must be a .tflite file or its .json manifest \(got(item))"
                        )
                    }
                }
                do {
                    configuration[keyPath: keyPath] = try WakeRuntime.distinctWords(items)
                } catch {
                    throw InvalidValue(problem: "\(error) \(got(text))")
                }
            },
            render: { $0[keyPath: keyPath].isEmpty ? .null : .plain($0[keyPath: keyPath].joined(separator: ", ")) }
        )
    }

    /// Text that must not be empty; `check` may refuse it further.
    static func text(
        _ path: String,
        _ keyPath: Path<String>,
        isPath: Bool = false,
        check: @escaping (String) throws -> Void = { _ in }
    ) -> ConfigurationKey {
        ConfigurationKey(
            path: path,
            isPath: isPath,
            set: { configuration, text in
                guard let text, !text.isEmpty else { throw InvalidValue(problem: "must not be empty \(got(text))") }
                try check(text)
                configuration[keyPath: keyPath] = text
            },
            render: { .text($0[keyPath: keyPath]) }
        )
    }

    /// Text or nothing (null or empty: not set).
    static func optionalText(
        _ path: String,
        _ keyPath: Path<String?>,
        isPath: Bool = false,
        check: @escaping (String) throws -> Void = { _ in }
    ) -> ConfigurationKey {
        ConfigurationKey(
            path: path,
            isPath: isPath,
            set: { configuration, text in
                guard let text, !text.isEmpty else {
                    configuration[keyPath: keyPath] = nil
                    return
                }
                try check(text)
                configuration[keyPath: keyPath] = text
            },
            render: { configuration in configuration[keyPath: keyPath].map { .text($0) } ?? .null }
        )
    }

    /// true or false (also yes/no, on/off, 1/0).
    static func flag(_ path: String, _ keyPath: Path<Bool>) -> ConfigurationKey {
        ConfigurationKey(
            path: path,
            set: { configuration, text in
                switch text?.lowercased() {
                case "true", "yes", "on", "1": configuration[keyPath: keyPath] = true
                case "false", "no", "off", "0": configuration[keyPath: keyPath] = false
                default: throw InvalidValue(problem: "must be true or false \(got(text))")
                }
            },
            render: { .plain($0[keyPath: keyPath] ? "true" : "false") }
        )
    }

    /// One of `allowed`.
    static func choice(_ path: String, _ keyPath: Path<String>, allowed: [String]) -> ConfigurationKey {
        ConfigurationKey(
            path: path,
            set: { configuration, text in
                guard let text, allowed.contains(text) else {
                    throw InvalidValue(problem: "must be one of \(allowed.joined(separator: ", ")) \(got(text))")
                }
                configuration[keyPath: keyPath] = text
            },
            render: { .plain($0[keyPath: keyPath]) }
        )
    }

    /// A case of `T`, by raw value.
    static func choice<T: RawRepresentable & CaseIterable>(
        _ path: String,
        _ keyPath: Path<T>
    ) -> ConfigurationKey where T.RawValue == String {
        let allowed = T.allCases.map(\.rawValue)
        return ConfigurationKey(
            path: path,
            set: { configuration, text in
                guard let text, let value = T(rawValue: text) else {
                    throw InvalidValue(problem: "must be one of \(allowed.joined(separator: ", ")) \(got(text))")
                }
                configuration[keyPath: keyPath] = value
            },
            render: { .plain($0[keyPath: keyPath].rawValue) }
        )
    }

    /// A whole number in `range`.
    static func number(_ path: String, _ keyPath: Path<Int>, in range: ClosedRange<Int>) -> ConfigurationKey {
        ConfigurationKey(
            path: path,
            set: { configuration, text in configuration[keyPath: keyPath] = try wholeNumber(text, in: range) },
            render: { .plain(String($0[keyPath: keyPath])) }
        )
    }

    /// A whole number in `range`, or nothing.
    static func optionalNumber(_ path: String, _ keyPath: Path<Int?>, in range: ClosedRange<Int>) -> ConfigurationKey {
        ConfigurationKey(
            path: path,
            set: { configuration, text in
                guard let text, !text.isEmpty else {
                    configuration[keyPath: keyPath] = nil
                    return
                }
                configuration[keyPath: keyPath] = try wholeNumber(text, in: range)
            },
            render: { configuration in configuration[keyPath: keyPath].map { .plain(String($0)) } ?? .null }
        )
    }

    /// A number (with a fraction or not) in `range`.
    static func decimal(_ path: String, _ keyPath: Path<Double>, in range: NumberRange) -> ConfigurationKey {
        ConfigurationKey(
            path: path,
            set: { configuration, text in
                guard let text, let value = Double(text), value.isFinite else {
                    throw InvalidValue(problem: "must be a number \(range.phrase) \(got(text))")
                }
                guard range.contains(value) else {
                    throw InvalidValue(problem: "must be \(range.phrase) \(got(text))")
                }
                configuration[keyPath: keyPath] = value
            },
            render: { .plain(DurationText.number($0[keyPath: keyPath])) }
        )
    }

    /// A duration (`30s`, `500ms`, `2m`, `1.5s`, or a bare number of seconds) in `range`.
    static func duration(_ path: String, _ keyPath: Path<Duration>, in range: DurationRange) -> ConfigurationKey {
        ConfigurationKey(
            path: path,
            set: { configuration, text in
                guard let text, let value = DurationText.parse(text) else {
                    throw InvalidValue(problem: "must be a duration like 30s or 500ms \(got(text))")
                }
                guard range.contains(value) else {
                    throw InvalidValue(problem: "must be \(range.phrase) \(got(text))")
                }
                configuration[keyPath: keyPath] = value
            },
            render: { .plain(DurationText.format($0[keyPath: keyPath])) }
        )
    }

    private static func wholeNumber(_ text: String?, in range: ClosedRange<Int>) throws -> Int {
        let phrase = "a whole number from \(range.lowerBound) to \(range.upperBound)"
        guard let text, let value = Int(text), range.contains(value) else {
            throw InvalidValue(problem: "must be \(phrase) \(got(text))")
        }
        return value
    }
}

/// A range of values a key allows: a lower bound and maybe an upper one, said as the file writes them.
struct ValueRange<Value: Comparable> {
    var lower: Value
    var upper: Value?
    /// How the file writes a value (`0.5`, `500ms`).
    var write: (Value) -> String

    func contains(_ value: Value) -> Bool { value >= lower && upper.map { value <= $0 } ?? true }

    var phrase: String {
        guard let upper else { return "at least \(write(lower))" }
        return "from \(write(lower)) to \(write(upper))"
    }
}

/// A range of numbers.
typealias NumberRange = ValueRange<Double>
/// A range of durations.
typealias DurationRange = ValueRange<Duration>

extension ValueRange where Value == Double {
    init(lower: Double, upper: Double? = nil) { self.init(lower: lower, upper: upper, write: DurationText.number) }
}

extension ValueRange where Value == Duration {
    init(lower: Duration, upper: Duration? = nil) { self.init(lower: lower, upper: upper, write: DurationText.format) }
}

/// The keys of the configuration file, in the order the example file and the rendered configuration
/// show them. The one table both the file and the environment overrides are read through. Each backend's
/// section holds the keys the backend declares (``Backend/settingKeys``), from the registry.
enum ConfigurationKeys {
    /// The sections, in order ("" holds the top-level keys).
    static let sections =
        [""] + Backends.names + [
            "audio", "session", "wake", "earcons", "tools", "timers", "media", "metrics", "update", "mcp",
        ]

    /// Keys that would hold a secret: refused, with the systemd credential where the secret goes instead.
    static let secrets: [String: String] = Dictionary(
        uniqueKeysWithValues: Backends.all.flatMap { backend in
            backend.secrets.map { secret -> (String, String) in
                let name = secret.fileKey.hasSuffix("_file") ? String(secret.fileKey.dropLast(5)) : secret.fileKey
                return (backend.name + "." + name, secret.credential)
            }
        }
    )

    /// The keys of every backend's section (an instruction key with its `_file` companion).
    static var backendKeys: [ConfigurationKey] {
        Backends.all.flatMap { backend in
            backend.settingKeys.flatMap { key -> [ConfigurationKey] in
                let entry = ConfigurationKey.setting(backend.name, key)
                guard case .instruction = key.kind else { return [entry] }
                let file = SettingKey(key.name + "_file", .path, help: "a file holding \(key.name)")
                return [entry, .setting(backend.name, file)]
            }
        }
    }

    /// Every key.
    static var all: [ConfigurationKey] {
        [
            .choice("mode", \.mode),
            .choice("backend", \.backend, allowed: Backends.names),
            .text("board", \.board, check: boardName),
            .text("board_dir", \.boardDirectory, isPath: true),
            .text("state_dir", \.stateDirectory, isPath: true),
            .text("status_file", \.statusFile, isPath: true),
            .optionalText("control_socket", \.controlSocket, isPath: true),
            .choice("log_level", \.logLevel, allowed: ["trace", "debug", "info", "notice", "warning", "error"]),
            .flag("log_transcripts", \.logTranscripts),
        ] + backendKeys + [
            .optionalText("audio.capture_device", \.audio.captureDevice),
            .optionalText("audio.playback_device", \.audio.playbackDevice),
            .optionalText("audio.capture_file", \.audio.captureFile, isPath: true),
            .optionalText("audio.playback_file", \.audio.playbackFile, isPath: true),
            .decimal("audio.file_pace", \.audio.filePace, in: NumberRange(lower: 0, upper: 1000)),
            .flag("audio.echo_cancellation", \.audio.echoCancellation),
            .flag("audio.noise_suppression", \.audio.noiseSuppression),
            .flag("audio.automatic_gain", \.audio.automaticGain),
            .duration("audio.prebuffer", \.audio.prebuffer, in: DurationRange(lower: .zero, upper: .seconds(2))),
            .optionalNumber("audio.volume", \.audio.volume, in: 0...100),
            .optionalText("audio.mixer_control", \.audio.mixerControl),

            .duration(
                "session.idle_timeout",
                \.session.idleTimeout,
                in: DurationRange(lower: .seconds(1), upper: .seconds(24 * 3600))
            ),
            .optionalText("session.greeting", \.session.greeting),
            .decimal("session.vad_threshold", \.session.vadThreshold, in: NumberRange(lower: 0, upper: 60)),
            .duration("session.pre_roll", \.session.preRoll, in: DurationRange(lower: .zero, upper: .seconds(5))),
            .choice("session.trigger", \.session.trigger, allowed: SessionSettings.triggers),

            .wakeWords("wake.words", \.wake.words),
            .wakeWords("wake.stop_words", \.wake.stopWords, required: false, limit: WakeSettings.stopWordLimit),
            .decimal("wake.threshold", \.wake.threshold, in: NumberRange(lower: 0.01, upper: 0.99)),
            .duration("wake.refractory", \.wake.refractory, in: DurationRange(lower: .zero, upper: .seconds(60))),
            .decimal("wake.quiet_level", \.wake.quietLevel, in: NumberRange(lower: -120, upper: 0)),
            .flag("wake.follow_ups", \.wake.followUps),
            .flag("wake.send_wake_word", \.wake.sendWakeWord),

            .flag("earcons.listening_start", \.earcons.listeningStart),
            .flag("earcons.cancel", \.earcons.cancel),
            .flag("earcons.error", \.earcons.error),
            .flag("earcons.offline", \.earcons.offline),
            .number("earcons.volume", \.earcons.volume, in: 0...100),

            .flag("tools.volume", \.tools.volume),
            .flag("tools.mute", \.tools.mute),
            .flag("tools.clock", \.tools.clock),
            .flag("tools.status", \.tools.status),
            .flag("tools.timers", \.tools.timers),
            .flag("tools.media", \.tools.media),
            .choice("tools.set_volume", \.tools.setVolume, allowed: ToolBehavior.names),
            .choice("tools.get_volume", \.tools.getVolume, allowed: ToolBehavior.names),
            .choice("tools.set_microphone_muted", \.tools.setMicrophoneMuted, allowed: ToolBehavior.names),
            .choice("tools.get_time", \.tools.getTime, allowed: ToolBehavior.names),
            .choice("tools.get_device_status", \.tools.getDeviceStatus, allowed: ToolBehavior.names),
            .choice("tools.set_timer", \.tools.setTimer, allowed: ToolBehavior.names),
            .choice("tools.list_timers", \.tools.listTimers, allowed: ToolBehavior.names),
            .choice("tools.cancel_timer", \.tools.cancelTimer, allowed: ToolBehavior.names),
            .choice("tools.add_time_to_timer", \.tools.addTimeToTimer, allowed: ToolBehavior.names),
            .choice("tools.set_alarm", \.tools.setAlarm, allowed: ToolBehavior.names),
            .choice("tools.list_alarms", \.tools.listAlarms, allowed: ToolBehavior.names),
            .choice("tools.cancel_alarm", \.tools.cancelAlarm, allowed: ToolBehavior.names),
            .choice("tools.snooze_alarm", \.tools.snoozeAlarm, allowed: ToolBehavior.names),
            .choice("tools.stop_ringing", \.tools.stopRinging, allowed: ToolBehavior.names),
            .choice("tools.play_media", \.tools.playMedia, allowed: ToolBehavior.names),
            .choice("tools.pause_media", \.tools.pauseMedia, allowed: ToolBehavior.names),
            .choice("tools.resume_media", \.tools.resumeMedia, allowed: ToolBehavior.names),
            .choice("tools.stop_media", \.tools.stopMedia, allowed: ToolBehavior.names),
            .choice("tools.now_playing", \.tools.nowPlaying, allowed: ToolBehavior.names),

            .flag("timers.enabled", \.timers.enabled),
            .duration(
                "timers.ring_for",
                \.timers.ringFor,
                in: DurationRange(lower: .seconds(5), upper: .seconds(3600))
            ),
            .number("timers.volume", \.timers.volume, in: 0...100),

            .flag("media.enabled", \.media.enabled),
            .strings("media.allow_schemes", \.media.allowSchemes, limit: 3, check: ConfigurationKey.mediaScheme),
            .strings(
                "media.allow_hosts",
                \.media.allowHosts,
                limit: MediaAllowList.maximumHosts,
                check: ConfigurationKey.mediaHost
            ),
            .decimal("media.duck_db", \.media.duckDecibels, in: NumberRange(lower: -60, upper: 0)),
            .duration(
                "media.buffer",
                \.media.buffer,
                in: DurationRange(lower: .milliseconds(250), upper: .seconds(30))
            ),
            .duration(
                "media.open_timeout",
                \.media.openTimeout,
                in: DurationRange(lower: .seconds(1), upper: .seconds(120))
            ),
            .duration(
                "media.stall_timeout",
                \.media.stallTimeout,
                in: DurationRange(lower: .seconds(1), upper: .seconds(120))
            ),

            .optionalText("metrics.textfile", \.metrics.textfile, isPath: true, check: metricsFile),
            .text("update.window", \.update.window, check: updateWindow),
            .duration(
                "update.health_for",
                \.update.healthFor,
                in: DurationRange(lower: .seconds(30), upper: .seconds(24 * 3600))
            ),
        ]
    }

    /// The instruction keys of the backends' sections (`gemini.system_instruction`): each has a `_file` companion.
    static let instructionPaths: [String] = Backends.all.flatMap { backend in
        backend.settingKeys.compactMap { key in
            if case .instruction = key.kind { return backend.name + "." + key.name }
            return nil
        }
    }

    /// `(section, name)` of a dotted path.
    static func split(_ path: String) -> (section: String, name: String) {
        guard let dot = path.firstIndex(of: ".") else { return ("", path) }
        return (String(path[..<dot]), String(path[path.index(after: dot)...]))
    }

    /// The key at `path`, if there is one.
    static func key(_ path: String) -> ConfigurationKey? { all.first { $0.path == path } }

    /// The names allowed in `section` ("" for the top level, which includes the section names).
    static func names(in section: String) -> [String] {
        let keys = all.filter { $0.section == section }.map(\.name)
        if section == "media" { return keys + ["stations"] }
        return section.isEmpty ? keys + sections.dropFirst() : keys
    }

    /// node_exporter's textfile collector reads only `*.prom` files.
    private static func metricsFile(_ text: String) throws {
        guard text.hasPrefix("/"), text.hasSuffix(".prom"), !text.hasSuffix("/.prom") else {
            throw InvalidValue(
                problem: "must be an absolute path ending in .prom (node_exporter reads only those) \(got(text))"
            )
        }
    }

    /// `HH:MM-HH:MM`, two different times of day.
    static func updateWindow(_ text: String) throws {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        let minutes = parts.map { part -> Int? in
            let fields = part.split(separator: ":", omittingEmptySubsequences: false)
            guard fields.count == 2, fields.allSatisfy({ $0.count == 2 && $0.allSatisfy(\.isASCII) }),
                let hour = Int(fields[0]), let minute = Int(fields[1]), (0..<24).contains(hour),
                (0..<60).contains(minute)
            else { return nil }
            return hour * 60 + minute
        }
        guard minutes.count == 2, let start = minutes[0], let end = minutes[1], start != end else {
            throw InvalidValue(problem: "must be two times of day as HH:MM-HH:MM, e.g. 02:00-05:00 \(got(text))")
        }
    }

    private static func boardName(_ text: String) throws {
        guard !text.contains("/"), text != ".", text != ".." else {
            throw InvalidValue(problem: "must be a board name (a file in board_dir without .yaml) or auto \(got(text))")
        }
    }
}
