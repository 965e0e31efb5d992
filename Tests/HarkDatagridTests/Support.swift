import Foundation
import HarkBackendKit
import HarkCore
import HarkDatagrid
import HarkDatagridSimulator
import HarkHTTP
import HarkNet
import HarkTestKit
import Logging
import Synchronization

struct WaitTimeout: Error, CustomStringConvertible {
    var what: String
    var description: String { "timed out waiting for \(what)" }
}

/// Collects a session's events; tests await conditions on them with a deadline (no sleeps).
final class EventLog: Sendable {
    private struct Waiter {
        var id: Int
        var condition: @Sendable ([SessionEvent]) -> Bool
        var continuation: CheckedContinuation<[SessionEvent], any Error>
    }

    private struct State {
        var events: [SessionEvent] = []
        var waiters: [Waiter] = []
        var next = 0
        var finished = false
    }

    private let state = Mutex(State())

    var all: [SessionEvent] { state.withLock { $0.events } }

    func append(_ event: SessionEvent) {
        let woken = state.withLock { state -> [(Waiter, [SessionEvent])] in
            state.events.append(event)
            var woken: [(Waiter, [SessionEvent])] = []
            state.waiters.removeAll { waiter in
                guard waiter.condition(state.events) else { return false }
                woken.append((waiter, state.events))
                return true
            }
            return woken
        }
        for (waiter, events) in woken { waiter.continuation.resume(returning: events) }
    }

    /// Waits until `condition` holds for the events so far, for at most `timeout`.
    @discardableResult
    func waitFor(
        _ what: String,
        within timeout: Duration = .seconds(10),
        _ condition: @escaping @Sendable ([SessionEvent]) -> Bool
    ) async throws -> [SessionEvent] {
        let id = state.withLock { state in
            defer { state.next += 1 }
            return state.next
        }
        let timer = Task {
            try? await Task.sleep(for: timeout)
            let waiter = self.state.withLock { state -> Waiter? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index)
            }
            waiter?.continuation.resume(throwing: WaitTimeout(what: what))
        }
        defer { timer.cancel() }
        return try await withCheckedThrowingContinuation { continuation in
            let ready = state.withLock { state -> [SessionEvent]? in
                if condition(state.events) { return state.events }
                state.waiters.append(Waiter(id: id, condition: condition, continuation: continuation))
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

extension [SessionEvent] {
    var transcripts: [Transcript] {
        compactMap { if case .transcript(let piece) = $0 { piece } else { nil } }
    }
    var audioSamples: Int {
        reduce(0) { if case .audio(let chunk) = $1 { $0 + chunk.samples.count } else { $0 } }
    }
    var turnCompletes: Int { filter { $0 == .turnComplete }.count }
    var interruptions: Int { filter { $0 == .interrupted }.count }
    var tools: [ToolEvent] {
        compactMap { if case .tool(let tool) = $0 { tool } else { nil } }
    }
    var conversationStates: [ConversationState] {
        compactMap { if case .conversation(let state) = $0 { state } else { nil } }
    }
    var links: [LinkState] {
        compactMap { if case .link(let link) = $0 { link } else { nil } }
    }
    var connectedCount: Int { links.filter { $0 == .connected }.count }
}

let quietLogger = Logger(label: "datagrid-simulator") { _ in SwiftLogNoOpLogHandler() }

func startSimulator(_ configure: (inout DatagridSimulatorConfiguration) -> Void = { _ in }) async throws
    -> DatagridSimulator
{
    var configuration = DatagridSimulatorConfiguration()
    configuration.greets = false
    configure(&configuration)
    let simulator = DatagridSimulator(configuration: configuration, logger: quietLogger)
    try await simulator.start()
    return simulator
}

/// A running session against a simulator, with its events collected.
struct Running {
    var session: DatagridSession
    var events: EventLog
    var logs: LogCapture
    var task: Task<Result<Void, any Error>, Never>

    /// Ends the session politely and waits for `run()` to return.
    @discardableResult
    func finish() async -> Result<Void, any Error> {
        session.finish()
        return await task.value
    }
}

func startSession(
    _ simulator: DatagridSimulator,
    key: String = "dg-test-key-0123456789",
    mode: DatagridConnectionMode = .handoff,
    transport: (any WebSocketTransport)? = nil,
    http: (any HTTPClient)? = nil,
    _ configure: (inout DatagridConfiguration) -> Void = { _ in }
) -> Running {
    let logs = LogCapture()
    var configuration = DatagridConfiguration(
        apiKey: Secret(key),
        baseURL: simulator.httpBaseURL,
        mode: mode,
        start: DatagridStart(
            agentId: "agent_test",
            voiceConfig: DatagridStart.VoiceConfig(inputTranscription: true, silentStart: true)
        ),
        readyTimeout: .seconds(5),
        stopTimeout: .seconds(2),
        link: LinkSettings(backoff: Backoff(initial: .milliseconds(40), cap: .milliseconds(200)), randomSeed: 7)
    )
    configure(&configuration)
    let session = DatagridSession(
        configuration: configuration,
        transport: transport ?? NIOWebSocketTransport(logger: logs.logger("transport")),
        http: http ?? NIOHTTPClient(),
        logger: logs.logger("session")
    )
    let events = EventLog()
    let task = Task {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await event in session.events { events.append(event) }
            }
            let result: Result<Void, any Error>
            do {
                try await session.run()
                result = .success(())
            } catch {
                result = .failure(error)
            }
            await group.waitForAll()
            return result
        }
    }
    return Running(session: session, events: events, logs: logs, task: task)
}

/// Sends `samples` as 40 ms chunks of 16 kHz audio (as fast as the session takes them).
func sendAudio(_ session: DatagridSession, _ samples: [Int16]) {
    var offset = 0
    while offset < samples.count {
        let end = min(offset + 640, samples.count)
        session.send(.audio(AudioChunk(samples: Array(samples[offset..<end]), sampleRate: 16_000)))
        offset = end
    }
}

func silence(_ duration: Duration) -> [Int16] {
    [Int16](repeating: 0, count: Int(duration.milliseconds) * 16)
}
