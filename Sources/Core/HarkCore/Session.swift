#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What the agent is doing in the conversation. Exactly one at a time; the appliance shows it on the
/// LEDs, in `STATUS=` lines and in `hark status` under these names.
public enum ConversationState: String, Sendable, Hashable, CaseIterable {
    /// No session, or nobody talking.
    case idle
    /// The user may speak or is speaking.
    case listening
    /// The user's turn ended and no answer audio has arrived yet, or a tool runs.
    case thinking
    /// Answer audio is arriving (the player holds this until the last sample has left the speaker).
    case speaking
}

/// The state of the link to the backend: shown as an overlay over the conversation state.
public enum LinkState: Sendable, Hashable {
    /// Opening a connection (attempt 1 is the first try; later ones are reconnects).
    case connecting(attempt: Int)
    /// Set up and exchanging audio.
    case connected
    /// The network or the service failed; trying again after `retryIn`.
    case offline(reason: String, retryIn: Duration)
    /// Authentication or configuration was rejected; retried slowly after `retryIn`, if at all.
    case rejected(SessionFailure, retryIn: Duration?)
    /// The session ended for good (finished, or given up).
    case ended
}

/// A transcript segment: what the user or the agent said. A segment is one utterance, named by its
/// `segment` id; each event carries the segment's whole text so far, so an interim event replaces the
/// earlier text of the same id, and a final one closes it (no event of that id follows).
public struct Transcript: Sendable, Hashable {
    /// Who spoke.
    public enum Role: String, Sendable, Hashable { case user, agent }
    public var role: Role
    /// The segment this text belongs to (unique within a session).
    public var segment: String
    /// The segment's whole text so far.
    public var text: String
    /// True when the segment is finished: `text` is its last word.
    public var isFinal: Bool

    public init(role: Role, segment: String, text: String, isFinal: Bool) {
        self.role = role
        self.segment = segment
        self.text = text
        self.isFinal = isFinal
    }
}

/// Tool activity, local or on the service side.
public enum ToolEvent: Sendable, Hashable {
    /// A call began (`id` is empty when the backend gives none).
    case started(id: String, name: String)
    /// A call ended; `succeeded` is false when it threw or the service reported failure.
    case finished(id: String, name: String, succeeded: Bool)
    /// The service cancelled a call (usually because the user interrupted).
    case cancelled(id: String)
}

/// Token counts reported by a backend.
public struct UsageReport: Sendable, Hashable {
    public var promptTokens: Int64
    public var responseTokens: Int64
    public var totalTokens: Int64

    public init(promptTokens: Int64, responseTokens: Int64, totalTokens: Int64) {
        self.promptTokens = promptTokens
        self.responseTokens = responseTokens
        self.totalTokens = totalTokens
    }
}

/// Everything a backend session tells the rest of the appliance. Backend-neutral: Gemini Live,
/// Datagrid, the on-device cascade and LiveKit all map their own signals onto these.
public enum SessionEvent: Sendable, Hashable {
    /// The link changed (connecting, connected, offline, rejected, ended).
    case link(LinkState)
    /// The conversation state changed.
    case conversation(ConversationState)
    /// Answer audio to play, in arrival order.
    case audio(AudioChunk)
    /// The agent was interrupted: stop playback at once and drop queued audio.
    case interrupted
    /// The agent finished its turn (its audio may still be playing).
    case turnComplete
    /// A transcript piece.
    case transcript(Transcript)
    /// Tool activity.
    case tool(ToolEvent)
    /// Token usage.
    case usage(UsageReport)
    /// Something a person should know that is not an error (a resumption refused, a fresh session).
    case notice(String)
    /// An answer failed part-way (a text request or the speech service broke): said, not left silent.
    case answerFailed(String)
}

/// What the appliance sends into a session.
public enum SessionInput: Sendable, Hashable {
    /// Microphone audio (16 kHz mono PCM16 is what every backend takes).
    case audio(AudioChunk)
    /// The microphone paused (muted, or input ended) with the service's own voice detection on.
    case audioStreamEnd
    /// Manual activity: the user starts talking (push-to-talk pressed).
    case activityStart
    /// Manual activity: the user stopped talking (push-to-talk released).
    case activityEnd
    /// A typed or injected user turn.
    case text(String)
    /// The user cancelled the agent's answer locally (button, local barge-in): drop what is still coming.
    case interrupt
}

