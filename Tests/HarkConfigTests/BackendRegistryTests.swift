import ArgumentParser
import HarkBackendKit
import HarkBackends
import HarkConfig
import HarkCore
import HarkDatagrid
import HarkGemini
import Logging
import Testing

@testable import HarkApp

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The backend registry as the commands use it: each backend's section, what it can do, its own state.
@Suite struct BackendRegistryTests {
    private func parse(_ text: String, environment: [String: String] = [:]) throws -> LoadedConfiguration {
        try ConfigurationLoader.parse(text, file: "/srv/hark.yaml", folder: "/srv", environment: environment)
    }

    private let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }

    private func context(_ settings: BackendSettings, usage: BackendUsage) -> BackendContext {
        BackendContext(
            settings: settings,
            environment: [:],
            network: .nio(logger: logger),
            usage: usage,
            logger: logger
        )
    }

    @Test func everyBackendHasItsSectionAndEveryKeyItsVariable() throws {
        #expect(Backends.names == ["gemini", "datagrid", "cascade", "livekit"])
        for backend in Backends.all {
            for key in backend.settingKeys {
                #expect(ConfigurationLoader.keys.contains(backend.name + "." + key.name), "\(key.name)")
            }
        }
        let loaded = try parse("backend: gemini\n", environment: ["HARK_DATAGRID_AGENT_ID": "tutor"])
        #expect(loaded.configuration.text("datagrid.agent_id") == "tutor")
        #expect(throws: ConfigurationError.self) { try parse("backend: openai-realtime\n") }
    }

    @Test func aModeThatNeedsWhatTheBackendLacksIsAConfigurationErrorNamingBoth() {
        do {
            _ = try parse("mode: push-to-talk\nbackend: datagrid\n")
            Issue.record("push-to-talk with datagrid must be refused")
        } catch {
            let text = "\(error)"
            #expect(text.contains("/srv/hark.yaml:1: mode:"), "\(text)")
            #expect(text.contains("push-to-talk needs manual activity"), "\(text)")
            #expect(text.contains("datagrid"), "\(text)")
        }
        #expect((try? parse("mode: push-to-talk\nbackend: gemini\n")) != nil)
    }

    @Test func theDeviceToolsAreSaidToBeUnavailableWithDatagrid() throws {
        let scratch =
            FileManager.default.temporaryDirectory.path + "/hark-registry-\(UInt64.random(in: 0...UInt64.max))"
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let file = scratch + "/hark.yaml"
        try Data("backend: datagrid\nboard: host\nboard_dir: \(FileManager.default.currentDirectoryPath)/board\n".utf8)
            .write(to: URL(fileURLWithPath: file))
        let check = ConfigCheck.run(path: file, environment: ["DATAGRID_API_KEY": "k"])
        #expect(check.exitCode == 0, "\(check.output)")
        #expect(check.output.contains("the device tools are not available with datagrid"), "\(check.output)")
        #expect(check.output.contains("backend: datagrid"))
    }

    @Test func datagridsPromptComesFromItsOwnSectionAndFile() throws {
        let folder = FileManager.default.temporaryDirectory.path + "/hark-prompt-\(UInt64.random(in: 0...UInt64.max))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try Data("Teach Malayalam.\n".utf8).write(to: URL(fileURLWithPath: folder + "/prompt.txt"))
        let loaded = try ConfigurationLoader.parse(
            "backend: datagrid\ngemini:\n  system_instruction: not this one\ndatagrid:\n  system_prompt_file: prompt.txt\n"
                + "  endpoint: http://127.0.0.1:9\n",
            file: folder + "/hark.yaml",
            folder: folder,
            environment: [:]
        )
        #expect(loaded.configuration.text("datagrid.system_prompt") == "Teach Malayalam.")
        let backend = try DatagridBackend(
            context: context(loaded.configuration.backendSettings, usage: .oneShot(maxRetries: 1, fast: true))
        )
        let configuration = backend.configuration(for: SessionRequest(logger: logger))
        #expect(configuration.start.config?.systemPrompt == "Teach Malayalam.")
    }

    @Test func eachBackendKeepsItsConversationInItsOwnFileWithItsOwnValidity() throws {
        var datagrid = DatagridBackend.defaultSettings
        datagrid["endpoint"] = .text("http://127.0.0.1:9")
        datagrid["resume_within"] = .duration(.seconds(3600))
        let daemon = BackendUsage.daemon(stateDirectory: "/var/lib/hark", pace: 1)
        let dg = try DatagridBackend(context: context(datagrid, usage: daemon))
        let store = try #require(dg.configuration(for: SessionRequest(logger: logger)).conversationStore)
        #expect(store.path == "/var/lib/hark/datagrid-conversation.json")
        #expect(store.validity == .seconds(3600))
        datagrid["resume_within"] = .duration(.zero)
        let never = try DatagridBackend(context: context(datagrid, usage: daemon))
        #expect(never.configuration(for: SessionRequest(logger: logger)).conversationStore == nil)

        var gemini = GeminiBackend.defaultSettings
        gemini["endpoint"] = .text("ws://127.0.0.1:9")
        let live = try GeminiBackend(context: context(gemini, usage: daemon))
        let liveStore = try #require(live.configuration(for: SessionRequest(logger: logger)).resumptionStore)
        #expect(liveStore.path == "/var/lib/hark/resumption.json")
        #expect(liveStore.validity == .seconds(2 * 3600))
        let once = try GeminiBackend(context: context(gemini, usage: .oneShot(maxRetries: 3, fast: true)))
        let oneShot = once.configuration(for: SessionRequest(logger: logger))
        #expect(oneShot.resumptionStore == nil)
        #expect(oneShot.link.giveUpOnRejection)
        #expect(oneShot.link.maxConsecutiveFailures == 3)
    }

    @Test func aBackendRefusesAPlainConnectionToAnotherHostUnlessAllowed() throws {
        var settings = GeminiBackend.defaultSettings
        settings["endpoint"] = .text("ws://example.com:9000")
        settings["api_key_file"] = nil
        do {
            _ = try GeminiBackend(context: context(settings, usage: .oneShot(maxRetries: 1, fast: true)))
            Issue.record("ws:// to another host must be refused")
        } catch {
            #expect(error.key == "endpoint")
        }
        settings["allow_insecure"] = .flag(true)
        _ = try GeminiBackend(context: context(settings, usage: .oneShot(maxRetries: 1, fast: true)))
        #expect(throws: ConfigurationError.self) {
            try parse("gemini:\n  endpoint: ws://u:secret@example.com/\n")
        }
    }
}

