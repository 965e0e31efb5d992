import Foundation
import HarkCore
import HarkHelperProcess
import HarkLiveKit
import HarkLiveKitWire
import Logging
import Synchronization

/// The work of `hark-livekit`, the helper that `hark` starts for each connection of a LiveKit session: over the
/// socket pair it was given (``HelperProcess/childDescriptor``), it greets (with LiveKit's library loaded, or the
/// reason it could not be), joins the room `hark` asks for, publishes the microphone `hark` sends, plays the tracks
/// `hark` asks for, and reports the room's events; every decision stays in `hark`. It ends when `hark` says leave or
/// closes its end (when `hark` ends, however), leaving the room first.
public enum LiveKitHelperService {
    /// The most bytes gathered for one byte stream (the library's own bound).
    static let byteStreamLimit = LiveKitRoom.maximumByteStreamBytes
    /// The most commands waiting (`hark` paces audio: a few are ever waiting).
    static let commandCapacity = 4096

    /// Serves `descriptor` until the end; the process's exit status.
    public static func run(descriptor: Int32, environment: [String: String]) async -> Int32 {
        let (commands, continuation) = AsyncStream.makeStream(
            of: LiveKitCommand.self,
            bufferingPolicy: .bufferingOldest(commandCapacity)
        )
        let decoder = Mutex(LiveKitFrameDecoder())
        let broken = Mutex<String?>(nil)
        let link: SocketLink
        do {
            link = try SocketLink(descriptor: descriptor, name: "hark-lk-link") { incoming in
                switch incoming {
                case .bytes(let bytes):
                    let decoded = decoder.withLock { decoder -> Result<[LiveKitCommand], LiveKitWireError> in
                        decoder.append(bytes)
                        var commands: [LiveKitCommand] = []
                        do throws(LiveKitWireError) {
                            while let body = try decoder.next() { commands.append(try LiveKitCommand(decoding: body)) }
                        } catch {
                            return .failure(error)
                        }
                        return .success(commands)
                    }
                    switch decoded {
                    case .success(let commands):
                        for command in commands {
                            if case .dropped = continuation.yield(command) {
                                broken.withLock { $0 = "more commands waiting than \(commandCapacity)" }
                                continuation.finish()
                            }
                        }
                    case .failure(let error):
                        broken.withLock { $0 = "\(error)" }
                        continuation.finish()
                    }
                case .closed:
                    continuation.finish()
                }
            }
        } catch {
            Self.complain("hark-livekit: \(error)")
            return 2
        }
        let outbox = Outbox(link)
        defer { outbox.close() }
        let library: LiveKitLibrary
        do {
            library = try LiveKitLibrary.load(environment: environment)
            outbox.send(.hello(library: "livekit \(LiveKitLibrary.wheelVersion) (\(library.path))"))
        } catch {
            outbox.send(.hello(library: "livekit \(LiveKitLibrary.wheelVersion) (not loaded)"))
            outbox.send(.failed(.configuration, "\(error)"))
            return 1
        }
        var request: LiveKitJoinRequest?
        var greeted = false
        waiting: for await command in commands {
            switch command {
            case .hello: greeted = true
            case .join(let join) where greeted: request = join
            case .leave: break waiting
            default: break
            }
            if request != nil { break }
        }
        guard let request else {
            // Asked to leave before joining (`hark doctor`'s look at the library), or the link ended.
            if let problem = broken.withLock({ $0 }) {
                Self.complain("hark-livekit: hark's messages: \(problem)")
                return 2
            }
            return 0
        }
        let logger = Logger(label: "hark-livekit") { _ in LinkLogHandler(outbox: outbox, logLevel: request.logLevel) }
        var configuration = LiveKitClient.Configuration()
        // The library's log records come over only when hark logs at debug level or below: it formats and sends each
        // one (a join brings hundreds, a session some 130 a second, nearly all libwebrtc's debug and tungstenite's
        // trace), which cost a tenth of the helper's own work. Otherwise the library logs nothing (RUST_LOG=off, set
        // by hark-livekit's main before the library is loaded): what matters reaches hark as events and errors.
        configuration.captureLogs = request.logLevel <= .debug
        do {
            try await LiveKitClient.withClient(library: library, configuration: configuration, logger: logger) {
                client in
                await HelperRoom(client: client, request: request, outbox: outbox, logger: logger).run(commands)
                // After the leave nobody reads the link any more: at debug level the counts go to standard error.
                if request.logLevel <= .debug {
                    let seen = client.statistics
                    complain(
                        """
                        hark-livekit: LiveKit's library sent \(seen.events.queued) events and \(seen.logs.queued) log \
                        batches (\(seen.events.dropped + seen.logs.dropped) dropped, \(seen.droppedFrames) audio \
                        frames dropped)
                        """
                    )
                }
            }
        } catch {
            outbox.send(.failed(.transient, "LiveKit's library: \(error)"))
        }
        if let problem = broken.withLock({ $0 }) { Self.complain("hark-livekit: hark's messages: \(problem)") }
        return 0
    }

