import HarkAppliance
import HarkCore
import HarkTestKit
import Synchronization
import Testing

/// What the control socket's `update.ready` asks of the supervisor: why an update must wait now.
@Suite struct UpdateReadinessTests {
    @Test func anIdleApplianceIsReadyARingOrASessionIsNot() async throws {
        let rig = TimerSupervisorTests.Rig()
        #expect(await rig.supervisor.updateBusyReasons() == [])
        _ = try await rig.tool("set_timer", ["seconds": 5, "label": "tea"])
        try await rig.pass(5)
        try await rig.until("the ring") { await rig.supervisor.isRingingNow }
        #expect(await rig.supervisor.updateBusyReasons() == ["a timer or an alarm rings"])
        _ = try await rig.tool("stop_ringing")
        #expect(await rig.supervisor.updateBusyReasons() == [])
        // Speech opens a session: an update waits for it to close.
        for _ in 0..<30 { rig.microphone.push([Int16](repeating: 6000, count: 320)) }
        try await rig.until("the session") { !rig.sessions.list.withLock { $0.isEmpty } }
        try await rig.until("the reason") { await rig.supervisor.updateBusyReasons() == ["a conversation is open"] }
        try await rig.stop()
    }
}

extension Supervisor {
    /// Whether something rings, as the status shows it.
    var isRingingNow: Bool { !(currentStatus().timers?.ringing.isEmpty ?? true) }
}
