import HarkCore
import Logging

/// Who joins which room, and which agent is asked to come.
public struct LiveKitJoin: Sendable, Hashable {
    /// The room's name.
    public var room: String
    /// The device's identity in the room (the token's `sub`).
    public var identity: String
    /// Its display name.
    public var name: String
    /// The agent to dispatch to the room (`roomConfig.agents[].agentName`); nil: whatever the project dispatches.
    public var agentName: String?

    public init(room: String, identity: String, name: String, agentName: String?) {
        self.room = room
        self.identity = identity
        self.name = name
        self.agentName = agentName
    }
}

/// Where the token for a room comes from, as `hark` hands it to the helper.
public enum LiveKitCredential: Sendable, Hashable {
    /// A token fetched by `hark` (from the device's backend or the sandbox).
    case token(Secret)
    /// A token the helper mints and signs with the project's key and secret (development only).
    case mint(apiKey: String, apiSecret: Secret, lifetimeSeconds: UInt32)
}

/// What `hark` asks of the helper for one connection: the room to join and how.
public struct LiveKitJoinRequest: Sendable, Hashable {
    /// The server (`ws://` or `wss://`).
    public var url: String
    /// The token, or what mints one.
    public var credential: LiveKitCredential
    /// Who joins which room (what a minted token grants; a fetched token names its own).
    public var join: LiveKitJoin
    /// The rate of the microphone audio ``LiveKitCommand/audio(_:)`` carries.
    public var microphoneRate: UInt32
    /// The microphone track announces a pre-connect audio buffer (the agent waits for it).
    public var preConnectBuffer: Bool
    /// The rate the agent's audio is wanted at.
    public var outputRate: UInt32
    /// How much of the agent's audio one ``LiveKitEvent/audio(_:)`` message carries, in milliseconds.
    public var outputFrameMilliseconds: UInt16
    /// The longest the join may take.
    public var timeoutMilliseconds: UInt32
    /// The least level of the helper's log lines that are sent to `hark`.
    public var logLevel: Logger.Level
    /// The topic of the text streams the helper reads (transcripts); others are not read.
    public var textTopic: String

    public init(
        url: String,
        credential: LiveKitCredential,
        join: LiveKitJoin,
        microphoneRate: UInt32,
        preConnectBuffer: Bool,
        outputRate: UInt32,
        outputFrameMilliseconds: UInt16,
        timeoutMilliseconds: UInt32,
        logLevel: Logger.Level,
        textTopic: String
    ) {
        self.url = url
        self.credential = credential
        self.join = join
        self.microphoneRate = microphoneRate
        self.preConnectBuffer = preConnectBuffer
        self.outputRate = outputRate
        self.outputFrameMilliseconds = outputFrameMilliseconds
        self.timeoutMilliseconds = timeoutMilliseconds
        self.logLevel = logLevel
        self.textTopic = textTopic
    }
}

/// A byte stream to send, its content being the ``LiveKitCommand/bytes(_:)`` parts sent before it.
public struct LiveKitByteStream: Sendable, Hashable {
    public var topic: String
    public var name: String
    public var mimeType: String
    public var attributes: [String: String]
    /// The identities it goes to (empty: everyone).
    public var destinations: [String]

    public init(topic: String, name: String, mimeType: String, attributes: [String: String], destinations: [String]) {
        self.topic = topic
        self.name = name
        self.mimeType = mimeType
        self.attributes = attributes
        self.destinations = destinations
    }
}

/// A message from `hark` to the helper.
public enum LiveKitCommand: Sendable, Hashable {
    /// The first message: this side's version.
    case hello
    /// Join the room (once, after the hello).
    case join(LiveKitJoinRequest)
    /// Microphone audio for the room, at the join's rate (each is acknowledged with ``LiveKitEvent/captured(_:)``
    /// once it is in the track's queue).
    case audio([Int16])
    /// Mute or unmute the microphone track.
    case setMuted(Bool)
    /// Send `text` as a text stream on `topic`.
    case sendText(topic: String, text: String)
    /// A part of the next byte stream.
    case bytes([UInt8])
    /// Send the parts gathered so far as one byte stream.
    case sendBytes(LiveKitByteStream)
    /// Play a subscribed audio track: its frames come as ``LiveKitEvent/audio(_:)``.
    case play(trackSid: String)
    /// Leave the room and end.
    case leave
}

