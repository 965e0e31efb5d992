import HarkCore
import HarkDatagrid
import HarkGemini

/// The decisions `hark converse` and `hark run` make the same way when they build a session; each says
/// in its own words (flags or configuration keys) how to fix what is missing.
enum SessionChoices {
    /// A choice that cannot be made: `message` is for a person.
    struct Refusal: Error {
        var message: String
    }

    /// How to authenticate with the Live API: an ephemeral token from the owner's backend, tokens minted
    /// from the key, the key itself, or — only for an endpoint that is not Google's (a simulator, a proxy
    /// that adds the key) — no key at all.
    static func geminiAuthentication(
        tokenURL: String?,
        mintToken: Bool,
        key: Secret?,
        endpoint: String,
        mintNeedsKey: String,
        noKey: String
    ) throws(Refusal) -> LiveAuthentication {
        if let tokenURL { return .tokenServer(url: tokenURL, bearer: nil) }
        if mintToken {
            guard let key else { throw Refusal(message: mintNeedsKey) }
            return .mintedToken(apiKey: key)
        }
        if let key { return .apiKey(key) }
        guard !endpoint.hasPrefix(ConverseOptions.realEndpoint) else { throw Refusal(message: noKey) }
        return .apiKey(Secret("none"))
    }

    /// The Datagrid key: required for Datagrid's own service, optional for a simulator or proxy.
    static func datagridKey(_ key: Secret?, base: String, noKey: String) throws(Refusal) -> Secret {
        if let key { return key }
        let isReal = base.hasPrefix(DatagridConfiguration.realBaseURL) || base.hasPrefix("wss://api.datagrid.com")
        guard !isReal else { throw Refusal(message: noKey) }
        return Secret("none")
    }

    /// The REST base for a Datagrid endpoint given as http(s) or ws(s).
    static func datagridRESTBase(_ base: String) -> String {
        base.hasPrefix("ws") ? "http" + base.dropFirst(2) : base
    }

    /// What a Datagrid connection starts with: transcripts both ways, the agent, prompt and voice.
    static func datagridStart(
        agentID: String?,
        systemPrompt: String?,
        silentStart: Bool?,
        voicePreset: String?
    ) -> DatagridStart {
        DatagridStart(
            agentId: agentID,
            config: systemPrompt.map { DatagridStart.Config(systemPrompt: $0) },
            voiceConfig: DatagridStart.VoiceConfig(
                inputTranscription: true,
                outputTranscription: true,
                silentStart: silentStart,
                voicePreset: voicePreset
            )
        )
    }
}
