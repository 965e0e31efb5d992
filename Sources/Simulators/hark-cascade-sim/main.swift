import ArgumentParser
import HarkCascadeSimulator
import HarkCore
import HarkSimulatorKit
import Logging

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

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
            to stderr, never a key. SIGINT or SIGTERM stops it (and writes --record).

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
            milliseconds before the event that finishes it), keep-alive:MS (200, then only a keep-alive comment \
            every MS milliseconds, for an hour: no answer ever). --fail-text CODE answers every text request with \
            that status (key-invalid: the key refused), GET /v1beta/models/MODEL too when it refuses the key. \
            --call NAME has the model call that function in the first reply of a user turn; with --call-every-reply \
            in every reply, a tool's result or not (a model that never stops calling).

            The speech sockets' faults: --stt-endless-turn CHARS (once speech starts, every audio message brings a \
            final transcript of CHARS characters and the utterance never ends); --tts-fault FAULT on the \
            text-to-speech sockets (the first --tts-fault-sockets N opened, else every one): close=CODE (the socket \
            closes with CODE right after a reply's first audio), silent (text taken, nothing ever comes back), \
            flood=FACTOR (FACTOR times the audio the text speaks).
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
    @Flag(help: "With --call: call it in every reply, after a tool's result too (a fault).")
    var callEveryReply = false
    @Option(
        help: ArgumentHelp(
            "Once speech starts, a final transcript this long per audio message, no end.",
            valueName: "CHARS"
        )
    )
    var sttEndlessTurn: Int?
    @Option(help: ArgumentHelp("What goes wrong on text-to-speech sockets (see above).", valueName: "FAULT"))
    var ttsFault: String?
    @Option(help: ArgumentHelp("--tts-fault on the first N sockets only.", valueName: "N")) var ttsFaultSockets: Int?
    @Option(help: "trace, debug, info, notice, warning, error or critical.") var logLevel = "info"
    @Option(
        help: ArgumentHelp(
            "On SIGINT or SIGTERM, write what the services saw here as JSON (counts, and the text requests' sizes).",
            valueName: "PATH"
        )
    )
    var record: String?

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
        configuration.text.callsEveryReply = callEveryReply
        configuration.speechToTextEndlessTurn = sttEndlessTurn
        configuration.textToSpeechFault = ttsFault.flatMap(Self.speechFault)
        configuration.textToSpeechFaultSockets = ttsFaultSockets
        let simulator = CascadeSimulator(configuration: configuration, logger: logger)
        try await simulator.start()
        let signal = await SimulatorProcess.announceAndWait(listening: simulator.httpBaseURL)
        logger.info("stopping", metadata: ["signal": "\(signal)"])
        try await simulator.stop()
        if let record {
            let seen = simulator.snapshot
            let summary: JSONValue = [
                "speechToTextSockets": .number(Double(seen.speechToTextSockets)),
                "samplesReceived": .number(Double(seen.samplesReceived)),
                "textToSpeechSockets": .number(Double(seen.textToSpeechSockets)),
                "texts": .number(Double(seen.texts.count)),
                "speechFlushes": .number(Double(seen.speechFlushes)),
                "textRequests": .number(Double(seen.textRequests.count)),
                "textRequestBytes": .array(seen.textRequests.map { .number(Double($0.utf8.count)) }),
                "textRequestSeconds": .array(
                    seen.textRequestTimes.map { .number((seen.textRequestTimes[0].duration(to: $0)).seconds) }
                ),
                "turns": .number(Double(seen.turnCount)),
            ]
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            try encoder.encode(summary).write(to: URL(filePath: record), options: .atomic)
            logger.info("wrote the report", metadata: ["path": "\(record)"])
        }
    }

    func validate() throws {
        for value in [firstChunk, chunk, sttFinal, ttsFirstAudio] where !(0...60_000).contains(value) {
            throw ValidationError("delays are 0 to 60000 milliseconds")
        }
        for fault in textFault where fault != "ok" && Self.fault(fault) == nil {
            throw ValidationError(
                "--text-fault: ok, a status, STATUS:SECONDS, key-invalid, drop, drop-after:N, error-after:N, stall:MS "
                    + "or keep-alive:MS"
            )
        }
        if let failText, Int(failText) == nil && failText != "key-invalid" || Self.fault(failText) == nil {
            throw ValidationError("--fail-text: a status (100 to 599) or key-invalid")
        }
        if let sttEndlessTurn, !(1...1_048_576).contains(sttEndlessTurn) {
            throw ValidationError("--stt-endless-turn: 1 to 1048576 characters")
        }
        if let ttsFault, Self.speechFault(ttsFault) == nil {
            throw ValidationError("--tts-fault: close=CODE (1000 to 4999), silent or flood=FACTOR (2 to 1000)")
        }
        if let ttsFaultSockets, ttsFaultSockets < 1 { throw ValidationError("--tts-fault-sockets: at least 1") }
    }

    /// A `--tts-fault` value, or nil when not understood.
    static func speechFault(_ text: String) -> TextToSpeechService.Fault? {
        let parts = text.split(separator: "=", maxSplits: 1).map(String.init)
        let number = parts.count == 2 ? Int(parts[1]) : nil
        switch parts.first {
        case "silent"? where parts.count == 1: return .silent
        case "close"?:
            guard let number, (1000...4999).contains(number) else { return nil }
            return .closeMidReply(code: number)
        case "flood"?:
            guard let number, (2...1000).contains(number) else { return nil }
            return .audioFlood(factor: number)
        default: return nil
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
        case "keep-alive"?:
            guard let number, (10...60_000).contains(number) else { return nil }
            return .keepAlive(every: .milliseconds(number))
        case let status? where Int(status).map({ (100...599).contains($0) }) == true:
            if parts.count == 2 && number == nil { return nil }
            return .status(Int(status) ?? 503, retryAfter: number)
        default: return nil
        }
    }
}