/// Someone in the room as the helper reports them.
public struct LiveKitPeer: Sendable, Hashable {
    public var identity: String
    /// An agent (kind AGENT): it publishes `lk.agent.state`.
    public var isAgent: Bool
    public var attributes: [String: String]

    public init(identity: String, isAgent: Bool, attributes: [String: String]) {
        self.identity = identity
        self.isAgent = isAgent
        self.attributes = attributes
    }
}

/// The room the helper joined.
public struct LiveKitJoined: Sendable, Hashable {
    public var room: String
    /// The device's identity in it.
    public var localIdentity: String
    /// The published microphone track's id.
    public var microphoneTrack: String
    /// Who was there already.
    public var participants: [LiveKitPeer]

    public init(room: String, localIdentity: String, microphoneTrack: String, participants: [LiveKitPeer]) {
        self.room = room
        self.localIdentity = localIdentity
        self.microphoneTrack = microphoneTrack
        self.participants = participants
    }
}

/// A frame of a played track's audio.
public struct LiveKitTrackAudio: Sendable, Hashable {
    public var trackSid: String
    public var sampleRate: UInt32
    public var channels: UInt8
    /// Interleaved when there are several channels.
    public var samples: [Int16]

    public init(trackSid: String, sampleRate: UInt32, channels: UInt8, samples: [Int16]) {
        self.trackSid = trackSid
        self.sampleRate = sampleRate
        self.channels = channels
        self.samples = samples
    }
}

/// A message from the helper to `hark`.
public enum LiveKitEvent: Sendable, Hashable {
    /// The first message: the helper's version, and the LiveKit library's.
    case hello(library: String)
    /// The room was joined and the microphone published.
    case joined(LiveKitJoined)
    /// Someone joined.
    case participantJoined(LiveKitPeer)
    /// Someone left, and why (the library's `DisconnectReason`).
    case participantLeft(identity: String, reason: String)
    /// Someone's attributes, all of them now.
    case attributesChanged(identity: String, attributes: [String: String])
    /// A remote audio track was subscribed.
    case trackSubscribed(trackSid: String, participant: String)
    /// A subscription ended.
    case trackUnsubscribed(trackSid: String)
    /// The microphone track was published (again, after a full rejoin: a new id).
    case localTrackPublished(trackSid: String)
    /// Audio of a played track.
    case audio(LiveKitTrackAudio)
    /// A text stream on the join's topic was opened (`id` numbers it for this connection).
    case textOpened(id: UInt32, sender: String, attributes: [String: String])
    /// A piece of it.
    case textChunk(id: UInt32, text: String)
    /// Its end; `error` when it failed.
    case textClosed(id: UInt32, error: String?)
    /// The connection dropped; the library is getting it back.
    case reconnecting
    /// It is back.
    case reconnected
    /// The room was left (the library's `DisconnectReason`).
    case disconnected(reason: String)
    /// One ``LiveKitCommand/audio(_:)`` message of `samples` is in the track's queue.
    case captured(UInt32)
    /// A line of the helper's log.
    case log(Logger.Level, String)
    /// The join failed, or the helper cannot go on.
    case failed(SessionFailure.Kind, String)
}

extension LiveKitEvent {
    /// The kind of event, for a person (`joined`, `audio`).
    public var kind: String {
        switch self {
        case .hello: "hello"
        case .joined: "joined"
        case .participantJoined: "participantJoined"
        case .participantLeft: "participantLeft"
        case .attributesChanged: "attributesChanged"
        case .trackSubscribed: "trackSubscribed"
        case .trackUnsubscribed: "trackUnsubscribed"
        case .localTrackPublished: "localTrackPublished"
        case .audio: "audio"
        case .textOpened: "textOpened"
        case .textChunk: "textChunk"
        case .textClosed: "textClosed"
        case .reconnecting: "reconnecting"
        case .reconnected: "reconnected"
        case .disconnected: "disconnected"
        case .captured: "captured"
        case .log: "log"
        case .failed: "failed"
        }
    }
}

// MARK: - Encoding

extension LiveKitCommand {
    enum Tag: UInt8 {
        case hello = 1, join, audio, setMuted, sendText, bytes, sendBytes, play, leave
    }

