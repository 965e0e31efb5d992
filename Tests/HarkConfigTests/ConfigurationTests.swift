import HarkApp
import HarkConfig
import HarkCore
import HarkDatagrid
import HarkGemini
import Testing

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A temporary folder for one test, removed when the test is done.
final class Scratch {
    let path: String

    init() throws {
        path = FileManager.default.temporaryDirectory.path + "/hark-config-\(UInt64.random(in: 0...UInt64.max))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// Writes `text` to `name` in the folder and returns its path.
    @discardableResult
    func write(_ name: String, _ text: String) throws -> String {
        let file = path + "/" + name
        if let slash = file.lastIndex(of: "/") {
            try FileManager.default.createDirectory(atPath: String(file[..<slash]), withIntermediateDirectories: true)
        }
        try Data(text.utf8).write(to: URL(fileURLWithPath: file))
        return file
    }
}

/// The repository's root: the folder above this file that holds Package.swift.
func repositoryRoot(_ file: String = #filePath) -> String {
    var folder = String(file[..<file.lastIndex(of: "/")!])
    while !folder.isEmpty {
        if FileManager.default.fileExists(atPath: folder + "/Package.swift") { return folder }
        folder = String(folder[..<(folder.lastIndex(of: "/") ?? folder.startIndex)])
    }
    return "."
}

/// The error loading `text` (as the file `/tmp/x/hark.yaml`) with `environment` throws, or nil.
func failure(_ text: String, environment: [String: String] = [:]) -> ConfigurationError? {
    do {
        _ = try ConfigurationLoader.parse(text, file: "/tmp/x/hark.yaml", folder: "/tmp/x", environment: environment)
        return nil
    } catch {
        return error
    }
}

@Suite struct ConfigurationTests {
    @Test func theDefaultsAreTheSpeakerModeOnGemini() throws {
        let scratch = try Scratch()
        let loaded = try ConfigurationLoader.load(
            path: nil,
            environment: [:],
            defaultPath: scratch.path + "/hark.yaml"
        )
        #expect(loaded.configuration == ApplianceConfiguration())
        #expect(loaded.configuration.mode == .speaker)
        #expect(loaded.configuration.backend == "gemini")
        #expect(loaded.file == nil)
        #expect(loaded.notes == ["no configuration file at \(scratch.path)/hark.yaml; using defaults"])
    }

    @Test func aFileSetsEveryKindOfValue() throws {
        let text = """
            mode: kiosk
            backend: datagrid
            board: rpi5-respeaker-2mic
            board_dir: boards
            log_level: debug
            log_transcripts: yes
            gemini:
              voice: Puck
              language: ml-IN
              endpoint: ws://127.0.0.1:9000
              system_instruction: |
                Be brief.
                Speak slowly.
            datagrid:
              agent_id: tutor
              direct: true
            audio:
              capture_device: "hw:1,0"
              file_pace: 0
              prebuffer: 1.5s
              volume: 55
            session:
              idle_timeout: 2m
              pre_roll: 0.25
              greeting: ~
            earcons:
              volume: 0
            tools:
              clock: false
            """
        let loaded = try ConfigurationLoader.parse(text, file: "/srv/hark.yaml", folder: "/srv", environment: [:])
        let configuration = loaded.configuration
        #expect(configuration.mode == .kiosk)
        #expect(configuration.backend == "datagrid")
        #expect(configuration.board == "rpi5-respeaker-2mic")
        #expect(configuration.boardDirectory == "/srv/boards")
        #expect(configuration.logLevel == "debug")
        #expect(configuration.logTranscripts)
        #expect(configuration.text("gemini.voice") == "Puck")
        #expect(configuration.text("gemini.language") == "ml-IN")
        #expect(configuration.text("gemini.endpoint") == "ws://127.0.0.1:9000")
        #expect(configuration.text("gemini.system_instruction") == "Be brief.\nSpeak slowly.")
        #expect(configuration.text("datagrid.agent_id") == "tutor")
        #expect((configuration.backends["datagrid"]?.flag("direct") == true))
        #expect(configuration.audio.captureDevice == "hw:1,0")
        #expect(configuration.audio.filePace == 0)
        #expect(configuration.audio.prebuffer == .milliseconds(1500))
        #expect(configuration.audio.volume == 55)
        #expect(configuration.session.idleTimeout == .seconds(120))
        #expect(configuration.session.preRoll == .milliseconds(250))
        #expect(configuration.session.greeting == nil)
        #expect(configuration.earcons.volume == 0)
        #expect(!configuration.tools.clock)
        #expect(loaded.origin(of: "audio.volume") == .file(line: 21))
        #expect(loaded.origin(of: "tools.volume") == .standard)
    }

