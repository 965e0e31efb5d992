import ArgumentParser
import HarkCascadeSimulator
import HarkCore
import HarkLiveSimulator
import Logging

@main
struct HarkCascadeSim: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hark-cascade-sim",
        abstract: "A stand-in for the cascade's services (Sarvam speech-to-text and text-to-speech, Gemini text).",
        discussion: """
            Serves, on one port: the WebSocket /speech-to-text/ws (Sarvam's streaming speech-to-text: audio as \
            JSON, an energy voice detector ending an utterance after about 1 s of silence (0.5 s with \
            high_vad_sensitivity=true), START_SPEECH/END_SPEECH events with vad_signals=true in no fixed order \
            against the one final transcript of each utterance, flush with flush_signal=true, a drop without a close \
            frame after 60 s without audio), the WebSocket /text-to-speech/ws (Sarvam's streaming text-to-speech: \
            config first with language_code or target_language_code, text buffered until min_buffer_size or a \
            flush, audio as base64 PCM at speech_sample_rate, 20 ms of a 330 Hz tone per character, the final \
            event after a flush with send_completion_event=true, 422 errors, closed after 60 s idle) and \
            POST /v1beta/models/MODEL:streamGenerateContent?alt=sse (Gemini's streamed text, CRLF server-sent \
            events repeating the user's words in three sentences, thoughts only with includeThoughts, a \
            thoughtSignature on the last chunk). When ready it prints "listening on http://127.0.0.1:PORT"; logs go \
            to stderr, never a key. SIGINT or SIGTERM stops it.

            Keys: with --sarvam-key both sockets need it in api-subscription-key (a wrong one is refused at the \
            upgrade with 401, or with --close-4003 taken and closed with 4003 at the first audio); with \
            --gemini-key the text service needs it in x-goog-api-key (400 otherwise).
            """
    )

    @Option(help: "Address to bind.") var host = "127.0.0.1"
    @Option(help: "Port to bind (0: any).") var port = 0
    @Flag(help: "Serve HTTPS and wss:// with a self-signed CA generated at start-up.") var tls = false
    @Option(help: ArgumentHelp("With --tls, write the CA certificate here.", valueName: "PEM")) var caOut: String?
    @Option(help: ArgumentHelp("Require this Sarvam key.", valueName: "KEY")) var sarvamKey: String?
    @Option(help: ArgumentHelp("Require this Gemini key.", valueName: "KEY")) var geminiKey: String?
    @Flag(help: "Take a wrong Sarvam key and close with 4003 at the first audio instead of refusing it.")
    var close4003 = false
    @Option(help: ArgumentHelp("The transcript of the next utterance (repeatable).", valueName: "TEXT"))
    var transcript: [String] = []
    @Option(help: ArgumentHelp("Delay before the text's first chunk, in milliseconds.", valueName: "MS"))
    var firstChunk = 100
    @Option(help: ArgumentHelp("Answer every text request with this status (401, 429, 503).", valueName: "CODE"))
    var failText: Int?
    @Option(help: ArgumentHelp("Call this function when it is declared.", valueName: "NAME")) var call: String?
    @Option(help: "trace, debug, info, notice, warning, error or critical.") var logLevel = "info"

    func run() async throws {
        let logger = SimulatorProcess.bootstrapLogging(label: "hark-cascade-sim", level: logLevel)
        var configuration = CascadeSimulatorConfiguration()
        configuration.host = host
        configuration.port = port
        configuration.tls = tls
        configuration.caOut = caOut
        configuration.sarvamKey = sarvamKey.map(Secret.init)
        configuration.geminiKey = geminiKey.map(Secret.init)
        configuration.refuseBadKeyAtUpgrade = !close4003
        configuration.transcripts = transcript
        configuration.text.firstChunkDelay = .milliseconds(firstChunk)
        configuration.text.failWithStatus = failText
        configuration.text.scriptedCall = call
        let simulator = CascadeSimulator(configuration: configuration, logger: logger)
        try await simulator.start()
        let signal = await SimulatorProcess.announceAndWait(listening: simulator.httpBaseURL)
        logger.info("stopping", metadata: ["signal": "\(signal)"])
        try await simulator.stop()
    }
}
