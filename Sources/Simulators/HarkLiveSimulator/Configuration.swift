import HarkCore
import HarkGemini
import HarkSimulatorKit

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Everything that shapes a simulator: where it listens, what it demands, how it answers and what goes wrong.
public struct LiveSimulatorConfiguration: Sendable {
    /// The address to bind.
    public var host: String = "127.0.0.1"
    /// The port to bind; 0 picks an ephemeral one (see ``LiveSimulator/port``).
    public var port: Int = 0
    /// Plain or TLS.
    public var tls: SimulatorTLS = .none
    /// When set, a Live connection must present this API key (`x-goog-api-key` or `key=`), and
    /// `POST /v1alpha/auth_tokens` must too. When nil any key (or none) is accepted.
    public var requiredKey: Secret?
    /// Connection lifetime on the session clock (scaled by ``timeScale``), or on the wall clock with
    /// ``lifetimeOnWallClock``. nil: connections live forever.
    public var connectionLifetime: Duration?
    /// Count ``connectionLifetime`` on the wall clock from the setup, as the real service does, instead
    /// of the session clock. The session clock runs as fast as the client sends audio, so audio sent
    /// again after a resume (seconds of it at once) uses up a short lifetime at once: with a lifetime
    /// not much longer than what a client sends again, a connection can end before any turn does, and
    /// the next one then starts with the same audio again. The real service's ten minutes never meet
    /// that; a test of a device running faster than real time (file-backed audio) with short
    /// lifetimes wants the wall clock.
    public var lifetimeOnWallClock: Bool = false
    /// How long before the end of the lifetime `goAway` is sent (scaled by ``timeScale``).
    public var goAwayGrace: Duration = .seconds(10)
    /// Multiplies the simulator's own timers (lifetime, grace, stalls): 0.1 runs a 10-minute lifetime in 1 minute.
    public var timeScale: Double = 1
    /// Scripted tool calls, faults and resumption refusal.
    public var scenario: SimulatorScenario = SimulatorScenario()
    /// Send every server message in binary frames instead of text frames.
    public var binaryFrames: Bool = false
    /// Send only `setupComplete` in a binary frame (as the real service has been seen to do).
    public var binarySetupComplete: Bool = false
    /// Session-clock time from the end of a user turn (or a tool response) to the first answer audio.
    public var responseLatency: Duration = .milliseconds(300)
    /// How fast answer audio is released, in seconds of audio per second of session clock, after the lead.
    public var modelAudioPace: Double = 2
    /// Answer audio released at once when the answer starts (the service's first burst).
    public var modelAudioLead: Duration = .milliseconds(500)
    /// Wall-clock time without incoming audio after which the wall clock drives the session clock.
    public var idleGrace: Duration = .milliseconds(250)
    /// How long a resumption handle stays valid after its session last detached (wall clock).
    public var handleLifetime: Duration = .seconds(2 * 3600)
    /// Largest inbound WebSocket message accepted.
    public var maxFrameSize: Int = 16 << 20

    public init() {}

    /// A plain configuration on `host:port`.
    public init(host: String = "127.0.0.1", port: Int = 0) {
        self.host = host
        self.port = port
    }

    func scaled(_ duration: Duration) -> Int64 {
        Int64((Double(duration.nanoseconds) * max(timeScale, 0)).rounded())
    }
}

/// One scripted tool call: on user turn `turn` (1-based, counted over the session including resumptions)
/// the model calls `name` with `args`. A 2.5 model, and a 3.8 model calling a function declared
/// `behavior: BLOCKING`, waits for the `toolResponse` before answering; a 3.8 model calling any other function
/// (NON_BLOCKING, the 3.8 default) answers at once and speaks about the result when it comes.
public struct ScriptedToolCall: Sendable, Hashable {
    public var turn: Int
    public var name: String
    public var args: JSONValue

    public init(turn: Int, name: String, args: JSONValue = .object([:])) {
        self.turn = turn
        self.name = name
        self.args = args
    }

    /// Parses `TURN:NAME[:ARGS_JSON]`, e.g. `1:get_time:{}` or `2:set_volume:{"level":3}`.
    public static func parse(_ spec: String) throws -> ScriptedToolCall {
        let parts = spec.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, let turn = Int(parts[0]), turn >= 1, !parts[1].isEmpty else {
            throw SimulatorConfigurationError("tool call \"\(spec)\": expected TURN:NAME[:ARGS_JSON]")
        }
        var args: JSONValue = .object([:])
        if parts.count == 3, !parts[2].isEmpty {
            do {
                args = try JSONDecoder().decode(JSONValue.self, from: Data(parts[2].utf8))
            } catch {
                throw SimulatorConfigurationError("tool call \"\(spec)\": arguments are not JSON")
            }
        }
        return ScriptedToolCall(turn: turn, name: String(parts[1]), args: args)
    }
}