    @Test func eachTimerToolHasItsOwnKeyForHowItRuns() throws {
        let defaults = ToolSettings().behaviors
        #expect(defaults["set_timer"] == .nonBlocking(.whenIdle))
        #expect(defaults["list_timers"] == .nonBlocking(.interrupt))
        #expect(defaults["list_alarms"] == .nonBlocking(.interrupt))
        #expect(defaults["stop_ringing"] == .nonBlocking(.silent))
        let text = """
            tools:
              set_timer: blocking
              list_timers: when_idle
              cancel_timer: interrupt
              add_time_to_timer: silent
              set_alarm: blocking
              list_alarms: blocking
              cancel_alarm: silent
              snooze_alarm: interrupt
              stop_ringing: when_idle
            """
        let loaded = try ConfigurationLoader.parse(text, file: "/srv/hark.yaml", folder: "/srv", environment: [:])
        let behaviors = loaded.configuration.tools.behaviors
        #expect(behaviors["set_timer"] == .blocking)
        #expect(behaviors["list_timers"] == .nonBlocking(.whenIdle))
        #expect(behaviors["cancel_timer"] == .nonBlocking(.interrupt))
        #expect(behaviors["add_time_to_timer"] == .nonBlocking(.silent))
        #expect(behaviors["set_alarm"] == .blocking)
        #expect(behaviors["list_alarms"] == .blocking)
        #expect(behaviors["cancel_alarm"] == .nonBlocking(.silent))
        #expect(behaviors["snooze_alarm"] == .nonBlocking(.interrupt))
        #expect(behaviors["stop_ringing"] == .nonBlocking(.whenIdle))
        #expect(loaded.origin(of: "tools.snooze_alarm") == .file(line: 9))
        #expect(throws: (any Error).self) {
            try ConfigurationLoader.parse(
                "tools:\n  snooze_alarm: sometimes\n",
                file: "/srv/hark.yaml",
                folder: "/srv",
                environment: [:]
            )
        }
    }

