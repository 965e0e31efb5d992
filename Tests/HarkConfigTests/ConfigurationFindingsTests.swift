import HarkApp
import HarkBoard
import HarkConfig
import HarkCore
import Testing

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// The configuration file and its environment, at their edges: a byte order mark, huge and hostile values,
/// typos in variable names, where a board error is blamed, sizes, and one verdict on a key file.
@Suite struct ConfigurationFindingsTests {
    @Test func aByteOrderMarkIsAccepted() throws {
        let scratch = try Scratch()
        let file = try scratch.write("hark.yaml", "\u{FEFF}mode: kiosk\nsession:\n  idle_timeout: 10s\n")
        let loaded = try ConfigurationLoader.load(path: file, environment: [:])
        #expect(loaded.configuration.mode == .kiosk)
        #expect(loaded.configuration.session.idleTimeout == .seconds(10))
        #expect(loaded.origin(of: "mode") == .file(line: 1))
    }

    @Test func aHugeValueIsEchoedBounded() throws {
        // In the file (under its size limit) and from the environment (which has none of its own here).
        let large = String(repeating: "x", count: 900 * 1024)
        let error = try #require(failure("mode: \(large)\n"))
        let text = error.description
        #expect(text.utf8.count < 300)
        #expect(text.hasPrefix("/tmp/x/hark.yaml:1: mode: must be one of speaker, push-to-talk, kiosk (got \"xxx"))
        #expect(text.hasSuffix("…[cut, 921600 bytes in all]\")"))

        let huge = String(repeating: "y", count: 5 * 1024 * 1024)
        let variable = try #require(failure("", environment: ["HARK_SESSION_IDLE_TIMEOUT": huge]))
        #expect(variable.description.utf8.count < 300)
        #expect(variable.description.hasSuffix("…[cut, 5242880 bytes in all]\")"))
        let url = try #require(failure("", environment: ["HARK_GEMINI_TOKEN_URL": "ftp://" + huge]))
        #expect(url.description.utf8.count < 300)
    }

    @Test func aHostileValueCannotForgeALineOrDriveATerminal() throws {
        let error = try #require(failure("mode: \"loud\\ninfo hark: ok \\e[2J\\e]0;owned\\a\"\n"))
        let text = error.description
        #expect(!text.contains("\n") && !text.contains("\u{1B}") && !text.contains("\u{07}"))
        #expect(text.contains("(got \"loud\\ninfo hark: ok \\u{1B}[2J\\u{1B}]0;owned\\u{07}\")"), "\(text)")
        // A key named in the file is shown the same way.
        let key = try #require(failure("\"mo\\nde\": x\n"))
        #expect(!key.description.contains("\n"))
        #expect(key.description.contains("mo\\nde: unknown key"), "\(key.description)")
    }