    /// The frame that carries this command. Throws when audio or a bytes part is larger than the protocol allows
    /// (the caller splits them); text is cut to its field's limit.
    public func encoded() throws(LiveKitWireError) -> [UInt8] {
        var writer: WireWriter
        switch self {
        case .hello:
            writer = WireWriter(type: Tag.hello.rawValue)
            writer.bytes += LiveKitWire.magic
            writer.u16(LiveKitWire.version)
        case .join(let join):
            writer = WireWriter(type: Tag.join.rawValue, capacity: 512)
            writer.text(join.url, limit: LiveKitWire.maximumTextBytes)
            switch join.credential {
            case .token(let token):
                writer.u8(0)
                writer.text(token.reveal(), limit: LiveKitWire.maximumTextBytes)
            case .mint(let key, let secret, let lifetime):
                writer.u8(1)
                writer.text(key, limit: LiveKitWire.maximumNameBytes)
                writer.text(secret.reveal(), limit: LiveKitWire.maximumValueBytes)
                writer.u32(lifetime)
            }
            writer.text(join.join.room, limit: LiveKitWire.maximumNameBytes)
            writer.text(join.join.identity, limit: LiveKitWire.maximumNameBytes)
            writer.text(join.join.name, limit: LiveKitWire.maximumNameBytes)
            writer.optionalText(join.join.agentName, limit: LiveKitWire.maximumNameBytes)
            writer.u32(join.microphoneRate)
            writer.bool(join.preConnectBuffer)
            writer.u32(join.outputRate)
            writer.u16(join.outputFrameMilliseconds)
            writer.u32(join.timeoutMilliseconds)
            writer.u8(LogLevelCode.code(join.logLevel))
            writer.text(join.textTopic, limit: LiveKitWire.maximumNameBytes)
        case .audio(let samples):
            guard samples.count <= LiveKitWire.maximumSamples else {
                throw LiveKitWireError(.tooLarge("audio", samples.count))
            }
            writer = WireWriter(type: Tag.audio.rawValue, capacity: samples.count * 2 + 4)
            writer.samples(samples)
        case .setMuted(let muted):
            writer = WireWriter(type: Tag.setMuted.rawValue)
            writer.bool(muted)
        case .sendText(let topic, let text):
            writer = WireWriter(type: Tag.sendText.rawValue, capacity: text.utf8.count + 32)
            writer.text(topic, limit: LiveKitWire.maximumNameBytes)
            writer.text(text, limit: LiveKitWire.maximumTextBytes)
        case .bytes(let part):
            guard part.count <= LiveKitWire.maximumBytesPart else {
                throw LiveKitWireError(.tooLarge("a bytes part", part.count))
            }
            writer = WireWriter(type: Tag.bytes.rawValue, capacity: part.count + 4)
            writer.raw(part)
        case .sendBytes(let stream):
            writer = WireWriter(type: Tag.sendBytes.rawValue, capacity: 256)
            writer.text(stream.topic, limit: LiveKitWire.maximumNameBytes)
            writer.text(stream.name, limit: LiveKitWire.maximumNameBytes)
            writer.text(stream.mimeType, limit: LiveKitWire.maximumNameBytes)
            writer.attributes(stream.attributes)
            let destinations = stream.destinations.prefix(LiveKitWire.maximumParticipants)
            writer.u16(UInt16(destinations.count))
            for identity in destinations { writer.text(identity, limit: LiveKitWire.maximumNameBytes) }
        case .play(let sid):
            writer = WireWriter(type: Tag.play.rawValue)
            writer.text(sid, limit: LiveKitWire.maximumNameBytes)
        case .leave:
            writer = WireWriter(type: Tag.leave.rawValue)
        }
        return LiveKitWire.frame(writer.bytes)
    }