    @Test func eachMediaToolHasItsOwnKeyForHowItRuns() throws {
        let defaults = ToolSettings().behaviors
        #expect(defaults["play_media"] == .nonBlocking(.whenIdle))
        #expect(defaults["stop_media"] == .nonBlocking(.silent))
        #expect(defaults["now_playing"] == .nonBlocking(.interrupt))
        let text = """
            tools:
              play_media: blocking
              pause_media: interrupt
              resume_media: when_idle
              stop_media: interrupt
              now_playing: silent
            """
        let loaded = try ConfigurationLoader.parse(text, file: "/srv/hark.yaml", folder: "/srv", environment: [:])
        let behaviors = loaded.configuration.tools.behaviors
        #expect(behaviors["play_media"] == .blocking)
        #expect(behaviors["pause_media"] == .nonBlocking(.interrupt))
        #expect(behaviors["resume_media"] == .nonBlocking(.whenIdle))
        #expect(behaviors["stop_media"] == .nonBlocking(.interrupt))
        #expect(behaviors["now_playing"] == .nonBlocking(.silent))
        #expect(loaded.origin(of: "tools.now_playing") == .file(line: 6))
        #expect(throws: (any Error).self) {
            try ConfigurationLoader.parse(
                "tools:\n  play_media: later\n",
                file: "/srv/hark.yaml",
                folder: "/srv",
                environment: [:]
            )
        }
    }

    @Test func durationsTakeUnitsOrBareSeconds() throws {
        func idle(_ text: String) throws -> Duration {
            try ConfigurationLoader.parse(
                "session:\n  idle_timeout: \(text)\n",
                file: "f",
                folder: "/",
                environment: [:]
            )
            .configuration.session.idleTimeout
        }
        #expect(try idle("30s") == .seconds(30))
        #expect(try idle("1500ms") == .milliseconds(1500))
        #expect(try idle("2m") == .seconds(120))
        #expect(try idle("1.5s") == .milliseconds(1500))
        #expect(try idle("45") == .seconds(45))
        #expect(try idle("2.5") == .milliseconds(2500))
        #expect(try idle("1h") == .seconds(3600))
    }

    @Test func unknownKeysNameTheLineAndWhatIsAllowed() throws {
        let top = try #require(failure("mode: speaker\nmodel: x\n"))
        #expect(top.key == "model")
        #expect(top.line == 2)
        #expect(
            top.description.hasPrefix("/tmp/x/hark.yaml:2: model: unknown key; allowed here: mode, backend, board,")
        )
        let sections =
            "gemini, datagrid, cascade, livekit, audio, session, wake, earcons, tools, timers, media, metrics, update, mcp"
        #expect(top.problem.hasSuffix(sections))

        let nested = try #require(failure("gemini:\n  model: x\n  voise: Kore\n"))
        #expect(nested.key == "gemini.voise")
        #expect(nested.line == 3)
        #expect(nested.problem.contains("allowed here: model, endpoint, api_version, voice,"))
        #expect(!nested.problem.contains("api_key,"))

        let section = try #require(failure("audio: loud\n"))
        #expect(section.key == "audio")
        #expect(section.problem == "must be a mapping (key: value lines)")

        let list = try #require(failure("gemini:\n  voice: [Kore, Puck]\n"))
        #expect(list.description == "/tmp/x/hark.yaml:2: gemini.voice: must be a single value, not a list or a mapping")
    }

    @Test func badValuesSayWhatIsAllowed() throws {
        let mode = try #require(failure("mode: loud\n"))
        #expect(
            mode.description == "/tmp/x/hark.yaml:1: mode: must be one of speaker, push-to-talk, kiosk (got \"loud\")"
        )

        let level = try #require(failure("log_level: verbose\n"))
        #expect(level.problem == "must be one of trace, debug, info, notice, warning, error (got \"verbose\")")

        let duration = try #require(failure("mode: kiosk\nsession:\n  greeting: hi\n  idle_timeout: soon\n"))
        #expect(
            duration.description
                == "/tmp/x/hark.yaml:4: session.idle_timeout: must be a duration like 30s or 500ms (got \"soon\")"
        )

        let flag = try #require(failure("tools:\n  clock: maybe\n"))
        #expect(flag.problem == "must be true or false (got \"maybe\")")

        let empty = try #require(failure("mode:\n"))
        #expect(empty.problem == "must be one of speaker, push-to-talk, kiosk (got nothing)")

        let url = try #require(failure("gemini:\n  token_url: ftp://host/t?token=abc\n"))
        #expect(url.problem == "must be a http:// or https:// URL (got \"ftp://host/t?token=REDACTED\")")

        let board = try #require(failure("board: ../etc\n"))
        #expect(board.key == "board")

        let language = try #require(failure("gemini:\n  language: Malayalam\n"))
        #expect(language.problem.hasPrefix("must be a BCP-47 language code"))

        let yaml = try #require(failure("mode: speaker\ngemini: [unclosed\n"))
        #expect(yaml.line != nil)
        #expect(yaml.problem.hasPrefix("not valid YAML"))

        let twice = try #require(failure("mode: speaker\nmode: kiosk\n"))
        #expect(twice.problem == "not valid YAML: a mapping repeats the key 'mode'")
    }

    @Test func valuesOutOfRangeAreRefused() throws {
        let volume = try #require(failure("earcons:\n  volume: 170\n"))
        #expect(
            volume.description
                == "/tmp/x/hark.yaml:2: earcons.volume: must be a whole number from 0 to 100 (got \"170\")"
        )

        let audioVolume = try #require(failure("audio:\n  volume: -1\n"))
        #expect(audioVolume.key == "audio.volume")

        let pace = try #require(failure("audio:\n  file_pace: -0.5\n"))
        #expect(pace.problem == "must be from 0 to 1000 (got \"-0.5\")")

        let idle = try #require(failure("session:\n  idle_timeout: 500ms\n"))
        #expect(idle.problem == "must be from 1s to 24h (got \"500ms\")")

        let prebuffer = try #require(failure("audio:\n  prebuffer: 3s\n"))
        #expect(prebuffer.problem == "must be from 0s to 2s (got \"3s\")")

        let threshold = try #require(failure("session:\n  vad_threshold: 90\n"))
        #expect(threshold.problem == "must be from 0 to 60 (got \"90\")")

        let both = try #require(failure("gemini:\n  token_url: https://example.com/token\n  mint_token: true\n"))
        #expect(both.key == "gemini.mint_token")
        #expect(both.line == 3)
    }

    @Test func secretsAreNeverInline() throws {
        let gemini = try #require(failure("gemini:\n  model: x\n  api_key: AIzaSomething\n"))
        #expect(gemini.key == "gemini.api_key")
        #expect(gemini.line == 3)
        #expect(gemini.problem.contains("gemini.api_key_file"))
        #expect(gemini.problem.contains("systemd credential gemini-api-key"))
        #expect(!gemini.description.contains("AIzaSomething"))

        let datagrid = try #require(failure("datagrid:\n  api_key: dg-123\n"))
        #expect(datagrid.problem.contains("datagrid.api_key_file"))
        #expect(!datagrid.description.contains("dg-123"))

        let environment = try #require(failure("", environment: ["HARK_GEMINI_API_KEY": "AIzaSomething"]))
        #expect(environment.variable == "HARK_GEMINI_API_KEY")
        #expect(!environment.description.contains("AIzaSomething"))
    }

    @Test func environmentVariablesOverrideTheFile() throws {
        let scratch = try Scratch()
        let file = try scratch.write("hark.yaml", "mode: speaker\nsession:\n  idle_timeout: 30s\n")
        let loaded = try ConfigurationLoader.load(
            path: file,
            environment: [
                "HARK_MODE": "kiosk",
                "HARK_SESSION_IDLE_TIMEOUT": "1.5s",
                "HARK_AUDIO_CAPTURE_DEVICE": "plughw:CARD=Device",
                "HARK_GEMINI_MODEL": "models/gemini-live-test",
                "HARK_TOOLS_CLOCK": "false",
                "HARK_GEMINI_VOICE": "",
                "HARK_REALTIME_TESTS": "1",
                "PATH": "/usr/bin",
            ]
        )
        let configuration = loaded.configuration
        #expect(configuration.mode == .kiosk)
        #expect(configuration.session.idleTimeout == .milliseconds(1500))
        #expect(configuration.audio.captureDevice == "plughw:CARD=Device")
        #expect(configuration.text("gemini.model") == "models/gemini-live-test")
        #expect(!configuration.tools.clock)
        #expect(configuration.text("gemini.voice") == nil)
        #expect(loaded.file == file)
        #expect(
            loaded.overrides == [
                "HARK_MODE", "HARK_GEMINI_MODEL", "HARK_GEMINI_VOICE", "HARK_AUDIO_CAPTURE_DEVICE",
                "HARK_SESSION_IDLE_TIMEOUT", "HARK_TOOLS_CLOCK",
            ]
        )
        #expect(loaded.origin(of: "mode") == .environment("HARK_MODE"))

        let rendered = loaded.rendered()
        #expect(rendered.contains("\nmode: kiosk  # from HARK_MODE\n"))
        #expect(rendered.contains("\n  idle_timeout: 1500ms  # from HARK_SESSION_IDLE_TIMEOUT\n"))
        #expect(rendered.contains("\n  capture_device: plughw:CARD=Device  # from HARK_AUDIO_CAPTURE_DEVICE\n"))
        #expect(rendered.contains("\nbackend: gemini\n"))
    }

    @Test func badEnvironmentValuesNameTheVariable() throws {
        let mode = try #require(failure("mode: speaker\n", environment: ["HARK_MODE": "loud"]))
        #expect(
            mode.description
                == "environment variable HARK_MODE: must be one of speaker, push-to-talk, kiosk (got \"loud\")"
        )
        #expect(mode.key == "mode")

        let idle = try #require(failure("", environment: ["HARK_SESSION_IDLE_TIMEOUT": "soon"]))
        #expect(
            idle.description
                == "environment variable HARK_SESSION_IDLE_TIMEOUT: must be a duration like 30s or 500ms (got \"soon\")"
        )

        let typo = try #require(failure("", environment: ["HARK_GEMINI_MODLE": "x"]))
        #expect(typo.variable == "HARK_GEMINI_MODLE")
        #expect(typo.problem.contains("allowed: HARK_GEMINI_MODEL, HARK_GEMINI_ENDPOINT,"))
    }

    @Test func environmentNamesComeFromTheKeys() {
        let keys = ConfigurationLoader.keys
        let names = keys.map(ConfigurationLoader.environmentVariable(for:))
        #expect(Set(names).count == keys.count)
        #expect(ConfigurationLoader.environmentVariable(for: "session.idle_timeout") == "HARK_SESSION_IDLE_TIMEOUT")
        #expect(ConfigurationLoader.environmentVariable(for: "board_dir") == "HARK_BOARD_DIR")
        #expect(keys.contains("earcons.volume"))
        #expect(keys.contains("gemini.system_instruction_file"))
    }

    @Test func aMissingNamedFileIsAnError() throws {
        let scratch = try Scratch()
        do {
            _ = try ConfigurationLoader.load(path: scratch.path + "/nothing.yaml", environment: [:])
            Issue.record("a missing file loaded")
        } catch {
            #expect(error.description == "\(scratch.path)/nothing.yaml: no such file")
        }
        do {
            _ = try ConfigurationLoader.load(path: nil, environment: ["HARK_CONFIG": scratch.path + "/other.yaml"])
            Issue.record("a missing file loaded")
        } catch {
            #expect(error.description == "\(scratch.path)/other.yaml: no such file (named by HARK_CONFIG)")
        }
        let named = try scratch.write("named.yaml", "mode: kiosk\n")
        let loaded = try ConfigurationLoader.load(path: nil, environment: ["HARK_CONFIG": named])
        #expect(loaded.file == named)
        #expect(loaded.configuration.mode == .kiosk)
    }

    @Test func theInstructionIsInlineOrAFileNotBoth() throws {
        let scratch = try Scratch()
        try scratch.write("prompts/tutor.txt", "  Teach Malayalam.\n")
        let file = try scratch.write("hark.yaml", "gemini:\n  system_instruction_file: prompts/tutor.txt\n")
        let loaded = try ConfigurationLoader.load(path: file, environment: [:])
        #expect(loaded.configuration.text("gemini.system_instruction") == "Teach Malayalam.")
        #expect(loaded.configuration.text("gemini.system_instruction_file") == scratch.path + "/prompts/tutor.txt")
        #expect(loaded.rendered().contains("# system_instruction: the text of system_instruction_file (16 characters)"))

        let both = try #require(
            failure("gemini:\n  system_instruction: Hi.\n  system_instruction_file: tutor.txt\n")
        )
        #expect(both.key == "gemini.system_instruction")
        #expect(both.line == 2)
        #expect(both.problem == "give either gemini.system_instruction or gemini.system_instruction_file, not both")

        let missing = try #require(failure("gemini:\n  system_instruction_file: absent.txt\n"))
        #expect(
            missing.description == "/tmp/x/hark.yaml:2: gemini.system_instruction_file: cannot read /tmp/x/absent.txt"
        )

        // The environment replaces the file's instruction in either form.
        let replaced = try ConfigurationLoader.load(
            path: file,
            environment: ["HARK_GEMINI_SYSTEM_INSTRUCTION": "Speak English."]
        )
        #expect(replaced.configuration.text("gemini.system_instruction") == "Speak English.")
        #expect(replaced.configuration.text("gemini.system_instruction_file") == nil)

        let emptied = try ConfigurationLoader.load(
            path: file,
            environment: ["HARK_GEMINI_SYSTEM_INSTRUCTION": "", "HARK_GEMINI_SYSTEM_INSTRUCTION_FILE": ""]
        )
        #expect(emptied.configuration.text("gemini.system_instruction") == nil)
        #expect(emptied.configuration.text("gemini.system_instruction_file") == nil)

        let envBoth = try #require(
            failure(
                "",
                environment: [
                    "HARK_GEMINI_SYSTEM_INSTRUCTION": "a", "HARK_GEMINI_SYSTEM_INSTRUCTION_FILE": "b.txt",
                ]
            )
        )
        #expect(envBoth.variable == "HARK_GEMINI_SYSTEM_INSTRUCTION")
    }

    @Test func theRenderedConfigurationLoadsBackTheSame() throws {
        let text = """
            mode: kiosk
            board: host
            gemini:
              voice: Kore
              token_url: https://example.com/token
              system_instruction: |-
                Line one: with a colon.
                "Quoted" line # not a comment

                After a blank line.
            audio:
              capture_device: "hw:1,0"
              mixer_control: "yes"
              prebuffer: 0.0125
            session:
              greeting: "നമസ്കാരം! Say hello."
            """
        let loaded = try ConfigurationLoader.parse(text, file: "/srv/a.yaml", folder: "/srv", environment: [:])
        let rendered = loaded.rendered()
        let again = try ConfigurationLoader.parse(rendered, file: "/srv/b.yaml", folder: "/srv", environment: [:])
        #expect(again.configuration == loaded.configuration)
        #expect(loaded.configuration.audio.mixerControl == "yes")
        for key in ConfigurationLoader.keys where key != "gemini.system_instruction" {
            let name = String(key.split(separator: ".").last!)
            #expect(rendered.contains("\(name):"), "\(key) is not rendered")
        }
    }

    @Test func theRenderedConfigurationShowsNoSecret() throws {
        let scratch = try Scratch()
        let secret = "AIzaTEST-secret-value-123456"
        let keyFile = try scratch.write("gemini-api-key", secret + "\n")
        let file = try scratch.write(
            "hark.yaml",
            "board: host\nboard_dir: \(repositoryRoot())/board\ngemini:\n  api_key_file: gemini-api-key\n"
        )
        let environment = ["GEMINI_API_KEY": secret + "-env"]
        let loaded = try ConfigurationLoader.load(path: file, environment: environment)
        #expect(loaded.configuration.text("gemini.api_key_file") == keyFile)
        #expect(
            try loaded.configuration.load(GeminiBackend.key, of: "gemini", environment: environment)?.reveal() == secret
        )
        let rendered = loaded.rendered()
        #expect(!rendered.contains(secret))
        #expect(rendered.contains("api_key_file: \(keyFile)"))

        let check = ConfigCheck.run(path: file, environment: environment, systemRoot: scratch.path)
        #expect(check.exitCode == 0)
        #expect(!check.output.contains(secret))
        #expect(check.output.contains("gemini key: file \(keyFile) (present, used)"))
        #expect(
            check.output.contains(
                "gemini key: environment variable GEMINI_API_KEY (set, not used: an earlier source comes first)"
            )
        )
        #expect(!loaded.configuration.describeSecretSources(environment: environment).joined().contains(secret))
    }

    @Test func keysAreLookedUpInOrder() throws {
        let scratch = try Scratch()
        let credentials = scratch.path + "/credentials"
        try scratch.write("credentials/gemini-api-key", "from-credential\n")
        try scratch.write("credentials/datagrid-api-key", "dg-from-credential")
        let keyFile = try scratch.write("key", "from-file")
        var configuration = ApplianceConfiguration()
        let everything = [
            "CREDENTIALS_DIRECTORY": credentials, "GEMINI_API_KEY": "from-env", "DATAGRID_API_KEY": "dg-from-env",
        ]

        // No file configured: the credential, then the variable.
        #expect(
            try configuration.load(GeminiBackend.key, of: "gemini", environment: everything)?.reveal()
                == "from-credential"
        )
        #expect(
            try configuration.load(GeminiBackend.key, of: "gemini", environment: ["GEMINI_API_KEY": "from-env"])?
                .reveal() == "from-env"
        )
        #expect(try configuration.load(GeminiBackend.key, of: "gemini", environment: [:]) == nil)
        #expect(
            try configuration.load(DatagridBackend.key, of: "datagrid", environment: everything)?.reveal()
                == "dg-from-credential"
        )
        #expect(
            try configuration.load(
                DatagridBackend.key,
                of: "datagrid",
                environment: [
                    "CREDENTIALS_DIRECTORY": scratch.path + "/none", "DATAGRID_API_KEY": "dg-from-env",
                ]
            )?
            .reveal() == "dg-from-env"
        )

        // A configured file comes first; a configured file that is missing is an error, not a fall-through.
        configuration.backends["gemini"]?["api_key_file"] = .text(keyFile)
        #expect(
            try configuration.load(GeminiBackend.key, of: "gemini", environment: everything)?.reveal() == "from-file"
        )
        #expect(
            configuration.describeSecretSources(environment: everything) == [
                "gemini key: file \(keyFile) (present, used)",
                "gemini key: systemd credential gemini-api-key (present, not used: an earlier source comes first)",
                "gemini key: environment variable GEMINI_API_KEY (set, not used: an earlier source comes first)",
            ]
        )
        configuration.backends["gemini"]?["api_key_file"] = .text(scratch.path + "/absent")
        #expect(throws: ConfigurationError.self) {
            try configuration.load(GeminiBackend.key, of: "gemini", environment: everything)
        }
        #expect(
            configuration.describeSecretSources(environment: [:]).first
                == "gemini key: file \(scratch.path)/absent (missing; the key cannot be loaded until this is fixed)"
        )

        // A token server: no key on the device.
        configuration.backends["gemini"]?["token_url"] = .text("https://example.com/token?token=abc")
        #expect(!configuration.requires(GeminiBackend.key))
        #expect(
            configuration.describeSecretSources(environment: [:])
                == [
                    "gemini key: not on this device; ephemeral tokens come from https://example.com/token?token=REDACTED"
                ]
        )
    }

    @Test func theExampleFilesLoad() throws {
        let root = repositoryRoot()
        let example = try ConfigurationLoader.load(path: root + "/config/hark.yaml", environment: [:])
        #expect(example.configuration == ApplianceConfiguration())
        // The example shows every key.
        let text = String(
            decoding: try #require(FileManager.default.contents(atPath: root + "/config/hark.yaml")),
            as: UTF8.self
        )
        for key in ConfigurationLoader.keys {
            let name = String(key.split(separator: ".").last!)
            #expect(text.contains("\n" + (key.contains(".") ? "  " : "") + name + ":"), "\(key) is missing")
        }

        // The tutor as the seed built it: the cascade, saaras:v3 detecting the language, bulbul:v3 "kavitha" in
        // Malayalam, the seed's instructions, greeting first; and the same tutor on Gemini Live.
        let kiosk = try ConfigurationLoader.load(path: root + "/config/kiosk-tutor.yaml", environment: [:])
        let configuration = kiosk.configuration
        #expect(configuration.mode == .kiosk && configuration.backend == "cascade")
        #expect(configuration.text("cascade.stt_model") == "saaras:v3")
        #expect(configuration.text("cascade.stt_language") == "unknown")
        #expect(configuration.text("cascade.tts_model") == "bulbul:v3")
        #expect(configuration.text("cascade.speaker") == "kavitha")
        #expect(configuration.text("cascade.tts_language") == "ml-IN")
        #expect(configuration.session.greeting != nil)
        #expect(configuration.session.idleTimeout < .seconds(30))
        let live = try ConfigurationLoader.load(path: root + "/config/kiosk-tutor-live.yaml", environment: [:])
        #expect(live.configuration.mode == .kiosk && live.configuration.backend == "gemini")
        #expect(live.configuration.text("gemini.voice") != nil)
        for instruction in [
            configuration.text("cascade.system_instruction"), live.configuration.text("gemini.system_instruction"),
        ] {
            let instruction = try #require(instruction)
            #expect(instruction.contains("Malayalam language tutor"))
            #expect(instruction.contains("Keep responses short (1-2 sentences)"))
            #expect(instruction.contains("Do not use emojis, asterisks, or markdown formatting"))
        }
    }
}

