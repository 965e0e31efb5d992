import HarkCore
import HarkLiveKitWire
import Logging
import Testing

/// The protocol between hark and hark-livekit as a value: every message survives the trip, and bytes that are not
/// the protocol are a clear error, never a trap.
@Suite struct LiveKitWireTests {
    static let join = LiveKitJoinRequest(
        url: "wss://example.livekit.cloud",
        credential: .token(Secret("aaa.bbb.ccc")),
        join: LiveKitJoin(room: "kiosk-1", identity: "hark-kiosk", name: "Hark", agentName: "tutor"),
        microphoneRate: 16_000,
        preConnectBuffer: true,
        outputRate: 24_000,
        outputFrameMilliseconds: 40,
        timeoutMilliseconds: 20_000,
        logLevel: .notice,
        textTopic: "lk.transcription"
    )

    static let commands: [LiveKitCommand] = [
        .hello, .join(join),
        .join(
            LiveKitJoinRequest(
                url: "ws://127.0.0.1:7880",
                credential: .mint(apiKey: "key", apiSecret: Secret("s3cr3t"), lifetimeSeconds: 3600),
                join: LiveKitJoin(room: "r", identity: "i", name: "n", agentName: nil),
                microphoneRate: 48_000,
                preConnectBuffer: false,
                outputRate: 48_000,
                outputFrameMilliseconds: 10,
                timeoutMilliseconds: 1,
                logLevel: .trace,
                textTopic: "t"
            )
        ),
        .audio([0, 1, -1, .max, .min]), .audio([]), .setMuted(true), .setMuted(false),
        .sendText(topic: "lk.chat", text: "héllo wörld ✓"), .bytes([0, 255, 7]),
        .sendBytes(
            LiveKitByteStream(
                topic: "lk.agent.pre-connect-audio-buffer",
                name: "pre-connect-audio",
                mimeType: "audio/pcm",
                attributes: ["trackId": "TR_1", "sampleRate": "16000"],
                destinations: ["agent-1", "agent-2"]
            )
        ),
        .play(trackSid: "TR_agent"), .leave,
    ]

    static let events: [LiveKitEvent] = [
        .hello(library: "livekit 1.2.1 (/usr/lib/hark/liblivekit_ffi.so)"),
        .joined(
            LiveKitJoined(
                room: "r1",
                localIdentity: "hark",
                microphoneTrack: "TR_mic",
                participants: [
                    LiveKitPeer(identity: "agent", isAgent: true, attributes: ["lk.agent.state": "listening"]),
                    LiveKitPeer(identity: "p", isAgent: false, attributes: [:]),
                ]
            )
        ),
        .participantJoined(LiveKitPeer(identity: "a", isAgent: true, attributes: ["k": "v"])),
        .participantLeft(identity: "a", reason: "CLIENT_INITIATED"),
        .attributesChanged(identity: "a", attributes: ["lk.agent.state": "speaking"]),
        .trackSubscribed(trackSid: "TR_1", participant: "a"), .trackUnsubscribed(trackSid: "TR_1"),
        .localTrackPublished(trackSid: "TR_2"),
        .audio(LiveKitTrackAudio(trackSid: "TR_1", sampleRate: 24_000, channels: 1, samples: [3, -3, 300])),
        .textOpened(id: 7, sender: "a", attributes: ["lk.segment_id": "s"]), .textChunk(id: 7, text: "Hi."),
        .textClosed(id: 7, error: nil), .textClosed(id: 8, error: "closed abnormally"), .reconnecting, .reconnected,
        .disconnected(reason: "ROOM_DELETED"), .captured(320), .log(.warning, "a line"),
        .failed(.authentication, "LiveKit refused the token"),
    ]

    /// Every frame in `bytes`, decoded with `decode`.
    func decodeAll<Message>(
        _ bytes: [UInt8],
        pieces: Int = 1,
        _ decode: (ArraySlice<UInt8>) throws -> Message
    ) throws -> [Message] {
        var decoder = LiveKitFrameDecoder()
        var out: [Message] = []
        var index = 0
        while index < bytes.count {
            let end = min(bytes.count, index + pieces)
            decoder.append(bytes[index..<end])
            index = end
            while let body = try decoder.next() { out.append(try decode(body)) }
        }
        return out
    }

