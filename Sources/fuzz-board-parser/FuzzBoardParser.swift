// Fuzz target: the board file parser, fed the text of one board file (its seeds are named "fuzz").
//
// One file, one `@main`, two builds. SwiftPM names an executable's entry point after its module and
// points the linker's `main` at it, so libFuzzer's own `main` never runs; the `main` below starts
// libFuzzer itself. `scripts/fuzz` compiles with `-sanitize=fuzzer,address -D HARK_FUZZING`: `main` hands
// the command line to libFuzzer's driver, which calls `LLVMFuzzerTestOneInput` with each input it makes
// (or, given files, runs each once: a crash replays). A plain `swift build`, as CI runs, links no
// libFuzzer: `main` runs each file named on the command line through the same `fuzzOne` and exits.

import HarkBoard

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Parses `bytes` as the text of a board file named `fuzz.yaml`. Bad input must throw; a trap is a bug.
func fuzzOne(_ bytes: Data) {
    _ = try? BoardLoader.parse(String(decoding: bytes, as: UTF8.self), file: "fuzz.yaml", name: "fuzz")
}

/// libFuzzer's entry point: one input; 0 keeps it eligible for the corpus.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    fuzzOne(start.map { Data(bytes: $0, count: count) } ?? Data())
    return 0
}

#if HARK_FUZZING
    /// libFuzzer's driver, `int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *,
    /// size_t))`, from the runtime `-sanitize=fuzzer` links.
    @_extern(c, "LLVMFuzzerRunDriver")
    func runFuzzerDriver(
        _ argc: UnsafeMutablePointer<CInt>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
        _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
    ) -> CInt
#endif

/// Fuzzes (under `HARK_FUZZING`) or replays the files named on the command line.
@main
enum FuzzRunner {
    static func main() throws {
        #if HARK_FUZZING
            var argc = CommandLine.argc
            var argv = CommandLine.unsafeArgv
            exit(runFuzzerDriver(&argc, &argv, fuzzTestOneInput))
        #else
            for path in CommandLine.arguments.dropFirst() {
                fuzzOne(try Data(contentsOf: URL(fileURLWithPath: path)))
                print("ok \(path)")
            }
        #endif
    }
}
