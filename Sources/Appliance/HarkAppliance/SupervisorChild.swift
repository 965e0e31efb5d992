import HarkCore

/// Work the supervisor's loop starts beside itself, as a child of ``Supervisor/run()``'s task group: one child
/// per stream, each reporting its end as an input.
enum SupervisorChild: Sendable {
    /// A session's run; its end is an input.
    case session(any VoiceSession, generation: Int)
    /// A session's events, delivered as inputs until its stream ends.
    case events(AsyncStream<SessionEvent>, generation: Int)
    /// Waits until the speaker played its last sample (or was interrupted or stopped); the end of an answer's
    /// `turn` is an input, an earcon's (nil) is not.
    case drain(turn: Int?)
    /// Sleeps `after` on `clock`, then says a timer or an alarm is due.
    case wake(after: Duration, clock: any Clock<Duration>)

    /// Runs to the child's end.
    func run(inputs: ApplianceInputs, speaker: any Speaker) async {
        switch self {
        case .session(let session, let number):
            do {
                try await session.run()
                inputs.post(.sessionEnded(generation: number, nil))
            } catch let failure as SessionFailure {
                inputs.post(.sessionEnded(generation: number, failure))
            } catch {
                inputs.post(.sessionEnded(generation: number, SessionFailure(.transient, "\(error)")))
            }
        case .events(let events, let number):
            for await event in events { await inputs.deliver(.session(generation: number, event)) }
        case .drain(let turn):
            _ = await speaker.finishTurn()
            if let turn { inputs.post(.drained(turn: turn)) }
        case .wake(let delay, let clock):
            if (try? await clock.sleep(for: delay)) != nil { inputs.post(.timerDue) }
        }
    }
}
