import HarkSimulatorKit
import Testing

@Suite struct WatchedStateTests {
    @Test func aWaiterWakesOnTheChangeThatMakesItsConditionTrue() async throws {
        let watched = WatchedState(0)
        let waiter = Task { try await watched.wait("three", until: .now + .seconds(10)) { $0 >= 3 } }
        for _ in 0..<3 { watched.update { $0 += 1 } }
        #expect(try await waiter.value == 3)
        #expect(try await watched.wait("already true", until: .now + .seconds(10)) { $0 == 3 } == 3)
    }

    @Test func aDeadlineEndsTheWaitWithTheValueAtThatTime() async {
        let watched = WatchedState("idle")
        do {
            _ = try await watched.wait("speaking", until: .now + .milliseconds(20)) { $0 == "speaking" }
            Issue.record("the wait should have timed out")
        } catch let timeout as WatchTimeout<String> {
            #expect(timeout.value == "idle")
            #expect(timeout.description == "timed out waiting for speaking")
        } catch {
            Issue.record("unexpected \(error)")
        }
    }
}
