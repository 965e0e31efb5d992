// Fuzz target: the command line of `hark` (its subcommands, numbers and durations), parsed and validated.
// `HarkFuzzKit` explains the two builds (libFuzzer, or a replay of the files named).

import ArgumentParser
import HarkApp
import HarkFuzzKit

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The subcommands an input's first byte chooses between (the others it reads as arguments of `hark`).
let subcommands = ["converse", "run", "status", "config", "doctor", "wake", "reload"]

/// Numbers that reach arithmetic, as the options that take them: a fuzzed argument often lands on one.
let numberOptions = [
    "--timeout", "--idle-timeout", "--listen", "--duration", "--chunk-ms", "--max-retries", "--turns", "--threshold",
    "--refractory",
]

/// Parses `bytes` as the arguments of `hark`: the first byte picks a subcommand, the rest are arguments
/// separated by NUL bytes or newlines. Parsing and validation must throw on bad input (a usage error); a
/// trap is a bug. Nothing runs.
func fuzzOne(_ bytes: Data) {
    guard let first = bytes.first else { return }
    var arguments: [String] = []
    if Int(first) < subcommands.count * 40 { arguments.append(subcommands[Int(first) % subcommands.count]) }
    let rest = bytes.dropFirst().prefix(4096)
    for piece in rest.split(whereSeparator: { $0 == 0 || $0 == 0x0A }) {
        var argument = String(decoding: piece, as: UTF8.self)
        // A leading byte 0x01...0x09 stands for one of the number options, so the fuzzer reaches them at once.
        if let lead = argument.utf8.first, (1...UInt8(numberOptions.count)).contains(lead) {
            arguments.append(numberOptions[Int(lead) - 1])
            argument.removeFirst()
        }
        arguments.append(argument)
    }
    _ = try? HarkCommand.parseAsRoot(arguments)
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
