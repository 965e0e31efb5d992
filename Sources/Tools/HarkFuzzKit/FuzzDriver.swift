// The shared half of every fuzz target.
//
// One `@main` per target, two builds. SwiftPM names an executable's entry point after its module and
// points the linker's `main` at it, so libFuzzer's own `main` never runs; each target's `main` calls
// ``FuzzDriver/run(_:replay:)``, which starts libFuzzer itself. `scripts/fuzz` compiles with
// `-sanitize=fuzzer,address -D HARK_FUZZING`: the command line goes to libFuzzer's driver, which calls the
// target's `LLVMFuzzerTestOneInput` with each input it makes (or, given files, runs each once: a crash
// replays). A plain `swift build`, as CI runs, links no libFuzzer: the files named on the command line
// run through the same function, and the program exits.

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

/// Starts a fuzz target: libFuzzer under `HARK_FUZZING`, else a replay of the files on the command line.
public enum FuzzDriver {
    /// `testOneInput` is the target's `LLVMFuzzerTestOneInput`; `replay` runs one input's bytes.
    public static func run(
        _ testOneInput: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt,
        replay: (Data) -> Void
    ) throws {
        #if HARK_FUZZING
            var argc = CommandLine.argc
            var argv = CommandLine.unsafeArgv
            exit(runFuzzerDriver(&argc, &argv, testOneInput))
        #else
            for path in CommandLine.arguments.dropFirst() {
                replay(try Data(contentsOf: URL(fileURLWithPath: path)))
                print("ok \(path)")
            }
        #endif
    }

    /// The bytes libFuzzer hands over, as `Data`.
    public static func data(_ start: UnsafePointer<UInt8>?, _ count: Int) -> Data {
        start.map { Data(bytes: $0, count: count) } ?? Data()
    }
}