    @Test func everyMessageSurvivesTheTripWhateverPiecesTheBytesComeIn() throws {
        let commandBytes = try Self.commands.flatMap { try $0.encoded() }
        let eventBytes = try Self.events.flatMap { try $0.encoded() }
        for pieces in [1, 3, 4096] {
            #expect(try decodeAll(commandBytes, pieces: pieces, LiveKitCommand.init(decoding:)) == Self.commands)
            #expect(try decodeAll(eventBytes, pieces: pieces, LiveKitEvent.init(decoding:)) == Self.events)
        }
    }

    @Test func theFrameIsALittleEndianLengthThenTheTypeThenTheFields() throws {
        // An independent reading of the layout: a muted command is 4 bytes of length (2), type 4, then 1.
        #expect(try LiveKitCommand.setMuted(true).encoded() == [2, 0, 0, 0, 4, 1])
        // Samples are little-endian 16-bit, after a 32-bit count.
        #expect(
            try LiveKitCommand.audio([0x0102, -2]).encoded() == [9, 0, 0, 0, 3, 2, 0, 0, 0, 0x02, 0x01, 0xFE, 0xFF]
        )
        // A hello carries the magic and the version.
        let hello = try LiveKitCommand.hello.encoded()
        #expect(Array(hello[5..<12]) == Array("HARK-LK".utf8))
        #expect(hello[12] == UInt8(LiveKitWire.version & 0xFF) && hello[13] == UInt8(LiveKitWire.version >> 8))
    }

    @Test func aFrameTooLargeIsRefusedAsSoonAsItsLengthIsReadAndTheDecoderStaysFailed() {
        var decoder = LiveKitFrameDecoder()
        let length = UInt32(LiveKitWire.maximumFrameBytes + 1)
        decoder.append([UInt8(length & 0xFF), UInt8((length >> 8) & 0xFF), UInt8((length >> 16) & 0xFF), 0])
        let error = #expect(throws: LiveKitWireError.self) { try decoder.next() }
        #expect(error?.description.contains("larger than the protocol allows") == true)
        #expect(decoder.pendingBytes == 0, "nothing is kept for it")
        decoder.append(try! LiveKitCommand.leave.encoded())
        #expect(throws: LiveKitWireError.self) { try decoder.next() }
        // An empty frame too.
        var empty = LiveKitFrameDecoder()
        empty.append([0, 0, 0, 0])
        #expect(throws: LiveKitWireError.self) { try empty.next() }
    }

    @Test func anotherVersionOrAnotherProgramIsNamedInTheError() throws {
        var hello = try LiveKitEvent.hello(library: "x").encoded()
        hello[12] = 99
        let version = #expect(throws: LiveKitWireError.self) {
            try LiveKitEvent(decoding: hello[4...])
        }
        #expect(version?.isVersionMismatch == true)
        #expect(version?.description.contains("version 99") == true)
        var notHark = try LiveKitEvent.hello(library: "x").encoded()
        notHark[5] = UInt8(ascii: "X")
        let other = #expect(throws: LiveKitWireError.self) { try LiveKitEvent(decoding: notHark[4...]) }
        #expect(other?.description.contains("not a Hark LiveKit hello") == true)
    }

    @Test func fieldsOutOfBoundsAreRefused() throws {
        func refused(_ body: [UInt8], _ expected: String) {
            let command = #expect(throws: LiveKitWireError.self) { try LiveKitCommand(decoding: body[...]) }
            let event = #expect(throws: LiveKitWireError.self) { try LiveKitEvent(decoding: body[...]) }
            #expect(
                command?.description.contains(expected) == true || event?.description.contains(expected) == true,
                "\(String(describing: command)) / \(String(describing: event))"
            )
        }
        refused([0xEE], "unknown type 238")
        refused([3, 0, 0, 2, 0], "too large")  // audio claiming 131072 samples
        refused([3, 2, 0, 0, 0, 1, 0], "cut short")  // audio with one of its two samples
        refused([5, 2, 0, 0, 0, 0xC3, 0x28, 0, 0, 0, 0], "not UTF-8")  // a topic of invalid UTF-8
        refused([4, 2], "out of range")  // a boolean that is 2
        refused([9, 0], "follow")  // leave with a byte after it
        // An audio event with a sample rate of 0 or odd samples for its channels.
        var audio = try LiveKitEvent.audio(
            LiveKitTrackAudio(trackSid: "T", sampleRate: 24_000, channels: 2, samples: [1, 2])
        ).encoded()
        audio[10] = 0
        audio[11] = 0
        audio[12] = 0
        audio[13] = 0
        #expect(throws: LiveKitWireError.self) { try LiveKitEvent(decoding: audio[4...]) }
    }

    @Test func theEncoderCutsTextToItsFieldAndRefusesAudioLargerThanAFrame() throws {
        // Text from the room longer than its field is cut on a character boundary (é is two bytes).
        let long = String(repeating: "é", count: LiveKitWire.maximumNameBytes)
        let event = try LiveKitEvent(
            decoding: try LiveKitEvent.participantLeft(identity: long, reason: "x").encoded()[4...]
        )
        guard case .participantLeft(let identity, _) = event else {
            Issue.record("\(event)")
            return
        }
        #expect(identity.utf8.count <= LiveKitWire.maximumNameBytes)
        #expect(identity.allSatisfy { $0 == "é" } && identity.count == LiveKitWire.maximumNameBytes / 2)
        // Too many attributes: the first ones in key order are kept.
        let many = Dictionary(uniqueKeysWithValues: (0..<100).map { (String(format3($0)), "v") })
        guard
            case .participantJoined(let peer) = try LiveKitEvent(
                decoding: try LiveKitEvent.participantJoined(
                    LiveKitPeer(identity: "a", isAgent: false, attributes: many)
                ).encoded()[4...]
            )
        else {
            Issue.record("not a participant")
            return
        }
        #expect(peer.attributes.count == LiveKitWire.maximumAttributes)
        #expect(peer.attributes["000"] == "v" && peer.attributes["099"] == nil)
        #expect(throws: LiveKitWireError.self) {
            try LiveKitCommand.audio([Int16](repeating: 0, count: LiveKitWire.maximumSamples + 1)).encoded()
        }
        // Every frame the encoder makes stays within the frame bound, text at its limits included.
        let huge = String(repeating: "x", count: 1 << 20)
        for frame in [
            try LiveKitCommand.sendText(topic: huge, text: huge).encoded(),
            try LiveKitCommand.audio([Int16](repeating: 1, count: LiveKitWire.maximumSamples)).encoded(),
            try LiveKitEvent.textChunk(id: 1, text: huge).encoded(),
        ] {
            #expect(frame.count - 4 <= LiveKitWire.maximumFrameBytes)
        }
    }

    func format3(_ value: Int) -> String {
        let text = String(value)
        return String(repeating: "0", count: max(0, 3 - text.count)) + text
    }

    @Test func garbageIsAnErrorNeverATrap() {
        var generator = SeededGenerator(seed: 0x5EED)
        var errors = 0
        for _ in 0..<3000 {
            let count = Int.random(in: 0..<64, using: &generator)
            var bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
            // Mostly valid lengths and types, so the fields' checks are reached too.
            if bytes.count >= 5, Bool.random(using: &generator) {
                let length = UInt32(bytes.count - 4)
                bytes[0] = UInt8(length & 0xFF)
                bytes[1] = UInt8(length >> 8)
                bytes[2] = 0
                bytes[3] = 0
                bytes[4] =
                    Bool.random(using: &generator)
                    ? UInt8.random(in: 1...9, using: &generator) : UInt8.random(in: 0x41...0x52, using: &generator)
            }
            var decoder = LiveKitFrameDecoder()
            decoder.append(bytes)
            do {
                while let body = try decoder.next() {
                    _ = try? LiveKitCommand(decoding: body)
                    _ = try? LiveKitEvent(decoding: body)
                }
            } catch {
                errors += 1
            }
        }
        #expect(errors > 0)
    }
}

/// A small deterministic generator (SplitMix64) for reproducible garbage.
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
