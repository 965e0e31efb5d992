import HarkBackendKit
import HarkCascade
import HarkCore
import HarkSimulatorKit

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What a simulated service does on its socket.
public enum ServiceOutput: Sendable, Hashable {
    /// A text frame.
    case send(String)
    /// A close frame with this code and reason, then the socket closes.
    case close(code: Int, reason: String)
    /// The TCP connection goes away without a close frame (Sarvam's idle cut).
    case drop
}

/// Sarvam's streaming speech-to-text socket as a value (`/speech-to-text/ws`), as the facts page describes it:
/// audio in as JSON, its own voice detector over it, one final transcript per utterance (no partials), VAD events
/// only with `vad_signals=true` and in no fixed order against the transcript, `flush` only with
/// `flush_signal=true`, a drop without a close frame after 60 s without audio, and close 4003 when the key is bad
/// (the handshake succeeds; the close comes with the first audio). With a ``finalDelay`` the final transcript and
/// END_SPEECH go out that long after the endpoint (the service's own processing time).
public struct SpeechToTextService: Sendable {
    /// Where an utterance ended, in samples of the stream: its last speech frame's end, and the sample at which the
    /// endpointing's silence was complete.
    public struct Endpoint: Sendable, Hashable {
        public var speechEnd: Int64
        public var commit: Int64
    }

    /// The query of the socket's URL.
    public struct Options: Sendable, Hashable {
        public var language = "unknown"
        public var model = "saaras:v3"
        public var mode = "transcribe"
        public var sampleRate = 16_000
        public var vadSignals = false
        public var flushSignal = false
        public var highVADSensitivity = false

        public init() {}

        /// Reads the query (`language-code`, `model`, `mode`, `sample_rate`, `vad_signals`, `flush_signal`,
        /// `high_vad_sensitivity`); unknown names are ignored, as the service does.
        public init(query: [String: String]) {
            language = query["language-code"] ?? language
            model = query["model"] ?? model
            mode = query["mode"] ?? mode
            sampleRate = query["sample_rate"].flatMap(Int.init) ?? sampleRate
            vadSignals = query["vad_signals"] == "true"
            flushSignal = query["flush_signal"] == "true"
            highVADSensitivity = query["high_vad_sensitivity"] == "true"
        }
    }

    public let options: Options
    /// The transcripts to give, utterance by utterance (then "utterance N").
    public let transcripts: [String]
    /// The key was rejected: the first audio closes the socket with 4003.
    public let badKey: Bool
    /// Without audio for this long the connection is dropped.
    public let idleCut: Duration
    /// Between the endpoint and the final transcript (with END_SPEECH).
    public let finalDelay: Duration
    /// A fault: once speech starts, every audio message brings a final transcript of this many characters and the
    /// utterance never ends (no END_SPEECH, no endpoint), for as long as audio comes.
    public let endlessTurnCharacters: Int?

    private var detector: SimulatorVoiceDetector
    private var utterances = 0
    private var lastAudio: Duration
    /// Seeds the order of END_SPEECH and the transcript.
    private var random: UInt64
    /// What the session received, for tests: audio samples, flushes, unknown messages.
    public private(set) var samplesReceived = 0
    public private(set) var flushes = 0
    public private(set) var closed = false
    /// Utterances ended so far, and where the last one ended.
    public private(set) var endpoints = 0
    public private(set) var lastEndpoint: Endpoint?
    /// Final transcripts sent so far.
    public private(set) var transcriptsSent = 0
    /// Messages held for their time (the final delay).
    private var pending: [(due: Duration, output: ServiceOutput, isTranscript: Bool)] = []

    public init(
        options: Options,
        transcripts: [String] = [],
        badKey: Bool = false,
        idleCut: Duration = .seconds(60),
        finalDelay: Duration = .zero,
        endlessTurnCharacters: Int? = nil,
        seed: UInt64 = 1,
        now: Duration
    ) {
        self.options = options
        self.transcripts = transcripts
        self.badKey = badKey
        self.idleCut = idleCut
        self.finalDelay = max(.zero, finalDelay)
        self.endlessTurnCharacters = endlessTurnCharacters.map { min(max(1, $0), 1 << 20) }
        self.random = seed | 1
        self.lastAudio = now
        // Sarvam's endpointing needs about 1 s of trailing silence, 0.5 s with high sensitivity.
        self.detector = SimulatorVoiceDetector(
            parameters: .init(
                startThresholdDBFS: -45,
                endThresholdDBFS: -45,
                prefixPadding: .milliseconds(60),
                silenceDuration: options.highVADSensitivity ? .milliseconds(500) : .seconds(1)
            ),
            sampleRate: options.sampleRate
        )
    }