/// A fault to inject: what happens, and when.
public struct SimulatorFault: Sendable, Hashable, CustomStringConvertible {
    /// The moment a fault fires.
    public enum Trigger: Sendable, Hashable, CustomStringConvertible {
        /// When the setup arrives, before `setupComplete` is sent (a stall here: setup never completes).
        case presetup
        /// Right after `setupComplete`.
        case setup
        /// Once this much audio has been received on the connection.
        case audio(Duration)
        /// When user turn K (session numbering) ends, before anything of its answer is sent.
        case turn(Int)
        /// Right after the first audio chunk of answer K: mid-answer.
        case answer(Int)
        /// This much wall-clock time after the connection opened (not scaled).
        case wall(Duration)

        public var description: String {
            switch self {
            case .presetup: "presetup"
            case .setup: "setup"
            case .audio(let duration): "audio=\(SimulatorDurations.format(duration))"
            case .turn(let turn): "turn=\(turn)"
            case .answer(let turn): "answer=\(turn)"
            case .wall(let duration): "wall=\(SimulatorDurations.format(duration))"
            }
        }
    }

    /// What the fault does.
    public enum Action: Sendable, Hashable, CustomStringConvertible {
        /// Close with this code and reason (default reason per code). 1006 means a TCP drop.
        case close(code: Int, reason: String?)
        /// Close the socket without a close frame (the client sees 1006).
        case drop
        /// Send nothing and answer no pings for this long (scaled by the time scale), or for ever.
        case stall(Duration?)
        /// One frame that is not JSON.
        case malformedJSON
        /// One frame holding the first part of a valid message.
        case truncatedJSON
        /// One valid message (silent audio) of about this many bytes.
        case oversizedFrame(bytes: Int)
        /// This many tiny messages (`usageMetadata` only) in a row.
        case flood(count: Int)
        /// Delay every later outbound message by this much wall-clock time.
        case slowReplies(Duration)
        /// One `{"someFutureMessage":{}}`.
        case unknownMessage
        /// From now on, known messages carry fields the client does not know.
        case unknownFields
        /// From now on, field names go out in snake_case.
        case snakeCase
        /// From now on, audio goes out in URL-safe base64 without padding.
        case base64URL
        /// The next user turn to end (with `turn=K`: turn K) gets no answer, only a `turnComplete` with
        /// `turnCompleteReason: RESPONSE_REJECTED` (the model chose not to answer).
        case reject
        /// A `toolCallCancellation` for every call still waiting for its response.
        case cancelTools
        /// One `goAway` whose `timeLeft` is this text, verbatim (`9223372036854775807s`: an absurd time).
        case goAway(timeLeft: String)
        /// From now on nothing but a `usageMetadata` message every this long (wall clock): the link is alive
        /// and no progress is ever made.
        case keepAlive(Duration)

        public var description: String {
            switch self {
            case .close(let code, let reason): reason.map { "close=\(code),\($0)" } ?? "close=\(code)"
            case .drop: "drop"
            case .stall(let duration): duration.map { "stall=\(SimulatorDurations.format($0))" } ?? "stall"
            case .malformedJSON: "malformed"
            case .truncatedJSON: "truncated"
            case .oversizedFrame(let bytes): "oversized=\(bytes)"
            case .flood(let count): "flood=\(count)"
            case .slowReplies(let delay): "slow=\(SimulatorDurations.format(delay))"
            case .unknownMessage: "unknown-message"
            case .unknownFields: "unknown-fields"
            case .snakeCase: "snake-case"
            case .base64URL: "base64url"
            case .reject: "reject"
            case .cancelTools: "cancel-tools"
            case .goAway(let timeLeft): "go-away=\(timeLeft)"
            case .keepAlive(let every): "keep-alive=\(SimulatorDurations.format(every))"
            }
        }
    }

    public var trigger: Trigger
    public var action: Action
    /// Only on this connection (1-based, in accept order over the simulator's life); nil: any connection.
    public var connection: Int?
    /// Fire on every matching connection; otherwise the fault fires once per simulator run.
    public var repeats: Bool

    public init(trigger: Trigger, action: Action, connection: Int? = nil, repeats: Bool = false) {
        self.trigger = trigger
        self.action = action
        self.connection = connection
        self.repeats = repeats
    }

    public var description: String {
        var text = "\(trigger):\(action)"
        if let connection { text += ":conn=\(connection)" }
        if repeats { text += ":repeat" }
        return text
    }

