import HarkLiveKitProto

/// A participant of a room: who it is, what kind (an agent publishes `lk.agent.state` among its attributes), its
/// attributes as last seen.
public struct LiveKitParticipant: Sendable {
    /// The kind of participant (`ParticipantKind`).
    public enum Kind: String, Sendable, Equatable {
        case standard, ingress, egress, sip, agent, connector, bridge
    }

    /// The server's id for the participant (`PA_...`).
    public var sid: String
    /// The identity the participant joined with (its token's `sub`).
    public var identity: String
    /// Its display name.
    public var name: String
    /// What it is.
    public var kind: Kind
    /// Its attributes (for an agent: `lk.agent.state` among them).
    public var attributes: [String: String]
    /// Its metadata.
    public var metadata: String
    /// The library's handle for the participant, kept while this value lives.
    let handle: OwnedHandle?

    init(_ owned: Livekit_Proto_OwnedParticipant, library: LiveKitLibrary) {
        self.init(owned.info, handle: owned.hasHandle ? OwnedHandle(owned.handle, library: library) : nil)
    }

    init(_ info: Livekit_Proto_ParticipantInfo, handle: OwnedHandle?) {
        sid = info.sid
        identity = info.identity
        name = info.name
        kind = Kind(info.kind)
        attributes = info.attributes
        metadata = info.metadata
        self.handle = handle
    }
}

extension LiveKitParticipant.Kind {
    init(_ kind: Livekit_Proto_ParticipantKind) {
        switch kind {
        case .standard: self = .standard
        case .ingress: self = .ingress
        case .egress: self = .egress
        case .sip: self = .sip
        case .agent: self = .agent
        case .connector: self = .connector
        case .bridge: self = .bridge
        }
    }
}

/// A track a remote participant published: what it is, before (or without) subscribing to it.
public struct LiveKitTrackPublication: Sendable {
    /// The track's server id (`TR_...`).
    public var sid: String
    /// Its name.
    public var name: String
    /// Whether it is audio (else video or unknown).
    public var isAudio: Bool
    /// Whether it comes from a microphone (`TrackSource.SOURCE_MICROPHONE`).
    public var isMicrophone: Bool
    /// Whether it is muted.
    public var muted: Bool
    let handle: OwnedHandle?

    init(_ owned: Livekit_Proto_OwnedTrackPublication, library: LiveKitLibrary) {
        let info = owned.info
        sid = info.sid
        name = info.name
        isAudio = info.kind == .kindAudio
        isMicrophone = info.source == .sourceMicrophone
        muted = info.muted
        handle = owned.hasHandle ? OwnedHandle(owned.handle, library: library) : nil
    }
}

/// A remote track this client subscribed to: ``LiveKitClient/audioStream(of:sampleRate:channels:frameCapacity:)``
/// receives its audio. Holds the library's handle for the track while it lives.
public struct LiveKitRemoteTrack: Sendable {
    /// The track's server id (`TR_...`).
    public var sid: String
    /// Its name.
    public var name: String
    /// Whether it is audio.
    public var isAudio: Bool
    /// The identity of the participant who publishes it.
    public var participantIdentity: String
    let handle: OwnedHandle

    init(_ owned: Livekit_Proto_OwnedTrack, participant: String, library: LiveKitLibrary) {
        sid = owned.info.sid
        name = owned.info.name
        isAudio = owned.info.kind == .kindAudio
        participantIdentity = participant
        handle = OwnedHandle(owned.handle, library: library)
    }
}

/// The state of the room's connection (`ConnectionState`).
public enum LiveKitConnectionState: String, Sendable, Equatable {
    case disconnected, connected, reconnecting

    init(_ state: Livekit_Proto_ConnectionState) {
        switch state {
        case .connDisconnected: self = .disconnected
        case .connConnected: self = .connected
        case .connReconnecting: self = .reconnecting
        }
    }
}

