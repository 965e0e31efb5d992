import Foundation
import HarkAppliance
import Testing

/// The health gate after an upgrade as a value: observations and the time in, a verdict out.
@Suite struct UpdateGateTests {
    private let running = UpdateGate.Unit(activeState: "active", restarts: 0, mainStart: 5_000_000)
    private func daemon(_ pings: Int, state: String = "idle", overlays: [String] = []) -> UpdateGate.Daemon {
        UpdateGate.Daemon(state: state, overlays: overlays, watchdogPings: pings)
    }

    @Test func aHealthyReleaseIsKeptAfterHealthFor() {
        var gate = UpdateGate(healthFor: 600, rejectedBefore: false, now: 100)
        #expect(
            gate.observe(unit: .init(activeState: "activating", restarts: 0, mainStart: 0), daemon: nil, now: 105)
                == .watching("waiting for READY=1 (systemd: activating)")
        )
        var now = 110.0
        var pings = 1
        var verdict = gate.observe(unit: running, daemon: daemon(pings), now: now)
        while case .watching = verdict, now < 2_000 {
            now += 5
            pings += 1
            verdict = gate.observe(
                unit: running,
                daemon: daemon(pings, state: pings % 7 == 0 ? "offline" : "idle"),
                now: now
            )
        }
        // Healthy from 110 on: kept at 710, not one observation earlier; offline (no network) is not a failure.
        #expect(verdict == .healthy)
        #expect(now == 710)
        // Final: a crash after the verdict does not change it.
        #expect(
            gate.observe(unit: .init(activeState: "failed", restarts: 3, mainStart: 1), daemon: nil, now: 720)
                == .healthy
        )
    }

    @Test func aRestartFailsIt() {
        var gate = UpdateGate(healthFor: 600, rejectedBefore: false, now: 0)
        _ = gate.observe(unit: running, daemon: daemon(1), now: 10)
        let restarted = UpdateGate.Unit(activeState: "active", restarts: 1, mainStart: 9_000_000)
        #expect(gate.observe(unit: restarted, daemon: daemon(2), now: 60) == .failed("the service restarted 1 time(s)"))
        // A new main process without a counted restart is one too.
        var other = UpdateGate(healthFor: 600, rejectedBefore: false, now: 0)
        _ = other.observe(unit: running, daemon: daemon(1), now: 10)
        let again = UpdateGate.Unit(activeState: "active", restarts: 0, mainStart: 9_000_000)
        #expect(
            other.observe(unit: again, daemon: daemon(2), now: 20) == .failed("the service's process started again")
        )
    }

    @Test func exitingAtStartFailsOnceTheReadyTimeIsOver() {
        var gate = UpdateGate(healthFor: 600, readyWithin: 180, rejectedBefore: false, now: 0)
        let starting = UpdateGate.Unit(activeState: "activating", restarts: 0, mainStart: 0)
        #expect(gate.observe(unit: starting, daemon: nil, now: 170) != .failed(""))
        if case .failed = gate.observe(unit: starting, daemon: nil, now: 170) { Issue.record("failed too early") }
        #expect(
            gate.observe(unit: starting, daemon: nil, now: 181)
                == .failed("not ready within 180 s (systemd: activating)")
        )
        var failedUnit = UpdateGate(healthFor: 600, rejectedBefore: false, now: 0)
        #expect(
            failedUnit.observe(unit: .init(activeState: "failed", restarts: 0, mainStart: 0), daemon: nil, now: 1)
                == .failed("the service failed (systemd: failed)")
        )
    }

    @Test func aCrashBeforeReadyFailsAtTheFirstRestart() {
        var gate = UpdateGate(healthFor: 600, readyWithin: 180, rejectedBefore: false, now: 0)
        let starting = UpdateGate.Unit(activeState: "activating", restarts: 2, mainStart: 0)
        #expect(
            gate.observe(unit: starting, daemon: nil, now: 5) == .watching("waiting for READY=1 (systemd: activating)")
        )
        let again = UpdateGate.Unit(activeState: "activating", restarts: 3, mainStart: 0)
        #expect(
            gate.observe(unit: again, daemon: nil, now: 15)
                == .failed("the service restarted 1 time(s) before it became ready")
        )
    }

    @Test func aStalledWatchdogFailsIt() {
        var gate = UpdateGate(healthFor: 600, pingsWithin: 120, rejectedBefore: false, now: 0)
        _ = gate.observe(unit: running, daemon: daemon(10), now: 10)
        #expect(gate.observe(unit: running, daemon: daemon(10), now: 130) == .watching("healthy for 120 of 600 s"))
        #expect(gate.observe(unit: running, daemon: daemon(10), now: 131) == .failed("no watchdog ping for 121 s"))
    }

    @Test func aRejectedKeyFailsItOnlyWhenTheReleaseBeforeDidNotShowOne() {
        var gate = UpdateGate(healthFor: 60, rejectedBefore: false, now: 0)
        #expect(
            gate.observe(unit: running, daemon: daemon(1, state: "error", overlays: ["error"]), now: 5)
                == .failed("the service rejected its key or configuration, which the release before did not")
        )
        var already = UpdateGate(healthFor: 60, rejectedBefore: true, now: 0)
        if case .failed = already.observe(unit: running, daemon: daemon(1, state: "error", overlays: ["error"]), now: 5)
        {
            Issue.record("a key the release before had rejected too is not the new release's fault")
        }
        var fatal = UpdateGate(healthFor: 60, rejectedBefore: false, now: 0)
        #expect(
            fatal.observe(unit: running, daemon: daemon(1, state: "fatal"), now: 5)
                == .failed("the daemon gave up (fatal)")
        )
    }

    @Test func aDaemonThatNeverAnswersFails() {
        var gate = UpdateGate(healthFor: 60, readyWithin: 30, rejectedBefore: false, now: 0)
        #expect(gate.observe(unit: running, daemon: nil, now: 20) == .watching("waiting for the daemon to answer"))
        #expect(
            gate.observe(unit: running, daemon: nil, now: 31) == .failed("no answer on the control socket within 30 s")
        )
    }

    @Test func systemctlShowIsReadLineByLine() {
        let unit = UpdateGate.Unit(
            systemctlShow: "NRestarts=2\nActiveState=active\nExecMainStartTimestampMonotonic=123456\nOther=x=y\n"
        )
        #expect(unit == .init(activeState: "active", restarts: 2, mainStart: 123_456))
        let hostile = UpdateGate.Unit(
            systemctlShow:
                "NRestarts=-5\nActiveState=\(String(repeating: "a", count: 500))\nExecMainStartTimestampMonotonic=zz"
        )
        #expect(hostile.restarts == 0 && hostile.activeState.count == 32 && hostile.mainStart == 0)
    }

    @Test func theGateSurvivesAFile() throws {
        var gate = UpdateGate(healthFor: 60, rejectedBefore: false, now: 0)
        _ = gate.observe(unit: running, daemon: daemon(3), now: 10)
        let data = try JSONEncoder().encode(gate)
        var read = try JSONDecoder().decode(UpdateGate.self, from: data)
        #expect(read == gate)
        let restarted = UpdateGate.Unit(activeState: "active", restarts: 1, mainStart: 1)
        #expect(read.observe(unit: restarted, daemon: daemon(4), now: 20) == .failed("the service restarted 1 time(s)"))
    }
}
