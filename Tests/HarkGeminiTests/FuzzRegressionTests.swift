import Foundation
import HarkBackendKit
import HarkCore
import HarkGemini
import Testing

/// Inputs `scripts/fuzz` found that trapped the server-message decoder, kept as they were found
/// (base64), with the smallest frames that reach the same places. Each must throw, not trap.
@Suite struct GeminiFuzzRegressionTests {
    let codec = LiveCodec()

    /// Decodes `bytes` both ways a frame arrives: as text (invalid UTF-8 replaced) and as binary.
    func decodeBothWays(_ bytes: Data) -> [Result<ServerMessage, any Error>] {
        let frames: [WebSocketMessage] = [.text(String(decoding: bytes, as: UTF8.self)), .binary(bytes)]
        return frames.map { frame in Result { try codec.decodeServer(frame.bytes).message } }
    }

    /// Found by fuzz-gemini-decoder: a token count of 1.5e111 converted to Int64 trapped
    /// (`flexInt`). The text frame repairs the invalid UTF-8 in it, so only that one reaches the count.
    @Test func hugeTokenCountAsFound() throws {
        let found = try #require(
            Data(
                base64Encoded:
                    "eyJ1c2FnZU1ldGFkYXRhIjogeyJwcm9tcHRUb2tlbkNvdW50IjogMTAwLCAicmVzcG9uc2VUb2tlbkNvdW50IjogNTAsICJ0b3RhbFRva2VuQ291bnQiOiAxNTAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwLCAidGhvdWdodHNUb2tlbkNvdW50IjogMjAsICJwcm9tcHRUb2tlbnNEZXRhaWxzIjogW3sgIm1vZGFsaXR5IjogIkFVRElPIiwgInTY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2Ni12NjY2NjY2NjY2NjYdCI6IDUwIH1dfX0="
            )
        )
        for result in decodeBothWays(found) {
            #expect(throws: DecodingError.self) { try result.get() }
        }
    }

    /// Integer fields out of Int64's range, or not whole, are errors; in range they still decode.
    @Test func integerFieldsOutOfRange() throws {
        for count in ["1e30", "-1e30", "9223372036854775808", "1.5", "1e19"] {
            #expect(throws: DecodingError.self, "\(count)") {
                try codec.decodeServer(Data(#"{"usageMetadata": {"totalTokenCount": \#(count)}}"#.utf8))
            }
        }
        let big = try codec.decodeServer(Data(#"{"usageMetadata": {"totalTokenCount": 1e18}}"#.utf8))
        #expect(big.message.usageMetadata?.totalTokenCount == 1_000_000_000_000_000_000)
    }

    /// A `goAway.timeLeft` beyond Int64 milliseconds, as a number or as a string, is an error; it
    /// trapped before.
    @Test func durationsOutOfRange() throws {
        for timeLeft in ["1e300", "-1e300", "1e16", #""1e300s""#, #""-1e300s""#, #""99999999999999999999s""#] {
            #expect(throws: DecodingError.self, "\(timeLeft)") {
                try codec.decodeServer(Data(#"{"goAway": {"timeLeft": \#(timeLeft)}}"#.utf8))
            }
        }
    }

    /// A duration whose whole part is empty (".5s") is half a second, not five.
    @Test func durationWithoutWholePart() {
        #expect(ProtoDuration.parse(".5s") == .milliseconds(500))
        #expect(ProtoDuration.parse("-.5s") == .milliseconds(-500))
        #expect(ProtoDuration.parse("1e3s") == .seconds(1000))
        #expect(ProtoDuration.parse("49.990s") == .milliseconds(49_990))
    }
}
