import Glibc
import HarkBoardIO
import HarkCore
import HarkIndicators
import HarkTestKit
import Testing

@Suite struct ButtonThreadTests {
    @Test func theButtonThreadDeliversActionsFromATerminalKey() async throws {
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        defer {
            close(ends[0])
            close(ends[1])
        }
        let reader = ButtonReader(
            source: TerminalKeySource(fd: ends[0]),
            interpreter: ButtonInterpreter(map: .standard, mode: .pushToTalk)
        )
        let (actions, continuation) = AsyncStream.makeStream(of: ButtonAction.self)
        try reader.start { continuation.yield($0) }
        defer { reader.stop() }
        // Space toggles: the first is a press (talk), the second its release (end of the turn).
        #expect(write(ends[1], " ", 1) == 1)
        let first = try await withDeadline(.seconds(10), "talk_start") {
            var iterator = actions.makeAsyncIterator()
            return await iterator.next()
        }
        #expect(first == .talkStart)
        #expect(reader.errorCount == 0)
    }
}
