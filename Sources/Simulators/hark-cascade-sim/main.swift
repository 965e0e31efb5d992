import ArgumentParser
import HarkCascadeSimulator
import HarkCore
import HarkSimulatorKit
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
            --gemini-key the text service needs it in x-goog-api-key (otherwise 400 INVALID_ARGUMENT with the reason \
            API_KEY_INVALID, as Google refuses a key that is not valid; so does GET /v1beta/models/MODEL, which \
            answers the model's description when the key is taken).

            The services' own time: --stt-final (endpoint to final transcript), --first-chunk and --chunk (the \
            text's first chunk and each next), --tts-first-audio (text or flush to its audio). Faults: \
            --refuse-stt CODE refuses the next speech-to-text upgrade with that status (repeatable, in order); \
            --text-fault FAULT for the next text request (repeatable, in order): ok, a status (429, 503, 401, 403, or \
            429:SECONDS with a Retry-After), key-invalid (the key refused: 400 with the reason API_KEY_INVALID), \
            drop (200, then the connection closes), drop-after:N or error-after:N (the connection closes, or an \
            error comes as raw JSON lines, after N events), stall:MS (the whole text, then a pause of MS \
            milliseconds before the event that finishes it). --fail-text CODE answers every text request with that \
            status (key-invalid: the key refused), GET /v1beta/models/MODEL too when it refuses the key.
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
    @Option(help: ArgumentHelp("Delay between the text's chunks, in milliseconds.", valueName: "MS"))
    var chunk = 30
    @Option(help: ArgumentHelp("Delay from the endpoint to the final transcript, in milliseconds.", valueName: "MS"))
    var sttFinal = 0
    @Option(help: ArgumentHelp("Delay from a text or flush to its speech, in milliseconds.", valueName: "MS"))
    var ttsFirstAudio = 0
    @Option(
        help: ArgumentHelp(
            "Answer every text request with this status (401, 403, 429, 503) or key-invalid.",
            valueName: "CODE"
        )
    )
    var failText: String?
    @Option(help: ArgumentHelp("Refuse the next speech-to-text upgrade with this status.", valueName: "CODE"))
    var refuseStt: [Int] = []
    @Option(help: ArgumentHelp("What goes wrong with the next text request (see above).", valueName: "FAULT"))
    var textFault: [String] = []
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
        configuration.text.chunkDelay = .milliseconds(chunk)
        configuration.text.fault = failText.flatMap(Self.fault)
        configuration.speechToTextFinalDelay = .milliseconds(sttFinal)
        configuration.textToSpeechFirstAudioDelay = .milliseconds(ttsFirstAudio)
        configuration.speechToTextRefusals = refuseStt
        configuration.textFaults = textFault.map(Self.fault)
        configuration.text.scriptedCall = call
        let simulator = CascadeSimulator(configuration: configuration, logger: logger)
        try await simulator.start()
        let signal = await SimulatorProcess.announceAndWait(listening: simulator.httpBaseURL)
        logger.info("stopping", metadata: ["signal": "\(signal)"])
        try await simulator.stop()
    }

    func validate() throws {
        for value in [firstChunk, chunk, sttFinal, ttsFirstAudio] where !(0...60_000).contains(value) {
            throw ValidationError("delays are 0 to 60000 milliseconds")
        }
        for fault in textFault where fault != "ok" && Self.fault(fault) == nil {
            throw ValidationError(
                "--text-fault: ok, a status, STATUS:SECONDS, key-invalid, drop, drop-after:N, error-after:N or stall:MS"
            )
        }
        if let failText, Int(failText) == nil && failText != "key-invalid" || Self.fault(failText) == nil {
            throw ValidationError("--fail-text: a status (100 to 599) or key-invalid")
        }
    }

    /// A `--text-fault` value (nil for `ok`, or one not understood).
    static func fault(_ text: String) -> TextService.Fault? {
        let parts = text.split(separator: ":", maxSplits: 1).map(String.init)
        let number = parts.count == 2 ? Int(parts[1]) : nil
        switch parts.first {
        case "drop"? where parts.count == 1: return .drop
        case "key-invalid"? where parts.count == 1: return .keyInvalid
        case "drop-after"?: return number.map { .dropAfter(events: $0) }
        case "error-after"?: return number.map { .errorAfter(events: $0) }
        case "stall"?:
            guard let number, (0...600_000).contains(number) else { return nil }
            return .stallBeforeFinish(.milliseconds(number))
        case let status? where Int(status).map({ (100...599).contains($0) }) == true:
            if parts.count == 2 && number == nil { return nil }
            return .status(Int(status) ?? 503, retryAfter: number)
        default: return nil
        }
    }
}
