import HarkCore
import HarkLiveKitProto
import Logging
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// How to join a room (`RoomOptions`).
public struct LiveKitRoomOptions: Sendable {
    /// Subscribe to every track published in the room (the agent's voice) without asking.
    public var autoSubscribe = true
    /// Publish only the layers someone subscribes to (video; no effect on audio).
    public var dynacast = false
    /// One peer connection for publishing and subscribing (`/rtc/v1`), when set; else the library's default.
    public var singlePeerConnection: Bool?
    /// The library's own deadline for joining, when set (it retries within it); else its default.
    public var libraryConnectTimeout: Duration?
    /// How long ``LiveKitClient/connect(url:token:options:)`` waits for the join in all.
    public var timeout: Duration = .seconds(20)
    /// The most room events that wait unread; beyond, the oldest go.
    public var eventCapacity = 1024

    /// The defaults.
    public init() {}
}

/// A room this client joined (``LiveKitClient/connect(url:token:options:)``): its events, this client's
/// participant, and what it can do there — publish an audio source, send text and byte streams, set its
/// attributes, leave. Leaving (``disconnect()``) happens at the client's end at the latest; the room's handle is
/// dropped with the last reference.
public final class LiveKitRoom: Sendable {
    /// The room's events, until it is left (then the stream ends).
    public let events: AsyncStream<LiveKitRoomEvent>
    /// The room's server id (`RM_...`).
    public let sid: String
    /// The room's name.
    public let name: String
    /// This client's participant as it joined.
    public let localParticipant: LiveKitParticipant
    /// The other participants present when it joined (later ones come as events).
    public let remoteParticipants: [LiveKitParticipant]
    /// The tracks they had published, by participant identity.
    public let remotePublications: [String: [LiveKitTrackPublication]]
    let handle: OwnedHandle
    private let client: LiveKitClient
    private let left = Mutex(false)
    /// Local tracks published here, kept alive while the room is.
    private let published = Mutex<[OwnedHandle]>([])
    /// The microphone track's handle, once published.
    private let microphone = Mutex<OwnedHandle?>(nil)

    init(
        client: LiveKitClient,
        result: Livekit_Proto_ConnectCallback.Result,
        events: AsyncStream<LiveKitRoomEvent>
    ) {
        let library = client.library
        self.client = client
        self.events = events
        handle = OwnedHandle(result.room.handle, library: library)
        sid = result.room.info.sid
        name = result.room.info.name
        localParticipant = LiveKitParticipant(result.localParticipant, library: library)
        var participants: [LiveKitParticipant] = []
        var publications: [String: [LiveKitTrackPublication]] = [:]
        for entry in result.participants {
            let participant = LiveKitParticipant(entry.participant, library: library)
            participants.append(participant)
            publications[participant.identity] = entry.publications.map {
                LiveKitTrackPublication($0, library: library)
            }
        }
        remoteParticipants = participants
        remotePublications = publications
    }

    /// A room released without ``disconnect()`` is left all the same (without waiting for the answer), before its
    /// handle goes: the library would otherwise keep the connection until it is disposed of.
    deinit {
        if !isDisconnected {
            var request = Livekit_Proto_FfiRequest()
            var disconnect = Livekit_Proto_DisconnectRequest()
            disconnect.roomHandle = handle.id
            disconnect.requestAsyncID = client.makeAsyncID()
            disconnect.reason = .clientInitiated
            request.disconnect = disconnect
            client.sendDetached(request, "leave the released room \(name)")
        }
        client.unroute(room: handle.id)
    }

    /// Whether the room was left (by ``disconnect()`` or by the server).
    public var isDisconnected: Bool { left.withLock { $0 } }

    func markDisconnected() { left.withLock { $0 = true } }

    /// The local participant's handle (its requests need it).
    private var localHandle: UInt64 { localParticipant.handle?.id ?? 0 }

