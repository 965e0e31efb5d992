import Foundation
import HarkAppliance
import HarkCore
import Synchronization
import Testing

final class TestControls: DeviceControls {
    let state = Mutex((volume: 50, muted: false))
    func volume() async -> Int { state.withLock { $0.volume } }
    func setVolume(_ percent: Int) async -> Int {
        state.withLock {
            $0.volume = max(0, min(100, percent))
            return $0.volume
        }
    }
    func isMuted() async -> Bool { state.withLock { $0.muted } }
    func setMuted(_ muted: Bool) async { state.withLock { $0.muted = muted } }
    func status() async -> JSONValue { ["uptime_seconds": 12] }
}

@Suite struct DeviceToolTests {
    @Test func everyToolIsDeclaredWithASchemaAndWorks() async throws {
        let controls = TestControls()
        let zone = try #require(TimeZone(identifier: "Asia/Kolkata"))
        let registry = ToolRegistry(
            DeviceTools.make(controls: controls, now: { Date(timeIntervalSince1970: 1_795_000_000) }, timeZone: zone)
        )
        #expect(
            registry.tools.map(\.name) == [
                "set_volume", "get_volume", "set_microphone_muted", "get_time", "get_device_status",
            ]
        )
        #expect(registry.tool(named: "set_volume")?.parameters?["required"] == ["percent"])

        // Out of range is refused (the model hears why), not clamped.
        #expect(await !registry.call(name: "set_volume", arguments: ["percent": 140]).succeeded)
        let set = await registry.call(name: "set_volume", arguments: ["percent": 100])
        #expect(set.succeeded && set.result == ["volume": 100])
        let bad = await registry.call(name: "set_volume", arguments: ["percent": "loud"])
        #expect(!bad.succeeded)
        #expect(bad.result["error"]?.stringValue?.contains("percent") == true)

        let mute = await registry.call(name: "set_microphone_muted", arguments: ["muted": true])
        #expect(mute.succeeded)
        #expect(await controls.isMuted())
        #expect(
            await registry.call(name: "get_volume", arguments: [:]).result == ["volume": 100, "microphone_muted": true]
        )

        let time = await registry.call(name: "get_time", arguments: [:]).result
        // 1 795 000 000 s is 2026-11-18 11:06:40 UTC: 16:36:40 in India.
        #expect(time["local_time"] == "2026-11-18T16:36:40+05:30")
        #expect(time["weekday"] == "Wednesday")
        #expect(time["time_zone"] == "Asia/Kolkata")
        #expect(await registry.call(name: "get_device_status", arguments: [:]).result == ["uptime_seconds": 12])
    }

    @Test func switchedOffToolsAreNotDeclared() {
        let tools = DeviceTools.make([.clock], controls: TestControls())
        #expect(tools.map(\.name) == ["get_time"])
    }
}
