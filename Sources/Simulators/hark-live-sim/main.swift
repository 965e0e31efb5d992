import ArgumentParser
import HarkCore
import HarkLiveSimulator
import HarkSimulatorKit
import Logging

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

@main
struct HarkLiveSim: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hark-live-sim",
        abstract: "A stand-in for the Gemini Live API (BidiGenerateContent over WebSocket), for tests and benchmarks.",
        discussion: """
            Serves ws[s]://HOST:PORT[/PREFIX]/ws/google.ai.generativelanguage.VERSION.GenerativeService.\
            BidiGenerateContent for VERSION v1, v1beta or v1alpha, and ...BidiGenerateContentConstrained on \
            v1alpha with ephemeral tokens minted by POST /v1alpha/auth_tokens. Any other path gets 404. \
            When ready it prints one line to stdout, "listening on ws://127.0.0.1:PORT" (or \
            wss://localhost:PORT). It logs one line per event to stderr, never a key or a token. \
            SIGINT or SIGTERM stops it (and writes --record).

            Time: each connection's clock runs on the input audio it receives (at 16 kHz, 16000 samples \
            are one second), so a client that sends as fast as it can sees exactly what a real-time \
            client sees. When no audio has arrived for 250 ms of wall-clock time, the wall clock drives \
            the connection's clock instead, so silent clients still get their answers, goAway and close.

            Voice activity: RMS of 20 ms frames. START_SENSITIVITY_HIGH (default) / LOW: speech at \
            -50 / -38 dBFS for 40 / 100 ms starts a turn; END_SENSITIVITY_HIGH (default) / LOW: \
            500 / 800 ms below -44 / -56 dBFS ends it. prefixPaddingMs and silenceDurationMs override \
            the durations. With disabled: true, activityStart and activityEnd delimit turns.

            Answers: --response-latency after a user turn ends, clamp(4 + round(4 * U), 4, 40) beeps of \
            250 ms for U seconds of speech (4 beeps for a text turn): 24 kHz mono PCM16, 440, 550, 660 \
            or 880 Hz for turns 1, 2, 3, 4 (mod 4), in 125 ms chunks, the first 500 ms at once and the \
            rest at twice real time. Output transcription "answering turn N" (text turns: "answering: \
            TEXT"; tool turns add "tool NAME said RESPONSE"), then generationComplete, turnComplete \
            with usageMetadata, and sessionResumptionUpdate with a new handle. User speech during an \
            answer interrupts it (interrupted, turnComplete) unless activityHandling is NO_INTERRUPTION.

            Sessions: a sessionResumptionUpdate with resumable: false and no handle goes out \
            mid-answer, one with a new handle after each turn. A setup with that handle resumes the \
            session (turn numbering continues) on a new connection; an unknown handle, or one 2 hours \
            past its session's end, is closed with 1007; a resume while the session's old socket is \
            still open is closed with 1011. Ephemeral tokens open one new session per use (0 = \
            unlimited); resuming uses none.

            Models: the setup's model name chooses the behaviour. Names starting with gemini-3.8-live \
            behave as gemini-3.8-live does (below); every other name as the 2.5 native-audio models (above). \
            gemini-2.0-flash-live-001 and gemini-live-2.5-flash-preview were shut down: refused with 1008 \
            ("models/X is not found for API version ..."), as an unknown model.

            gemini-3.8-live: a setup with generationConfig.thinkingConfig (only thinkingLevel, and only on \
            gemini-3.8-live-extended-thinking, is taken), proactivity {proactiveAudio: false}, \
            generationConfig.enableAffectiveDialog or responseModalities TEXT is closed with 1007 \
            ("Request contains an invalid argument: FIELD ..."). setupComplete carries a sessionId; every \
            turnComplete an interactionStatus (IDLE, or IN_PROGRESS while more output is to come). Function \
            calls are NON_BLOCKING unless declared behavior: BLOCKING: the model sends the toolCall and goes on \
            with its answer, whose turnComplete says IN_PROGRESS while a call is unanswered. Responses with \
            willContinue: true are progress; the last one is heard per its scheduling: WHEN_IDLE (default) in \
            a turn of its own ("tool NAME said RESPONSE") once the model is idle, INTERRUPT at once (what the \
            model is saying is interrupted), SILENT in no turn (a turnComplete with IDLE and no content ends the \
            interaction). A BLOCKING call is answered after its response, as on 2.5. User speech while calls \
            run cancels them (toolCallCancellation; later responses are ignored); calls still running when a \
            connection ends go on in the session that resumes it. Polite barge-in: an answer \
            never starts while the user speaks; it waits for the end of the speech. With historyConfig \
            {initialHistoryInClientContent: true}, clientContent turns (roles user and model) are history, \
            taken without an answer until one with turnComplete: true (--record shows them, and whether they \
            came before any realtime input). While the user speaks: interimInputTranscription every 500 ms of \
            speech (the whole guess so far), voiceActivity ACTIVITY_START / ACTIVITY_END with audioOffset at \
            the detector's speech start and end. inputAudioTranscription.languageCodes and customVocabulary \
            are taken and recorded.

            Faults (--fault, repeatable):
            \(SimulatorFault.grammar)
            Examples: turn=2:close=1011  audio=3s:drop:conn=1  answer=1:stall=20s  turn=2:reject  \
            answer=1:cancel-tools

            Scenario file (--scenario):
            \(SimulatorScenario.fileFormat)
            """
    )

    @Option(help: "Address to bind.")
    var host = "127.0.0.1"

    @Option(help: "Port to bind; 0 picks a free one (printed on the 'listening on' line).")
    var port = 0

    @Flag(
        help:
            "Serve TLS (wss://, https://) with a self-signed CA and a leaf for localhost and 127.0.0.1, generated now."
    )
    var tls = false

    @Option(
        help: ArgumentHelp(
            "With --tls: write the generated CA certificate (PEM) here, for clients to trust.",
            valueName: "path"
        )
    )
    var caOut: String?

    @Option(
        help: ArgumentHelp(
            "Serve TLS with this PEM certificate chain instead of a generated one (needs --key-file).",
            valueName: "path"
        )
    )
    var certFile: String?

    @Option(help: ArgumentHelp("The PEM private key for --cert-file.", valueName: "path"))
    var keyFile: String?

    @Option(
        help: ArgumentHelp(
            "Accept only this API key (x-goog-api-key header or key= query); a wrong or missing key is "
                + "closed with 1008 after setup. Default: any key.",
            valueName: "key"
        )
    )
    var requireKey: String?

    @Option(
        help: ArgumentHelp(
            "Close each connection with 1000 after this much connection time (e.g. 600s, 10m), sending "
                + "goAway --go-away-grace before.",
            valueName: "duration"
        )
    )
    var connectionLifetime: String?

    @Flag(
        help: ArgumentHelp(
            "Count --connection-lifetime on the wall clock from the setup, as the real service does, not on the "
                + "session clock (which runs as fast as the client sends audio, so audio sent again after a "
                + "resume uses a short lifetime up at once)."
        )
    )
    var lifetimeOnWallClock = false

    @Option(help: ArgumentHelp("How long before the lifetime ends goAway is sent.", valueName: "duration"))
    var goAwayGrace = "10s"

    @Option(
        help:
            "Multiply the simulator's own timers (lifetime, grace, stalls): 0.1 runs a 10-minute lifetime in 1 minute."
    )
    var timeScale = 1.0

    @Option(
        help: ArgumentHelp(
            "Connection time from the end of a user turn to the first answer audio.",
            valueName: "duration"
        )
    )
    var responseLatency = "300ms"

    @Option(
        help: ArgumentHelp(
            "A JSON scenario file: tool calls, faults, resumption refusal (format above).",
            valueName: "path"
        )
    )
    var scenario: String?

    @Option(
        help: ArgumentHelp(
            "Script a tool call: on user turn TURN the model calls NAME with ARGS (repeatable), e.g. "
                + "1:get_time:{}. A 2.5 model (or a BLOCKING function on 3.8) waits for the toolResponse before "
                + "answering; 3.8 answers at once and speaks about the result when it comes.",
            valueName: "TURN:NAME[:ARGS_JSON]"
        )
    )
    var toolCall: [String] = []

    @Option(
        help: ArgumentHelp("Inject a fault (repeatable; grammar above).", valueName: "TRIGGER:ACTION[:conn=N][:repeat]")
    )
    var fault: [String] = []

    @Option(help: ArgumentHelp("Refuse every resumption with this close code (1011 or 1007).", valueName: "code"))
    var refuseResumption: Int?

    @Flag(help: "Send every server message in a binary WebSocket frame.")
    var binaryFrames = false

    @Flag(help: "Send only setupComplete in a binary frame, as the real service has been seen to.")
    var binarySetupComplete = false

    @Option(
        help: ArgumentHelp("On exit, write a JSON report of what each connection received here.", valueName: "path")
    )
    var record: String?

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel = "info"

    func validate() throws {
        if (certFile == nil) != (keyFile == nil) {
            throw ValidationError("--cert-file and --key-file go together")
        }
        if caOut != nil, !tls {
            throw ValidationError("--ca-out needs --tls")
        }
        if !(timeScale > 0) {
            throw ValidationError("--time-scale must be positive")
        }
        if let refuseResumption, ![1007, 1011].contains(refuseResumption) {
            throw ValidationError("--refuse-resumption takes 1007 or 1011")
        }
        if Logger.Level(rawValue: logLevel) == nil {
            throw ValidationError("unknown --log-level \(logLevel)")
        }
    }

    func run() async throws {
        let logger = SimulatorProcess.bootstrapLogging(label: "hark-live-sim", level: logLevel)

        var configuration = LiveSimulatorConfiguration(host: host, port: port)
        if let certFile, let keyFile {
            configuration.tls = .files(certificate: certFile, key: keyFile)
        } else if tls {
            configuration.tls = .selfSigned(caOut: caOut)
        }
        configuration.requiredKey = requireKey.map(Secret.init)
        configuration.connectionLifetime = try connectionLifetime.map { try duration($0, "--connection-lifetime") }
        configuration.goAwayGrace = try duration(goAwayGrace, "--go-away-grace")
        configuration.lifetimeOnWallClock = lifetimeOnWallClock
        configuration.responseLatency = try duration(responseLatency, "--response-latency")
        configuration.timeScale = timeScale
        configuration.binaryFrames = binaryFrames
        configuration.binarySetupComplete = binarySetupComplete
        var scenario = try scenario.map(SimulatorScenario.load(path:)) ?? SimulatorScenario()
        scenario.toolCalls += try toolCall.map(ScriptedToolCall.parse)
        for spec in fault {
            if spec.hasPrefix("refuse-resumption") {
                scenario.refuseResumption = Int(spec.split(separator: "=").last ?? "") ?? 1011
            } else {
                scenario.faults.append(try SimulatorFault.parse(spec))
            }
        }
        if let refuseResumption { scenario.refuseResumption = refuseResumption }
        configuration.scenario = scenario

        let simulator = LiveSimulator(configuration: configuration, logger: logger)
        try await simulator.start()
        let signal = await SimulatorProcess.announceAndWait(listening: simulator.baseURL)
        logger.info("stopping", metadata: ["signal": "\(signal)"])
        try await simulator.stop()
        if let record {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            try encoder.encode(simulator.recorder.snapshot()).write(to: URL(filePath: record), options: .atomic)
            logger.info("wrote the report", metadata: ["path": "\(record)"])
        }
    }

    private func duration(_ text: String, _ flag: String) throws -> Duration {
        guard let value = SimulatorDurations.parse(text) else {
            throw ValidationError("\(flag): not a duration: \(text) (e.g. 1.5, 1.5s, 250ms, 10m)")
        }
        return value
    }
}
