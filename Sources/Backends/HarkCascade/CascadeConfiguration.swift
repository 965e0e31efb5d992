import HarkCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Everything a cascade session needs: where the services are, the keys, and how each stage is set up.
public struct CascadeConfiguration: Sendable {
    /// Sarvam's base URL (`https://api.sarvam.ai`; `https` → `wss` for its sockets).
    public var sarvamEndpoint: String
    /// Gemini's base URL (`https://generativelanguage.googleapis.com`).
    public var geminiEndpoint: String
    /// The Gemini API version in the path (`v1beta`, as the REST documentation uses).
    public var geminiAPIVersion: String
    /// Sent only in the `api-subscription-key` header.
    public var sarvamKey: Secret
    /// Sent only in the `x-goog-api-key` header.
    public var geminiKey: Secret
    /// Where the Gemini key is set, for the message when the service refuses it.
    public var geminiKeyOrigin: String

    /// Speech-to-text: `saaras:v3`, `unknown` (detected) or a BCP-47 code, `transcribe`, high VAD sensitivity.
    public var sttModel: String
    public var sttLanguage: String
    public var sttMode: String
    public var sttHighSensitivity: Bool

    /// The text model (`gemini-3.8-flash`), its thinking level (`LOW`: latency before the first sentence), and
    /// what it is told.
    public var llmModel: String
    public var thinkingLevel: String?
    public var temperature: Double?
    public var maxOutputTokens: Int?
    public var systemInstruction: String?

    /// The voice.
    public var voice: SpeechVoice
    /// How much of the conversation the text model is given.
    public var historyTurns: Int
    public var historyCharacters: Int

    /// Microphone audio held while the speech-to-text socket is reconnecting.
    public var inputBound: Duration
    /// Without microphone audio for this long, silence keeps the speech-to-text socket open (it is cut after
    /// ~60 s without audio).
    public var keepAliveAfter: Duration
    /// An idle speech socket is pinged this often (it closes after 60 s without traffic).
    public var pingInterval: Duration
    /// How long a text request may take to answer with its head.
    public var replyHeadTimeout: Duration
    /// How a text request turned away before its answer began is asked again.
    public var replyRetry: ReplyRetry
    /// How long a connection opened ahead for the next text request (when the user began to speak) is used; an
    /// older one is closed and opened again (a server closes an idle connection after a while).
    public var openAheadLifetime: Duration
    /// How long a reply may take from its text request to its last audio: a stream of keep-alives or a speech socket
    /// that never answers fails the reply then (with the error earcon), not when the user speaks again.
    public var replyDeadline: Duration
    /// The most text requests a minute (a user turn, each round of tools, each retry is one): more fail at once.
    public var requestsPerMinute: Int
    /// The most rounds of tool calls one user turn may take (``CascadeMachine/maximumToolRounds``).
    public var maximumToolRounds: Int

    /// How the session reconnects (the speech-to-text socket; the speech socket follows the same rule).
    public var link: LinkSettings

    public static let sarvamRealEndpoint = "https://api.sarvam.ai"
    public static let geminiRealEndpoint = "https://generativelanguage.googleapis.com"

    public init(
        sarvamEndpoint: String = Self.sarvamRealEndpoint,
        geminiEndpoint: String = Self.geminiRealEndpoint,
        sarvamKey: Secret,
        geminiKey: Secret
    ) {
        self.sarvamEndpoint = sarvamEndpoint
        self.geminiEndpoint = geminiEndpoint
        self.geminiAPIVersion = "v1beta"
        self.sarvamKey = sarvamKey
        self.geminiKey = geminiKey
        self.geminiKeyOrigin =
            "cascade.api_key_file (hark converse: --api-key-file), the systemd credential "
            + "gemini-api-key or GEMINI_API_KEY"
        self.sttModel = "saaras:v3"
        self.sttLanguage = "unknown"
        self.sttMode = "transcribe"
        self.sttHighSensitivity = false
        self.llmModel = "gemini-3.8-flash"
        self.thinkingLevel = "LOW"
        self.voice = SpeechVoice()
        self.historyTurns = 20
        self.historyCharacters = 8000
        self.inputBound = .seconds(30)
        self.keepAliveAfter = .seconds(20)
        self.pingInterval = .seconds(30)
        self.replyHeadTimeout = .seconds(15)
        self.replyRetry = ReplyRetry()
        self.openAheadLifetime = .seconds(20)
        self.replyDeadline = .seconds(90)
        self.requestsPerMinute = 30
        self.maximumToolRounds = 4
        self.link = LinkSettings()
    }

