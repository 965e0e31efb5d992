import Foundation
import HarkCore
import HarkDatagrid
import Testing

/// Frames that reached the integer conversion fuzz-gemini-decoder found trapping in the shared flex
/// decoding (`flexInt`): a Datagrid server sends integers there too. Each must decode or throw, not trap.
@Suite struct DatagridFuzzRegressionTests {
    let codec = DatagridCodec()

    /// A citation timestamp beyond Int64 throws; the session logs the frame and skips it.
    @Test func citationTimestampOutOfRange() {
        for timestamp in ["1e30", "-1e30", "9223372036854775808", "1.5"] {
            #expect(throws: DecodingError.self, "\(timestamp)") {
                try codec.decodeServer(
                    Data(#"{"type":"citation","payload":{"citations":[],"timestamp_ms":\#(timestamp)}}"#.utf8)
                )
            }
        }
    }

    /// A numeric error code beyond Int64 is no code, and the error still arrives.
    @Test func errorCodeOutOfRange() throws {
        let decoded = try codec.decodeServer(Data(#"{"type":"error","payload":{"message":"m","code":1e30}}"#.utf8))
        #expect(decoded.message == .error(DatagridError(message: "m")))
        let small = try codec.decodeServer(Data(#"{"type":"error","payload":{"message":"m","code":4001}}"#.utf8))
        #expect(small.message == .error(DatagridError(message: "m", code: "4001")))
    }
}
