import HarkCore
import HarkDatagrid
import Logging

/// `hark converse --backend datagrid`: the same run against a Datagrid voice agent.
extension ConverseRunner {
    /// Builds the Datagrid session configuration from the options; throws a usage error (exit 2).
    func makeDatagridConfiguration() throws -> DatagridConfiguration {
        let key: Secret?
        do {
            var sources: [Secret.Source] = []
            if let file = options.apiKeyFile { sources.append(.file(file)) }
            sources += [.environment("DATAGRID_API_KEY"), .credential("datagrid-api-key")]
            key = try Secret.load(from: sources, environment: environment)
        } catch let error as Secret.LoadError {
            throw ConverseUsageError(error.description)
        }
        // The Gemini default endpoint means "not given": use Datagrid's own.
        let base =
            options.endpoint == ConverseOptions.realEndpoint ? DatagridConfiguration.realBaseURL : options.endpoint
        let schemes = ["http://", "https://", "ws://", "wss://"]
        guard schemes.contains(where: { base.hasPrefix($0) }) else {
            throw ConverseUsageError(
                "--endpoint must start with http(s):// or ws(s):// (got \(URLRedaction.redact(base)))"
            )
        }
        let apiKey: Secret
        do {
            apiKey = try SessionChoices.datagridKey(
                key,
                base: base,
                noKey:
                    "no Datagrid API key: pass --api-key-file PATH or set DATAGRID_API_KEY (see hark converse --help)"
            )
        } catch {
            throw ConverseUsageError(error.message)
        }
        if let text = options.greeting, text.count > DatagridStart.initialMessageLimit {
            throw ConverseUsageError("--greeting is longer than \(DatagridStart.initialMessageLimit) characters")
        }
        let start = SessionChoices.datagridStart(
            agentID: options.agentId,
            systemPrompt: options.systemInstruction,
            silentStart: options.silentStart,
            voicePreset: options.voicePreset
        )
        return DatagridConfiguration(
            apiKey: apiKey,
            baseURL: SessionChoices.datagridRESTBase(base),
            webSocketBaseURL: DatagridConfiguration.webSocketBase(for: base),
            mode: options.direct ? .direct : .handoff,
            teamspace: options.teamspace,
            start: start,
            giveUpOnRejection: true,
            maxConsecutiveFailures: options.maxRetries
        )
    }

    /// Runs the conversation with a ``DatagridSession``.
    func runDatagrid() async -> ConverseOutcome {
        do {
            let configuration = try makeDatagridConfiguration()
            let samples = try loadInput()
            let session = DatagridSession(
                configuration: configuration,
                transport: transport,
                http: http,
                logger: logger
            )
            return await converse(session: session, samples: samples, progress: ProgressBox())
        } catch let error as ConverseUsageError {
            return ConverseOutcome(exitCode: 2, message: error.message, outputSamples: 0, inputSamplesSent: 0)
        } catch {
            return ConverseOutcome(exitCode: 2, message: "\(error)", outputSamples: 0, inputSamplesSent: 0)
        }
    }
}