/// What every backend counts: shown by `hark status` and printed by `hark converse`.
public struct SessionStatistics: Sendable, Hashable {
    /// Connections opened (the first message sent).
    public var connections = 0
    /// Connections that became ready (Gemini's `setupComplete`, Datagrid's `ready`).
    public var readies = 0
    /// Connection attempts that failed, or connections lost.
    public var failures = 0
    /// Connections that continued the conversation of an earlier one (resumed, or the same conversation id).
    public var resumptions = 0
    /// Resumptions the service refused (a fresh conversation followed).
    public var resumptionsRefused = 0
    /// Input audio samples sent, each counted once however often it went out.
    public var audioSamplesSent = 0
    /// Input audio samples sent again on a new connection because the service had not confirmed them.
    public var audioSamplesResent = 0
    /// Answer audio samples received (at the rate they came in).
    public var audioSamplesReceived = 0
    /// Answer audio messages skipped because their format cannot be played (e.g. an impossible rate).
    public var audioMessagesSkipped = 0
    /// Input samples dropped because the hold bound was exceeded.
    public var droppedInputSamples = 0
    /// Turns the agent completed.
    public var turns = 0
    /// Server frames that could not be decoded and were skipped.
    public var undecodableFrames = 0
    /// Server messages of a type this client does not know, skipped.
    public var unknownMessages = 0
    /// Errors the service reported in a message.
    public var serviceErrors = 0
    /// The service's name for the current session, when it gives one (Gemini's `setupComplete.sessionId`):
    /// what its support asks for. Printable and bounded.
    public var serviceSession: String?
    /// What only one backend counts, by name (Datagrid: `handoffs`, `directFallbacks`).
    public var other: [String: Int] = [:]

    public init() {}
}

/// A conversation with a voice agent: audio and control in, events out, reconnecting by itself.
///
/// The owner calls ``run()`` in a task of its own; it returns when ``finish()`` has ended the session
/// politely, or throws when the session cannot go on (a one-shot run gave up). Events arrive on
/// ``events`` in order; ``send(_:)`` never blocks and never waits for the network.
public protocol VoiceSession: AnyObject, Sendable {
    /// The session's events, in order. One consumer.
    var events: AsyncStream<SessionEvent> { get }
    /// Queues input for the service. Audio beyond the configured bound drops the oldest, counted.
    func send(_ input: SessionInput)
    /// Waits until less than `samples` of audio is queued: backpressure for sources faster than real time.
    func waitForInputRoom(below samples: Int) async
    /// Connects, reconnects and exchanges messages until finished or cancelled.
    func run() async throws
    /// Ends the session politely and makes ``run()`` return.
    func finish()
    /// The counters so far.
    var statistics: SessionStatistics { get }
}

