import Foundation
import HarkApp
import HarkBackendKit
import HarkCore
import HarkGemini
import HarkLiveSimulator
import HarkSimulatorKit
import HarkTestKit
import NIOWebSocket
import Testing
import WSClient

/// The session against the simulator in gemini-3.8-live mode, over real loopback sockets.
@Suite(.timeLimit(.minutes(2))) struct Gemini38Tests {
    static let model = "models/gemini-3.8-live"

    /// The final transcript segments in `events`, as (role, text).
    func finals(_ events: [SessionEvent]) -> [(role: String, text: String)] {
        events.compactMap { event in
            guard case .transcript(let piece) = event, piece.isFinal else { return nil }
            return (piece.role == .user ? "user" : "model", piece.text)
        }
    }

    @Test func aNonBlockingToolsResultIsSpokenAfterItFinishes() async throws {
        let simulator = try await startSimulator {
            $0.scenario.toolCalls = [ScriptedToolCall(turn: 1, name: "check_status", args: ["what": "battery"])]
        }
        defer { Task { try? await simulator.stop() } }
        // The tool finishes when the test says so: after the model has answered without its result.
        let (gate, open) = AsyncStream<Void>.makeStream()
        let tools = ToolRegistry([
            LocalTool(name: "check_status", description: "Device status", behavior: .nonBlocking(.whenIdle)) { _ in
                for await _ in gate { break }
                return ["battery": 80]
            }
        ])
        let session = makeSession(simulator, tools: tools) { $0.setup.model = Self.model }
        let run = Task { try await session.run() }
        var events = session.events.makeAsyncIterator()
        session.send(speech(1.6))
        session.send(silence(1.0))
        // The answer went out while the tool ran, and said more was to come.
        // (A generous deadline: a loaded machine runs the whole suite's sessions at once.)
        _ = try await simulator.recorder.waitFor("the answer with IN_PROGRESS", within: .seconds(60)) {
            $0.connection(1)?.turnCompletes.map(\.interactionStatus) == ["IN_PROGRESS"]
        }
        open.yield()
        let seen = await collect(&events) { $0 == .turnComplete }
        // The session's turn ended only after the result was spoken.
        let said = agentText(seen)
        #expect(said.contains("answering turn 1"))
        #expect(said.contains(#"tool check_status said {"battery":80}"#))
        #expect(seen.contains { if case .tool(.finished(_, "check_status", true)) = $0 { true } else { false } })
        #expect(seen.contains { if case .audio = $0 { true } else { false } })
        let connection = try #require(simulator.recorder.snapshot().connection(1))
        #expect(connection.family == .gemini38)
        #expect(connection.turnCompletes.map(\.interactionStatus) == ["IN_PROGRESS", "IDLE"])
        #expect(connection.setup?.tools?.first?.functionDeclarations?.first?.behavior == "NON_BLOCKING")
        #expect(connection.toolResponses.map(\.scheduling) == ["WHEN_IDLE"])
        #expect(connection.toolResults.map(\.outcome) == ["spoken"])
        #expect(session.statistics.failures == 0)
        session.finish()
        try await run.value
    }

    @Test func aToolStillRunningWhenTheConnectionIsLostIsHeardOnTheResumedOne() async throws {
        let simulator = try await startSimulator {
            $0.scenario.toolCalls = [ScriptedToolCall(turn: 1, name: "slow_lookup")]
            $0.scenario.faults = [try SimulatorFault.parse("audio=3.5s:drop:conn=1")]
        }
        defer { Task { try? await simulator.stop() } }
        let (gate, open) = AsyncStream<Void>.makeStream()
        let tools = ToolRegistry([
            LocalTool(name: "slow_lookup", description: "Looks something up", behavior: .nonBlocking(.whenIdle)) { _ in
                for await _ in gate { break }
                return ["found": true]
            }
        ])
        let session = makeSession(simulator, tools: tools) { $0.setup.model = Self.model }
        let run = Task { try await session.run() }
        var events = session.events.makeAsyncIterator()
        session.send(speech(1.6))
        session.send(silence(1.0))
        _ = try await simulator.recorder.waitFor("the answer with IN_PROGRESS", within: .seconds(60)) {
            $0.connection(1)?.turnCompletes.map(\.interactionStatus) == ["IN_PROGRESS"]
        }
        session.send(silence(1.0))  // the TCP drop comes during this
        _ = try await simulator.recorder.waitFor("the resumed session", within: .seconds(60)) {
            $0.connection(2)?.family == .gemini38
        }
        open.yield()  // the tool finishes now
        _ = await collect(&events) { event in
            guard case .transcript(let piece) = event else { return false }
            return piece.role == .agent && piece.isFinal && piece.text.hasPrefix("tool slow_lookup said")
        }
        let resumed = try #require(simulator.recorder.snapshot().connection(2))
        #expect(resumed.resumed)
        #expect(resumed.toolResponses.map(\.matched) == [true])
        #expect(resumed.toolResults.map(\.outcome) == ["spoken"])
        #expect(resumed.turnCompletes.last?.interactionStatus == "IDLE")
        session.finish()
        try await run.value
    }

    @Test func aToolCallCancellationCancelsTheToolsTask() async throws {
        let simulator = try await startSimulator {
            $0.scenario.toolCalls = [ScriptedToolCall(turn: 1, name: "slow_lookup")]
            // Right after the first audio of answer 1, the service gives up the call.
            $0.scenario.faults = [try SimulatorFault.parse("answer=1:cancel-tools")]
        }
        defer { Task { try? await simulator.stop() } }
        let (cancelled, markCancelled) = AsyncStream<Void>.makeStream()
        let tools = ToolRegistry([
            LocalTool(name: "slow_lookup", description: "Looks something up", behavior: .nonBlocking(.whenIdle)) { _ in
                do {
                    try await Task.sleep(for: .seconds(600))
                } catch {
                    markCancelled.yield()
                    throw error
                }
                return ["found": true]
            }
        ])
        let session = makeSession(simulator, tools: tools) { $0.setup.model = Self.model }
        let run = Task { try await session.run() }
        var events = session.events.makeAsyncIterator()
        session.send(speech(1.6))
        session.send(silence(1.0))
        let seen = await collect(&events) { if case .tool(.cancelled) = $0 { true } else { false } }
        #expect(seen.contains { if case .tool(.started(_, "slow_lookup")) = $0 { true } else { false } })
        try await withDeadline(.seconds(10), "the tool's task to be cancelled") {
            for await _ in cancelled { return }
        }
        // The answer goes on and ends the exchange: nothing runs any more.
        let rest = await collect(&events) { $0 == .turnComplete }
        #expect(agentText(seen + rest).contains("answering turn 1"))
        let connection = try #require(simulator.recorder.snapshot().connection(1))
        let call = "call-\(connection.sessionID ?? 0)-1-1"
        #expect(connection.cancelledToolCalls == [call])
        #expect(connection.toolResponses.isEmpty)  // a cancelled tool sends no response
        #expect(connection.turnCompletes.map(\.interactionStatus) == ["IDLE"])
        session.finish()
        try await run.value
    }

    @Test func inProgressThenIdleKeepsConverseGoingUntilTheLastAnswer() async throws {
        let simulator = try await startSimulator {
            $0.scenario.toolCalls = [ScriptedToolCall(turn: 1, name: "set_volume", args: ["percent": 30])]
            // Three times converse's idle timeout between the answer's IN_PROGRESS and the result's turn.
            $0.responseLatency = .milliseconds(1500)
        }
        defer { Task { try? await simulator.stop() } }
        let input = TestSignals.speech(total: .seconds(4), burst: .milliseconds(1600), gap: .seconds(10))
        let run = try await converse(simulator, input: input) { $0.tools = true }
        #expect(run.outcome.exitCode == 0, "\(run.outcome.message ?? "")")
        #expect(run.transcript.contains("model: answering turn 1"), "\(run.transcript)")
        #expect(run.transcript.contains(#"model: tool set_volume said {"volume":30}"#), "\(run.transcript)")
        let connection = try #require(simulator.recorder.snapshot().connection(1))
        #expect(connection.setup?.model == Self.model)
        #expect(connection.turnCompletes.map(\.interactionStatus) == ["IN_PROGRESS", "IDLE"])
        #expect(connection.toolResults.map(\.outcome) == ["spoken"])
    }

    /// A device tool, what the model is scripted to call it with, and what becomes of its result.
    enum DeviceToolCase: String, CaseIterable, Sendable {
        /// INTERRUPT: what the user asked about is answered at once.
        case time = "1:get_time:{}"
        /// SILENT: a mute needs no reply; the answer's own turnComplete ends the exchange.
        case mute = #"1:set_microphone_muted:{"muted":true}"#

        var scheduling: String { self == .time ? "INTERRUPT" : "SILENT" }
        var outcome: String { self == .time ? "spoken" : "silent" }
    }

    @Test(arguments: DeviceToolCase.allCases)
    func eachDeviceToolsResultIsHeardPerItsScheduling(_ tool: DeviceToolCase) async throws {
        let simulator = try await startSimulator { $0.scenario.toolCalls = [try ScriptedToolCall.parse(tool.rawValue)] }
        defer { Task { try? await simulator.stop() } }
        let input = TestSignals.speech(total: .seconds(4), burst: .milliseconds(1600), gap: .seconds(10))
        let run = try await converse(simulator, input: input) { $0.tools = true }
        #expect(run.outcome.exitCode == 0, "\(run.outcome.message ?? "")")
        let connection = try #require(simulator.recorder.snapshot().connection(1))
        #expect(connection.toolResponses.map(\.scheduling) == [tool.scheduling])
        #expect(connection.toolResults.map(\.outcome) == [tool.outcome])
        #expect(connection.turnCompletes.last?.interactionStatus == "IDLE")
        let spoken = run.transcript.contains { $0.hasPrefix("model: tool ") }
        #expect(spoken == (tool == .time), "\(run.transcript)")
    }

    @Test func aRejectedTurnLeavesTheSessionListeningWithoutAReconnect() async throws {
        let simulator = try await startSimulator { $0.scenario.faults = [try SimulatorFault.parse("turn=1:reject")] }
        defer { Task { try? await simulator.stop() } }
        let clock = ManualClock()
        let logs = LogCapture()
        let session = makeSession(simulator, clock: clock, capture: logs) {
            $0.setup.model = Self.model
            $0.stallTimeout = .seconds(15)
            $0.setupTimeout = .seconds(300)  // never fired by the advances below
        }
        let run = Task { try await session.run() }
        var events = session.events.makeAsyncIterator()
        session.send(speech(1.6))
        session.send(silence(1.0))
        let first = await collect(&events) { $0 == .turnComplete }
        #expect(!first.contains { if case .audio = $0 { true } else { false } })
        // Back to listening (the turnComplete's own batch says so).
        _ = await collect(&events) { $0 == .conversation(.listening) }
        #expect(logs.all.contains { $0.contains("the model chose not to answer (RESPONSE_REJECTED)") })
        // Nothing is owed: silence for several stall periods is not a stall.
        for _ in 0..<3 {
            try await withDeadline(.seconds(10), "the stall check") { await clock.waitForSleepers(1) }
            clock.advance(by: .seconds(15))
        }
        try await withDeadline(.seconds(10), "the stall check") { await clock.waitForSleepers(1) }
        #expect(simulator.recorder.snapshot().connections.count == 1)
        #expect(session.statistics.failures == 0)
        // The next question is answered on the same connection.
        session.send(speech(1.6))
        session.send(silence(1.0))
        let second = await collect(&events) { $0 == .turnComplete }
        #expect(agentText(second).contains("answering turn 2"))
        let snapshot = simulator.recorder.snapshot()
        #expect(snapshot.connections.count == 1)
        #expect(snapshot.connections[0].turns.map(\.outcome) == ["rejected", "completed"])
        #expect(snapshot.connections[0].turnCompletes.map(\.reason) == ["RESPONSE_REJECTED", nil])
        session.finish()
        try await run.value
    }

    @Test func aRefusedResumptionGoesOnWithTheConversationSeededBeforeAnyInput() async throws {
        let simulator = try await startSimulator {
            // Connection 1 is lost after its first exchange; the service then refuses to resume the session.
            $0.scenario.faults = [try SimulatorFault.parse("audio=3.5s:drop:conn=1")]
            $0.scenario.refuseResumption = 1007
        }
        defer { Task { try? await simulator.stop() } }
        let logs = LogCapture()
        let session = makeSession(simulator, capture: logs) {
            $0.setup.model = Self.model
            $0.history = ConversationHistory(turns: 20, characters: 4000)
        }
        let run = Task { try await session.run() }
        var events = session.events.makeAsyncIterator()
        session.send(speech(1.6))
        session.send(silence(1.0))
        let first = await collect(&events) { $0 == .turnComplete }
        let said = finals(first)
        #expect(said.map(\.role) == ["user", "model"])
        session.send(silence(1.0))  // the drop comes during this
        _ = await collect(&events) { if case .link(.offline) = $0 { true } else { false } }
        _ = await collect(&events) { $0 == .link(.connected) }
        session.send(speech(1.6))
        session.send(silence(1.0))
        let answered = await collect(&events) { $0 == .turnComplete }
        #expect(agentText(answered).contains("answering turn 1"))  // a fresh session
        let snapshot = simulator.recorder.snapshot()
        #expect(snapshot.connections.count == 3)
        let refused = try #require(snapshot.connection(2))
        #expect(refused.resumptionHandle != nil && refused.close?.code == 1007)
        let fresh = try #require(snapshot.connection(3))
        #expect(fresh.resumptionHandle == nil)
        #expect(fresh.setup?.historyConfig?.initialHistoryInClientContent == true)
        // What was said, in order, before any realtime input; then the conversation went on.
        #expect(fresh.seededTurns.map(\.role) == said.map(\.role))
        #expect(fresh.seededTurns.map(\.text) == said.map(\.text))
        #expect(fresh.seededTurns.last?.text == "answering turn 1")
        #expect(fresh.historyComplete)
        #expect(fresh.seededBeforeRealtimeInput == true)
        #expect(Array(fresh.messageKinds.prefix(2)) == ["setup", "clientContent"])
        #expect(fresh.turns.first?.outcome == "completed")
        #expect(logs.all.contains { $0.contains("resumption refused; continued with 2 turns of history") })
        session.finish()
        try await run.value
    }

    @Test func interimTranscriptsVoiceActivityAndTranscriptionHintsAreUnderstood() async throws {
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        let logs = LogCapture()
        let session = makeSession(simulator, capture: logs) {
            $0.setup.model = Self.model
            $0.setup.inputAudioTranscription = AudioTranscriptionConfig(
                languageCodes: ["ml-IN", "en-IN"],
                customVocabulary: ["നന്ദി", "സുഖമാണോ"]
            )
        }
        let run = Task { try await session.run() }
        var events = session.events.makeAsyncIterator()
        // As a microphone sends it: 100 ms at a time.
        for _ in 0..<16 { session.send(speech(0.1)) }
        session.send(silence(1.0))
        let seen = await collect(&events) { $0 == .turnComplete }
        let user = seen.compactMap { event -> Transcript? in
            if case .transcript(let piece) = event, piece.role == .user { piece } else { nil }
        }
        // The guesses while the user spoke, each replacing the last in one segment, then the final words.
        let guesses = user.filter { !$0.isFinal && !$0.text.hasSuffix("of speech") }.map(\.text)
        #expect(guesses.count >= 2 && guesses.allSatisfy { $0.hasPrefix("heard ") }, "\(guesses)")
        #expect(guesses.first == "heard 0.5 s", "\(guesses)")
        #expect(Set(user.map(\.segment)).count == 1)
        #expect(user.last?.isFinal == true)
        #expect(user.last?.text.hasSuffix("s of speech") == true, "\(user.map(\.text))")
        #expect(logs.all.contains { $0.contains("voiceActivity ACTIVITY_START at") })
        #expect(logs.all.contains { $0.contains("voiceActivity ACTIVITY_END at") })
        #expect(logs.all.contains { $0.contains("service session sim-session-1") })
        let connection = try #require(simulator.recorder.snapshot().connection(1))
        #expect(connection.transcriptionLanguages == ["ml-IN", "en-IN"])
        #expect(connection.customVocabulary == ["നന്ദി", "സുഖമാണോ"])
        #expect(connection.sentMessageKinds.filter { $0 == "voiceActivity" }.count == 2)
        session.finish()
        try await run.value
    }

    @Test func aSetupWith38RejectsIsRefusedByTheServiceAndFirstByTheConfigurationCheck() async throws {
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        // Sent raw, the service closes it with 1007, naming the field.
        let setup =
            #"{"setup":{"model":"models/gemini-3.8-live","generationConfig":{"responseModalities":["AUDIO"],"#
            + #""thinkingConfig":{"thinkingBudget":0}}}}"#
        let close = try await WebSocketClient.connect(
            url: simulator.liveURL(),
            configuration: WebSocketClientConfiguration(maxFrameSize: 1 << 20),
            logger: quietLogger
        ) { inbound, outbound, _ in
            try await outbound.write(.text(setup))
            for try await _ in inbound.messages(maxSize: 1 << 20) {}
        }
        #expect(close?.closeCode == .dataInconsistentWithMessage)
        #expect(close?.reason?.hasPrefix("Request contains an invalid argument") == true)
        #expect(close?.reason?.contains("generationConfig.thinkingConfig") == true, "\(close?.reason ?? "")")
        #expect(simulator.recorder.snapshot().connection(1)?.sessionID == nil)
        // The configuration check refuses it first, naming the key: nothing is sent to the service.
        let run = try await converse(simulator) { $0.settings["thinking_budget"] = "0" }
        #expect(run.outcome.exitCode == 2)
        #expect(run.outcome.message?.contains("--thinking-budget") == true, "\(run.outcome.message ?? "")")
        #expect(simulator.recorder.snapshot().connections.count == 1)
        let settings = try GeminiBackend.settingKeys.first { $0.name == "thinking_budget" }.map { key in
            var settings = GeminiBackend.defaultSettings
            settings["thinking_budget"] = try key.parse("0")
            return settings
        }
        #expect(GeminiBackend.crossCheck(try #require(settings))?.key == "thinking_budget")
    }
}