/// `hark converse`'s command line: each backend's options, and numbers that must be refused.
@Suite struct ConverseCommandLineTests {
    private func validate(_ arguments: [String]) -> String? {
        do {
            let command = try Converse.parse(arguments)
            try command.validate()
            return nil
        } catch {
            return Converse.message(for: error)
        }
    }

    @Test func optionsOfAnotherBackendAreRefused() {
        let base = ["--input", "in.wav", "--output", "out.wav"]
        #expect(
            validate(base + ["--agent-id", "tutor"])?.contains("--agent-id do not apply to --backend gemini") == true
        )
        #expect(validate(base + ["--backend", "datagrid", "--model", "m"])?.contains("--model") == true)
        #expect(validate(base + ["--backend", "datagrid", "--agent-id", "tutor"]) == nil)
        #expect(validate(base + ["--backend", "nope"])?.contains("--backend must be one of gemini, datagrid") == true)
    }

    @Test func absurdNumbersAreUsageErrors() {
        let base = ["--input", "in.wav", "--output", "out.wav"]
        for value in ["inf", "1e300", "nan", "0"] {
            #expect(validate(base + ["--timeout", value])?.contains("--timeout must be a number of seconds") == true)
        }
        #expect(validate(base + ["--idle-timeout", "1e300"])?.contains("--idle-timeout") == true)
        #expect(validate(base + ["--listen", "inf"])?.contains("--listen") == true)
        #expect(validate(["--input", "in.wav", "--output", ""])?.contains("--output must name a file") == true)
        #expect(throws: (any Error).self) {
            let run = try Run.parse(["--duration", "inf"])
            try run.validate()
        }
    }

    @Test func aSettingIsCheckedByItsKeyWhicheverWayItCame() async {
        var options = ConverseOptions(input: "/nonexistent.wav", output: "/tmp/out.wav")
        options.settings["api_version"] = "v9"
        let outcome = await ConverseRunner(
            options: options,
            network: .nio(logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }),
            environment: [:],
            logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() },
            transcriptSink: { _ in }
        ).run()
        #expect(outcome.exitCode == 2)
        #expect(outcome.message?.contains("--api-version must be one of v1beta, v1, v1alpha") == true)
    }

    /// Each backend's own `hark converse` options, read from the help ArgumentParser prints for its group (not from
    /// the code that turns them into settings): every flag is a key of that backend, named as the key's flag, and
    /// parsing it gives exactly that setting.
    @Test func everyBackendOptionIsAKeyOfItsBackendAndGivesThatSetting() throws {
        let groups: [(any BackendOptionGroup.Type, String)] = [
            (GeminiOptions.self, GeminiOptions.helpMessage()), (DatagridOptions.self, DatagridOptions.helpMessage()),
            (CascadeOptions.self, CascadeOptions.helpMessage()),
            (LiveKitAgentOptions.self, LiveKitAgentOptions.helpMessage()),
        ]
        #expect(groups.map { $0.0.backendName } == Backends.names)
        for (group, help) in groups {
            let backend = try #require(Backends.named(group.backendName))
            // `--flag` alone, or `--flag <VALUE>` for an option that takes one.
            var flags: [String: Bool] = [:]
            for match in help.matches(of: /(--[a-z0-9-]+)( <[A-Za-z.]+>)?/) where match.output.1 != "--help" {
                flags[String(match.output.1)] = match.output.2 != nil
            }
            #expect(!flags.isEmpty, "\(group)")
            for (flag, takesValue) in flags {
                let key = try #require(
                    backend.settingKeys.first { SettingKey.flagName($0.name) == flag },
                    "\(flag) of \(backend.name) names no key of its section"
                )
                var isFlag = false
                if case .flag = key.kind { isFlag = true }
                let value = takesValue ? (isFlag ? "false" : "value-of-\(key.name)") : "true"
                let parsed = try parseOptions(group, takesValue ? [flag, value] : [flag])
                #expect(parsed == [key.name: value], "\(flag)")
            }
            #expect(try parseOptions(group, []).isEmpty, "\(group): nothing given, no settings")
        }
    }

    private func parseOptions(_ group: any BackendOptionGroup.Type, _ arguments: [String]) throws -> [String: String] {
        let parsed = try (group as! any ParsableArguments.Type).parse(arguments)
        return (parsed as! any BackendOptionGroup).settings
    }

    /// The commands' help names every backend and where each secret comes from, from the registry.
    @Test func theCommandsHelpNamesEveryBackendAndEverySecret() {
        for help in [Run.helpMessage(columns: 400), ConfigCommand.Check.helpMessage(columns: 400)] {
            for backend in Backends.all {
                #expect(help.contains("\(backend.name)"), "\(backend.name)")
                for secret in backend.secrets {
                    #expect(help.contains(secret.credential) && help.contains(secret.environment), "\(secret.what)")
                }
            }
        }
        let converse = Converse.helpMessage(columns: 400)
        for backend in Backends.all {
            #expect(converse.contains("--backend \(backend.name): \(backend.summary)"), "\(backend.name)")
            for secret in backend.secrets { #expect(converse.contains(SettingKey.flagName(secret.fileKey))) }
        }
    }

    /// The secret report as a structure: which place is used, which is not needed and why, for the doctor.
    @Test func theSecretReportSaysWhichPlaceIsUsedAndWhyASecretIsNotNeeded() throws {
        var configuration = try ConfigurationLoader.parse(
            "backend: datagrid\n",
            file: "/srv/hark.yaml",
            folder: "/srv",
            environment: [:]
        ).configuration
        let environment = ["DATAGRID_API_KEY": "dg-from-env"]
        let report = configuration.secretReport(environment: environment)
        #expect(report.map(\.verdict) == [.absent, .used])
        #expect(report.last?.description == "datagrid key: environment variable DATAGRID_API_KEY (set, used)")
        configuration.backends["datagrid"]?["endpoint"] = .text("http://127.0.0.1:9")
        let simulator = configuration.secretReport(environment: environment)
        #expect(simulator.map(\.verdict) == [.notNeeded])
        #expect(simulator.first?.state == "not needed: the endpoint is not the service's own")
    }
}
