import HarkAppliance
import HarkCore
import Synchronization
import Testing

/// The timer and alarm tools as the model calls them: declared with schemas, their arguments turned into requests
/// or refused with a sentence the model reads (the book is never reached with a bad one).
@Suite struct TimerToolTests {
    /// Records the requests that reach it and answers each with its description.
    final class RecordingTimers: TimerControls {
        let requests = Mutex<[TimerRequest]>([])

        func timers(_ request: TimerRequest) async -> TimerOutcome {
            requests.withLock { $0.append(request) }
            return TimerOutcome(ok: true, message: "done", data: ["timers": []])
        }
    }

    let timers = RecordingTimers()
    var registry: ToolRegistry {
        ToolRegistry(DeviceTools.make([.timers], controls: TestControls(), timers: timers))
    }

    @Test func everyToolIsDeclaredWithItsSchedulingAndNoneWithoutTheTimers() {
        #expect(
            registry.tools.map(\.name) == [
                "set_timer", "list_timers", "cancel_timer", "add_time_to_timer", "set_alarm", "list_alarms",
                "cancel_alarm", "snooze_alarm", "stop_ringing",
            ]
        )
        #expect(registry.tool(named: "set_timer")?.behavior == .nonBlocking(.whenIdle))
        #expect(registry.tool(named: "list_timers")?.behavior == .nonBlocking(.interrupt))
        #expect(registry.tool(named: "stop_ringing")?.behavior == .nonBlocking(.silent))
        #expect(DeviceTools.make(.all, controls: TestControls()).allSatisfy { !$0.name.contains("timer") })
    }

    @Test func goodArgumentsBecomeRequests() async {
        let calls: [(String, JSONValue)] = [
            ("set_timer", ["seconds": 600, "label": "pasta"]),
            ("cancel_timer", [:]),
            ("add_time_to_timer", ["seconds": -60, "label": "pasta"]),
            ("set_alarm", ["time": "6:45", "days": ["mon", "Friday"], "label": "work"]),
            ("snooze_alarm", [:]),
            ("snooze_alarm", ["minutes": 15]),
            ("stop_ringing", [:]),
        ]
        for (name, arguments) in calls {
            let (result, succeeded) = await registry.call(name: name, arguments: arguments)
            #expect(succeeded && result["result"] == "done", "\(name): \(result)")
        }
        #expect(
            timers.requests.withLock { $0 } == [
                .setTimer(seconds: 600, label: "pasta"),
                .cancelTimers(label: nil),
                .addTime(seconds: -60, label: "pasta"),
                .setAlarm(hour: 6, minute: 45, days: [.monday, .friday], label: "work"),
                .snooze(label: nil, minutes: 9),
                .snooze(label: nil, minutes: 15),
                .stopRinging,
            ]
        )
    }

    @Test func badArgumentsAreRefusedWithASentenceAndNeverReachTheBook() async throws {
        let calls: [(String, JSONValue, String)] = [
            ("set_timer", ["seconds": 0], "seconds must be a whole number from 1 to 86400"),
            ("set_timer", ["seconds": .number(.nan)], "seconds must be a whole number from 1 to 86400"),
            ("set_timer", [:], "seconds must be a whole number from 1 to 86400; it is missing"),
            ("set_timer", ["seconds": 60, "label": ["x"]], "label must be a string, not an array"),
            (
                "set_timer", ["seconds": 60, "label": .string(String(repeating: "y", count: 201))],
                "label must be at most"
            ),
            ("set_alarm", ["time": "7.30"], "time must be a 24-hour time HH:MM"),
            ("set_alarm", ["time": "24:00"], "time must be a 24-hour time HH:MM"),
            ("set_alarm", ["time": "０7:30"], "time must be a 24-hour time HH:MM"),
            ("set_alarm", [:], "time must be a string; it is missing"),
            ("set_alarm", ["time": "07:30", "days": ["mon", "blursday"]], "days must name weekdays"),
            ("set_alarm", ["time": "07:30", "days": "mon"], "days must be a list of at most 7 weekdays"),
            ("snooze_alarm", ["minutes": 61], "minutes must be a whole number from 1 to 60"),
            ("add_time_to_timer", ["seconds": 1e12], "seconds must be a whole number from -86400 to 86400"),
        ]
        for (name, arguments, says) in calls {
            let (result, succeeded) = await registry.call(name: name, arguments: arguments)
            #expect(!succeeded, "\(name) \(arguments)")
            let message = try #require(result["error"]?.stringValue, "\(name) \(arguments)")
            #expect(message.hasPrefix(says), "\(name) \(arguments): \(message)")
        }
        #expect(timers.requests.withLock { $0.isEmpty })
    }
}
