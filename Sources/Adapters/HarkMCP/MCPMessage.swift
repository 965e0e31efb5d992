import HarkCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The id of a JSON-RPC request: a number or a string (the server's own requests may use either).
public enum MCPRequestID: Sendable, Hashable, CustomStringConvertible {
    case number(Int)
    case string(String)

    /// Its JSON form.
    public var json: JSONValue {
        switch self {
        case .number(let value): .number(Double(value))
        case .string(let value): .string(value)
        }
    }

    /// The id in `value` (an integral number or a short string), else nil.
    public init?(_ value: JSONValue?) {
        switch value {
        case .number(let number)? where number.rounded() == number && abs(number) < 9_007_199_254_740_992:
            self = .number(Int(number))
        case .string(let text)? where text.utf8.count <= 256:
            self = .string(text)
        default:
            return nil
        }
    }

    public var description: String {
        switch self {
        case .number(let value): "\(value)"
        case .string(let value): RemoteText.printable(value, limit: 64)
        }
    }
}

/// One JSON-RPC 2.0 message from an MCP server, classified.
public enum MCPIncoming: Sendable, Hashable {
    /// The answer to a request of ours: its result or its error.
    case response(id: MCPRequestID, result: Result<JSONValue, MCPRemoteError>)
    /// A request from the server (`ping`, or one this client does not serve).
    case request(id: MCPRequestID, method: String, params: JSONValue?)
    /// A notification (`notifications/progress`, `notifications/tools/list_changed`, ...).
    case notification(method: String, params: JSONValue?)

    /// Reads one message; throws ``MCPError`` for what is not a JSON-RPC 2.0 message.
    public static func decode(_ bytes: Data) throws(MCPError) -> MCPIncoming {
        let value: JSONValue
        do {
            value = try JSONDecoder().decode(JSONValue.self, from: bytes)
        } catch {
            throw MCPError(.garbage, "the server sent something that is not JSON (\(bytes.count) bytes)")
        }
        guard case .object(let members) = value else {
            throw MCPError(.garbage, "the server sent JSON that is not a JSON-RPC message (not an object)")
        }
        if let method = members["method"]?.stringValue {
            let name = RemoteText.printable(method, limit: 128)
            if let idValue = members["id"], idValue != .null {
                guard let id = MCPRequestID(idValue) else {
                    throw MCPError(.garbage, "the server sent a request with an unusable id")
                }
                return .request(id: id, method: name, params: members["params"])
            }
            return .notification(method: name, params: members["params"])
        }
        guard let id = MCPRequestID(members["id"]) else {
            throw MCPError(.garbage, "the server sent a response without a usable id")
        }
        if let error = members["error"] {
            return .response(id: id, result: .failure(MCPRemoteError(error)))
        }
        guard let result = members["result"] else {
            throw MCPError(.garbage, "the server sent a response with neither result nor error")
        }
        return .response(id: id, result: .success(result))
    }
}

/// A JSON-RPC error the server answered with.
public struct MCPRemoteError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Its code (-32601: no such method, -32602: bad parameters, ...).
    public var code: Int
    /// Its message, made printable and bounded.
    public var message: String

    /// Reads the `error` member of a response.
    public init(_ value: JSONValue) {
        code = value["code"]?.numberValue.flatMap { $0.isFinite && abs($0) < 1e9 ? Int($0) : nil } ?? 0
        message = RemoteText.printable(value["message"]?.stringValue ?? "no message", limit: 300)
    }

    /// An error with `code` and `message`.
    public init(code: Int, message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "error \(code): \(message)" }
}

/// Why an MCP exchange failed.
public struct MCPError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of failure.
    public enum Kind: String, Sendable, Hashable {
        /// The server could not be reached, or the link to it broke.
        case unreachable
        /// A deadline passed.
        case timeout
        /// The server answered what is not a JSON-RPC message (or not one of MCP).
        case garbage
        /// A message passed the size bound.
        case tooLarge
        /// The server answered the request with a JSON-RPC error.
        case remote
        /// The server refused the credential (HTTP 401 / 403).
        case unauthorized
        /// The session the server held is gone (HTTP 404 on it): initialize again.
        case sessionGone
        /// The call was cancelled (a barge-in, the session ending).
        case cancelled
        /// The server does not speak a protocol revision this client does.
        case unsupported
    }

    /// The kind.
    public var kind: Kind
    /// What happened, printable.
    public var message: String

    /// An error of `kind` saying `message`.
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}

/// Encodes JSON-RPC messages (compact, keys sorted for stable bytes).
enum MCPEncoding {
    static func encode(_ value: JSONValue) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // A JSONValue always encodes.
        return (try? encoder.encode(value)) ?? Data("null".utf8)
    }

    static func request(id: MCPRequestID, method: String, params: JSONValue?) -> Data {
        var members: [String: JSONValue] = ["jsonrpc": "2.0", "id": id.json, "method": .string(method)]
        if let params { members["params"] = params }
        return encode(.object(members))
    }

    static func notification(method: String, params: JSONValue?) -> Data {
        var members: [String: JSONValue] = ["jsonrpc": "2.0", "method": .string(method)]
        if let params { members["params"] = params }
        return encode(.object(members))
    }

    static func response(id: MCPRequestID, result: JSONValue) -> Data {
        encode(["jsonrpc": "2.0", "id": id.json, "result": result])
    }

    static func errorResponse(id: MCPRequestID, code: Int, message: String) -> Data {
        encode([
            "jsonrpc": "2.0", "id": id.json, "error": ["code": .number(Double(code)), "message": .string(message)],
        ])
    }
}