    @Test func anUnknownTopLevelVariableIsRefusedLikeASectionOne() throws {
        let mood = try #require(failure("", environment: ["HARK_MOOD": "kiosk"]))
        #expect(mood.variable == "HARK_MOOD")
        #expect(
            mood.description.hasPrefix(
                "environment variable HARK_MOOD: not a configuration key; did you mean HARK_MODE?"
            )
        )
        #expect(mood.problem.contains("allowed: HARK_MODE, HARK_BACKEND, HARK_BOARD,"))
        #expect(mood.problem.contains("HARK_<SECTION>_<KEY>"))
        let section = try #require(failure("", environment: ["HARK_SESSION_IDLE_TIMOUT": "5s"]))
        #expect(section.problem.contains("did you mean HARK_SESSION_IDLE_TIMEOUT?"))
        // What hark reads besides the keys is not refused.
        var environment = ["HARK_MODE": "kiosk"]
        for name in ConfigurationLoader.otherVariables where name != ConfigurationLoader.pathVariable {
            environment[name] = "1"
        }
        let loaded = try ConfigurationLoader.parse(
            "",
            file: "/tmp/x/hark.yaml",
            folder: "/tmp/x",
            environment: environment
        )
        #expect(loaded.configuration.mode == .kiosk)
    }

    /// Every `HARK_` variable the sources, the scripts or the tests read is a key's or one of
    /// ``ConfigurationLoader/otherVariables``: the list of what is not refused cannot fall behind.
    @Test func everyVariableHarkReadsIsAllowed() throws {
        let root = repositoryRoot()
        let known = Set(ConfigurationLoader.keys.map(ConfigurationLoader.environmentVariable(for:)))
            .union(ConfigurationLoader.otherVariables)
        var found: [String: String] = [:]
        let patterns: [(folder: String, suffix: String, pattern: Regex<(Substring, Substring)>)] = [
            ("Sources", ".swift", #/"(HARK_[A-Z0-9_]+)"/#),
            ("Tests", ".swift", #/environment\["(HARK_[A-Z0-9_]+)"\]/#),
            ("scripts", "", #/\b(HARK_[A-Z0-9_]+)=/#),
            ("scripts", "", #/\$\{?(HARK_[A-Z0-9_]+)/#),
            ("systemd", "", #/\b(HARK_[A-Z0-9_]+)=/#),
        ]
        for (folder, suffix, pattern) in patterns {
            let base = root + "/" + folder
            let files = (try? FileManager.default.subpathsOfDirectory(atPath: base)) ?? []
            for relative in files where relative.hasSuffix(suffix) {
                guard let text = try? String(contentsOfFile: base + "/" + relative, encoding: .utf8) else { continue }
                for match in text.matches(of: pattern) { found[String(match.1)] = folder + "/" + relative }
            }
        }
        #expect(found["HARK_CONFIG"] != nil && found["HARK_REALTIME_TESTS"] != nil, "the scan found nothing")
        for (name, file) in found.sorted(by: { $0.key < $1.key }) {
            #expect(
                known.contains(name),
                "\(file) reads \(name): a key, or add it to ConfigurationLoader.otherVariables"
            )
        }
    }

    @Test func aBoardErrorBlamesTheVariableTheOptionOrTheBoardFile() throws {
        let scratch = try Scratch()
        let file = try scratch.write("hark.yaml", "board: nosuch\n")
        try scratch.write("boards/broken.yaml", "name: broken\ndescription: x\nleds: {kind: lamp}\n")

        // The folder came from HARK_BOARD_DIR, the name from the file: both are said.
        let fromVariable = try ConfigurationLoader.load(
            path: file,
            environment: ["HARK_BOARD_DIR": scratch.path + "/boards"]
        )
        let missing = #expect(throws: ConfigurationError.self) { try fromVariable.selectBoard(facts: SystemFacts()) }
        #expect(
            missing?.description
                == "\(file):1: board: no board file nosuch.yaml in \(scratch.path)/boards "
                + "(board_dir from HARK_BOARD_DIR); allowed: auto, broken"
        )

        // hark run --board: the option, not the file's line.
        var fromOption = fromVariable
        try fromOption.override("board", with: "other", option: "--board")
        let option = #expect(throws: ConfigurationError.self) { try fromOption.selectBoard(facts: SystemFacts()) }
        #expect(
            option?.description.hasPrefix("option --board: no board file other.yaml in ") == true,
            "\(String(describing: option))"
        )
        #expect(fromOption.rendered().contains("\nboard: other  # from --board\n"))
        let badName = #expect(throws: ConfigurationError.self) {
            try fromOption.override("board", with: "../etc/passwd", option: "--board")
        }
        #expect(badName?.description.hasPrefix("option --board: must be a board name") == true)

        // A board file with an error, found through the variable or the option: the board file's line.
        try fromOption.override("board", with: "broken", option: "--board")
        let broken = #expect(throws: ConfigurationError.self) { try fromOption.selectBoard(facts: SystemFacts()) }
        #expect(
            broken?.description.hasPrefix("\(scratch.path)/boards/broken.yaml:") == true,
            "\(String(describing: broken))"
        )
        #expect(broken?.description.contains("hark.yaml") == false)
    }

    @Test func aHugeConfigurationFileIsRefusedUnread() throws {
        let scratch = try Scratch()
        // 200 MB, sparse: refused by its size, never read.
        let sparse = try scratch.write("huge.yaml", "")
        #expect(truncate(sparse, 200 * 1024 * 1024) == 0)
        let huge = #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader.load(path: sparse, environment: [:])
        }
        #expect(huge?.description.hasPrefix("\(sparse): is 209715200 bytes, larger than 1 MiB") == true)
        // Just over the limit, all comments: valid YAML, still refused.
        let comments = String(repeating: "# a comment line of text\n", count: ConfigurationLoader.fileLimit / 25 + 1)
        let long = try scratch.write("long.yaml", comments + "mode: kiosk\n")
        #expect(throws: ConfigurationError.self) { try ConfigurationLoader.load(path: long, environment: [:]) }
        #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader.parse(comments, file: long, folder: scratch.path, environment: [:])
        }
        // A FIFO would hang the reader.
        let fifo = scratch.path + "/fifo.yaml"
        #expect(mkfifo(fifo, 0o600) == 0)
        let pipe = #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader.load(path: fifo, environment: [:])
        }
        #expect(pipe?.description == "\(fifo): is not a regular file")
    }

    @Test func anInlineInstructionHasTheInstructionFilesLimit() throws {
        let limit = ConfigurationLoader.instructionLimit
        let fits = String(repeating: "a", count: limit)
        let loaded = try ConfigurationLoader.parse(
            "gemini:\n  system_instruction: \(fits)\n",
            file: "/tmp/x/hark.yaml",
            folder: "/tmp/x",
            environment: [:]
        )
        #expect(loaded.configuration.text("gemini.system_instruction")?.utf8.count == limit)

        let inFile = try #require(failure("gemini:\n  system_instruction: \(fits)b\n"))
        #expect(inFile.key == "gemini.system_instruction" && inFile.line == 2)
        #expect(inFile.problem == "is \(limit + 1) bytes, longer than 256 KiB; a system instruction is text")

        let twenty = String(repeating: "z", count: 20 * 1024 * 1024)
        let variable = try #require(failure("", environment: ["HARK_GEMINI_SYSTEM_INSTRUCTION": twenty]))
        #expect(variable.variable == "HARK_GEMINI_SYSTEM_INSTRUCTION")
        #expect(variable.description.utf8.count < 200)
    }

    @Test func anUnreadableKeyFileIsAnErrorForTheCheckAsForTheDaemon() throws {
        let scratch = try Scratch()
        let file = try scratch.write(
            "hark.yaml",
            "board: host\nboard_dir: \(repositoryRoot())/board\ngemini:\n  api_key_file: /nonexistent/key\n"
        )
        let result = ConfigCheck.run(path: file, environment: ["GEMINI_API_KEY": "k"], systemRoot: scratch.path)
        #expect(result.exitCode == 2, "\(result.output)")
        #expect(
            result.output == "hark config: \(file):4: gemini.api_key_file: cannot read the key file /nonexistent/key\n"
        )
        // The daemon reads the key even when tokens come from a token server: so does the check.
        let tokens = ConfigCheck.run(
            path: file,
            environment: ["HARK_GEMINI_TOKEN_URL": "https://example.com/token"],
            systemRoot: scratch.path
        )
        #expect(tokens.exitCode == 2, "\(tokens.output)")
        // A key merely not found may still come from systemd: a warning, as before.
        let unset = try scratch.write("unset.yaml", "board: host\nboard_dir: \(repositoryRoot())/board\n")
        let warned = ConfigCheck.run(path: unset, environment: [:], systemRoot: scratch.path)
        #expect(warned.exitCode == 0)
        #expect(warned.output.contains("warning: no API key found"))
    }

    @Test func theCheckRefusesWhatTheModelRejectsAndWarnsOfOlderModels() throws {
        let scratch = try Scratch()
        let head = "board: host\nboard_dir: \(repositoryRoot())/board\ngemini:\n"
        let environment = ["GEMINI_API_KEY": "k"]
        let current = try scratch.write("current.yaml", head + "  thinking_budget: 512\n")
        let refused = ConfigCheck.run(path: current, environment: environment, systemRoot: scratch.path)
        #expect(refused.exitCode == 2)
        #expect(
            refused.output.hasPrefix(
                "hark config: \(current):4: gemini.thinking_budget: gemini-3.8-live takes no thinking budget"
            )
        )
        let gone = try scratch.write("gone.yaml", head + "  model: gemini-2.0-flash-live-001\n")
        let shutDown = ConfigCheck.run(path: gone, environment: environment, systemRoot: scratch.path)
        #expect(shutDown.exitCode == 2)
        #expect(shutDown.output.contains("gemini.model: gemini-2.0-flash-live-001 was shut down on 2025-12-09"))
        let old = try scratch.write(
            "old.yaml",
            head + "  model: gemini-2.5-flash-native-audio-preview-09-2025\n  thinking_budget: 0\n"
        )
        let warned = ConfigCheck.run(path: old, environment: environment, systemRoot: scratch.path)
        #expect(warned.exitCode == 0, "\(warned.output)")
        #expect(
            warned.output.contains(
                "warning: gemini.model: gemini-2.5-flash-native-audio-preview-09-2025 is an older preview"
            )
        )
        #expect(warned.output.hasSuffix("ok: usable, with warnings\n"))
        let fine = try scratch.write("fine.yaml", head + "  transcription_languages: ml-IN, en-IN\n")
        let clean = ConfigCheck.run(path: fine, environment: environment, systemRoot: scratch.path)
        #expect(clean.exitCode == 0 && clean.output.hasSuffix("ok: the configuration is usable\n"), "\(clean.output)")
    }
}
