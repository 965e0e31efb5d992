import ArgumentParser
import HarkBackends
import HarkBoard
import HarkConfig
import HarkCore
import HarkGemini
import HarkWake
import Logging

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// `hark config`: the configuration file's tools.
struct ConfigCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config",
        abstract: "Check and show the appliance's configuration.",
        discussion: """
            The configuration file is /etc/hark/hark.yaml (or --config PATH, or $HARK_CONFIG); every key can \
            be overridden by an environment variable HARK_<SECTION>_<KEY> (HARK_MODE, HARK_GEMINI_MODEL, \
            HARK_SESSION_IDLE_TIMEOUT, ...). API keys are never in the file: each backend's key comes from a \
            file its section names, a systemd credential or an environment variable (hark config check --help \
            lists them). See hark config check --help.
            """,
        subcommands: [Check.self],
        defaultSubcommand: Check.self
    )

    /// `hark config check`: loads and validates the configuration as `hark run` would, and shows it.
    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Validate the configuration and show the effective settings.",
            discussion: """
                The file: --config PATH, else $HARK_CONFIG, else /etc/hark/hark.yaml (when that one does not \
                exist the defaults are used). The annotated example, config/hark.yaml, lists every key with its \
                default and allowed values. Relative paths in the file are relative to the file's folder.

                Environment overrides: every key can be set by an environment variable named HARK_ and the \
                key, uppercased, dots as underscores: HARK_MODE, HARK_BACKEND, HARK_BOARD, HARK_LOG_LEVEL, \
                HARK_GEMINI_MODEL, HARK_SESSION_IDLE_TIMEOUT, HARK_AUDIO_CAPTURE_DEVICE, ... They win over the \
                file (in the systemd unit: Environment= lines in a drop-in, systemctl edit hark). A relative \
                path in a variable is relative to the current directory.

                The backends (`backend:`; each has a section of its own):
                \(Backends.listing())

                API keys never go in the configuration file. Put a key in a file readable only by the service and \
                name it in the backend's section, or store it as /etc/credstore/hark.CREDENTIAL (root, mode \
                0600), which hark.service hands to the daemon as the systemd credential CREDENTIAL, or set the \
                environment variable; they are tried in that order:
                \(Backends.secretSources())
                With gemini.token_url the device holds no key at all: it fetches an ephemeral token per connection \
                from your backend. The check says where the key would be read from, never the key.

                Also checks the board: the one named by board in board_dir, or for board: auto the one \
                detected. Exit codes: 0 the configuration is usable (warnings may be printed), 2 it is not \
                (one line names the file, the line, the key and what is allowed).
                """
        )

        @Option(
            name: .customLong("config"),
            help: ArgumentHelp(
                "The configuration file (default: $HARK_CONFIG, else /etc/hark/hark.yaml).",
                valueName: "PATH"
            )
        )
        var path: String?

        func run() async throws {
            let result = ConfigCheck.run(path: path, environment: ProcessInfo.processInfo.environment)
            if result.exitCode == 0 {
                writeAll(STDOUT_FILENO, result.output)
                // The MCP servers, connected and listed (a server down now is a warning: the daemon keeps trying).
                let servers = await MCPCheck.items(configPath: path, environment: ProcessInfo.processInfo.environment)
                for item in servers { writeAll(STDOUT_FILENO, "\(item)\n") }
                if servers.contains(where: { $0.verdict == .failed }) { throw ExitCode(2) }
            } else {
                writeAll(STDERR_FILENO, result.output)
                throw ExitCode(result.exitCode)
            }
        }
    }
}

