import HarkBackends
import HarkBoard
import HarkCore
import HarkPlatform

extension LoadedConfiguration {
    /// The effective configuration as YAML text: every key, in the example file's order, with a comment
    /// where a value came from the environment. Secrets are never shown, only where they would be read
    /// from; URLs are shown with credential-like query values redacted. Loading the text again gives the
    /// same configuration (an instruction read from a file is shown as the file).
    public func rendered() -> String {
        var lines: [String] = []
        let source = file.map { "then \($0), " } ?? "(no file), "
        lines.append("# The effective configuration: the defaults, \(source)then the environment.")
        lines.append("# Secrets are never shown here, only where they are read from.")
        let keys = ConfigurationKeys.all
        for section in ConfigurationKeys.sections {
            let indent = section.isEmpty ? "" : "  "
            if section == "mcp" {
                lines.append("")
                lines.append("mcp:")
                if configuration.mcpServers.isEmpty {
                    lines.append("  servers: []")
                } else {
                    lines.append("  servers:")
                    for server in configuration.mcpServers { lines += server.rendered() }
                }
                continue
            }
            if !section.isEmpty {
                lines.append("")
                lines.append("\(section):")
            }
            if section == "media" { lines += MediaConfigurationReader.rendered(configuration.media.stations) }
            for key in keys where key.section == section {
                let comment = origin(of: key.path).comment
                if ConfigurationKeys.instructionPaths.contains(key.path), configuration.text(key.path + "_file") != nil
                {
                    let count = configuration.text(key.path)?.count ?? 0
                    lines.append(
                        "\(indent)# \(key.name): the text of \(key.name)_file (\(count) characters)"
                    )
                    continue
                }
                var value = key.render(configuration)
                if key.path.hasSuffix("_url") || key.path.hasSuffix("endpoint"), case .text(let url) = value {
                    value = .text(URLRedaction.redact(url))
                }
                lines += RenderedValue.lines(key: key.name, value: value, indent: indent, comment: comment)
                for secret in Backends.named(section)?.secrets ?? [] where secret.fileKey == key.name {
                    lines.append(
                        "\(indent)# the key: \(secret.fileKey) if set, else the systemd credential \(secret.credential), "
                            + "else \(secret.environment)"
                    )
                }
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }
}

extension ConfigurationOrigin {
    /// `  # from HARK_MODE` for a value from the environment (`  # from --board` from the command line),
    /// else nothing.
    fileprivate var comment: String {
        switch self {
        case .environment(let name), .commandLine(let name): "  # from \(name)"
        case .standard, .file: ""
        }
    }
}

extension RenderedValue {
    /// `key: value` (one line, or a block for text over several lines), with `comment` after the key.
    static func lines(key: String, value: RenderedValue, indent: String, comment: String) -> [String] {
        switch value {
        case .null:
            return ["\(indent)\(key): ~\(comment)"]
        case .plain(let text):
            return ["\(indent)\(key): \(text)\(comment)"]
        case .text(let text):
            if let block = block(text, indent: indent + "  ") {
                return ["\(indent)\(key): \(block.indicator)\(comment)"] + block.lines
            }
            return ["\(indent)\(key): \(scalar(text))\(comment)"]
        }
    }

    /// `text` plain when YAML reads it back as the same string, else double-quoted.
    static func scalar(_ text: String) -> String {
        let safe =
            !text.isEmpty && text.first.map { $0.isLetter || $0.isNumber || "/._".contains($0) } == true
            && text.allSatisfy { ($0.isLetter || $0.isNumber || " -_./:+@,=?&%".contains($0)) && $0 != "\t" }
            && !text.hasSuffix(" ") && !text.contains(": ") && !text.contains(" #") && !text.hasSuffix(":")
        if safe, YAMLNode.scalar(text: text, style: .plain, line: 1).isText { return text }
        var quoted = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": quoted += "\\\""
            case "\\": quoted += "\\\\"
            case "\n": quoted += "\\n"
            case "\t": quoted += "\\t"
            case "\r": quoted += "\\r"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7f {
                    let hex = String(scalar.value, radix: 16)
                    quoted += "\\x" + String(repeating: "0", count: 2 - hex.count) + hex
                } else {
                    quoted.unicodeScalars.append(scalar)
                }
            }
        }
        return quoted + "\""
    }

    /// A literal block (`|` or `|-`) for text over several lines, when one writes it exactly.
    private static func block(_ text: String, indent: String) -> (indicator: String, lines: [String])? {
        guard text.contains("\n"), !text.contains("\r"), !text.contains("\t"),
            let first = text.first, !first.isWhitespace
        else { return nil }
        var body = Substring(text)
        var indicator = "|-"
        if body.hasSuffix("\n") {
            body = body.dropLast()
            indicator = "|"
            if body.hasSuffix("\n") { return nil }
        }
        let lines = body.split(separator: "\n", omittingEmptySubsequences: false)
        // Blank last lines would be chomped; lines of only spaces would change the indentation.
        guard lines.last?.isEmpty == false, !lines.contains(where: { !$0.isEmpty && $0.allSatisfy(\.isWhitespace) })
        else { return nil }
        return (indicator, lines.map { $0.isEmpty ? "" : indent + $0 })
    }
}
