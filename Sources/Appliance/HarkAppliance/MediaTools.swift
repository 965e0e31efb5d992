import HarkCore

/// What the media tools and the control socket ask of the device's music and radio.
public enum MediaRequest: Sendable, Equatable {
    /// Play a configured station (by name) or a URL.
    case play(String)
    /// Pause what plays.
    case pause
    /// Resume what was paused.
    case resume
    /// Stop what plays.
    case stop
    /// Tell what plays.
    case status
}

/// How a media request went: done or not, a sentence for the agent or a person, and the player's status.
public struct MediaReply: Sendable, Equatable {
    /// Whether it was done.
    public var ok: Bool
    /// What happened, or why not.
    public var message: String
    /// The status after it (`state`, `source`, `title`, `stations`), a JSON object.
    public var data: JSONValue

    /// A reply.
    public init(ok: Bool, message: String, data: JSONValue = .object([:])) {
        self.ok = ok
        self.message = message
        self.data = data
    }

    /// The tool's result: `result` and the status when done, `error` when not.
    public var toolResult: JSONValue {
        var members: [String: JSONValue] = ok ? ["result": .string(message)] : ["error": .string(message)]
        if case .object(let facts) = data { members.merge(facts) { first, _ in first } }
        return .object(members)
    }
}

/// The device's music and radio as the device tools and the control socket reach them.
public protocol MediaControls: Sendable {
    /// Performs `request`; a play returns once the source plays or failed (within its deadline).
    func media(_ request: MediaRequest) async -> MediaReply
}

extension DeviceTools {
    /// The longest source a tool or the control socket passes: a station's name or a URL.
    public static let mediaSourceLimit = 2048

    /// The music and radio tools over `media`, each with its behaviour.
    static func mediaTools(_ media: any MediaControls, behavior: (String) -> ToolBehavior) -> [LocalTool] {
        func tool(
            _ name: String,
            _ description: String,
            _ parameters: JSONValue? = nil,
            _ request: @escaping @Sendable (JSONValue) throws -> MediaRequest
        ) -> LocalTool {
            LocalTool(name: name, description: description, parameters: parameters, behavior: behavior(name)) {
                arguments in
                await media.media(try request(arguments)).toolResult
            }
        }
        return [
            tool(
                "play_media",
                "Plays music or radio on this device's speaker: a station by its name (now_playing lists them), or the URL of a stream or playlist the user gave. What played before stops. It says whether it plays, or why not.",
                [
                    "type": "object",
                    "properties": [
                        "source": [
                            "type": "string",
                            "description": "A station's name, or an https URL of a stream (at most 2048 characters).",
                        ]
                    ],
                    "required": ["source"],
                ]
            ) { arguments in
                let source = try requiredString("source", in: arguments, limit: mediaSourceLimit)
                guard !source.trimmedWhitespace.isEmpty else {
                    throw ArgumentError(description: "source must name a station or give a URL")
                }
                return .play(source.trimmedWhitespace)
            },
            tool("pause_media", "Pauses the music or radio playing on this device.") { _ in .pause },
            tool("resume_media", "Resumes the music or radio paused on this device.") { _ in .resume },
            tool("stop_media", "Stops the music or radio on this device.") { _ in .stop },
            tool(
                "now_playing",
                "Tells what this device plays (the station or address, and the song's title when the stream gives it), and the stations it knows."
            ) { _ in .status },
        ]
    }

    /// The string `name` of a call's `arguments`, at most `limit` characters; missing or another type throws.
    static func requiredString(_ name: String, in arguments: JSONValue, limit: Int) throws -> String {
        guard let text = try optionalString(name, in: arguments, limit: limit) else {
            throw ArgumentError(description: "\(name) must be a string; it is missing")
        }
        return text
    }
}

/// The control socket's media operations over ``MediaControls``: `media.play` (`source`: a station's name or a
/// URL), `media.pause`, `media.resume`, `media.stop`, `media.status`. Bad arguments and other operations are
/// refused with a clear message.
public struct MediaControlService: ControlService {
    let media: (any MediaControls)?

    /// The operations over `media` (nil: music and radio are turned off, and every operation says so).
    public init(media: (any MediaControls)?) {
        self.media = media
    }

    public func handle(_ request: ControlRequest) async -> ControlReply {
        guard let media else {
            return ControlReply(ok: false, message: "music and radio are turned off (media.enabled)")
        }
        let mediaRequest: MediaRequest
        switch request.op {
        case "media.play":
            do {
                let source = try DeviceTools.requiredString(
                    "source",
                    in: .object(request.args),
                    limit: DeviceTools.mediaSourceLimit
                )
                guard !source.trimmedWhitespace.isEmpty else {
                    return ControlReply(ok: false, message: "media.play: source must name a station or give a URL")
                }
                mediaRequest = .play(source.trimmedWhitespace)
            } catch {
                return ControlReply(ok: false, message: "media.play: \(error)")
            }
        case "media.pause": mediaRequest = .pause
        case "media.resume": mediaRequest = .resume
        case "media.stop": mediaRequest = .stop
        case "media.status": mediaRequest = .status
        default:
            return ControlReply(ok: false, message: "unknown operation \(RemoteText.printable(request.op, limit: 40))")
        }
        let reply = await media.media(mediaRequest)
        return ControlReply(ok: reply.ok, message: reply.message, data: reply.data)
    }
}