    /// The command a frame's body holds.
    public init(decoding body: ArraySlice<UInt8>) throws(LiveKitWireError) {
        guard let first = body.first else { throw LiveKitWireError(.emptyFrame) }
        guard let tag = Tag(rawValue: first) else { throw LiveKitWireError(.unknownType(first)) }
        var reader = WireReader(body.dropFirst(), side: "command", kind: tag)
        switch tag {
        case .hello:
            try reader.hello()
            self = .hello
        case .join:
            let url = try reader.text("url", limit: LiveKitWire.maximumTextBytes)
            let credential: LiveKitCredential
            switch try reader.u8("credential") {
            case 0: credential = .token(Secret(try reader.text("token", limit: LiveKitWire.maximumTextBytes)))
            case 1:
                credential = .mint(
                    apiKey: try reader.text("api key", limit: LiveKitWire.maximumNameBytes),
                    apiSecret: Secret(try reader.text("api secret", limit: LiveKitWire.maximumValueBytes)),
                    lifetimeSeconds: try reader.u32("lifetime")
                )
            default: throw LiveKitWireError(.invalidValue("the command join (credential)"))
            }
            let room = try reader.text("room", limit: LiveKitWire.maximumNameBytes)
            let identity = try reader.text("identity", limit: LiveKitWire.maximumNameBytes)
            let name = try reader.text("name", limit: LiveKitWire.maximumNameBytes)
            let agentName = try reader.optionalText("agent name", limit: LiveKitWire.maximumNameBytes)
            let microphoneRate = try reader.u32("microphone rate")
            let preConnect = try reader.bool("pre-connect buffer")
            let outputRate = try reader.u32("output rate")
            let frame = try reader.u16("output frame")
            let timeout = try reader.u32("timeout")
            guard let level = LogLevelCode.level(try reader.u8("log level")) else {
                throw LiveKitWireError(.invalidValue("the command join (log level)"))
            }
            let topic = try reader.text("text topic", limit: LiveKitWire.maximumNameBytes)
            guard (8_000...192_000).contains(microphoneRate), (8_000...192_000).contains(outputRate),
                (10...1000).contains(frame)
            else { throw LiveKitWireError(.invalidValue("the command join (rates)")) }
            self = .join(
                LiveKitJoinRequest(
                    url: url,
                    credential: credential,
                    join: LiveKitJoin(room: room, identity: identity, name: name, agentName: agentName),
                    microphoneRate: microphoneRate,
                    preConnectBuffer: preConnect,
                    outputRate: outputRate,
                    outputFrameMilliseconds: frame,
                    timeoutMilliseconds: timeout,
                    logLevel: level,
                    textTopic: topic
                )
            )
        case .audio:
            self = .audio(try reader.samples("samples"))
        case .setMuted:
            self = .setMuted(try reader.bool("muted"))
        case .sendText:
            let topic = try reader.text("topic", limit: LiveKitWire.maximumNameBytes)
            self = .sendText(topic: topic, text: try reader.text("text", limit: LiveKitWire.maximumTextBytes))
        case .bytes:
            self = .bytes(try reader.raw("part", limit: LiveKitWire.maximumBytesPart))
        case .sendBytes:
            let topic = try reader.text("topic", limit: LiveKitWire.maximumNameBytes)
            let name = try reader.text("name", limit: LiveKitWire.maximumNameBytes)
            let mimeType = try reader.text("MIME type", limit: LiveKitWire.maximumNameBytes)
            let attributes = try reader.attributes("attributes")
            let count = Int(try reader.u16("destinations"))
            guard count <= LiveKitWire.maximumParticipants else {
                throw LiveKitWireError(.tooLarge("the command sendBytes (destinations)", count))
            }
            var destinations: [String] = []
            for _ in 0..<count {
                destinations.append(try reader.text("destination", limit: LiveKitWire.maximumNameBytes))
            }
            self = .sendBytes(
                LiveKitByteStream(
                    topic: topic,
                    name: name,
                    mimeType: mimeType,
                    attributes: attributes,
                    destinations: destinations
                )
            )
        case .play:
            self = .play(trackSid: try reader.text("track", limit: LiveKitWire.maximumNameBytes))
        case .leave:
            self = .leave
        }
        try reader.end()
    }
}

extension LiveKitEvent {
    enum Tag: UInt8 {
        case hello = 0x41, joined, participantJoined, participantLeft, attributesChanged, trackSubscribed
        case trackUnsubscribed, localTrackPublished, audio, textOpened, textChunk, textClosed, reconnecting
        case reconnected, disconnected, captured, log, failed
    }