@Suite struct ConfigCheckTests {
    @Test func aUsableConfigurationExitsZero() throws {
        let scratch = try Scratch()
        let file = try scratch.write("hark.yaml", "board: host\nboard_dir: \(repositoryRoot())/board\n")
        let result = ConfigCheck.run(path: file, environment: ["GEMINI_API_KEY": "k"], systemRoot: scratch.path)
        #expect(result.exitCode == 0)
        #expect(result.output.contains("configuration: \(file)"))
        #expect(result.output.contains("board: host ("))
        #expect(result.output.contains("\nmode: speaker\n"))
        #expect(result.output.hasSuffix("ok: the configuration is usable\n"))
    }

    @Test func aMissingKeyOrBoardIsAWarning() throws {
        let scratch = try Scratch()
        let file = try scratch.write("hark.yaml", "board: auto\nboard_dir: \(repositoryRoot())/board\n")
        let result = ConfigCheck.run(path: file, environment: [:], systemRoot: scratch.path)
        #expect(result.exitCode == 0)
        #expect(result.output.contains("warning: no board detected (model: unknown; sound cards: none)"))
        #expect(result.output.contains("warning: no API key found: "))
        #expect(result.output.hasSuffix("ok: usable, with warnings\n"))

        let tokens = ConfigCheck.run(
            path: file,
            environment: ["HARK_GEMINI_TOKEN_URL": "https://example.com/token"],
            systemRoot: scratch.path
        )
        #expect(!tokens.output.contains("no API key found"))
    }

