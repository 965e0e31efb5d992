// Fuzz target: the server-sent events parser (ServerSentEventParser), fed a stream whole and split.
// `HarkFuzzKit` explains the two builds (libFuzzer, or a replay of the files named).

import HarkBackendKit
import HarkCore
import HarkFuzzKit

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Everything a parser reports after `chunks` and the end of the stream.
struct Outcome: Equatable {
    var events: [ServerSentEvent]
    var lastEventID: String
    var retry: Int?
    var dropped: Int

    init(_ chunks: [ArraySlice<UInt8>], lineBytes: Int, eventBytes: Int) {
        var parser = ServerSentEventParser(maximumLineBytes: lineBytes, maximumEventBytes: eventBytes)
        var events: [ServerSentEvent] = []
        for chunk in chunks { events += parser.feed(chunk) }
        events += parser.finish()
        self.events = events
        lastEventID = parser.lastEventID
        retry = parser.retryMilliseconds
        dropped = parser.droppedEvents
    }
}

/// Parses `bytes` whole, then split into pieces whose lengths follow from the bytes themselves (and one
/// byte at a time when short), with the default bounds and with small ones that the input passes. The
/// events must not depend on where the stream was split, and none may pass the bounds; bad input must
/// never trap.
func fuzzOne(_ data: Data) {
    let bytes = [UInt8](data)
    for (lineBytes, eventBytes) in [
        (ServerSentEventParser.defaultMaximumLineBytes, ServerSentEventParser.defaultMaximumEventBytes), (24, 64),
    ] {
        let whole = Outcome([bytes[...]], lineBytes: lineBytes, eventBytes: eventBytes)
        var pieces: [ArraySlice<UInt8>] = []
        var offset = 0
        var index = 0
        while offset < bytes.count {
            let length = min(bytes.count - offset, Int(bytes[index % bytes.count] % 13) + 1)
            pieces.append(bytes[offset..<offset + length])
            offset += length
            index += 1
        }
        let split = Outcome(pieces, lineBytes: lineBytes, eventBytes: eventBytes)
        precondition(split == whole, "the events depend on where the stream was split")
        if bytes.count <= 512 {
            let single = Outcome(bytes.indices.map { bytes[$0...$0] }, lineBytes: lineBytes, eventBytes: eventBytes)
            precondition(single == whole, "the events differ when the stream comes a byte at a time")
        }
        for event in whole.events {
            // Invalid UTF-8 becomes U+FFFD (3 bytes for each byte at most).
            precondition(event.data.utf8.count <= 3 * eventBytes, "an event passed its bound")
            precondition(event.type.utf8.count <= 3 * lineBytes && event.lastEventID.utf8.count <= 3 * lineBytes)
        }
    }
}

/// libFuzzer's entry point: one input; 0 keeps it eligible for the corpus.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    fuzzOne(FuzzDriver.data(start, count))
    return 0
}

/// Fuzzes (under `HARK_FUZZING`) or replays the files named on the command line.
@main
enum FuzzRunner {
    static func main() throws { try FuzzDriver.run(fuzzTestOneInput, replay: fuzzOne) }
}
