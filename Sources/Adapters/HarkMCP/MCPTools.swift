import HarkCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// One tool of `tools/list`, read and bounded. Names, descriptions, schemas and hints come from the server and are
/// untrusted: a tool that cannot be read is refused with a reason, never half-taken.
public struct MCPToolDescription: Sendable, Hashable {
    /// Its name on the server.
    public var name: String
    /// What it does (the description, else the title), printable and bounded.
    public var description: String
    /// The JSON Schema of its arguments (an object schema).
    public var inputSchema: JSONValue
    /// The server says it only reads (`readOnlyHint`).
    public var readOnly: Bool
    /// The server marks it destructive (`destructiveHint: true`, and not read-only).
    public var destructive: Bool

    /// Longest name taken (the specification's bound).
    public static let maximumNameBytes = 128
    /// Longest description kept, in characters.
    public static let maximumDescription = 1024
    /// Largest input schema taken, encoded.
    public static let maximumSchemaBytes = 32 << 10
    /// Deepest nesting of an input schema taken.
    public static let maximumSchemaDepth = 24

    /// Reads one entry of `tools/list`: the tool, or why it is refused (the name, printable, and the reason).
    public static func read(_ value: JSONValue) -> Result<MCPToolDescription, MCPToolRefusal> {
        guard let rawName = value["name"]?.stringValue, !rawName.isEmpty else {
            return .failure(MCPToolRefusal(tool: "(no name)", reason: "the server gave it no name"))
        }
        let shown = RemoteText.printable(rawName, limit: 80)
        guard rawName.utf8.count <= maximumNameBytes,
            rawName.unicodeScalars.allSatisfy({
                $0.value > 0x20 && $0.value != 0x7F && !(0x80...0x9F).contains($0.value)
            })
        else {
            return .failure(
                MCPToolRefusal(
                    tool: shown,
                    reason: "its name is longer than \(maximumNameBytes) bytes or holds spaces or control characters"
                )
            )
        }
        let schema = value["inputSchema"] ?? ["type": "object"]
        guard case .object = schema, schema["type"]?.stringValue ?? "object" == "object" else {
            return .failure(MCPToolRefusal(tool: shown, reason: "its input schema is not an object schema"))
        }
        guard depth(of: schema) <= maximumSchemaDepth,
            MCPEncoding.encode(schema).count <= maximumSchemaBytes
        else {
            return .failure(
                MCPToolRefusal(
                    tool: shown,
                    reason:
                        "its input schema is larger than \(maximumSchemaBytes / 1024) KiB or nested deeper than \(maximumSchemaDepth)"
                )
            )
        }
        let text = value["description"]?.stringValue ?? value["title"]?.stringValue ?? rawName
        let annotations = value["annotations"]
        let readOnly = annotations?["readOnlyHint"]?.boolValue ?? false
        return .success(
            MCPToolDescription(
                name: rawName,
                description: RemoteText.printable(text, limit: maximumDescription),
                inputSchema: schema,
                readOnly: readOnly,
                destructive: !readOnly && (annotations?["destructiveHint"]?.boolValue ?? false)
            )
        )
    }

    private static func depth(of value: JSONValue, _ level: Int = 0) -> Int {
        guard level <= maximumSchemaDepth else { return level }
        switch value {
        case .array(let items): return items.map { depth(of: $0, level + 1) }.max() ?? level
        case .object(let members): return members.values.map { depth(of: $0, level + 1) }.max() ?? level
        default: return level
        }
    }
}

/// A tool of a server that is not offered to the agent, and why.
public struct MCPToolRefusal: Error, Sendable, Hashable, CustomStringConvertible {
    /// The tool's name as the server gave it, printable.
    public var tool: String
    /// Why it is not offered.
    public var reason: String

    /// A refusal of `tool` for `reason`.
    public init(tool: String, reason: String) {
        self.tool = tool
        self.reason = reason
    }

    public var description: String { "\(tool): \(reason)" }
}

/// The names MCP tools are declared under: `SERVER__TOOL`, made of letters, digits and `_` only, starting with a
/// letter, at most 64 characters (what every backend takes: Gemini's function names and the cascade's). A name
/// cut short ends in a hash of the whole, so two long names stay apart.
public enum MCPToolNaming {
    /// Longest declared name.
    public static let maximumLength = 64