    @Test func anUnusableConfigurationExitsTwoWithOneLine() throws {
        let scratch = try Scratch()
        let file = try scratch.write("hark.yaml", "mode: speaker\nsession:\n  idle_timeout: soon\n")
        let result = ConfigCheck.run(path: file, environment: [:], systemRoot: scratch.path)
        #expect(result.exitCode == 2)
        #expect(
            result.output
                == "hark config: \(file):3: session.idle_timeout: must be a duration like 30s or 500ms (got \"soon\")\n"
        )

        let board = try scratch.write("board.yaml", "board: nosuch\nboard_dir: \(repositoryRoot())/board\n")
        let noBoard = ConfigCheck.run(path: board, environment: [:], systemRoot: scratch.path)
        #expect(noBoard.exitCode == 2)
        #expect(noBoard.output.hasPrefix("hark config: \(board):1: board: no board file nosuch.yaml in "))
        #expect(noBoard.output.contains("allowed: auto, host,"))

        let environment = ConfigCheck.run(path: board, environment: ["HARK_BOARD": "x/y"], systemRoot: scratch.path)
        #expect(environment.exitCode == 2)
        #expect(environment.output.hasPrefix("hark config: environment variable HARK_BOARD: "))

        let missing = ConfigCheck.run(path: scratch.path + "/absent.yaml", environment: [:])
        #expect(missing.exitCode == 2)
        #expect(missing.output == "hark config: \(scratch.path)/absent.yaml: no such file\n")
    }
}

@Suite struct InstructionFileLimitTests {
    @Test func aDeviceOrAHugeFileIsRefusedByName() throws {
        let refusal = #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader.parse(
                "gemini:\n  system_instruction_file: /dev/zero\n",
                file: "/tmp/hark.yaml",
                folder: "/tmp",
                environment: [:]
            )
        }
        #expect(refusal?.description.contains("/dev/zero is not a regular file") == true)
        let big = FileManager.default.temporaryDirectory.path + "/hark-big-instruction-\(UUID().uuidString).txt"
        try String(repeating: "a", count: ConfigurationLoader.instructionLimit + 1).write(
            toFile: big,
            atomically: true,
            encoding: .utf8
        )
        defer { try? FileManager.default.removeItem(atPath: big) }
        let tooBig = #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader.parse(
                "gemini:\n  system_instruction_file: \(big)\n",
                file: "/tmp/hark.yaml",
                folder: "/tmp",
                environment: [:]
            )
        }
        #expect(tooBig?.description.contains("larger than 256 KiB") == true)
    }
}
