import HarkBackendKit
import HarkCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// How the device reaches the Datagrid Voice WebSocket.
public enum DatagridConnectionMode: String, Sendable, Hashable, CaseIterable {
    /// `POST {base}/v1/voice` with the key in the `Authorization` header; the answer holds a WebSocket URL
    /// with a short-lived token and the `start` message to send. The default: the key never travels in a URL.
    case handoff
    /// `wss://.../ws/voice?token=KEY`: the key in the URL (redacted in every log line). A fallback.
    case direct
}

/// Everything a Datagrid Voice session needs to know.
public struct DatagridConfiguration: Sendable {
    /// The API key.
    public var apiKey: Secret
    /// REST base (`https://api.datagrid.com`), for the hand-off.
    public var baseURL: String
    /// WebSocket base (`wss://api.datagrid.com`), for the direct connection; `/ws/voice` is appended.
    public var webSocketBaseURL: String
    public var mode: DatagridConnectionMode
    /// With ``DatagridConnectionMode/handoff``: when the service has no hand-off endpoint (HTTP 404 or 405),
    /// connect directly from then on instead of failing. Authentication and other errors never fall back.
    public var directFallback: Bool
    /// Sent as `Datagrid-Teamspace` on the hand-off.
    public var teamspace: String?
    /// The `start` payload (agent, voice, prompts); its `conversation_id` is filled in after a reconnect.
    public var start: DatagridStart
    /// How long to wait for `ready` after `start`.
    public var readyTimeout: Duration
    /// How long to wait for `ended` after `stop`.
    public var stopTimeout: Duration
    /// Answer audio quiet for this long ends the turn when no agent transcript did (checked at this interval).
    public var answerQuietTimeout: Duration
    /// Where the conversation id is persisted (atomically; `model` is the agent id), so a restart continues the
    /// conversation; forgotten when the conversation ends. Nil: not persisted.
    public var conversationStore: ResumptionStore?
    /// Microphone audio held while not connected (sent once `ready`).
    public var inputBound: Duration
    /// Largest audio message, as a duration of 16 kHz audio.
    public var maxAudioChunk: Duration
    /// How the session reconnects.
    public var link: LinkSettings

    /// The real service's REST base.
    public static let realBaseURL = "https://api.datagrid.com"
    /// The real service's WebSocket base.
    public static let realWebSocketBaseURL = "wss://api.datagrid.com"

    public init(
        apiKey: Secret,
        baseURL: String = DatagridConfiguration.realBaseURL,
        webSocketBaseURL: String? = nil,
        mode: DatagridConnectionMode = .handoff,
        directFallback: Bool = true,
        teamspace: String? = nil,
        start: DatagridStart = DatagridStart(),
        readyTimeout: Duration = .seconds(15),
        stopTimeout: Duration = .seconds(3),
        answerQuietTimeout: Duration = .seconds(2),
        conversationStore: ResumptionStore? = nil,
        inputBound: Duration = .seconds(30),
        maxAudioChunk: Duration = .milliseconds(100),
        link: LinkSettings = LinkSettings()
    ) {
        self.apiKey = apiKey
        self.baseURL = Self.trimmed(baseURL)
        self.webSocketBaseURL = Self.trimmed(webSocketBaseURL ?? Self.webSocketBase(for: baseURL))
        self.mode = mode
        self.directFallback = directFallback
        self.teamspace = teamspace
        self.start = start
        self.readyTimeout = readyTimeout
        self.stopTimeout = stopTimeout
        self.answerQuietTimeout = answerQuietTimeout
        self.conversationStore = conversationStore
        self.inputBound = inputBound
        self.maxAudioChunk = maxAudioChunk
        self.link = link
    }

    /// `https://h` → `wss://h`, `http://h` → `ws://h`; ws URLs stay.
    public static func webSocketBase(for base: String) -> String {
        if base.hasPrefix("https://") { return "wss://" + base.dropFirst("https://".count) }
        if base.hasPrefix("http://") { return "ws://" + base.dropFirst("http://".count) }
        return base
    }

    /// The hand-off endpoint (a query in the base stays after the path).
    public var handoffURL: String { EndpointURL.join(baseURL, path: "/v1/voice") }

    /// The direct WebSocket URL, with the key as `token` (log only ``URLRedaction/redact(_:)`` of it).
    public var directURL: String {
        EndpointURL.join(webSocketBaseURL, path: "/ws/voice", query: "token=" + Self.percentEncoded(apiKey.reveal()))
    }

    private static func trimmed(_ url: String) -> String {
        var url = url
        while url.hasSuffix("/") { url.removeLast() }
        return url
    }

    /// Percent-encodes everything but unreserved characters (RFC 3986).
    static func percentEncoded(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                out.unicodeScalars.append(UnicodeScalar(byte))
            default:
                let hex = Array("0123456789ABCDEF")
                out.append("%")
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0xF)])
            }
        }
        return out
    }
}