    /// The declared name of `tool` of `server`.
    public static func declaredName(server: String, tool: String) -> String {
        var name = String(
            "\(server)__\(tool)".unicodeScalars.map { scalar -> Character in
                scalar.isASCII
                    && (scalar.properties.isAlphabetic || ("0"..."9").contains(Character(scalar)) || scalar == "_")
                    ? Character(scalar) : "_"
            }
        )
        if let first = name.unicodeScalars.first, !first.properties.isAlphabetic { name = "t" + name }
        guard name.count > maximumLength else { return name }
        var hash: UInt32 = 2_166_136_261
        for byte in "\(server)\u{0}\(tool)".utf8 {
            hash = (hash ^ UInt32(byte)) &* 16_777_619
        }
        let suffix = String(hash, radix: 16)
        let padded = String(repeating: "0", count: 8 - suffix.count) + suffix
        return String(name.prefix(maximumLength - 9)) + "_" + padded
    }

    /// True when `pattern` (`*` any run, `?` one character) matches all of `name`.
    public static func glob(_ pattern: String, matches name: String) -> Bool {
        let p = Array(pattern.unicodeScalars)
        let n = Array(name.unicodeScalars)
        var (pi, ni, star, mark) = (0, 0, -1, 0)
        while ni < n.count {
            if pi < p.count, p[pi] == "?" || p[pi] == n[ni] {
                pi += 1
                ni += 1
            } else if pi < p.count, p[pi] == "*" {
                star = pi
                mark = ni
                pi += 1
            } else if star >= 0 {
                pi = star + 1
                mark += 1
                ni = mark
            } else {
                return false
            }
        }
        while pi < p.count, p[pi] == "*" { pi += 1 }
        return pi == p.count
    }
}

/// A `tools/call` result made into what the model hears: the text of its content (images, audio and resources named,
/// not passed on), its structured content when small enough, and a failure (`isError`) as an error the model can
/// speak about. Only printable text and the result's own JSON go on; nothing in it is ever run.
public enum MCPToolResult {
    /// The most characters of text the model is given from one result.
    public static let maximumTextCharacters = 16_384

    /// The result for the model, and whether the tool succeeded.
    public static func forModel(_ result: JSONValue) -> (result: JSONValue, succeeded: Bool) {
        var parts: [String] = []
        for item in result["content"]?.arrayValue?.prefix(64) ?? [] {
            switch item["type"]?.stringValue {
            case "text":
                if let text = item["text"]?.stringValue { parts.append(text) }
            case "image", "audio":
                let kind = item["type"]?.stringValue ?? "media"
                parts.append(
                    "[\(kind) \(RemoteText.printable(item["mimeType"]?.stringValue ?? "", limit: 60)), not shown]"
                )
            case "resource_link":
                let name = item["name"]?.stringValue ?? item["uri"]?.stringValue ?? ""
                parts.append("[link \(RemoteText.printable(name, limit: 200))]")
            case "resource":
                if let text = item["resource"]?["text"]?.stringValue {
                    parts.append(text)
                } else {
                    parts.append(
                        "[resource \(RemoteText.printable(item["resource"]?["uri"]?.stringValue ?? "", limit: 200))]"
                    )
                }
            default:
                continue
            }
        }
        let text = modelText(parts.joined(separator: "\n"))
        if result["isError"]?.boolValue == true {
            return (["error": .string(text.isEmpty ? "the tool failed without saying why" : text)], false)
        }
        var answer: [String: JSONValue] = [:]
        if !text.isEmpty { answer["result"] = .string(text) }
        // Structured content beside the text, unless it only repeats it (`{"result": text}`).
        if let structured = result["structuredContent"], case .object = structured,
            structured != ["result": .string(text)],
            MCPEncoding.encode(structured).count <= maximumTextCharacters
        {
            answer["structured"] = structured
        }
        if answer.isEmpty { answer["result"] = "done" }
        return (.object(answer), true)
    }

    /// Text for the model: line breaks and tabs kept, other control characters dropped, bounded.
    static func modelText(_ text: String) -> String {
        var kept = String.UnicodeScalarView()
        var count = 0
        for scalar in text.unicodeScalars {
            let value = scalar.value
            if value < 0x20 && value != 0x0A && value != 0x09 { continue }
            if value == 0x7F || (0x80...0x9F).contains(value) || (0x202A...0x202E).contains(value)
                || (0x2066...0x2069).contains(value)
            {
                continue
            }
            if count == maximumTextCharacters {
                return String(kept) + " … (cut short)"
            }
            kept.append(scalar)
            count += 1
        }
        return String(kept)
    }
}
