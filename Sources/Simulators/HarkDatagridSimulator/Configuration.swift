import HarkCore
import HarkDatagrid
import HarkSimulatorKit

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A scripted service-side tool call: on user turn `turn` (1-based, counted over the conversation), the answer
/// is preceded by `tool_call` `started` and then `completed` (or `failed`) after `duration` of session clock.
public struct DatagridToolScript: Sendable, Hashable {
    public var turn: Int
    public var name: String
    public var fails: Bool
    public var duration: Duration

    public init(turn: Int, name: String, fails: Bool = false, duration: Duration = .milliseconds(400)) {
        self.turn = turn
        self.name = name
        self.fails = fails
        self.duration = duration
    }
}

/// Something going wrong on purpose.
public struct DatagridFault: Sendable, Hashable {
    /// When it fires.
    public enum Trigger: Sendable, Hashable {
        /// As soon as connection `connection` (1-based) sent `ready`.
        case afterReady(connection: Int)
        /// When the answer to user turn `turn` (over the conversation) has been sent in full.
        case afterTurn(Int)
    }

    /// What happens.
    public enum Action: Sendable, Hashable {
        /// A close frame with this code and reason.
        case close(code: Int, reason: String)
        /// The TCP connection just goes away (1006 for the client).
        case drop
        /// A frame that is not JSON, then one that is JSON without a type.
        case malformed
        /// A message of a type no client knows, and a known one with unknown fields.
        case unknownType
        /// An `error` message with this code, then (if `close`) a 1000 close.
        case error(code: String, message: String, close: Bool)
    }

    public var trigger: Trigger
    public var action: Action

    public init(_ trigger: Trigger, _ action: Action) {
        self.trigger = trigger
        self.action = action
    }
}

/// Everything that shapes a Datagrid simulator.
public struct DatagridSimulatorConfiguration: Sendable {
    /// The address to bind.
    public var host: String = "127.0.0.1"
    /// The port to bind; 0 picks an ephemeral one.
    public var port: Int = 0
    /// Serve HTTPS and `wss://` with a self-signed CA generated at start-up (its PEM written to ``caOut`` when set).
    public var tls: Bool = false
    /// Where to write the generated CA certificate (PEM), with ``tls``.
    public var caOut: String?
    /// When set, `POST /v1/voice` must carry `Authorization: Bearer KEY` and a direct connection `token=KEY`.
    public var requiredKey: Secret?
    /// Multiplies the simulator's own timers (silence timeout, tool durations): 0.01 runs 60 s in 0.6 s.
    public var timeScale: Double = 1
    /// Silent input after which the session ends with `client_silence_timeout`, unless `start` sets
    /// `voice_config.silence_timeout` (seconds). Scaled by ``timeScale``.
    public var silenceTimeout: Duration = .seconds(60)
    /// Silence that ends a user turn, unless `start` sets `voice_config.silence_commit_ms`.
    public var silenceCommit: Duration = .milliseconds(500)
    /// Session-clock time from the end of a user turn to the first answer audio.
    public var responseLatency: Duration = .milliseconds(300)
    /// Seconds of answer audio released per second of session clock, after the lead.
    public var audioPace: Double = 2
    /// Answer audio released at once when the answer starts.
    public var audioLead: Duration = .milliseconds(500)
    /// Wall-clock time without incoming audio after which the wall clock drives the session clock.
    public var idleGrace: Duration = .milliseconds(250)
    /// How long a hand-off token may wait before its WebSocket connects (wall clock, not scaled).
    public var tokenLifetime: Duration = .seconds(60)
    /// Serve `POST /v1/voice`; when false it answers 404, as a deployment without the hand-off would.
    public var handoffAvailable: Bool = true
    /// Greet when the connection is ready, unless `voice_config.silent_start` is true (a new conversation only).
    public var greets: Bool = true
    /// Scripted tool calls.
    public var tools: [DatagridToolScript] = []
    /// Scripted faults; each fires once.
    public var faults: [DatagridFault] = []
    /// Largest inbound WebSocket message accepted.
    public var maxFrameSize: Int = 4 << 20

    public init(host: String = "127.0.0.1", port: Int = 0) {
        self.host = host
        self.port = port
    }

    func scaled(_ duration: Duration) -> Int64 {
        Int64((Double(duration.nanoseconds) * max(timeScale, 0)).rounded())
    }
}
