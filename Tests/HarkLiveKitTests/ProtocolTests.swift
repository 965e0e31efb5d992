import HarkLiveKitProto
import SwiftProtobuf
import Testing

@testable import HarkLiveKit

/// The generated FFI protocol types, and what the client reads from encoded events without decoding them.
@Suite struct ProtocolTests {
    /// A connect request survives encoding and decoding, field by field, and is encoded as the oneof field
    /// `FfiRequest.connect` (number 3).
    @Test func aConnectRequestRoundTrips() throws {
        var options = Livekit_Proto_RoomOptions()
        options.autoSubscribe = true
        options.dynacast = false
        options.singlePeerConnection = true
        options.connectTimeoutMs = 5000
        var connect = Livekit_Proto_ConnectRequest()
        connect.url = "ws://127.0.0.1:7880"
        connect.token = "a.b.c"
        connect.requestAsyncID = 1 << 62 + 1
        connect.options = options
        var request = Livekit_Proto_FfiRequest()
        request.connect = connect

        let bytes: [UInt8] = try request.serializedBytes()
        #expect(bytes.first == 0x1A, "the first tag is field 3, length-delimited (3 << 3 | 2)")
        let decoded = try Livekit_Proto_FfiRequest(serializedBytes: bytes)
        #expect(decoded == request)
        guard case .connect(let again) = decoded.message else {
            Issue.record("decoded as \(String(describing: decoded.message))")
            return
        }
        #expect(again.url == "ws://127.0.0.1:7880")
        #expect(again.requestAsyncID == 1 << 62 + 1)
        #expect(again.options.singlePeerConnection && again.options.connectTimeoutMs == 5000)
    }

    /// An audio capture request (a pointer and a frame's shape) and the callback that answers it round-trip too.
    @Test func anAudioCaptureAndItsAnswerRoundTrip() throws {
        var info = Livekit_Proto_AudioFrameBufferInfo()
        info.dataPtr = 0x7fff_0000_1000
        info.numChannels = 1
        info.sampleRate = 48_000
        info.samplesPerChannel = 960
        var capture = Livekit_Proto_CaptureAudioFrameRequest()
        capture.sourceHandle = 42
        capture.requestAsyncID = 7
        capture.buffer = info
        var request = Livekit_Proto_FfiRequest()
        request.captureAudioFrame = capture
        let decoded = try Livekit_Proto_FfiRequest(serializedBytes: request.serializedBytes() as [UInt8])
        #expect(decoded.captureAudioFrame.buffer.samplesPerChannel == 960)
        #expect(decoded.captureAudioFrame.sourceHandle == 42)

        var answer = Livekit_Proto_CaptureAudioFrameCallback()
        answer.asyncID = 7
        var event = Livekit_Proto_FfiEvent()
        event.captureAudioFrame = answer
        let again = try Livekit_Proto_FfiEvent(serializedBytes: event.serializedBytes() as [UInt8])
        #expect(again.captureAudioFrame.asyncID == 7)
        #expect(!again.captureAudioFrame.hasError)
    }

    /// proto2's required fields are enforced when encoding: a request missing one is refused before it reaches the
    /// library.
    @Test func aRequestMissingARequiredFieldIsRefused() {
        var request = Livekit_Proto_FfiRequest()
        request.connect = Livekit_Proto_ConnectRequest()  // no url, no token
        #expect(throws: (any Error).self) { let _: [UInt8] = try request.serializedBytes() }
    }

    /// The client tells log batches from other events by their first tag: `FfiEvent.logs` is field 18 (a two-byte
    /// varint tag), a room event field 1.
    @Test func theEventKindIsReadFromTheFirstTag() throws {
        var record = Livekit_Proto_LogRecord()
        record.level = .logWarn
        record.target = "livekit"
        record.message = "hello"
        var batch = Livekit_Proto_LogBatch()
        batch.records = [record]
        var logs = Livekit_Proto_FfiEvent()
        logs.logs = batch
        var room = Livekit_Proto_FfiEvent()
        var roomEvent = Livekit_Proto_RoomEvent()
        roomEvent.roomHandle = 3
        roomEvent.reconnecting = Livekit_Proto_Reconnecting()
        room.roomEvent = roomEvent
        var panic = Livekit_Proto_FfiEvent()
        var message = Livekit_Proto_Panic()
        message.message = "boom"
        panic.panic = message

        func kind(_ event: Livekit_Proto_FfiEvent) throws -> Int? {
            let bytes: [UInt8] = try event.serializedBytes()
            return bytes.withUnsafeBufferPointer { EventKind.fieldNumber(of: $0) }
        }
        #expect(try kind(logs) == 18)
        #expect(try kind(room) == 1)
        #expect(try kind(panic) == 20)
        #expect([UInt8]().withUnsafeBufferPointer { EventKind.fieldNumber(of: $0) } == nil)
        #expect([UInt8]([0x80, 0x80]).withUnsafeBufferPointer { EventKind.fieldNumber(of: $0) } == nil)
    }
}

/// Redaction of what the library says before it reaches a log or an error.
@Suite struct LogRedactionTests {
    static let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJkZXZpY2UifQ.c2lnbmF0dXJlLXNlY3JldA"

    @Test func removesTokensWhereverTheyAppear() {
        let cases = [
            "connecting to wss://example.livekit.cloud/rtc?access_token=\(Self.jwt)&protocol=15",
            "Authorization: Bearer \(Self.jwt)",
            "token \(Self.jwt) rejected",
            "failed: {\"token\":\"\(Self.jwt)\"}",
        ]
        for text in cases {
            let redacted = LogRedaction.redact(text)
            #expect(!redacted.contains("c2lnbmF0dXJl"), "\(redacted)")
            #expect(!redacted.contains("eyJzdWIi"), "\(redacted)")
        }
        #expect(
            LogRedaction.redact("GET ws://127.0.0.1:9/rtc/v1?join_request=abc returned 401 Unauthorized")
                == "GET ws://127.0.0.1:9/rtc/v1?join_request=REDACTED returned 401 Unauthorized"
        )
    }

    @Test func keepsOrdinaryTextAndBoundsItsLength() {
        #expect(LogRedaction.redact("ICE connection state: connected") == "ICE connection state: connected")
        #expect(LogRedaction.redact("a\u{1B}[31mred") == "a?[31mred")
        let long = String(repeating: "x", count: 5000)
        #expect(LogRedaction.redact(long, limit: 100).count == 101)
    }
}
