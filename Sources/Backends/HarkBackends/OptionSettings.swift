import ArgumentParser
import HarkCore

extension BackendOptionGroup where Self: ParsableArguments {
    /// The settings given, by key name, read from the group's own options: each text `@Option` and each `@Flag` is
    /// the setting whose key is the property's name in snake case, as its flag is in kebab case (`agentId`:
    /// `--agent-id`, `agent_id`); a flag that is set gives "true". So an option is declared once, as a property;
    /// the registry's tests hold every flag to a key of its backend.
    public var settings: [String: String] {
        var settings: [String: String] = [:]
        for child in Mirror(reflecting: self).children {
            guard let label = child.label, label.hasPrefix("_") else { continue }
            let key = OptionNames.snakeCase(String(label.dropFirst()))
            if let option = child.value as? Option<String?> {
                settings[key] = option.wrappedValue
            } else if let flag = child.value as? Flag<Bool>, flag.wrappedValue {
                settings[key] = "true"
            }
        }
        return settings
    }
}

/// How a property's name becomes a setting's key, the way ArgumentParser makes its flag (`sandboxID`: `sandbox_id`,
/// `--sandbox-id`).
enum OptionNames {
    /// `apiVersion` → `api_version`, `livekitURL` → `livekit_url`: a word starts at an upper-case letter after a
    /// lower-case one or a digit, and at the last capital of a run that a lower-case letter follows.
    static func snakeCase(_ name: String) -> String {
        let characters = Array(name)
        var result = ""
        for (index, character) in characters.enumerated() {
            if character.isUppercase, index > 0 {
                let previous = characters[index - 1]
                let nextIsLower = index + 1 < characters.count && characters[index + 1].isLowercase
                if previous.isLowercase || previous.isNumber || (previous.isUppercase && nextIsLower) {
                    result.append("_")
                }
            }
            result.append(contentsOf: character.lowercased())
        }
        return result
    }
}
