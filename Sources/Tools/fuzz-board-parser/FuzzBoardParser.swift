// Fuzz target: the board file parser, fed the text of one board file (its seeds are named "fuzz").
// `HarkFuzzKit` explains the two builds (libFuzzer, or a replay of the files named).

import HarkBoard
import HarkFuzzKit

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Parses `bytes` as the text of a board file named `fuzz.yaml`. Bad input must throw; a trap is a bug.
func fuzzOne(_ bytes: Data) {
    _ = try? BoardLoader.parse(String(decoding: bytes, as: UTF8.self), file: "fuzz.yaml", name: "fuzz")
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