    /// The frame that carries this event. Throws only for audio larger than the protocol allows (the caller splits
    /// it); text from the room is cut to its field's limit.
    public func encoded() throws(LiveKitWireError) -> [UInt8] {
        var writer: WireWriter
        switch self {
        case .hello(let library):
            writer = WireWriter(type: Tag.hello.rawValue)
            writer.bytes += LiveKitWire.magic
            writer.u16(LiveKitWire.version)
            writer.text(library, limit: LiveKitWire.maximumNameBytes)
        case .joined(let joined):
            writer = WireWriter(type: Tag.joined.rawValue, capacity: 256)
            writer.text(joined.room, limit: LiveKitWire.maximumNameBytes)
            writer.text(joined.localIdentity, limit: LiveKitWire.maximumNameBytes)
            writer.text(joined.microphoneTrack, limit: LiveKitWire.maximumNameBytes)
            let participants = joined.participants.prefix(LiveKitWire.maximumParticipants)
            writer.u16(UInt16(participants.count))
            for peer in participants { writer.peer(peer) }
        case .participantJoined(let peer):
            writer = WireWriter(type: Tag.participantJoined.rawValue)
            writer.peer(peer)
        case .participantLeft(let identity, let reason):
            writer = WireWriter(type: Tag.participantLeft.rawValue)
            writer.text(identity, limit: LiveKitWire.maximumNameBytes)
            writer.text(reason, limit: LiveKitWire.maximumNameBytes)
        case .attributesChanged(let identity, let attributes):
            writer = WireWriter(type: Tag.attributesChanged.rawValue)
            writer.text(identity, limit: LiveKitWire.maximumNameBytes)
            writer.attributes(attributes)
        case .trackSubscribed(let sid, let participant):
            writer = WireWriter(type: Tag.trackSubscribed.rawValue)
            writer.text(sid, limit: LiveKitWire.maximumNameBytes)
            writer.text(participant, limit: LiveKitWire.maximumNameBytes)
        case .trackUnsubscribed(let sid):
            writer = WireWriter(type: Tag.trackUnsubscribed.rawValue)
            writer.text(sid, limit: LiveKitWire.maximumNameBytes)
        case .localTrackPublished(let sid):
            writer = WireWriter(type: Tag.localTrackPublished.rawValue)
            writer.text(sid, limit: LiveKitWire.maximumNameBytes)
        case .audio(let audio):
            guard audio.samples.count <= LiveKitWire.maximumSamples else {
                throw LiveKitWireError(.tooLarge("audio", audio.samples.count))
            }
            writer = WireWriter(type: Tag.audio.rawValue, capacity: audio.samples.count * 2 + 32)
            writer.text(audio.trackSid, limit: LiveKitWire.maximumNameBytes)
            writer.u32(audio.sampleRate)
            writer.u8(audio.channels)
            writer.samples(audio.samples)
        case .textOpened(let id, let sender, let attributes):
            writer = WireWriter(type: Tag.textOpened.rawValue)
            writer.u32(id)
            writer.text(sender, limit: LiveKitWire.maximumNameBytes)
            writer.attributes(attributes)
        case .textChunk(let id, let text):
            writer = WireWriter(type: Tag.textChunk.rawValue, capacity: text.utf8.count + 8)
            writer.u32(id)
            writer.text(text, limit: LiveKitWire.maximumTextBytes)
        case .textClosed(let id, let error):
            writer = WireWriter(type: Tag.textClosed.rawValue)
            writer.u32(id)
            writer.optionalText(error, limit: LiveKitWire.maximumValueBytes)
        case .reconnecting:
            writer = WireWriter(type: Tag.reconnecting.rawValue)
        case .reconnected:
            writer = WireWriter(type: Tag.reconnected.rawValue)
        case .disconnected(let reason):
            writer = WireWriter(type: Tag.disconnected.rawValue)
            writer.text(reason, limit: LiveKitWire.maximumNameBytes)
        case .captured(let samples):
            writer = WireWriter(type: Tag.captured.rawValue)
            writer.u32(samples)
        case .log(let level, let message):
            writer = WireWriter(type: Tag.log.rawValue, capacity: message.utf8.count + 8)
            writer.u8(LogLevelCode.code(level))
            writer.text(message, limit: LiveKitWire.maximumValueBytes)
        case .failed(let kind, let message):
            writer = WireWriter(type: Tag.failed.rawValue)
            writer.u8(FailureCode.code(kind))
            writer.text(message, limit: LiveKitWire.maximumValueBytes)
        }
        return LiveKitWire.frame(writer.bytes)
    }

