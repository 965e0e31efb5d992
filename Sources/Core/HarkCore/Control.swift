/// One request to the running daemon through its control socket: an operation and its arguments, one JSON object
/// per line, `{"op": "timers.add", "args": {"seconds": 600, "label": "pasta"}}`. What arrives is untrusted: the
/// socket bounds its size and nesting, and each operation validates its own arguments.
///
/// The operations: `reload` and `status` (the daemon's own); `timers.list`, `timers.add` (`seconds`, `label`?),
/// `timers.cancel` (`label`?: none cancels all), `timers.stop` (stops what rings), `alarms.add` (`time` "HH:MM",
/// `label`?, `days`? as `["mon", ...]`), `alarms.cancel` (`label`?) and `announce` (`file`, a WAV the command has
/// checked, and `chime`; the daemon reads the file before it replies, so the command may remove it then).
public struct ControlRequest: Sendable, Hashable, Codable {
    /// The operation, e.g. `reload`, `status`, `timers.add`.
    public var op: String
    /// Its arguments by name (empty when it takes none).
    public var args: [String: JSONValue]

    /// A request for `op` with `args`.
    public init(op: String, args: [String: JSONValue] = [:]) {
        self.op = op
        self.args = args
    }

    private enum CodingKeys: String, CodingKey {
        case op
        case args
    }

    /// Decodes `{"op": ..., "args": {...}}`; `args` may be left out.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        op = try container.decode(String.self, forKey: .op)
        args = try container.decodeIfPresent([String: JSONValue].self, forKey: .args) ?? [:]
    }

    /// Encodes `{"op": ..., "args": {...}}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(op, forKey: .op)
        try container.encode(args, forKey: .args)
    }
}

/// The daemon's answer to one ``ControlRequest``, one JSON object per line: `{"ok": true, "message": "...",
/// "data": {...}}`. `message` is for a person (the command prints it); `data` is for the command to read.
public struct ControlReply: Sendable, Hashable, Codable {
    /// Whether the operation was done.
    public var ok: Bool
    /// What happened, or why not, in a sentence a person reads.
    public var message: String
    /// What the operation returns (`timers.list`: the timers, alarms and what rings; `status`: the status), or nil.
    public var data: JSONValue?

    /// A reply: done or not, a sentence, and the data returned.
    public init(ok: Bool, message: String, data: JSONValue? = nil) {
        self.ok = ok
        self.message = message
        self.data = data
    }

    /// An operation refused or failed, with why.
    public static func failure(_ message: String) -> ControlReply { ControlReply(ok: false, message: message) }

    private enum CodingKeys: String, CodingKey {
        case ok
        case message
        case data
    }

    /// Decodes `{"ok": ..., "message": ..., "data": ...}`; `message` and `data` may be left out.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        ok = try container.decode(Bool.self, forKey: .ok)
        message = try container.decodeIfPresent(String.self, forKey: .message) ?? ""
        let value = try container.decodeIfPresent(JSONValue.self, forKey: .data)
        data = value == .null ? nil : value
    }

    /// Encodes `{"ok": ..., "message": ..., "data": ...}` (`data` only when there is some).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(ok, forKey: .ok)
        try container.encode(message, forKey: .message)
        try container.encodeIfPresent(data, forKey: .data)
    }
}

/// What serves the control socket's operations: the daemon's parts each answer theirs. A handler never traps on
/// what a request holds: unknown operations and bad arguments get `ok: false` with a clear message.
public protocol ControlService: Sendable {
    /// Performs `request` and says how it went.
    func handle(_ request: ControlRequest) async -> ControlReply
}
