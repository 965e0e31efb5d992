// Fuzz target: the appliance configuration parser, fed the text of one configuration file.
// `HarkFuzzKit` explains the two builds (libFuzzer, or a replay of the files named).

import HarkConfig
import HarkFuzzKit

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// An empty folder: relative paths in the file (`system_instruction_file: x.txt`) resolve into it and
/// find nothing.
let folder = FileManager.default.temporaryDirectory.path + "/hark-fuzz-config-\(getpid())"

/// Parses `bytes` as the appliance configuration file. A NUL byte ends the file's text; the lines after
/// it are the environment (`HARK_SESSION_IDLE_TIMEOUT=30`), so the overrides are fuzzed too. Bad input
/// must throw; a trap is a bug.
func fuzzOne(_ bytes: Data) {
    let parts = bytes.split(separator: 0, maxSplits: 1, omittingEmptySubsequences: false)
    let text = String(decoding: parts.first ?? Data(), as: UTF8.self)
    var environment: [String: String] = [:]
    if parts.count == 2 {
        for line in String(decoding: parts[1], as: UTF8.self).split(separator: "\n") {
            let pair = line.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            environment[String(pair[0])] = pair.count == 2 ? String(pair[1]) : ""
        }
    }
    _ = try? ConfigurationLoader.parse(text, file: "fuzz.yaml", folder: folder, environment: environment)
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
