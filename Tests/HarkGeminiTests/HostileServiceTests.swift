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
}