    /// A line on standard error (shared with `hark`: its journal), for what cannot go over the link.
    static func complain(_ message: String) {
        FileHandle.standardError.write(Data((RemoteText.printable(message) + "\n").utf8))
    }
}

/// Events on their way to `hark`.
final class Outbox: Sendable {
    private let link: SocketLink

    init(_ link: SocketLink) {
        self.link = link
    }

    /// Sends `event` (audio too large for one frame is split).
    func send(_ event: LiveKitEvent) {
        if case .audio(let audio) = event, audio.samples.count > LiveKitWire.maximumSamples {
            for start in stride(from: 0, to: audio.samples.count, by: LiveKitWire.maximumSamples) {
                var part = audio
                part.samples = Array(
                    audio.samples[start..<min(audio.samples.count, start + LiveKitWire.maximumSamples)]
                )
                send(.audio(part))
            }
            return
        }
        guard let frame = try? event.encoded() else { return }
        link.send(frame)
    }

    /// Lets what waits go out (up to a second), then closes the link.
    func close() {
        var waited = 0
        while link.pendingBytes > 0, waited < 100 {
            usleep(10_000)
            waited += 1
        }
        link.close()
        link.join()
    }
}

/// The helper's log lines, sent to `hark` (which writes them to its own log, printable and bounded).
struct LinkLogHandler: LogHandler {
    let outbox: Outbox
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]

    init(outbox: Outbox, logLevel: Logger.Level) {
        self.outbox = outbox
        self.logLevel = logLevel
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var text = "\(event.message)"
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        if !merged.isEmpty {
            text += " " + merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        }
        outbox.send(.log(event.level, text))
    }
}

/// One room, joined for `hark`.
final class HelperRoom: Sendable {
    let client: LiveKitClient
    let request: LiveKitJoinRequest
    let outbox: Outbox
    let logger: Logger

    private struct State {
        /// Subscribed audio tracks, by id, and the tasks playing them.
        var tracks: [String: LiveKitRemoteTrack] = [:]
        var players: [String: Task<Void, Never>] = [:]
        /// Tasks reading text streams and sending streams.
        var tasks: [Task<Void, Never>] = []
        /// The parts of the next byte stream.
        var bytes: [UInt8] = []
        var nextTextID: UInt32 = 1
    }

    private let state = Mutex(State())

    /// The most subscribed audio tracks kept.
    static let trackLimit = 16

    init(client: LiveKitClient, request: LiveKitJoinRequest, outbox: Outbox, logger: Logger) {
        self.client = client
        self.request = request
        self.outbox = outbox
        self.logger = logger
    }