    /// The event a frame's body holds.
    public init(decoding body: ArraySlice<UInt8>) throws(LiveKitWireError) {
        guard let first = body.first else { throw LiveKitWireError(.emptyFrame) }
        guard let tag = Tag(rawValue: first) else { throw LiveKitWireError(.unknownType(first)) }
        var reader = WireReader(body.dropFirst(), side: "event", kind: tag)
        let name = LiveKitWire.maximumNameBytes
        switch tag {
        case .hello:
            try reader.hello()
            self = .hello(library: try reader.text("library", limit: name))
        case .joined:
            let room = try reader.text("room", limit: name)
            let local = try reader.text("identity", limit: name)
            let track = try reader.text("track", limit: name)
            let count = Int(try reader.u16("participants"))
            guard count <= LiveKitWire.maximumParticipants else {
                throw LiveKitWireError(.tooLarge("the event joined (participants)", count))
            }
            var participants: [LiveKitPeer] = []
            for _ in 0..<count { participants.append(try reader.peer()) }
            self = .joined(
                LiveKitJoined(room: room, localIdentity: local, microphoneTrack: track, participants: participants)
            )
        case .participantJoined:
            self = .participantJoined(try reader.peer())
        case .participantLeft:
            let identity = try reader.text("identity", limit: name)
            self = .participantLeft(identity: identity, reason: try reader.text("reason", limit: name))
        case .attributesChanged:
            let identity = try reader.text("identity", limit: name)
            self = .attributesChanged(identity: identity, attributes: try reader.attributes("attributes"))
        case .trackSubscribed:
            let sid = try reader.text("track", limit: name)
            self = .trackSubscribed(trackSid: sid, participant: try reader.text("participant", limit: name))
        case .trackUnsubscribed:
            self = .trackUnsubscribed(trackSid: try reader.text("track", limit: name))
        case .localTrackPublished:
            self = .localTrackPublished(trackSid: try reader.text("track", limit: name))
        case .audio:
            let sid = try reader.text("track", limit: name)
            let rate = try reader.u32("rate")
            let channels = try reader.u8("channels")
            let samples = try reader.samples("samples")
            guard (8_000...192_000).contains(rate), (1...8).contains(channels), samples.count % Int(channels) == 0
            else { throw LiveKitWireError(.invalidValue("the event audio (format)")) }
            self = .audio(LiveKitTrackAudio(trackSid: sid, sampleRate: rate, channels: channels, samples: samples))
        case .textOpened:
            let id = try reader.u32("stream")
            let sender = try reader.text("sender", limit: name)
            self = .textOpened(id: id, sender: sender, attributes: try reader.attributes("attributes"))
        case .textChunk:
            let id = try reader.u32("stream")
            self = .textChunk(id: id, text: try reader.text("text", limit: LiveKitWire.maximumTextBytes))
        case .textClosed:
            let id = try reader.u32("stream")
            self = .textClosed(id: id, error: try reader.optionalText("error", limit: LiveKitWire.maximumValueBytes))
        case .reconnecting:
            self = .reconnecting
        case .reconnected:
            self = .reconnected
        case .disconnected:
            self = .disconnected(reason: try reader.text("reason", limit: name))
        case .captured:
            self = .captured(try reader.u32("samples"))
        case .log:
            guard let level = LogLevelCode.level(try reader.u8("level")) else {
                throw LiveKitWireError(.invalidValue("the event log (level)"))
            }
            self = .log(level, try reader.text("message", limit: LiveKitWire.maximumValueBytes))
        case .failed:
            guard let kind = FailureCode.kind(try reader.u8("kind")) else {
                throw LiveKitWireError(.invalidValue("the event failed (kind)"))
            }
            self = .failed(kind, try reader.text("message", limit: LiveKitWire.maximumValueBytes))
        }
        try reader.end()
    }
}

extension WireWriter {
    mutating func peer(_ peer: LiveKitPeer) {
        text(peer.identity, limit: LiveKitWire.maximumNameBytes)
        bool(peer.isAgent)
        attributes(peer.attributes)
    }
}

extension WireReader {
    mutating func peer() throws(LiveKitWireError) -> LiveKitPeer {
        let identity = try text("identity", limit: LiveKitWire.maximumNameBytes)
        let agent = try bool("agent")
        return LiveKitPeer(identity: identity, isAgent: agent, attributes: try attributes("attributes"))
    }
}

/// Log levels on the wire.
enum LogLevelCode {
    static let levels: [Logger.Level] = [.trace, .debug, .info, .notice, .warning, .error, .critical]
    static func code(_ level: Logger.Level) -> UInt8 { UInt8(levels.firstIndex(of: level) ?? 2) }
    static func level(_ code: UInt8) -> Logger.Level? { Int(code) < levels.count ? levels[Int(code)] : nil }
}

/// Failure kinds on the wire.
enum FailureCode {
    static let kinds: [SessionFailure.Kind] = [.transient, .authentication, .configuration, .untrusted]
    static func code(_ kind: SessionFailure.Kind) -> UInt8 { UInt8(kinds.firstIndex(of: kind) ?? 0) }
    static func kind(_ code: UInt8) -> SessionFailure.Kind? { Int(code) < kinds.count ? kinds[Int(code)] : nil }
}
