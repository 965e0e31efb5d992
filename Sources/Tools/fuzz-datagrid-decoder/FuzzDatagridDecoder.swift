// Fuzz target: the Datagrid Voice server-message decoder and the session machine it feeds, fed received frames.
// `HarkFuzzKit` explains the two builds (libFuzzer, or a replay of the files named).

import HarkCore
import HarkDatagrid
import HarkFuzzKit

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Decodes `bytes` as the session does, arrived as a text frame and as a binary frame, and encodes what decoded. An
/// input with line breaks is also a conversation: each line a frame, decoded and handed to a session state machine, as
/// the session does next (a tool call started, then failed). Inputs without a line break skip the machine, which keeps
/// the decoder's own runs fast. Bad input must throw; a trap is a bug.
func fuzzOne(_ bytes: Data) {
    let codec = DatagridCodec()
    func decode(_ frame: Data) -> [DatagridServerMessage] {
        let frames: [WebSocketMessage] = [.text(String(decoding: frame, as: UTF8.self)), .binary(frame)]
        return frames.compactMap { try? codec.decodeServer($0.bytes).message }
    }
    for message in decode(bytes) { _ = try? codec.encodeServer(message) }
    let newline = UInt8(ascii: "\n")
    guard bytes.contains(newline) else { return }
    var machine = DatagridSessionMachine()
    machine.connectionOpened()
    for line in bytes.split(separator: newline) {
        for message in decode(Data(line)) { _ = machine.receive(message) }
    }
    _ = machine.connectionClosed()
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