    /// `wss://` (or `ws://`) for an `https://` (or `http://`) base.
    static func webSocketBase(_ base: String) -> String {
        if base.hasPrefix("https://") { return "wss://" + base.dropFirst("https://".count) }
        if base.hasPrefix("http://") { return "ws://" + base.dropFirst("http://".count) }
        return base
    }

    /// The speech-to-text socket's URL: everything in its query, the key in no URL.
    public var speechToTextURL: String {
        let query = [
            ("language-code", sttLanguage), ("model", sttModel), ("mode", sttMode),
            ("sample_rate", String(AudioFormat.microphone.sampleRate)),
            ("input_audio_codec", "pcm_s16le"), ("vad_signals", "true"), ("flush_signal", "true"),
            ("high_vad_sensitivity", sttHighSensitivity ? "true" : "false"),
        ].map { "\($0.0)=\($0.1)" }.joined(separator: "&")
        return EndpointURL.join(Self.webSocketBase(sarvamEndpoint), path: "/speech-to-text/ws", query: query)
    }

    /// The text-to-speech socket's URL.
    public var textToSpeechURL: String {
        EndpointURL.join(
            Self.webSocketBase(sarvamEndpoint),
            path: "/text-to-speech/ws",
            query: "model=\(voice.model)&send_completion_event=true"
        )
    }

    /// The streamed text request's URL.
    public var replyURL: String {
        EndpointURL.join(
            geminiEndpoint,
            path: "/\(geminiAPIVersion)/models/\(llmModel):streamGenerateContent",
            query: "alt=sse"
        )
    }

    /// The text model's own URL (`models.get`): a cheap request that tells whether the service takes the key.
    public var modelURL: String {
        EndpointURL.join(geminiEndpoint, path: "/\(geminiAPIVersion)/models/\(llmModel)", query: nil)
    }
}

/// How a text request that the service turned away before its answer began is asked again: a status that may pass
/// (``statuses``: 408, 429, 500, 502, 503, 504), a connection lost before the first chunk, or a stream that began
/// with an error. A failure after the answer began is not retried (part of it may have been spoken): the session
/// says it failed. The attempts are few and the waits short, since someone is waiting for the answer.
public struct ReplyRetry: Sendable, Hashable {
    /// Requests in all, the first one included (1: none again).
    public var attempts: Int
    /// The wait before each next request (jittered, growing).
    public var backoff: Backoff
    /// The longest wait the service may ask for (`Retry-After`, or Google's `RetryInfo`): when it asks for more, the
    /// reply fails at once — asking sooner would only be turned away again, and nobody waits that long for an answer.
    public var longestWait: Duration

    /// The statuses that may pass.
    public static let statuses: Set<Int> = [408, 429, 500, 502, 503, 504]

    public init(
        attempts: Int = 3,
        backoff: Backoff = Backoff(initial: .milliseconds(400), cap: .seconds(2)),
        longestWait: Duration = .seconds(4)
    ) {
        self.attempts = max(1, attempts)
        self.backoff = backoff
        self.longestWait = longestWait
    }

    /// The wait before the next request after request number `attempt` (1 for the first) was turned away, the
    /// service having asked for `asked`; nil: give up. The wait is the backoff's, or what the service asked if longer.
    public func wait(
        after attempt: Int,
        asked: Duration?,
        backoff: inout Backoff,
        using random: inout some RandomNumberGenerator
    ) -> Duration? {
        guard attempt < attempts else { return nil }
        if let asked, asked > longestWait { return nil }
        return max(backoff.next(using: &random), asked ?? .zero)
    }

    /// What the service asked for: `Retry-After` as seconds (digits only; an HTTP date is not followed), else the
    /// `retryDelay` of a `google.rpc.RetryInfo` in the error body's `details` ("37s", "1.5s"); nil when neither, or
    /// when the body is over 64 KiB.
    public static func asked(retryAfter header: String?, body: Data) -> Duration? {
        if let header = header?.trimmedWhitespace, (1...9).contains(header.count),
            header.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let seconds = Int(header)
        {
            return .seconds(seconds)
        }
        guard body.count <= 64 * 1024, let json = try? JSONDecoder().decode(JSONValue.self, from: body) else {
            return nil
        }
        for detail in json["error"]?["details"]?.arrayValue ?? [] {
            guard detail["@type"]?.stringValue?.hasSuffix("google.rpc.RetryInfo") == true,
                let delay = detail["retryDelay"]?.stringValue, delay.hasSuffix("s"), delay.count <= 20,
                let seconds = Double(delay.dropLast()), seconds.isFinite, (0...86_400).contains(seconds)
            else { continue }
            return .milliseconds(Int64((seconds * 1000).rounded(.up)))
        }
        return nil
    }
}
