// Fuzz target: tool-call arguments from the model into the device tools.
// `HarkFuzzKit` explains the two builds (libFuzzer, or a replay of the files named).

import Dispatch
import HarkAppliance
import HarkCore
import HarkFuzzKit
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Device controls that hold their state and insist on what the tools promise them.
final class Controls: DeviceControls {
    let state = Mutex((volume: 50, muted: false))
    func volume() async -> Int { state.withLock { $0.volume } }
    func setVolume(_ percent: Int) async -> Int {
        precondition((0...100).contains(percent), "set_volume passed \(percent) to the device")
        return state.withLock {
            $0.volume = percent
            return percent
        }
    }
    func isMuted() async -> Bool { state.withLock { $0.muted } }
    func setMuted(_ muted: Bool) async { state.withLock { $0.muted = muted } }
    func status() async -> JSONValue { ["uptime_seconds": 1] }
}

/// Timers and alarms on a book in memory, at a fixed time, that insist on the book's bounds after every request.
final class BookTimers: TimerControls {
    let book = Mutex(TimerBook())
    func timers(_ request: TimerRequest) async -> TimerOutcome {
        book.withLock { book in
            let outcome = book.perform(request, now: 1_800_000_000, calendar: UTCCalendar())
            precondition(book.timers.count <= TimerBook.limit && book.alarms.count <= TimerBook.limit)
            precondition(book.timers.allSatisfy { TimerBook.durations.contains($0.seconds) })
            precondition((book.timers.map(\.label) + book.alarms.map(\.label)).allSatisfy { $0.count <= 64 })
            return outcome
        }
    }
}

let registry = ToolRegistry(
    DeviceTools.make(controls: Controls(), timers: BookTimers(), now: { Date(timeIntervalSince1970: 0) })
)

/// The input is JSON: the arguments of a call to every tool but `get_time` (a text that is not JSON goes as a string),
/// also wrapped as `percent`, `muted`, and as each argument of the timer and alarm tools. Each call must return a
/// result; a trap is a bug.
func fuzzOne(_ data: Data) {
    let arguments =
        (try? JSONDecoder().decode(JSONValue.self, from: data)) ?? .string(String(decoding: data, as: UTF8.self))
    let calls: [JSONValue] = [
        arguments, ["percent": arguments], ["muted": arguments], ["seconds": arguments, "label": arguments],
        ["seconds": 60, "label": arguments], ["time": arguments, "days": arguments],
        ["time": "07:00", "days": arguments],
        ["minutes": arguments, "label": arguments],
    ]
    let done = DispatchSemaphore(value: 0)
    Task {
        for call in calls {
            // get_time reads only the clock (and its calendar is slow under the sanitizers).
            for tool in registry.tools where tool.name != "get_time" {
                let (result, succeeded) = await registry.call(name: tool.name, arguments: call)
                precondition(succeeded || result["error"]?.stringValue?.isEmpty == false, "a failure without a reason")
            }
        }
        done.signal()
    }
    done.wait()
    for range in [0...100, -10...10, Int.min...Int.max] {
        _ = try? DeviceTools.integer("percent", in: ["percent": arguments], range: range)
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