/// The whole of `hark config check`, in-process: what it prints and its exit code.
public enum ConfigCheck {
    /// Loads the configuration (`path`, else `$HARK_CONFIG`, else the default file), selects the board
    /// (detection reads the system under `systemRoot`; `defaultPath` is the file read when neither names
    /// one), makes the chosen backend from its section as `hark run` does (one verdict: what stops the daemon
    /// is an error here) and returns the report with exit code 0 when the configuration is usable, else the
    /// error with exit code 2. A key found nowhere is a warning: under systemd the credential may still be there.
    public static func run(
        path: String?,
        environment: [String: String],
        systemRoot: String = "/",
        defaultPath: String = ConfigurationLoader.defaultPath
    ) -> (exitCode: Int32, output: String) {
        let loaded: LoadedConfiguration
        let board: BoardSelection
        var warnings: [String] = []
        do {
            loaded = try ConfigurationLoader.load(path: path, environment: environment, defaultPath: defaultPath)
            board = try loaded.selectBoard(facts: SystemFacts.read(root: systemRoot))
        } catch {
            return (2, "hark config: \(error)\n")
        }
        let configuration = loaded.configuration
        guard let backend = Backends.named(configuration.backend) else {
            return (2, "hark config: \(loaded.error(key: "backend", "is not a backend"))\n")
        }
        do {
            _ = try loaded.makeBackend(
                environment: environment,
                logger: Logger(label: "hark-config-check") { _ in SwiftLogNoOpLogHandler() }
            )
        } catch let error as ConfigurationError {
            return (2, "hark config: \(error)\n")
        } catch let error as ApplianceSetupError {
            // A missing key is the one problem the service manager may still solve (a systemd credential).
            guard error.missingSecret else { return (2, "hark config: \(error)\n") }
            let sources = configuration.backendSecrets.flatMap { $0.sources(configuration.backendSettings) }
                .map(\.description).joined(separator: ", ")
            warnings.append("no API key found: looked in \(sources) (under systemd the credential may still be there)")
        } catch {
            return (2, "hark config: \(error)\n")
        }
        let opensOn: String?
        var wakeModels: [String] = []
        do {
            switch try WakeSetup.trigger(configuration, environment: environment) {
            case .wake(let runtime):
                // What the daemon loads, loaded: a model or a library it would refuse is refused here.
                let words = try WakeSetup.detector(loaded, runtime: runtime).words
                // Each word's threshold: its own, its manifest's cutoff (microWakeWord's), or wake.threshold.
                let thresholds = words.map { word in
                    let value = word.effectiveThreshold(detector: Float(configuration.wake.threshold))
                    return "\(word.name) \(Wake.fixed(value, decimals: 2))"
                        + (word.slidingWindow > 1 ? " over \(word.slidingWindow) runs" : "")
                }
                opensOn =
                    "the wake word \(words.map(\.name).joined(separator: ", ")) (threshold "
                    + "\(thresholds.joined(separator: ", ")); models in \(runtime.models))"
                wakeModels = WakeSetup.describe(words)
                if let warning = WakeSetup.licenceWarning(words, key: "wake.words") { warnings.append(warning) }
            case .voice(let note):
                opensOn = "any speech the voice detector hears"
                if let note { warnings.append(note) }
            case .button:
                opensOn = nil
            }
            if let stop = try WakeSetup.stopDetector(loaded, environment: environment) {
                wakeModels += WakeSetup.describe(stop.words).map { "stop word \($0)" }
                if let warning = WakeSetup.licenceWarning(stop.words, key: "wake.stop_words") {
                    warnings.append(warning)
                }
            }
        } catch {
            return (2, "hark config: \(error)\n")
        }
        var lines: [String] = []
        lines.append("configuration: \(loaded.file ?? "none (defaults)")")
        for note in loaded.notes { lines.append("note: \(note)") }
        if !loaded.overrides.isEmpty {
            lines.append("environment overrides: \(loaded.overrides.joined(separator: ", "))")
        }
        lines.append("board: \(board.summary)")
        if let opensOn { lines.append("sessions open on: \(opensOn)") }
        for model in wakeModels { lines.append("  \(model)") }
        if board.profile == nil { warnings.append(board.summary) }
        lines.append("backend: \(backend.name) (\(backend.summary))")
        lines.append("  offers: \(backend.capabilities.names.joined(separator: ", "))")
        let tools = configuration.tools
        if !backend.capabilities.contains(.deviceTools),
            tools.volume || tools.mute || tools.clock || tools.status || tools.timers
        {
            lines.append(
                "  the device tools are not available with \(backend.name): its agent runs its tools on the service"
            )
        }
        let timers = configuration.timers
        if !timers.enabled {
            lines.append("timers and alarms: off")
        } else {
            let reach =
                !backend.capabilities.contains(.deviceTools)
                ? "the agent cannot set or stop them (\(backend.name) runs no device tools; a ring is still told to it as a text turn)"
                : tools.timers
                    ? "the agent sets and stops them with its tools"
                    : "the agent cannot reach them (tools.timers is off)"
            lines.append("timers and alarms: kept in \(configuration.stateDirectory)/timers.json; \(reach)")
            lines.append("  the button, the wake word, the stop word and hark timers stop a ring")
            lines.append("  a ring lasts \(DurationText.format(timers.ringFor)) unheard, at volume \(timers.volume)")
        }
        for (key, note) in backend.advice(configuration.backendSettings) {
            warnings.append("\(backend.name).\(key): \(note)")
        }
        if !configuration.mcpServers.isEmpty {
            let names = configuration.mcpServers.map(\.name).joined(separator: ", ")
            if !backend.capabilities.contains(.deviceTools) {
                warnings.append(
                    "mcp.servers (\(names)): not offered with \(backend.name): its agent runs its tools on the service"
                )
            } else if backend.name == GeminiBackend.name, let model = configuration.backendSettings.text("model"),
                !LiveModelProfile.forModel(model).contextUpdate
            {
                warnings.append(
                    "mcp.servers (\(names)): \(model) takes no contextUpdate, so tools that change while a conversation "
                        + "is open reach the model only with its next connection"
                )
            }
        }
        lines += configuration.describeSecretSources(environment: environment)
        lines.append("")
        lines.append(loaded.rendered())
        for warning in warnings { lines.append("warning: \(warning)") }
        lines.append(warnings.isEmpty ? "ok: the configuration is usable" : "ok: usable, with warnings")
        return (0, lines.joined(separator: "\n") + "\n")
    }
}