    /// One text frame from the client.
    public mutating func received(_ text: String, now: Duration) -> [ServiceOutput] {
        guard !closed else { return [] }
        let due = release(now: now)
        guard let json = try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)) else {
            return due + close(1003, "Invalid message format")
        }
        if let audio = json["audio"] {
            guard !badKey else { return due + close(4003, "Invalid API key") }
            guard let data = audio["data"]?.stringValue.flatMap(Base64Bytes.decode) else {
                return due + close(1003, "Invalid audio data")
            }
            lastAudio = now
            let samples = PCM16.samples(data)
            samplesReceived += samples.count
            if let characters = endlessTurnCharacters {
                return due + endlessTurn(samples, characters: characters)
            }
            return due
                + detector.process(samples: samples).flatMap { event -> [ServiceOutput] in
                    switch event {
                    case .speechStarted: speechStarted()
                    case .speechEnded(_, let end, let commit): speechEnded(end: end, commit: commit, now: now)
                    }
                }
        }
        switch json["type"]?.stringValue {
        case "flush"?:
            flushes += 1
            guard options.flushSignal else { return due }
            if let event = detector.flush(), case .speechEnded(_, let end, let commit) = event {
                return due + speechEnded(end: end, commit: commit, now: now)
            }
            return due
        case "config"?:
            return due
        default:
            return due + close(1003, "Invalid message format")
        }
    }

    /// Time passed: held messages whose time came go out; the service cuts a socket that gets no audio.
    public mutating func tick(now: Duration) -> [ServiceOutput] {
        guard !closed else { return [] }
        let due = release(now: now)
        guard now - lastAudio >= idleCut else { return due }
        closed = true
        return due + [.drop]
    }

    /// The held messages due by `now`, in order.
    private mutating func release(now: Duration) -> [ServiceOutput] {
        guard let first = pending.first, first.due <= now else { return [] }
        let count = pending.prefix { $0.due <= now }.count
        let outputs = pending.prefix(count).map(\.output)
        transcriptsSent += pending.prefix(count).count(where: \.isTranscript)
        pending.removeFirst(count)
        return outputs
    }

    /// The endless-turn fault: speech starts as usual; from then on each audio message brings one more long final
    /// transcript, and the end never comes.
    private mutating func endlessTurn(_ samples: [Int16], characters: Int) -> [ServiceOutput] {
        if utterances == 0 {
            let started = detector.process(samples: samples).contains {
                if case .speechStarted = $0 { true } else { false }
            }
            guard started else { return [] }
            utterances = 1
            return speechStarted()
        }
        utterances += 1
        transcriptsSent += 1
        let words = String(repeating: "word ", count: characters / 5 + 1).prefix(characters)
        return [.send(Self.transcript(String(words), number: utterances, options: options))]
    }

    private func speechStarted() -> [ServiceOutput] {
        guard options.vadSignals else { return [] }
        return [.send(Self.event("START_SPEECH"))]
    }

    private mutating func speechEnded(end speechEnd: Int64, commit: Int64, now: Duration) -> [ServiceOutput] {
        utterances += 1
        endpoints += 1
        lastEndpoint = Endpoint(speechEnd: speechEnd, commit: commit)
        let text = utterances <= transcripts.count ? transcripts[utterances - 1] : "utterance \(utterances)"
        let transcript = ServiceOutput.send(Self.transcript(text, number: utterances, options: options))
        var outputs = [transcript]
        if options.vadSignals {
            // The order is not fixed: the transcript may come before END_SPEECH.
            random = random &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let end = ServiceOutput.send(Self.event("END_SPEECH"))
            outputs = random >> 63 == 0 ? [end, transcript] : [transcript, end]
        }
        guard finalDelay > .zero else {
            transcriptsSent += 1
            return outputs
        }
        pending += outputs.map { (now + finalDelay, $0, $0 == transcript) }
        return []
    }

    private mutating func close(_ code: Int, _ reason: String) -> [ServiceOutput] {
        closed = true
        return [.close(code: code, reason: reason)]
    }

    static func event(_ signal: String) -> String {
        #"{"type":"events","data":{"signal_type":"\#(signal)","occured_at":\#(Date().timeIntervalSince1970)}}"#
    }

    static func transcript(_ text: String, number: Int, options: Options) -> String {
        let data: JSONValue = [
            "request_id": .string("sim-\(number)"), "transcript": .string(text), "timestamps": .null,
            "diarized_transcript": .null,
            "language_code": .string(options.language == "unknown" ? "en-IN" : options.language),
            "language_probability": 0.9, "metrics": ["audio_duration": 1.0, "processing_latency": 0.1],
        ]
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let body = (try? encoder.encode(data)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        return #"{"type":"data","data":"# + body + "}"
    }
}