    /// Publishes `source` as this client's microphone track named `name` (`CreateAudioTrack`, then
    /// `PublishTrack` with source `MICROPHONE`); returns the published track's server id. `preConnectBuffer`
    /// marks the track as one whose first words come separately, as a pre-connect audio byte stream (the track's
    /// `TF_PRECONNECT_BUFFER` feature: an agent then waits for that stream before it listens to the track).
    public func publish(
        _ source: LiveKitAudioSource,
        name: String = "microphone",
        preConnectBuffer: Bool = false,
        timeout: Duration? = nil
    ) async throws -> String {
        var create = Livekit_Proto_FfiRequest()
        var track = Livekit_Proto_CreateAudioTrackRequest()
        track.name = name
        track.sourceHandle = source.handle.id
        create.createAudioTrack = track
        let created = try client.request(create, "create the microphone track")
        guard case .createAudioTrack(let answer) = created.message, answer.track.hasHandle else {
            throw LiveKitError.response("create the microphone track: the response holds no track")
        }
        let trackHandle = OwnedHandle(answer.track.handle, library: client.library)
        let local = localHandle
        let event = try await client.call("publish the microphone track", timeout: timeout) { id in
            var request = Livekit_Proto_FfiRequest()
            var publish = Livekit_Proto_PublishTrackRequest()
            publish.localParticipantHandle = local
            publish.trackHandle = trackHandle.id
            publish.requestAsyncID = id
            var options = Livekit_Proto_TrackPublishOptions()
            options.source = .sourceMicrophone
            if preConnectBuffer { options.preconnectBuffer = true }
            publish.options = options
            request.publishTrack = publish
            return request
        } answeredID: {
            $0.publishTrack.asyncID
        }
        guard case .publishTrack(let published) = event.message else {
            throw LiveKitError.response("publish the microphone track: an answer of another kind")
        }
        switch published.message {
        case .error(let error):
            throw LiveKitError.failed("publish the microphone track", error)
        case .publication(let publication):
            let publicationHandle = OwnedHandle(publication.handle, library: client.library)
            self.published.withLock { $0 += [trackHandle, publicationHandle] }
            microphone.withLock { $0 = trackHandle }
            return publication.info.sid
        case nil:
            throw LiveKitError.response("publish the microphone track: the answer holds neither a track nor an error")
        }
    }

    /// Mutes or unmutes the published microphone track (`LocalTrackMute`): a muted track sends nothing and the room
    /// is told it is muted. Throws when no microphone was published.
    public func setMicrophoneMuted(_ muted: Bool) throws(LiveKitError) {
        guard let track = microphone.withLock({ $0 }) else {
            throw LiveKitError.invalidArgument("no microphone track was published")
        }
        var request = Livekit_Proto_FfiRequest()
        var mute = Livekit_Proto_LocalTrackMuteRequest()
        mute.trackHandle = track.id
        mute.mute = muted
        request.localTrackMute = mute
        _ = try client.request(request, muted ? "mute the microphone" : "unmute the microphone")
    }

    /// Sends `text` as a text stream on `topic` (`StreamSendText`) with `attributes`, to `destinations` (identities;
    /// empty: everyone); returns the stream's id.
    public func sendText(
        _ text: String,
        topic: String,
        attributes: [String: String] = [:],
        to destinations: [String] = [],
        timeout: Duration? = nil
    ) async throws -> String {
        let local = localHandle
        let event = try await client.call("send a text stream on \(topic)", timeout: timeout) { id in
            var request = Livekit_Proto_FfiRequest()
            var send = Livekit_Proto_StreamSendTextRequest()
            send.localParticipantHandle = local
            send.text = text
            send.requestAsyncID = id
            var options = Livekit_Proto_StreamTextOptions()
            options.topic = topic
            options.attributes = attributes
            options.destinationIdentities = destinations
            send.options = options
            request.sendText = send
            return request
        } answeredID: {
            $0.sendText.asyncID
        }
        guard case .sendText(let answer) = event.message else {
            throw LiveKitError.response("send a text stream: an answer of another kind")
        }
        if case .error(let error) = answer.result {
            throw LiveKitError.failed("send a text stream", error.description_p)
        }
        return answer.info.streamID
    }

