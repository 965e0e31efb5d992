// Fuzz target: WAV files into both readers (WAVFile.decode whole, WAVStreamReader a block at a time).
// `HarkFuzzKit` explains the two builds (libFuzzer, or a replay of the files named).

import HarkAudio
import HarkCore
import HarkFuzzKit

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// Where each input is written for the streaming reader (one file per process, rewritten each time).
let scratch = (access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") + "/fuzz-wav-reader-\(getpid()).wav"

/// Decodes `bytes` whole and streams them from a file. Both must throw or agree on a file's rate, channels and
/// samples (any sample format read block by block, and a 16-bit PCM file's as it is); a trap is a bug.
func fuzzOne(_ data: Data) {
    let whole = try? WAVFile.decode(data)
    if data.count >= 16 { _ = try? WAVFormat(chunk: [UInt8](data.prefix(WAVFile.maximumFormatChunkBytes + 8))) }

    let descriptor = open(scratch, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard descriptor >= 0 else { fatalError("cannot write \(scratch)") }
    let written = data.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
    close(descriptor)
    guard written == data.count else { fatalError("cannot write \(scratch)") }

    let reader: WAVStreamReader?
    do {
        reader = try WAVStreamReader(path: scratch)
    } catch {
        precondition(whole == nil, "only the stream reader refused: \(error)")
        return
    }
    guard let whole else { preconditionFailure("only the whole reader refused") }
    // Every format, a block at a time, as hark wake and hark converse read it: the same samples.
    guard let any = try? WAVStreamReader(anyFormat: scratch) else { preconditionFailure("any format refused") }
    var converted: [Int16] = []
    while let block = try? any.readMono(991), !block.isEmpty { converted += block }
    precondition(converted == whole.mono, "the readers disagree on the converted samples")
    guard let reader else { return }
    precondition(whole.sampleRate == reader.sampleRate && whole.channels == reader.channels)
    var streamed: [Int16] = []
    while let block = try? reader.readMono(997), !block.isEmpty { streamed += block }
    precondition(streamed == whole.mono, "the readers disagree on the samples")
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
    static func main() throws {
        // libFuzzer's driver ends the process with exit(): the scratch file goes then.
        atexit { unlink(scratch) }
        try FuzzDriver.run(fuzzTestOneInput, replay: fuzzOne)
    }
}