    /// The grammar of ``parse(_:)``, for help texts.
    public static let grammar = """
        TRIGGER:ACTION[:conn=N][:repeat]
          TRIGGER:  presetup | setup | audio=DURATION | turn=K | answer=K | wall=DURATION
          ACTION:   close=CODE[,REASON] | drop | stall[=DURATION] | malformed |
                    truncated | oversized[=BYTES] | flood[=COUNT] |
                    slow=DURATION | unknown-message | unknown-fields |
                    snake-case | base64url | reject | cancel-tools |
                    go-away=TIMELEFT | keep-alive=DURATION
          DURATION: 1.5 (seconds), 1.5s, 250ms, 2m, 1h
          conn=N: only connection N; repeat: on every connection (default: once)
          reject: the next user turn to end (turn=K: turn K) gets no answer, only
                  turnComplete with turnCompleteReason RESPONSE_REJECTED
          cancel-tools: toolCallCancellation for every call waiting for its response
          go-away=TIMELEFT: one goAway with this timeLeft, verbatim (9223372036854775807s)
          keep-alive=DURATION: from now on only usageMetadata, one every DURATION
                  (wall clock): alive, and no progress
        """

    /// Parses `TRIGGER:ACTION[:conn=N][:repeat]` (see ``grammar``), e.g. `turn=2:close=1011`,
    /// `audio=3s:drop:conn=1`, `answer=1:stall=20s`, `wall=5:slow=200ms:repeat`.
    public static func parse(_ spec: String) throws -> SimulatorFault {
        func fail(_ why: String) -> SimulatorConfigurationError {
            SimulatorConfigurationError("fault \"\(spec)\": \(why); expected \(grammar)")
        }
        var segments = spec.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard segments.count >= 2 else { throw fail("missing action") }
        var connection: Int?
        var repeats = false
        while segments.count > 2, let last = segments.last {
            if last == "repeat" {
                repeats = true
            } else if last.hasPrefix("conn="), let number = Int(last.dropFirst(5)), number >= 1 {
                connection = number
            } else {
                break
            }
            segments.removeLast()
        }
        let triggerText = segments[0]
        let actionText = segments[1...].joined(separator: ":")
        let (triggerName, triggerValue) = splitAssignment(triggerText)
        let trigger: Trigger
        switch triggerName {
        case "presetup": trigger = .presetup
        case "setup": trigger = .setup
        case "audio":
            guard let value = triggerValue.flatMap(SimulatorDurations.parse) else { throw fail("bad audio time") }
            trigger = .audio(value)
        case "wall":
            guard let value = triggerValue.flatMap(SimulatorDurations.parse) else { throw fail("bad wall time") }
            trigger = .wall(value)
        case "turn", "answer":
            guard let value = triggerValue.flatMap({ Int($0) }), value >= 1 else { throw fail("bad turn number") }
            trigger = triggerName == "turn" ? .turn(value) : .answer(value)
        default: throw fail("unknown trigger \"\(triggerName)\"")
        }
        let (actionName, actionValue) = splitAssignment(actionText)
        let action: Action
        switch actionName {
        case "close":
            guard let value = actionValue else { throw fail("close needs a code") }
            let (codeText, reason) = splitFirst(value, ",")
            guard let code = Int(codeText), (1000...4999).contains(code) else { throw fail("bad close code") }
            action = .close(code: code, reason: reason)
        case "drop": action = .drop
        case "stall":
            if let actionValue {
                guard let value = SimulatorDurations.parse(actionValue) else { throw fail("bad stall duration") }
                action = .stall(value)
            } else {
                action = .stall(nil)
            }
        case "malformed": action = .malformedJSON
        case "truncated": action = .truncatedJSON
        case "oversized":
            let bytes = actionValue.flatMap { Int($0) } ?? (3 << 20)
            guard bytes > 0 else { throw fail("bad size") }
            action = .oversizedFrame(bytes: bytes)
        case "flood":
            let count = actionValue.flatMap { Int($0) } ?? 1000
            guard count > 0 else { throw fail("bad count") }
            action = .flood(count: count)
        case "slow":
            guard let value = actionValue.flatMap(SimulatorDurations.parse) else { throw fail("slow needs a delay") }
            action = .slowReplies(value)
        case "unknown-message": action = .unknownMessage
        case "unknown-fields": action = .unknownFields
        case "snake-case": action = .snakeCase
        case "base64url": action = .base64URL
        case "reject": action = .reject
        case "cancel-tools": action = .cancelTools
        case "go-away":
            guard let value = actionValue, (1...64).contains(value.utf8.count),
                value.utf8.allSatisfy({ (0x21...0x7E).contains($0) && $0 != 0x22 && $0 != 0x5C })
            else { throw fail("go-away needs a time left (printable, no quotes)") }
            action = .goAway(timeLeft: value)
        case "keep-alive":
            guard let value = actionValue.flatMap(SimulatorDurations.parse), value >= .milliseconds(10) else {
                throw fail("keep-alive needs an interval of at least 10ms")
            }
            action = .keepAlive(value)
        default: throw fail("unknown action \"\(actionName)\"")
        }
        return SimulatorFault(trigger: trigger, action: action, connection: connection, repeats: repeats)
    }

