import Foundation
import HarkCore
import HarkGemini
import Testing

/// What a hostile or broken Live service sends must not trap, loop or flood the log.
@Suite struct HostileLiveServiceTests {
    /// The longest a turn in flight is waited for after a goAway, whatever time it states.
    static let longestWait = Duration.seconds(120)

    private func ready() -> LiveSessionMachine {
        var machine = LiveSessionMachine(manualActivity: false)
        _ = machine.receive(ServerMessage(.setupComplete(SetupComplete())))
        return machine
    }

    private func decode(_ json: String) throws -> ServerMessage {
        try LiveCodec().decodeServer(Data(json.utf8)).message
    }

    /// Past protobuf's range a `timeLeft` is no duration (the message is refused, as the service's own parser
    /// would); within it, however long, the turn in flight is waited for a bounded time, and saying so cannot trap.
    @Test(arguments: [
        "9223372036854775807s", "9300000000000000s", "315576000000s", "31557600000s", "-9223372036854775808s", "1e18",
    ])
    func aGoAwayWithAnAbsurdTimeLeftMidTurnWaitsABoundedTime(_ timeLeft: String) throws {
        var machine = ready()
        _ = machine.receive(
            try decode(
                #"{"serverContent":{"modelTurn":{"parts":[{"inlineData":{"mimeType":"audio/pcm;rate=24000","data":"AAAA"}}]}}}"#
            )
        )
        #expect(machine.turnInFlight)
        let quoted = timeLeft.hasSuffix("s") ? "\"\(timeLeft)\"" : timeLeft
        let message: ServerMessage
        do {
            message = try decode(#"{"goAway":{"timeLeft":\#(quoted)}}"#)
        } catch is DecodingError {
            #expect(
                Double(timeLeft.dropLast(timeLeft.hasSuffix("s") ? 1 : 0)).map { abs($0) > 315_576_000_000 } == true
            )
            return
        }
        let actions = machine.receive(message)
        let delays = actions.compactMap { if case .scheduleSwitch(let after) = $0 { after } else { nil } }
        #expect(delays.count == 1)
        for delay in delays {
            #expect(delay >= .zero && delay <= Self.longestWait)
            // How the session says it (not asked of an unbounded delay, which would trap the test).
            if delay <= Self.longestWait { #expect(!delay.humanDescription.isEmpty) }
        }
        #expect(machine.phase == .draining)
    }

    private func events(_ actions: [LiveSessionMachine.Action]) -> [SessionEvent] {
        actions.compactMap { if case .emit(let event) = $0 { event } else { nil } }
    }

    /// Plays a model that calls a tool in every reply for `rounds` rounds, each answered at once; returns the calls
    /// run and every action.
    private func toolLoop(_ machine: inout LiveSessionMachine, rounds: Int, from first: Int = 1)
        -> (run: Int, actions: [LiveSessionMachine.Action])
    {
        var run = 0
        var all: [LiveSessionMachine.Action] = []
        for round in first..<(first + rounds) {
            let id = "call-\(round)"
            let actions = machine.receive(
                ServerMessage(.toolCall(ToolCall(functionCalls: [FunctionCall(id: id, name: "get_time", args: nil)])))
            )
            all += actions
            guard actions.contains(where: { if case .runTool = $0 { true } else { false } }) else { continue }
            run += 1
            let (_, finished) = machine.toolFinished(
                id: id,
                name: "get_time",
                result: ["time": "12:00"],
                succeeded: true
            )
            all += finished
        }
        return (run, all)
    }

    @Test func aModelThatCallsAToolInEveryReplyGetsABoundedNumberOfRoundsPerUserTurn() throws {
        var machine = ready()
        _ = machine.receive(try decode(#"{"serverContent":{"inputTranscription":{"text":"what time is it"}}}"#))
        let (run, actions) = toolLoop(&machine, rounds: 50)
        #expect(run <= 6, "\(run) calls run for one user turn")
        #expect(events(actions).contains { if case .answerFailed = $0 { true } else { false } })
        // The user speaks again: a new turn, with rounds of its own.
        _ = machine.receive(try decode(#"{"serverContent":{"inputTranscription":{"text":"and now"}}}"#))
        let again = toolLoop(&machine, rounds: 3, from: 100)
        #expect(again.run == 3)
    }

    @Test func aCancellationOfCallsThatWereNeverPendingIsCountedNotTold() throws {
        var machine = ready()
        _ = machine.receive(
            ServerMessage(.toolCall(ToolCall(functionCalls: [FunctionCall(id: "real", name: "get_time", args: nil)])))
        )
        let ids = (0..<20_000).map { "unknown-\($0)" } + ["real"]
        let actions = machine.receive(ServerMessage(.toolCallCancellation(ToolCallCancellation(ids: ids))))
        #expect(events(actions).filter { if case .tool(.cancelled) = $0 { true } else { false } }.count == 1)
        #expect(actions.contains(.cancelTools(["real"])))
        #expect(actions.count < 10, "\(actions.count) actions")
        let logged = actions.compactMap { action -> String? in
            switch action {
            case .debug(let text), .info(let text), .warning(let text): text
            default: nil
            }
        }
        #expect(logged.joined().utf8.count < 1000)
    }
}
