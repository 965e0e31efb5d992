/// What one family of Live models accepts in `setup` and how it behaves, so that a session never sends a model
/// what it rejects, and understands what it sends. Chosen from the model's name (``forModel(_:)``); an unknown
/// name gets the newest profile and a warning, never a refusal (a model released after this build).
public struct LiveModelProfile: Sendable, Hashable {
    /// How the service treats the model.
    public enum Availability: Sendable, Hashable {
        /// Served and current.
        case current
        /// Served, but an older preview: worth moving to the current model.
        case legacyPreview
        /// Shut down: every connection is refused.
        case shutDown(since: String)
        /// A name this build does not know: treated as the newest family.
        case unknown
    }

    /// The family, for logs and `hark doctor` (`gemini-3.8-live`, `gemini-2.5 native audio`).
    public var family: String
    public var availability: Availability
    /// `generationConfig.thinkingConfig.thinkingBudget` (2.5; gone from 3.5 on).
    public var thinkingBudget: Bool
    /// `generationConfig.thinkingConfig.thinkingLevel` (`low`, `medium`, `high`).
    public var thinkingLevel: Bool
    /// `generationConfig.enableAffectiveDialog`.
    public var affectiveDialog: Bool
    /// `proactivity {proactiveAudio}` may be sent (3.8: proactive audio is always on, and sending it is an error).
    public var proactivitySetting: Bool
    /// Function calls run NON_BLOCKING unless a declaration says otherwise; responses take `scheduling` and
    /// `willContinue`.
    public var nonBlockingTools: Bool
    /// `historyConfig {initialHistoryInClientContent}`: a fresh session can be seeded with the conversation.
    public var historyConfig: Bool
    /// `languageCodes` and `customVocabulary` in the transcription configuration.
    public var transcriptionHints: Bool
    /// `clientContent` with explicit roles is welcome at any time (not only before realtime input).
    public var clientContentAnyTime: Bool
    /// `contextUpdate` (new tools or instruction mid-session) is taken; models without it close the connection
    /// with 1007, and get new tools with the next connection's `setup`.
    public var contextUpdate = true

    /// The current stable Live model.
    public static let gemini38 = LiveModelProfile(
        family: "gemini-3.8-live",
        availability: .current,
        thinkingBudget: false,
        thinkingLevel: false,
        affectiveDialog: false,
        proactivitySetting: false,
        nonBlockingTools: true,
        historyConfig: true,
        transcriptionHints: true,
        clientContentAnyTime: true
    )

    /// `gemini-3.8-live-extended-thinking`: 3.8 with background reasoning, which takes `thinkingLevel`.
    public static let gemini38ExtendedThinking: LiveModelProfile = {
        var profile = gemini38
        profile.family = "gemini-3.8-live-extended-thinking"
        profile.thinkingLevel = true
        return profile
    }()

    /// The 2.5 native-audio models (previews, and the Vertex GA name): what 3.8 removed is there, what it added
    /// is not.
    public static let gemini25: LiveModelProfile = {
        var profile = gemini38
        profile.family = "gemini-2.5 native audio"
        (profile.thinkingBudget, profile.affectiveDialog, profile.proactivitySetting) = (true, true, true)
        (profile.nonBlockingTools, profile.historyConfig) = (false, false)
        (profile.transcriptionHints, profile.clientContentAnyTime) = (false, false)
        profile.contextUpdate = false
        return profile
    }()

    /// `gemini-3.1-flash-live-preview` (March 2026): a legacy preview. Taken to accept what 2.5 accepts and to
    /// think by level; tools stay blocking.
    public static let gemini31Preview: LiveModelProfile = {
        var profile = gemini25
        profile.family = "gemini-3.1 live preview"
        profile.availability = .legacyPreview
        profile.thinkingLevel = true
        return profile
    }()

    /// The newest family this build knows (what an unknown name gets).
    public static let newest = gemini38

    /// Models the service has shut down (every connection is refused).
    static let shutDownModels: [String: String] = [
        "gemini-2.0-flash-live-001": "2025-12-09",
        "gemini-live-2.5-flash-preview": "2025-12-09",
    ]

    /// The profile of `model` (with or without `models/`).
    public static func forModel(_ model: String) -> LiveModelProfile {
        let name = model.hasPrefix("models/") ? String(model.dropFirst("models/".count)) : model
        if let date = shutDownModels[name] ?? (name.hasPrefix("gemini-2.0-flash-live") ? "2025-12-09" : nil) {
            var profile = gemini25
            profile.family = "gemini-2.0 / 2.5 half-cascade live"
            profile.availability = .shutDown(since: date)
            return profile
        }
        if name.hasPrefix("gemini-3.8-live-extended-thinking") { return gemini38ExtendedThinking }
        if name.hasPrefix("gemini-3.8-live") { return gemini38 }
        if name.hasPrefix("gemini-3.1-flash-live") { return gemini31Preview }
        if name.hasPrefix("gemini-2.5-flash-native-audio") {
            var profile = gemini25
            profile.availability = .legacyPreview
            return profile
        }
        if name.hasPrefix("gemini-live-2.5-flash-native-audio") { return gemini25 }
        var profile = newest
        profile.availability = .unknown
        return profile
    }

    /// What a person should know about choosing `model` (nil: nothing).
    public static func advice(for model: String) -> String? {
        switch forModel(model).availability {
        case .current: nil
        case .legacyPreview:
            "\(model) is an older preview; the current Live model is \(GeminiBackend.defaultModel)"
        case .shutDown(let date):
            "\(model) was shut down on \(date); use \(GeminiBackend.defaultModel)"
        case .unknown:
            "\(model) is not a Live model this version knows; it is spoken to as \(newest.family) is"
        }
    }
}
