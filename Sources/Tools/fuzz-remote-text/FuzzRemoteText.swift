// Fuzz target: text a service or a file sends that Hark reads as a number of seconds or shows to a person — the
// protobuf durations of Gemini Live (`goAway.timeLeft`, `voiceActivity.audioOffset`), a `Retry-After` and a
// `RetryInfo.retryDelay`, and the one printable policy (RemoteText) every such text goes through before a log or a
// terminal. `HarkFuzzKit` explains the two builds (libFuzzer, or a replay of the files named).

import HarkBackendKit
import HarkCascade
import HarkCore
import HarkFuzzKit
import HarkGemini

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Every conversion a duration from the wire goes through, which must not trap.
func convert(_ duration: Duration) {
    _ = duration.milliseconds
    _ = duration.nanoseconds
    _ = duration.seconds
    _ = duration.humanDescription
    _ = ProtoDuration.format(duration)
}

/// A duration parsed from the wire lies within protobuf's range.
func checkBounded(_ duration: Duration?) {
    guard let duration else { return }
    precondition(duration <= ProtoDuration.limit && duration >= .zero - ProtoDuration.limit, "\(duration) unbounded")
    convert(duration)
}

/// What `RemoteText.printable` promises for `text` and `limit`: no scalar that needs escaping comes out, at most
/// `limit` scalars (at least the minimum), and printing it again changes nothing.
func checkPrintable(_ text: String, limit: Int) {
    let shown = RemoteText.printable(text, limit: limit)
    precondition(!shown.unicodeScalars.contains(where: RemoteText.needsEscaping), "a control character came out")
    precondition(shown.unicodeScalars.count <= max(limit, RemoteText.minimumLimit), "longer than its limit")
    if shown.unicodeScalars.count < max(limit, RemoteText.minimumLimit) / 2 {
        precondition(RemoteText.printable(shown, limit: limit) == shown, "not stable when printed again")
    }
}

/// The input as text: a duration string, a `Retry-After` header, the JSON of the messages that carry durations,
/// and, whole, text to print; the first byte picks a limit for the printable policy.
func fuzzOne(_ data: Data) {
    let bytes = [UInt8](data)
    let text = String(decoding: bytes, as: UTF8.self)
    // Durations: as a protobuf string, in the messages that carry them, and through the session machine.
    checkBounded(ProtoDuration.parse(text))
    checkBounded(ProtoDuration.parse(text + "s"))
    let quoted = (try? JSONEncoder().encode(text)).map { String(decoding: $0, as: UTF8.self) } ?? "\"\""
    let codec = LiveCodec()
    var machine = LiveSessionMachine(manualActivity: false)
    _ = machine.receive(ServerMessage(.setupComplete(SetupComplete())))
    _ = machine.receive(
        ServerMessage(
            .serverContent(
                ServerContent(modelTurn: Content(role: "model", parts: [Part(text: "a turn in flight")]))
            )
        )
    )
    for value in [quoted, text] {
        for json in [
            #"{"goAway":{"timeLeft":\#(value)}}"#,
            #"{"voiceActivity":{"type":"ACTIVITY_END","audioOffset":\#(value)}}"#,
        ] {
            guard let message = try? codec.decodeServer(Data(json.utf8)).message else { continue }
            if case .goAway(let away) = message.payload { checkBounded(away.timeLeft?.duration) }
            for action in machine.receive(message) {
                switch action {
                case .scheduleSwitch(let after):
                    precondition(after >= .zero && after <= LiveSessionMachine.longestGoAwayWait, "\(after)")
                    convert(after)
                case .debug(let line), .info(let line), .warning(let line):
                    checkPrintable(line, limit: 500)
                default: break
                }
            }
        }
    }
    // What a text service asks to wait: a Retry-After header, or a RetryInfo in the error's body.
    let body = #"{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":\#(quoted)}]}}"#
    for asked in [
        ReplyRetry.asked(retryAfter: text, body: Data()), ReplyRetry.asked(retryAfter: nil, body: Data(body.utf8)),
    ] {
        guard let asked else { continue }
        precondition(asked >= .zero && asked <= .seconds(1_000_000_000), "Retry-After \(asked)")
        convert(asked)
    }
    // The printable policy, on the text and on the raw bytes.
    let limit = Int(bytes.first ?? 0) * 4
    checkPrintable(text, limit: limit)
    let fromBytes = RemoteText.printable(bytes: bytes, limit: limit)
    precondition(!fromBytes.unicodeScalars.contains(where: RemoteText.needsEscaping), "a control character came out")
    precondition(fromBytes.unicodeScalars.count <= max(limit, RemoteText.minimumLimit), "longer than its limit")
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