/// Something that happened in a room, as the library reports it (its `RoomEvent`s), with the parts the LiveKit
/// backend uses as Swift values. Handles that come with an event (a subscribed track, a stream reader, a data
/// packet's buffer) are owned by the value and dropped with it.
public enum LiveKitRoomEvent: Sendable {
    /// A participant joined.
    case participantConnected(LiveKitParticipant)
    /// A participant left (`reason`: the library's `DisconnectReason`, e.g. `ROOM_DELETED`).
    case participantDisconnected(identity: String, reason: String)
    /// A participant's attributes changed: all of them now, and those that changed.
    case participantAttributesChanged(identity: String, attributes: [String: String], changed: [String: String])
    /// A remote participant published a track.
    case trackPublished(identity: String, publication: LiveKitTrackPublication)
    /// A remote participant unpublished a track.
    case trackUnpublished(identity: String, trackSid: String)
    /// This client subscribed to a remote track (automatically, unless the room was joined without).
    case trackSubscribed(LiveKitRemoteTrack)
    /// This client's subscription to a remote track ended.
    case trackUnsubscribed(identity: String, trackSid: String)
    /// Subscribing to a remote track failed.
    case trackSubscriptionFailed(identity: String, trackSid: String, error: String)
    /// A track was muted or unmuted.
    case trackMuted(identity: String, trackSid: String, muted: Bool)
    /// This client's own track was published (its server id).
    case localTrackPublished(trackSid: String)
    /// The connection's state changed.
    case connectionStateChanged(LiveKitConnectionState)
    /// The connection dropped and the library is getting it back (resume, else a full rejoin).
    case reconnecting
    /// The connection is back.
    case reconnected
    /// The room was left (`reason`: the library's `DisconnectReason`, e.g. `ROOM_DELETED`, `CLIENT_INITIATED`).
    case disconnected(reason: String)
    /// A participant opened a text stream (e.g. `lk.transcription`, `lk.chat`): read it with
    /// ``LiveKitTextStreamReader/chunks()``.
    case textStreamOpened(LiveKitTextStreamReader)
    /// A participant opened a byte stream (its content is not read here).
    case byteStreamOpened(identity: String, info: LiveKitStreamInfo)
    /// A data packet arrived (`topic`, at most ``LiveKitRoomEvent/maximumDataPacketBytes`` bytes).
    case dataReceived(identity: String, topic: String, data: [UInt8])
    /// Any other event, by the name of its kind.
    case other(String)
    /// The room's events end (`RoomEOS`).
    case ended

    /// The largest data packet copied out (LiveKit's own limit is 15 KiB for a reliable packet).
    public static let maximumDataPacketBytes = 64 << 10

    /// The Swift value of one `RoomEvent`, or nil when it carries nothing (an event with no message).
    static func convert(_ event: Livekit_Proto_RoomEvent, client: LiveKitClient) -> LiveKitRoomEvent? {
        let library = client.library
        switch event.message {
        case .participantConnected(let connected):
            return .participantConnected(LiveKitParticipant(connected.info, library: library))
        case .participantDisconnected(let left):
            return .participantDisconnected(identity: left.participantIdentity, reason: name(left.disconnectReason))
        case .participantAttributesChanged(let changed):
            return .participantAttributesChanged(
                identity: changed.participantIdentity,
                attributes: dictionary(changed.attributes),
                changed: dictionary(changed.changedAttributes)
            )
        case .trackPublished(let published):
            return .trackPublished(
                identity: published.participantIdentity,
                publication: LiveKitTrackPublication(published.publication, library: library)
            )
        case .trackUnpublished(let unpublished):
            return .trackUnpublished(identity: unpublished.participantIdentity, trackSid: unpublished.publicationSid)
        case .trackSubscribed(let subscribed):
            return .trackSubscribed(
                LiveKitRemoteTrack(subscribed.track, participant: subscribed.participantIdentity, library: library)
            )
        case .trackUnsubscribed(let unsubscribed):
            return .trackUnsubscribed(identity: unsubscribed.participantIdentity, trackSid: unsubscribed.trackSid)
        case .trackSubscriptionFailed(let failed):
            return .trackSubscriptionFailed(
                identity: failed.participantIdentity,
                trackSid: failed.trackSid,
                error: LogRedaction.redact(failed.error, limit: 256)
            )
        case .trackMuted(let muted):
            return .trackMuted(identity: muted.participantIdentity, trackSid: muted.trackSid, muted: true)
        case .trackUnmuted(let unmuted):
            return .trackMuted(identity: unmuted.participantIdentity, trackSid: unmuted.trackSid, muted: false)
        case .localTrackPublished(let published):
            return .localTrackPublished(trackSid: published.trackSid)
        case .connectionStateChanged(let changed):
            return .connectionStateChanged(LiveKitConnectionState(changed.state))
        case .reconnecting:
            return .reconnecting
        case .reconnected:
            return .reconnected
        case .disconnected(let disconnected):
            return .disconnected(reason: name(disconnected.reason))
        case .eos:
            return .ended
        case .textStreamOpened(let opened):
            return .textStreamOpened(
                LiveKitTextStreamReader(opened.reader, sender: opened.participantIdentity, client: client)
            )
        case .byteStreamOpened(let opened):
            // Not read: its handle goes now.
            _ = OwnedHandle(opened.reader.handle, library: library)
            return .byteStreamOpened(identity: opened.participantIdentity, info: LiveKitStreamInfo(opened.reader.info))
        case .dataPacketReceived(let packet):
            guard case .user(let user) = packet.value else { return .other("dataPacketReceived") }
            let buffer = OwnedHandle(user.data.handle, library: library)
            defer { withExtendedLifetime(buffer) {} }
            let info = user.data.data
            guard info.dataLen <= UInt64(maximumDataPacketBytes), info.dataPtr != 0 || info.dataLen == 0,
                let length = Int(exactly: info.dataLen)
            else { return .other("dataPacketReceived (too large)") }
            var data: [UInt8] = []
            if length > 0, let pointer = UnsafePointer<UInt8>(bitPattern: UInt(info.dataPtr)) {
                data = Array(UnsafeBufferPointer(start: pointer, count: length))
            }
            return .dataReceived(identity: packet.participantIdentity, topic: user.topic, data: data)
        case .some(let other):
            return .other(String(String(describing: other).prefix { $0 != "(" }))
        case nil:
            return nil
        }
    }