    /// Sends `bytes` as a byte stream on `topic` (`StreamSendBytes`) named `name`, of `mimeType`, with
    /// `attributes`, to `destinations` (identities; empty: everyone); returns the stream's id. At most
    /// ``maximumByteStreamBytes``.
    public func sendBytes(
        _ bytes: [UInt8],
        topic: String,
        name: String,
        mimeType: String = "application/octet-stream",
        attributes: [String: String] = [:],
        to destinations: [String] = [],
        timeout: Duration? = nil
    ) async throws -> String {
        guard bytes.count <= Self.maximumByteStreamBytes else {
            throw LiveKitError.invalidArgument("a byte stream of \(bytes.count) bytes is too large")
        }
        let local = localHandle
        let event = try await client.call("send a byte stream on \(topic)", timeout: timeout) { id in
            var request = Livekit_Proto_FfiRequest()
            var send = Livekit_Proto_StreamSendBytesRequest()
            send.localParticipantHandle = local
            send.bytes = Data(bytes)
            send.requestAsyncID = id
            var options = Livekit_Proto_StreamByteOptions()
            options.topic = topic
            options.name = name
            options.mimeType = mimeType
            options.attributes = attributes
            options.destinationIdentities = destinations
            send.options = options
            request.sendBytes = send
            return request
        } answeredID: {
            $0.sendBytes.asyncID
        }
        guard case .sendBytes(let answer) = event.message else {
            throw LiveKitError.response("send a byte stream: an answer of another kind")
        }
        if case .error(let error) = answer.result {
            throw LiveKitError.failed("send a byte stream", error.description_p)
        }
        return answer.info.streamID
    }

    /// The largest byte stream ``sendBytes(_:topic:name:mimeType:attributes:to:timeout:)`` sends (30 s of 48 kHz
    /// mono 16-bit audio, with room to spare).
    public static let maximumByteStreamBytes = 4 << 20

    /// Sets this client's participant attributes (`SetLocalAttributes`): the ones given are set, the others kept.
    public func setAttributes(_ attributes: [String: String], timeout: Duration? = nil) async throws {
        let local = localHandle
        let event = try await client.call("set the participant's attributes", timeout: timeout) { id in
            var request = Livekit_Proto_FfiRequest()
            var set = Livekit_Proto_SetLocalAttributesRequest()
            set.localParticipantHandle = local
            set.attributes = attributes.sorted { $0.key < $1.key }.map { key, value in
                var entry = Livekit_Proto_AttributesEntry()
                entry.key = key
                entry.value = value
                return entry
            }
            set.requestAsyncID = id
            request.setLocalAttributes = set
            return request
        } answeredID: {
            $0.setLocalAttributes.asyncID
        }
        if case .setLocalAttributes(let answer) = event.message, answer.hasError {
            throw LiveKitError.failed("set the participant's attributes", answer.error)
        }
    }

    /// Leaves the room (`Disconnect`), waiting for the library's answer; the room's events end. Safe to call more
    /// than once, and after the client ended.
    public func disconnect() async {
        await leave(timeout: client.configuration.disconnectTimeout)
    }

    /// ``disconnect()`` within `timeout`.
    func leave(timeout: Duration) async {
        let first = left.withLock { left in
            defer { left = true }
            return !left
        }
        guard first else {
            client.unroute(room: handle.id)
            return
        }
        let room = handle.id
        do {
            _ = try await client.call("leave the room", timeout: timeout) { id in
                var request = Livekit_Proto_FfiRequest()
                var disconnect = Livekit_Proto_DisconnectRequest()
                disconnect.roomHandle = room
                disconnect.requestAsyncID = id
                disconnect.reason = .clientInitiated
                request.disconnect = disconnect
                return request
            } answeredID: {
                $0.disconnect.asyncID
            }
        } catch {
            client.logger.warning("leaving the LiveKit room \(name): \(error)")
        }
        client.unroute(room: room)
    }
}