/// Why a session could not connect or went on failing. Configuration and authentication failures
/// are told apart from transient ones, because a device must not hammer a service that said no.
public struct SessionFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// The class of failure.
    public enum Kind: String, Sendable, Hashable {
        /// Network or service trouble that may pass: reconnect with backoff.
        case transient
        /// The credential was rejected (close 1008, HTTP 401/403): error state, slow retry.
        case authentication
        /// The request was rejected as invalid (close 1007, HTTP 400): error state, slow retry.
        case configuration
        /// The server's certificate is not trusted: error state, slow retry (a device must not talk to
        /// a server it cannot verify, and hammering one will not make it trusted).
        case untrusted
    }

    public var kind: Kind
    /// One line for a person; never contains a secret. Made printable and bounded (``RemoteText``,
    /// ``messageLimit``) when the failure is made: it often quotes the service.
    public var message: String
    /// The WebSocket close code, if the failure came as one.
    public var closeCode: Int?

    /// The longest ``message``, in Unicode scalars (``RemoteText/printable(_:limit:)``).
    public static let messageLimit = 1000

    /// A failure of `kind`; `message` is stored printable (control characters escaped) and bounded.
    public init(_ kind: Kind, _ message: String, closeCode: Int? = nil) {
        self.kind = kind
        self.message = RemoteText.printable(message, limit: Self.messageLimit)
        self.closeCode = closeCode
    }

    public var description: String { message }

    /// Classifies a WebSocket close by its code, as the Gemini protocol page describes. The service's
    /// `reason` is quoted printable and bounded.
    public static func fromClose(code: Int?, reason: String?) -> SessionFailure {
        let text = reason.map { $0.isEmpty ? "" : ": \(RemoteText.printable($0, limit: 200))" } ?? ""
        switch code {
        case 1007?:
            return SessionFailure(
                .configuration,
                "the service rejected the request (close 1007\(text))",
                closeCode: 1007
            )
        case 1008?:
            return SessionFailure(.authentication, "the service refused access (close 1008\(text))", closeCode: 1008)
        case let code?: return SessionFailure(.transient, "connection closed (close \(code)\(text))", closeCode: code)
        case nil: return SessionFailure(.transient, "connection lost without a close frame (1006)", closeCode: 1006)
        }
    }

    /// Classifies a failure to open a WebSocket: an untrusted certificate and a request that cannot be
    /// made are errors to show, and so is an upgrade the server declined with an HTTP status that says so
    /// (the table of ``fromHTTP(status:what:body:)``: 401/403 authentication, 400/404/422 configuration); the
    /// rest (DNS, refused, timeouts, a TLS hiccup, 429 and 5xx) may pass.
    public static func fromConnect(_ error: WebSocketConnectError) -> SessionFailure {
        switch (error.kind, error.httpStatus) {
        case (.untrusted, _): SessionFailure(.untrusted, error.message)
        case (.invalidRequest, _): SessionFailure(.configuration, error.message)
        case (.upgradeDeclined, let status?): SessionFailure(kind(ofHTTPStatus: status), error.message)
        default: SessionFailure(.transient, error.message)
        }
    }

    /// Classifies an HTTP request that got no answer (`what` names the request for the log).
    public static func fromHTTPClient(_ error: any Error, what: String) -> SessionFailure {
        if let error = error as? HTTPClientError, error.untrusted {
            return SessionFailure(.untrusted, "\(what): \(error.message)")
        }
        return SessionFailure(.transient, "\(what): \(error)")
    }

    /// Classifies an HTTP status of a token or hand-off request (`what` names the request for the log). What
    /// the answer's `body` says (a JSON error's `message`, or its text) is quoted, printable and bounded, with
    /// each of `secrets` (the request's credentials, should the server echo them) as `<redacted>`.
    public static func fromHTTP(status: Int, what: String, body: Data = Data(), hiding secrets: [Secret] = [])
        -> SessionFailure
    {
        let kind = kind(ofHTTPStatus: status)
        let verdict =
            switch kind {
            case .authentication: "credential rejected (HTTP \(status))"
            case .configuration: "request rejected (HTTP \(status))"
            case .transient, .untrusted: "HTTP \(status)"
            }
        let detail = httpErrorDetail(body, hiding: secrets).map { ": \($0)" } ?? ""
        return SessionFailure(kind, "\(what): \(verdict)\(detail)")
    }

    /// The one table of HTTP statuses: 401/403 the credential was rejected, 400/404/422 the request was;
    /// anything else (429, 5xx, a redirect) may pass.
    private static func kind(ofHTTPStatus status: Int) -> Kind {
        switch status {
        case 401, 403: .authentication
        case 400, 404, 422: .configuration
        default: .transient
        }
    }

    /// The largest error body read as JSON for its message; a larger one is quoted as text.
    private static let httpErrorJSONLimit = 64 * 1024

    /// What an HTTP error body says, printable and at most 200 scalars: the `message` of a JSON error
    /// (`{"error": {"message": ...}}`, `{"error": "..."}`, `{"message": ...}`, `{"detail": ...}`), else the
    /// body as text without the white space around it; nil when there is nothing else. `secrets` are hidden.
    private static func httpErrorDetail(_ body: Data, hiding secrets: [Secret]) -> String? {
        func shown(_ text: String) -> String {
            var text = text
            for secret in secrets where !secret.reveal().isEmpty {
                text = text.replacing(secret.reveal(), with: secret.description)
            }
            return RemoteText.printable(text, limit: 200)
        }
        if body.count <= httpErrorJSONLimit, let json = try? JSONDecoder().decode(JSONValue.self, from: body) {
            let candidates = [json["error"]?["message"], json["error"], json["message"], json["detail"]]
            for case let text? in candidates.map({ $0?.stringValue }) where !text.isEmpty {
                return shown(text)
            }
        }
        let isSpace = { (byte: UInt8) in byte == 0x20 || (0x09...0x0D).contains(byte) }
        guard let first = body.firstIndex(where: { !isSpace($0) }), let last = body.lastIndex(where: { !isSpace($0) })
        else { return nil }
        // The HTTP client bounds a body's size; what cannot be shown is only counted.
        return shown(String(decoding: body[first...last], as: UTF8.self))
    }
}
