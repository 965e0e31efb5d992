import ArgumentParser
import HarkCore
import HarkDatagridSimulator
import HarkSimulatorKit
import Logging

@main
struct HarkDatagridSim: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hark-datagrid-sim",
        abstract: "A stand-in for the Datagrid Voice WebSocket API, for tests and demos.",
        discussion: """
            Serves POST /v1/voice (the REST hand-off: with --require-key it checks "Authorization: Bearer KEY"; \
            it answers {"object": "voice.session", "url": "ws://HOST:PORT/ws/voice?token=vt_...", "agent_id", \
            "start_message"} with a single-use token valid for 60 s) and the WebSocket /ws/voice?token=TOKEN \
            (a hand-off token, or with --require-key the key itself for a direct connection). When ready it \
            prints "listening on http://127.0.0.1:PORT" to stdout; logs go to stderr, never a key or a token. \
            SIGINT or SIGTERM stops it.

            Each connection answers start with started then ready (audio before ready is ignored and counted), \
            greets (4 beeps and an agent transcript) unless voice_config.silent_start or the conversation \
            continues, and then: an energy voice detector (-50 dBFS to start, 500 ms below -44 dBFS to end, \
            or voice_config.silence_commit_ms) ends each user turn; the user's transcript goes out at once and, \
            after --response-latency, 24 kHz beeps in 125 ms audio chunks (440/550/660/880 Hz by turn; \
            clamp(4 + round(4 * U), 4, 40) beeps for U seconds of speech, 4 for a text turn), then the agent's \
            transcript "answer N". Speech during an answer interrupts it (interrupted). Time runs on the input \
            audio clock (wall clock after 250 ms without audio). Silent frames for the silence timeout \
            (voice_config.silence_timeout seconds, or --silence-timeout; scaled by --time-scale) end the session \
            with error client_silence_timeout and a 1000 close. stop is answered with ended and the \
            conversation's transcript. A start with a known conversation_id continues that conversation.

            Tool calls (--tool TURN:NAME[:fail], repeatable): tool_call started, then completed or failed, \
            before the answer to user turn TURN.
            Faults (--fault, repeatable): ready@CONN:ACTION or turn@TURN:ACTION, where ACTION is \
            close=CODE, drop, malformed, unknown or error=CODE.
            """
    )

    @Option(help: "Address to bind.") var host = "127.0.0.1"
    @Option(help: "Port to bind (0: any).") var port = 0
    @Option(help: ArgumentHelp("Require this API key.", valueName: "KEY")) var requireKey: String?
    @Flag(help: "Serve HTTPS and wss:// with a self-signed CA generated at start-up.") var tls = false
    @Option(help: ArgumentHelp("With --tls, write the CA certificate here.", valueName: "PEM")) var caOut: String?
    @Option(help: "Multiply the simulator's timers (silence timeout, tool durations).") var timeScale = 1.0
    @Option(help: ArgumentHelp("Default silence timeout in seconds.", valueName: "SECONDS")) var silenceTimeout = 60.0
    @Option(help: ArgumentHelp("Latency before each answer in milliseconds.", valueName: "MS")) var responseLatency =
        300
    @Flag(help: "Never greet.") var noGreeting = false
    @Option(help: ArgumentHelp("A scripted tool call.", valueName: "TURN:NAME[:fail]")) var tool: [String] = []
    @Option(help: ArgumentHelp("A fault.", valueName: "ready@CONN:ACTION|turn@TURN:ACTION")) var fault: [String] = []
    @Option(help: "trace, debug, info, notice, warning, error or critical.") var logLevel = "info"

    func run() async throws {
        let logger = SimulatorProcess.bootstrapLogging(label: "hark-datagrid-sim", level: logLevel)
        var configuration = DatagridSimulatorConfiguration(host: host, port: port)
        configuration.requiredKey = requireKey.map(Secret.init)
        configuration.tls = tls
        configuration.caOut = caOut
        configuration.timeScale = timeScale
        configuration.silenceTimeout = .milliseconds(Int64(silenceTimeout * 1000))
        configuration.responseLatency = .milliseconds(responseLatency)
        configuration.greets = !noGreeting
        configuration.tools = try tool.map(Self.parseTool)
        configuration.faults = try fault.map(Self.parseFault)
        let simulator = DatagridSimulator(configuration: configuration, logger: logger)
        try await simulator.start()
        let signal = await SimulatorProcess.announceAndWait(listening: simulator.httpBaseURL)
        logger.info("stopping", metadata: ["signal": "\(signal)"])
        try await simulator.stop()
    }

    static func parseTool(_ text: String) throws -> DatagridToolScript {
        let parts = text.split(separator: ":").map(String.init)
        guard parts.count >= 2, let turn = Int(parts[0]), turn > 0 else {
            throw ValidationError("--tool: expected TURN:NAME[:fail], got \(text)")
        }
        return DatagridToolScript(turn: turn, name: parts[1], fails: parts.count > 2 && parts[2] == "fail")
    }

    static func parseFault(_ text: String) throws -> DatagridFault {
        let parts = text.split(separator: ":", maxSplits: 1).map(String.init)
        guard parts.count == 2 else { throw ValidationError("--fault: expected WHEN:ACTION, got \(text)") }
        let trigger: DatagridFault.Trigger
        if parts[0].hasPrefix("ready@"), let number = Int(parts[0].dropFirst("ready@".count)) {
            trigger = .afterReady(connection: number)
        } else if parts[0].hasPrefix("turn@"), let number = Int(parts[0].dropFirst("turn@".count)) {
            trigger = .afterTurn(number)
        } else {
            throw ValidationError("--fault: WHEN is ready@CONN or turn@TURN, got \(parts[0])")
        }
        let action: DatagridFault.Action
        switch parts[1] {
        case "drop": action = .drop
        case "malformed": action = .malformed
        case "unknown": action = .unknownType
        case let spec where spec.hasPrefix("close="):
            guard let code = Int(spec.dropFirst("close=".count)) else {
                throw ValidationError("--fault: bad close code")
            }
            action = .close(code: code, reason: "simulated close")
        case let spec where spec.hasPrefix("error="):
            let code = String(spec.dropFirst("error=".count))
            action = .error(code: code, message: "simulated \(code)", close: true)
        default:
            throw ValidationError("--fault: unknown action \(parts[1])")
        }
        return DatagridFault(trigger, action)
    }
}
