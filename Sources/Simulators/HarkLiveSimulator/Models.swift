import HarkGemini

/// The Live model family a connection's `setup` chose, by the model's name. The simulator's own reading of the
/// protocol page ("Models and protocol as of late 2026"), kept apart from the client's profiles on purpose: a
/// stand-in that shares the client's understanding cannot catch the client's misunderstandings.
public enum LiveModelFamily: String, Sendable, Hashable, Codable, CustomStringConvertible {
    /// The 2.5 native-audio models, and every name the simulator does not model otherwise (its tests' `sim`).
    case gemini25 = "2.5"
    /// `gemini-3.8-live` and its variants (`gemini-3.8-live-extended-thinking`).
    case gemini38 = "3.8"

    /// The family of `model` (with or without `models/`): names starting with `gemini-3.8-live` are 3.8.
    public init(model: String) {
        self = LiveModelRules.bareName(model).hasPrefix("gemini-3.8-live") ? .gemini38 : .gemini25
    }

    public var description: String { rawValue }
}

/// What the service accepts in `setup`, per model.
public enum LiveModelRules {
    /// Models shut down on 2025-12-09: the service answers them as it answers a model it does not know.
    public static let shutDownModels: Set<String> = ["gemini-2.0-flash-live-001", "gemini-live-2.5-flash-preview"]

    /// Thinking levels `gemini-3.8-live-extended-thinking` takes (case-insensitive, as the service reads them).
    public static let thinkingLevels: Set<String> = ["MINIMAL", "LOW", "MEDIUM", "HIGH"]

    /// Function behaviours a 3.8 declaration may state.
    public static let behaviors: Set<String> = ["BLOCKING", "NON_BLOCKING", "UNSPECIFIED", "BEHAVIOR_UNSPECIFIED"]

    /// Schedulings a 3.8 function response may carry.
    public static let schedulings: Set<String> = ["SILENT", "WHEN_IDLE", "INTERRUPT", "SCHEDULING_UNSPECIFIED"]

    /// `model` without its `models/` prefix.
    public static func bareName(_ model: String) -> String {
        model.hasPrefix("models/") ? String(model.dropFirst("models/".count)) : model
    }

    /// The close reason of the service for a model it does not serve (close 1008).
    public static func notFound(model: String, version: String) -> String {
        let name = model.hasPrefix("models/") ? model : "models/" + model
        return "\(name) is not found for API version \(version), or is not supported for bidiGenerateContent. "
            + "Call ListModels to see the list of available models and their supported methods."
    }

    /// The first field of `setup` that `model` rejects (a path such as `generationConfig.thinkingConfig`), or nil.
    public static func rejectedField(_ setup: Setup) -> String? {
        let name = bareName(setup.model)
        guard LiveModelFamily(model: name) == .gemini38 else { return nil }
        let extendedThinking = name.hasPrefix("gemini-3.8-live-extended-thinking")
        if let generation = setup.generationConfig {
            // Audio out only: text comes from the output transcription.
            if generation.responseModalities?.contains(.text) == true { return "generationConfig.responseModalities" }
            if let thinking = generation.thinkingConfig {
                guard extendedThinking else { return "generationConfig.thinkingConfig" }
                if thinking.thinkingBudget != nil { return "generationConfig.thinkingConfig.thinkingBudget" }
                if thinking.includeThoughts != nil { return "generationConfig.thinkingConfig.includeThoughts" }
                if let level = thinking.thinkingLevel, !thinkingLevels.contains(level.uppercased()) {
                    return "generationConfig.thinkingConfig.thinkingLevel"
                }
            }
            if generation.enableAffectiveDialog != nil { return "generationConfig.enableAffectiveDialog" }
        }
        // Proactive audio is always on: turning it off is an error.
        if setup.proactivity?.proactiveAudio == false { return "proactivity.proactiveAudio" }
        for (toolIndex, tool) in (setup.tools ?? []).enumerated() {
            for (index, declaration) in (tool.functionDeclarations ?? []).enumerated() {
                if let behavior = declaration.behavior, !behaviors.contains(behavior.uppercased()) {
                    return "tools[\(toolIndex)].functionDeclarations[\(index)].behavior"
                }
            }
        }
        return nil
    }

    /// The close reason of the service for a rejected field (close 1007): "Request contains an invalid argument."
    /// naming the field.
    public static func invalidArgument(field: String) -> String {
        "Request contains an invalid argument: \(field) is not supported by this model."
    }

    /// The functions `setup` declares BLOCKING (3.8: every other one is NON_BLOCKING).
    public static func blockingFunctions(_ setup: Setup) -> Set<String> {
        blockingFunctions(setup.tools ?? [])
    }

    /// The functions `tools` declares `behavior: BLOCKING`.
    public static func blockingFunctions(_ tools: [Tool]) -> Set<String> {
        var names: Set<String> = []
        for tool in tools {
            for declaration in tool.functionDeclarations ?? [] where declaration.behavior?.uppercased() == "BLOCKING" {
                names.insert(declaration.name)
            }
        }
        return names
    }

    /// A close reason cut to what a close frame holds (123 bytes), on a character boundary.
    public static func closeReason(_ text: String) -> String {
        guard text.utf8.count > 123 else { return text }
        var cut = ""
        for character in text {
            if cut.utf8.count + String(character).utf8.count > 123 { break }
            cut.append(character)
        }
        return cut
    }
}
