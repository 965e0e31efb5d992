// Fuzz target: the Gemini Live server-message decoder and the session machine it feeds, fed received frames.
//
// One file, one `@main`, two builds. SwiftPM names an executable's entry point after its module and
// points the linker's `main` at it, so libFuzzer's own `main` never runs; the `main` below starts
// libFuzzer itself. `scripts/fuzz` compiles with `-sanitize=fuzzer,address -D HARK_FUZZING`: `main` hands
// the command line to libFuzzer's driver, which calls `LLVMFuzzerTestOneInput` with each input it makes
// (or, given files, runs each once: a crash replays). A plain `swift build`, as CI runs, links no
// libFuzzer: `main` runs each file named on the command line through the same `fuzzOne` and exits.

import HarkCore
import HarkGemini

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

/// Decodes `bytes` as the session does, arrived as a text frame and as a binary frame, and encodes what decoded. An
/// input with line breaks is also a conversation: each line a frame, decoded and handed to a session state machine, as
/// the session does next (a tool call, then its cancellation). Inputs without a line break skip the machine, which
/// keeps the decoder's own runs fast. Bad input must throw; a trap is a bug.
func fuzzOne(_ bytes: Data) {
    let codec = LiveCodec()
    func decode(_ frame: Data) -> [ServerMessage] {
        let frames: [WebSocketMessage] = [.text(String(decoding: frame, as: UTF8.self)), .binary(frame)]
        return frames.compactMap { try? codec.decodeServer($0.bytes).message }
    }
    for message in decode(bytes) { _ = try? codec.encode(message) }
    let newline = UInt8(ascii: "\n")
    guard bytes.contains(newline) else { return }
    var machine = LiveSessionMachine(manualActivity: bytes.count % 2 == 1)
    machine.connectionOpened()
    for line in bytes.split(separator: newline) {
        for message in decode(Data(line)) { _ = machine.receive(message) }
    }
    _ = machine.connectionClosed()
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