    private static func splitAssignment(_ text: String) -> (String, String?) {
        let (name, value) = splitFirst(text, "=")
        return (name.lowercased(), value)
    }

    private static func splitFirst(_ text: String, _ separator: Character) -> (String, String?) {
        guard let index = text.firstIndex(of: separator) else { return (text, nil) }
        return (String(text[..<index]), String(text[text.index(after: index)...]))
    }
}

/// What the simulator is scripted to do beyond answering: tool calls, faults, resumption refusal.
public struct SimulatorScenario: Sendable, Hashable {
    /// Scripted tool calls; several on the same turn go out in one `toolCall`.
    public var toolCalls: [ScriptedToolCall]
    /// Faults, in the order given; each has its own trigger.
    public var faults: [SimulatorFault]
    /// When set (1011 or 1007), every resumption attempt is closed with this code.
    public var refuseResumption: Int?

    public init(toolCalls: [ScriptedToolCall] = [], faults: [SimulatorFault] = [], refuseResumption: Int? = nil) {
        self.toolCalls = toolCalls
        self.faults = faults
        self.refuseResumption = refuseResumption
    }

    /// The tool calls scripted for turn `turn`.
    public func toolCalls(forTurn turn: Int) -> [ScriptedToolCall] {
        toolCalls.filter { $0.turn == turn }
    }

    /// The JSON format of a scenario file, for help texts.
    public static let fileFormat = """
        {
          "toolCalls": [{"turn": 1, "name": "get_time", "args": {}}],
          "faults": [
            "turn=2:close=1011",
            {"trigger": "audio=3s", "action": "drop", "connection": 1}
          ],
          "refuseResumption": 1011
        }
        """

    /// Reads a scenario JSON file (see ``fileFormat``).
    public static func load(path: String) throws -> SimulatorScenario {
        let data: Data
        do {
            data = try Data(contentsOf: URL(filePath: path))
        } catch {
            throw SimulatorConfigurationError("cannot read the scenario file \(path)")
        }
        return try SimulatorScenario(json: data)
    }

    /// Parses scenario JSON (see ``fileFormat``).
    public init(json: Data) throws {
        let root: JSONValue
        do {
            root = try JSONDecoder().decode(JSONValue.self, from: json)
        } catch {
            throw SimulatorConfigurationError("the scenario is not valid JSON")
        }
        guard case .object(let members) = root else {
            throw SimulatorConfigurationError("the scenario must be a JSON object")
        }
        self.init()
        for key in members.keys
        where !["toolCalls", "tool_calls", "faults", "refuseResumption", "refuse_resumption"].contains(key) {
            throw SimulatorConfigurationError("the scenario has an unknown field \"\(key)\"")
        }
        if case .array(let calls) = members["toolCalls"] ?? members["tool_calls"] ?? .array([]) {
            for call in calls {
                guard let turn = call["turn"]?.numberValue, let name = call["name"]?.stringValue else {
                    throw SimulatorConfigurationError("a scenario tool call needs \"turn\" and \"name\"")
                }
                toolCalls.append(ScriptedToolCall(turn: Int(turn), name: name, args: call["args"] ?? .object([:])))
            }
        }
        if case .array(let faults) = members["faults"] ?? .array([]) {
            for fault in faults {
                switch fault {
                case .string(let spec):
                    self.faults.append(try SimulatorFault.parse(spec))
                case .object:
                    guard let trigger = fault["trigger"]?.stringValue, let action = fault["action"]?.stringValue else {
                        throw SimulatorConfigurationError("a scenario fault object needs \"trigger\" and \"action\"")
                    }
                    var parsed = try SimulatorFault.parse("\(trigger):\(action)")
                    if let connection = fault["connection"]?.numberValue { parsed.connection = Int(connection) }
                    if let repeats = fault["repeat"]?.boolValue { parsed.repeats = repeats }
                    self.faults.append(parsed)
                default:
                    throw SimulatorConfigurationError("a scenario fault is a string or an object")
                }
            }
        }
        if let code = (members["refuseResumption"] ?? members["refuse_resumption"])?.numberValue {
            refuseResumption = Int(code)
        }
    }
}