    /// Joins, publishes the microphone and serves the room until `hark` says leave, closes the link, or the room ends.
    func run(_ commands: AsyncStream<LiveKitCommand>) async {
        let token: Secret
        switch request.credential {
        case .token(let secret):
            token = secret
        case .mint(let apiKey, let apiSecret, let lifetime):
            do {
                token = try LiveKitToken.mint(
                    request.join,
                    apiKey: apiKey,
                    apiSecret: apiSecret,
                    lifetime: .seconds(Int64(lifetime)),
                    now: Date()
                )
            } catch {
                outbox.send(.failed(error.kind, error.message))
                return
            }
        }
        var options = LiveKitRoomOptions()
        options.timeout = .milliseconds(Int64(request.timeoutMilliseconds))
        let room: LiveKitRoom
        do {
            room = try await client.connect(url: request.url, token: token, options: options)
        } catch let error as LiveKitError where error.isAuthentication {
            outbox.send(.failed(.authentication, "LiveKit refused the token: \(error)"))
            return
        } catch {
            outbox.send(.failed(.transient, "joining the LiveKit room: \(error)"))
            return
        }
        let source: LiveKitAudioSource
        let trackID: String
        do {
            source = try client.makeAudioSource(
                sampleRate: Int(request.microphoneRate),
                channels: 1,
                queueDuration: .milliseconds(200)
            )
            trackID = try await room.publish(
                source,
                preConnectBuffer: request.preConnectBuffer,
                timeout: options.timeout
            )
        } catch {
            outbox.send(.failed(.transient, "publishing the microphone: \(error)"))
            await room.disconnect()
            return
        }
        outbox.send(
            .joined(
                LiveKitJoined(
                    room: room.name,
                    localIdentity: room.localParticipant.identity,
                    microphoneTrack: trackID,
                    participants: room.remoteParticipants.map(Self.peer)
                )
            )
        )
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.serveCommands(commands, room, source) }
            group.addTask { await self.serveEvents(room) }
            await group.next()
            group.cancelAll()
        }
        let tasks = state.withLock { state in
            defer {
                state.players = [:]
                state.tasks = []
                state.tracks = [:]
            }
            return Array(state.players.values) + state.tasks
        }
        for task in tasks { task.cancel() }
        await room.disconnect()
        withExtendedLifetime(source) {}
    }

    static func peer(_ participant: LiveKitParticipant) -> LiveKitPeer {
        LiveKitPeer(
            identity: participant.identity,
            isAgent: participant.kind == .agent,
            attributes: participant.attributes
        )
    }

    // MARK: - Commands

    private func serveCommands(
        _ commands: AsyncStream<LiveKitCommand>,
        _ room: LiveKitRoom,
        _ source: LiveKitAudioSource
    )
        async
    {
        for await command in commands {
            switch command {
            case .audio(let samples):
                do {
                    // No timer per frame: hark bounds the wait (it gives up on a helper that takes no audio).
                    try await source.captureWithoutDeadline(samples)
                } catch {
                    if Task.isCancelled { return }
                    outbox.send(.failed(.transient, "sending the microphone: \(error)"))
                    return
                }
                outbox.send(.captured(UInt32(samples.count)))
            case .setMuted(let muted):
                do {
                    try room.setMicrophoneMuted(muted)
                } catch {
                    logger.warning("the microphone track cannot be \(muted ? "muted" : "unmuted"): \(error)")
                }
            case .sendText(let topic, let text):
                spawn {
                    do {
                        _ = try await room.sendText(text, topic: topic, timeout: .seconds(10))
                    } catch {
                        self.logger.warning("sending text on \(topic): \(error)")
                    }
                }
            case .bytes(let part):
                let kept = state.withLock { state -> Bool in
                    guard state.bytes.count + part.count <= LiveKitHelperService.byteStreamLimit else { return false }
                    state.bytes += part
                    return true
                }
                if !kept {
                    logger.warning("a byte stream larger than \(LiveKitHelperService.byteStreamLimit) bytes is cut")
                }
            case .sendBytes(let stream):
                let bytes = state.withLock { state in
                    defer { state.bytes = [] }
                    return state.bytes
                }
                sendBytes(bytes, stream, room)
            case .play(let sid):
                play(sid)
            case .leave:
                return
            case .hello, .join:
                logger.warning("hark repeated its greeting or join: ignored")
            }
        }
    }

    private func sendBytes(_ bytes: [UInt8], _ stream: LiveKitByteStream, _ room: LiveKitRoom) {
        spawn {
            do {
                _ = try await room.sendBytes(
                    bytes,
                    topic: stream.topic,
                    name: stream.name,
                    mimeType: stream.mimeType,
                    attributes: stream.attributes,
                    to: stream.destinations,
                    timeout: .seconds(10)
                )
                self.logger.debug("sent a byte stream of \(bytes.count) bytes on \(stream.topic)")
            } catch {
                self.logger.warning("sending a byte stream on \(stream.topic): \(error)")
            }
        }
    }

    /// Plays a subscribed track: its frames go to `hark` as they come.
    private func play(_ sid: String) {
        guard let track = state.withLock({ $0.tracks[sid] }) else {
            logger.debug("asked to play track \(sid), which is not subscribed")
            return
        }
        let stream: LiveKitAudioStream
        do {
            stream = try client.audioStream(
                of: track,
                sampleRate: Int(request.outputRate),
                channels: 1,
                frameDuration: .milliseconds(Int64(request.outputFrameMilliseconds))
            )
        } catch {
            logger.warning("the audio track \(sid) cannot be played: \(error)")
            return
        }
        let outbox = self.outbox
        let task = Task {
            for await frame in stream.frames where frame.channels == 1 {
                let audio = LiveKitTrackAudio(
                    trackSid: sid,
                    sampleRate: UInt32(frame.sampleRate),
                    channels: 1,
                    samples: frame.samples
                )
                outbox.send(.audio(audio))
            }
            withExtendedLifetime(stream) {}
        }
        let earlier = state.withLock { state in
            defer { state.players[sid] = task }
            return state.players[sid]
        }
        earlier?.cancel()
    }

    private func spawn(_ body: @escaping @Sendable () async -> Void) {
        let task = Task { await body() }
        state.withLock { $0.tasks = $0.tasks.filter { !$0.isCancelled } + [task] }
    }

    // MARK: - The room's events

    private func serveEvents(_ room: LiveKitRoom) async {
        let local = room.localParticipant.identity
        for await event in room.events {
            logger.trace("room event: \(String(describing: event).prefix(200))")
            switch event {
            case .participantConnected(let participant):
                outbox.send(.participantJoined(Self.peer(participant)))
            case .participantAttributesChanged(let identity, let attributes, _):
                outbox.send(.attributesChanged(identity: identity, attributes: attributes))
            case .participantDisconnected(let identity, let reason):
                outbox.send(.participantLeft(identity: identity, reason: reason))
            case .trackSubscribed(let track):
                guard track.isAudio, track.participantIdentity != local else { break }
                let kept = state.withLock { state -> Bool in
                    guard state.tracks.count < Self.trackLimit || state.tracks[track.sid] != nil else { return false }
                    state.tracks[track.sid] = track
                    return true
                }
                if kept { outbox.send(.trackSubscribed(trackSid: track.sid, participant: track.participantIdentity)) }
            case .trackUnsubscribed(_, let sid):
                let player = state.withLock { state in
                    state.tracks[sid] = nil
                    return state.players.removeValue(forKey: sid)
                }
                player?.cancel()
                outbox.send(.trackUnsubscribed(trackSid: sid))
            case .localTrackPublished(let sid):
                outbox.send(.localTrackPublished(trackSid: sid))
            case .textStreamOpened(let reader):
                guard reader.info.topic == request.textTopic else { break }
                read(reader)
            case .reconnecting:
                outbox.send(.reconnecting)
            case .reconnected:
                outbox.send(.reconnected)
            case .disconnected(let reason):
                outbox.send(.disconnected(reason: reason))
                return
            case .ended:
                outbox.send(.failed(.transient, "the LiveKit room's events ended"))
                return
            default:
                break
            }
        }
        if !Task.isCancelled { outbox.send(.failed(.transient, "the LiveKit room's events ended")) }
    }

    /// Reads a text stream chunk by chunk; what came before a failure is already with `hark`.
    private func read(_ reader: LiveKitTextStreamReader) {
        let id = state.withLock { state in
            defer { state.nextTextID &+= 1 }
            return state.nextTextID
        }
        var attributes = reader.info.attributes
        if attributes["lk.segment_id"] == nil { attributes["lk.segment_id"] = reader.info.id }
        outbox.send(.textOpened(id: id, sender: reader.sender, attributes: attributes))
        let outbox = self.outbox
        spawn {
            do {
                for try await chunk in try reader.chunks() { outbox.send(.textChunk(id: id, text: chunk)) }
                outbox.send(.textClosed(id: id, error: nil))
            } catch {
                if Task.isCancelled { return }
                outbox.send(.textClosed(id: id, error: "\(error)"))
            }
        }
    }
}