extension LiveKitClient {
    /// Joins the room at `url` (`ws://` or `wss://`) with `token` (`Connect`, then `ReadyForRoomEvent` once the room's
    /// events have somewhere to go). The token never reaches a log or an error; the URL is logged redacted. Fails
    /// with ``LiveKitError/isConnectFailure`` (``LiveKitError/isAuthentication`` when the token is refused), or
    /// ``LiveKitError/isTimeout`` after `options.timeout`.
    public func connect(url: String, token: Secret, options: LiveKitRoomOptions = LiveKitRoomOptions()) async throws
        -> LiveKitRoom
    {
        let what = "join the LiveKit room at \(URLRedaction.redact(url))"
        logger.debug("joining the LiveKit room at \(URLRedaction.redact(url))")
        let event = try await call(what, timeout: options.timeout) { id in
            var request = Livekit_Proto_FfiRequest()
            var connect = Livekit_Proto_ConnectRequest()
            connect.url = url
            connect.token = token.reveal()
            connect.requestAsyncID = id
            var roomOptions = Livekit_Proto_RoomOptions()
            roomOptions.autoSubscribe = options.autoSubscribe
            roomOptions.dynacast = options.dynacast
            if let single = options.singlePeerConnection { roomOptions.singlePeerConnection = single }
            if let limit = options.libraryConnectTimeout {
                roomOptions.connectTimeoutMs = UInt64(
                    max(
                        1,
                        limit.components.seconds * 1000
                            + limit.components.attoseconds / 1_000_000_000_000_000
                    )
                )
            }
            connect.options = roomOptions
            request.connect = connect
            return request
        } answeredID: {
            $0.connect.asyncID
        }
        guard case .connect(let answer) = event.message else {
            throw LiveKitError.response("\(what): an answer of another kind")
        }
        switch answer.message {
        case .error(let message):
            throw LiveKitError.connect(url, message)
        case .result(let result):
            let (events, continuation) = AsyncStream.makeStream(
                of: LiveKitRoomEvent.self,
                bufferingPolicy: .bufferingNewest(max(1, options.eventCapacity))
            )
            let room = LiveKitRoom(client: self, result: result, events: events)
            route(room: room.handle.id, to: continuation, room: room)
            var ready = Livekit_Proto_FfiRequest()
            var readyRequest = Livekit_Proto_ReadyForRoomEventRequest()
            readyRequest.roomHandle = room.handle.id
            ready.readyForRoomEvent = readyRequest
            do {
                _ = try request(ready, "start the room's events")
            } catch {
                await room.disconnect()
                throw error
            }
            logger.debug("joined the LiveKit room \(room.name) as \(room.localParticipant.identity)")
            return room
        case nil:
            throw LiveKitError.response("\(what): the answer holds neither a room nor an error")
        }
    }

    /// A new audio source taking `sampleRate` / `channels` frames, queueing up to `queueDuration` of audio
    /// (`NewAudioSource`, without WebRTC's own echo cancellation, noise suppression or gain control: the device's
    /// front end does those).
    public func makeAudioSource(
        sampleRate: Int,
        channels: Int = 1,
        queueDuration: Duration = .milliseconds(1000)
    ) throws(LiveKitError) -> LiveKitAudioSource {
        try LiveKitAudioSource(client: self, sampleRate: sampleRate, channels: channels, queueDuration: queueDuration)
    }

    /// The audio of a subscribed remote track, as frames at `sampleRate` with `channels` channels (`NewAudioStream`),
    /// each `frameDuration` long (10 ms when nil); at most `frameCapacity` frames wait unread.
    public func audioStream(
        of track: LiveKitRemoteTrack,
        sampleRate: Int,
        channels: Int = 1,
        frameCapacity: Int = 200,
        frameDuration: Duration? = nil
    ) throws(LiveKitError) -> LiveKitAudioStream {
        guard track.isAudio else { throw LiveKitError.invalidArgument("track \(track.sid) is not audio") }
        return try LiveKitAudioStream(
            client: self,
            track: track,
            sampleRate: sampleRate,
            channels: channels,
            frameCapacity: frameCapacity,
            frameDuration: frameDuration
        )
    }

    /// A new WebRTC audio processing module (`NewApm`).
    public func makeAudioProcessor(
        echoCancellation: Bool = true,
        noiseSuppression: Bool = true,
        gainControl: Bool = false,
        highPassFilter: Bool = true
    ) throws(LiveKitError) -> LiveKitAudioProcessor {
        try LiveKitAudioProcessor(
            client: self,
            echoCancellation: echoCancellation,
            noiseSuppression: noiseSuppression,
            gainControl: gainControl,
            highPassFilter: highPassFilter
        )
    }

    /// A new WebRTC resampler (`NewAudioResampler`).
    public func makeResampler() throws(LiveKitError) -> LiveKitResampler {
        try LiveKitResampler(client: self)
    }
}