    /// A `DisconnectReason` as its proto name (`ROOM_DELETED`).
    static func name(_ reason: Livekit_Proto_DisconnectReason) -> String {
        switch reason {
        case .unknownReason: "UNKNOWN_REASON"
        case .clientInitiated: "CLIENT_INITIATED"
        case .duplicateIdentity: "DUPLICATE_IDENTITY"
        case .serverShutdown: "SERVER_SHUTDOWN"
        case .participantRemoved: "PARTICIPANT_REMOVED"
        case .roomDeleted: "ROOM_DELETED"
        case .stateMismatch: "STATE_MISMATCH"
        case .joinFailure: "JOIN_FAILURE"
        case .migration: "MIGRATION"
        case .signalClose: "SIGNAL_CLOSE"
        case .roomClosed: "ROOM_CLOSED"
        case .userUnavailable: "USER_UNAVAILABLE"
        case .userRejected: "USER_REJECTED"
        case .sipTrunkFailure: "SIP_TRUNK_FAILURE"
        case .connectionTimeout: "CONNECTION_TIMEOUT"
        case .mediaFailure: "MEDIA_FAILURE"
        case .agentError: "AGENT_ERROR"
        }
    }

    /// Attribute entries as a dictionary (a repeated key keeps its last value).
    static func dictionary(_ entries: [Livekit_Proto_AttributesEntry]) -> [String: String] {
        var result: [String: String] = [:]
        for entry in entries { result[entry.key] = entry.value }
        return result
    }
}

/// What a data stream's header says (`TextStreamInfo` / `ByteStreamInfo`).
public struct LiveKitStreamInfo: Sendable, Equatable {
    /// The stream's id.
    public var id: String
    /// Its topic (`lk.transcription`, `lk.chat`, ...).
    public var topic: String
    /// Its MIME type.
    public var mimeType: String
    /// Its attributes (for a transcription: `lk.segment_id`, `lk.transcription_final`, `lk.transcribed_track_id`).
    public var attributes: [String: String]
    /// Its announced length, when the sender gave one.
    public var totalLength: UInt64?

    init(_ info: Livekit_Proto_TextStreamInfo) {
        id = info.streamID
        topic = info.topic
        mimeType = info.mimeType
        attributes = info.attributes
        totalLength = info.hasTotalLength ? info.totalLength : nil
    }

    init(_ info: Livekit_Proto_ByteStreamInfo) {
        id = info.streamID
        topic = info.topic
        mimeType = info.mimeType
        attributes = info.attributes
        totalLength = info.hasTotalLength ? info.totalLength : nil
    }
}
