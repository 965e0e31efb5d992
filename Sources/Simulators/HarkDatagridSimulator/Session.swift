import HarkBackendKit
import HarkCore
import HarkDatagrid
import HarkSimulatorKit

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What the owner of a simulated connection must do.
public enum DatagridSimulatorAction: Sendable, Hashable {
    /// Send this message.
    case send(DatagridServerMessage)
    /// Send this text as one frame, verbatim.
    case sendRaw(String)
    /// Close with this code and reason.
    case close(code: Int, reason: String)
    /// Drop the TCP connection without a close frame.
    case drop
    /// Record: the connection joined this conversation.
    case joined(conversationId: String, continued: Bool, start: DatagridStart)
    /// Record: a turn began.
    case turnStarted(DatagridTurnRecord)
    /// Record: a turn's answer ended (`completed` or `interrupted`) after `chunks` audio chunks.
    case turnEnded(number: Int, outcome: String, chunks: Int)
    /// Record: a fault fired.
    case faultFired(String)
}

/// The Datagrid Voice service's behaviour for one connection, as a value: client messages and time in,
/// actions out. The owner (the channel handler, or a test) performs the actions.
///
/// ## Time
/// As in the Live simulator, the session clock advances by the duration of the input audio received, so a
/// client sending as fast as it can sees what a real-time client sees; after ``DatagridSimulatorConfiguration/idleGrace``
/// of wall-clock time without audio the wall clock drives it instead.
///
/// ## Answers
/// The energy voice detector ends a user turn after the silence commit; the user's `transcript` goes out at
/// once, the answer ``DatagridSimulatorConfiguration/responseLatency`` later: scripted `tool_call` statuses first,
/// then ``ModelAudio`` beeps in 125 ms `audio` chunks (24 kHz), then the agent's `transcript` (transcripts only
/// when `voice_config.input_transcription` / `output_transcription` are not false; `ended` always has them). Speech that starts
/// during an answer interrupts it (`interrupted`). Silent input for the silence timeout ends the session with
/// `error` `client_silence_timeout`. `stop` is answered by `ended` with the conversation's transcript.
public struct DatagridSimulatorSession: Sendable {
    public enum Phase: Sendable, Hashable {
        case awaitingStart
        case active
        case closed
    }

    struct Answer: Sendable {
        enum Stage: Sendable, Hashable {
            case thinking(until: Int64)
            case tool(until: Int64)
            case speaking(from: Int64)
        }

        var turn: Int
        var stage: Stage
        var chunks: Int
        var sent = 0
        var tool: DatagridToolScript?
    }

    public private(set) var phase: Phase = .awaitingStart
    public let number: Int
    public private(set) var conversationId: String?
    private let configuration: DatagridSimulatorConfiguration
    private let store: DatagridStore
    /// The start payload redeemed from a hand-off token, used when the client's own `start` lacks fields.
    private let handoffStart: DatagridStart?
    private var vad: SimulatorVoiceDetector
    private var clock: Int64 = 0
    private var lastAudioWall: Duration?
    private var clockAtLastAudio: Int64 = 0
    private var silent: Int64 = 0
    private var silenceLimit: Int64
    private var answer: Answer?
    private var speechStartSample: Int64 = 0
    private var firedFaults: Set<Int> = []
    private let openedAt: Duration
    private var userTranscripts = true
    private var agentTranscripts = true

    /// - Parameter handoffStart: the body of the `POST /v1/voice` whose token opened this connection.
    public init(
        number: Int,
        configuration: DatagridSimulatorConfiguration,
        store: DatagridStore,
        handoffStart: DatagridStart? = nil,
        wallNow: Duration = .zero
    ) {
        self.number = number
        self.openedAt = wallNow
        self.configuration = configuration
        self.store = store
        self.handoffStart = handoffStart
        self.vad = Self.makeVAD(commit: configuration.silenceCommit)
        self.silenceLimit = configuration.scaled(configuration.silenceTimeout)
    }

    private static func makeVAD(commit: Duration) -> SimulatorVoiceDetector {
        SimulatorVoiceDetector(
            parameters: SimulatorVoiceDetector.Parameters(
                startThresholdDBFS: -50,
                endThresholdDBFS: -44,
                prefixPadding: .milliseconds(40),
                silenceDuration: commit
            )
        )
    }

    /// The session clock in nanoseconds.
    public var clockNanoseconds: Int64 { clock }

    /// Handles one client message.
    public mutating func received(_ message: DatagridClientMessage, wallNow: Duration) -> [DatagridSimulatorAction] {
        guard phase != .closed else { return [] }
        var out: [DatagridSimulatorAction] = []
        switch message {
        case .start(let start):
            guard phase == .awaitingStart else {
                return [.send(.error(DatagridError(message: "session already started", code: "invalid_message")))]
            }
            out += begin(start)
        case .audio(let audio):
            guard phase == .active else { return [] }
            out += receivedAudio(PCM16.samples(audio.data.data), wallNow: wallNow)
        case .text(let text):
            guard phase == .active else { return [] }
            out += interruptAnswer(echo: true)
            out += startTurn(kind: "text", speech: .zero, userText: text)
        case .interrupt:
            out += interruptAnswer(echo: false)
        case .stop:
            out += stop()
        case .unknown:
            out.append(
                .send(.error(DatagridError(message: "unknown message type \(message.type)", code: "invalid_message")))
            )
        }
        out += advance()
        return out
    }

    /// A frame that was not a message.
    public mutating func receivedInvalid() -> [DatagridSimulatorAction] {
        guard phase != .closed else { return [] }
        return [.send(.error(DatagridError(message: "invalid JSON", code: "invalid_message")))]
    }

    /// Time passes (the owner calls it every few milliseconds).
    public mutating func tick(wallNow: Duration) -> [DatagridSimulatorAction] {
        guard phase == .active else { return [] }
        let grace = configuration.idleGrace
        if let last = lastAudioWall {
            let idle = wallNow - last
            if idle > grace { clock = max(clock, clockAtLastAudio + (idle - grace).nanoseconds) }
        } else {
            let idle = wallNow - openedAt
            if idle > grace { clock = max(clock, (idle - grace).nanoseconds) }
        }
        return advance()
    }

    /// The socket is gone.
    public mutating func socketClosed() {
        phase = .closed
    }

    /// Whether connection-level faults are waiting for `ready`.
    private mutating func begin(_ clientStart: DatagridStart) -> [DatagridSimulatorAction] {
        var start = clientStart
        if let handoffStart {
            // The hand-off's body completes what the client sent (it normally sends the same thing back).
            if start.agentId == nil { start.agentId = handoffStart.agentId }
            if start.conversationId == nil { start.conversationId = handoffStart.conversationId }
            if start.voiceConfig == nil { start.voiceConfig = handoffStart.voiceConfig }
            if start.config == nil { start.config = handoffStart.config }
        }
        if let text = start.initialMessage, text.count > DatagridStart.initialMessageLimit {
            return [
                .send(.error(DatagridError(message: "initial_message is too long", code: "invalid_request"))),
                .close(code: 1008, reason: "invalid_request"),
            ]
        }
        let (conversation, continued) = store.join(conversation: start.conversationId)
        conversationId = conversation.id
        if let seconds = start.voiceConfig?.silenceTimeout, seconds > 0 {
            silenceLimit = configuration.scaled(.milliseconds(Int64(seconds * 1000)))
        }
        userTranscripts = start.voiceConfig?.inputTranscription != false
        agentTranscripts = start.voiceConfig?.outputTranscription != false
        if let commit = start.voiceConfig?.silenceCommitMs, commit > 0 {
            vad = Self.makeVAD(commit: .milliseconds(commit))
        }
        phase = .active
        var out: [DatagridSimulatorAction] = [
            .joined(conversationId: conversation.id, continued: continued, start: start),
            .send(
                .started(
                    DatagridStarted(
                        sessionId: store.nextSessionID(),
                        conversationId: conversation.id,
                        messageId: "msg_\(number)"
                    )
                )
            ),
            .send(.ready),
        ]
        for (index, fault) in configuration.faults.enumerated() {
            if case .afterReady(let connection) = fault.trigger, connection == number {
                firedFaults.insert(index)
                out += perform(fault, label: "afterReady(\(connection))")
            }
        }
        if configuration.greets, start.voiceConfig?.silentStart != true, !continued, phase == .active {
            answer = Answer(turn: 0, stage: .speaking(from: clock), chunks: 2 * ModelAudio.textTurnBeeps)
            out.append(.turnStarted(DatagridTurnRecord(number: 0, kind: "greeting", speechSeconds: 0)))
        }
        return out
    }

    private mutating func receivedAudio(_ samples: [Int16], wallNow: Duration) -> [DatagridSimulatorAction] {
        var out: [DatagridSimulatorAction] = []
        let before = vad.samplesProcessed
        let events = vad.process(samples: samples)
        clock = max(clock, clockAtLastAudio) + Int64(samples.count) * 1_000_000_000 / 16_000
        clockAtLastAudio = clock
        lastAudioWall = wallNow
        for event in events {
            switch event {
            case .speechStarted(let start, _):
                speechStartSample = start
                silent = 0
                out += interruptAnswer(echo: true)
            case .speechEnded(let start, let end, _):
                let speech = Duration.nanoseconds((end - start) * 1_000_000_000 / 16_000)
                out += startTurn(kind: "speech", speech: speech, userText: nil)
            }
        }
        // Silent frames count toward the silence timeout; an answer in flight or speech resets it.
        if vad.isSpeaking || answer != nil {
            silent = 0
        } else {
            silent += (vad.samplesProcessed - before) * 1_000_000_000 / 16_000
            if silent >= silenceLimit {
                phase = .closed
                out.append(
                    .send(
                        .error(
                            DatagridError(
                                message: "No audio activity detected; closing the session",
                                code: "client_silence_timeout"
                            )
                        )
                    )
                )
                out.append(.close(code: 1000, reason: "client_silence_timeout"))
            }
        }
        return out
    }

    private mutating func startTurn(kind: String, speech: Duration, userText: String?) -> [DatagridSimulatorAction] {
        guard let id = conversationId,
            let conversation = store.update(conversation: id, { $0.turns += 1 })
        else { return [] }
        let turn = conversation.turns
        let seconds = Double(speech.nanoseconds) / 1e9
        let text = userText ?? "speech \(turn) (\((seconds * 10).rounded() / 10) s)"
        let chunks = 2 * (kind == "text" ? ModelAudio.textTurnBeeps : ModelAudio.beepCount(speech: speech))
        answer = Answer(
            turn: turn,
            stage: .thinking(until: clock + configuration.responseLatency.nanoseconds),
            chunks: chunks,
            tool: configuration.tools.first { $0.turn == turn }
        )
        silent = 0
        var out: [DatagridSimulatorAction] = [
            .turnStarted(DatagridTurnRecord(number: turn, kind: kind, speechSeconds: seconds))
        ]
        let line = transcript("user", text)
        if userTranscripts { out.append(line) }
        return out
    }

    private mutating func interruptAnswer(echo: Bool) -> [DatagridSimulatorAction] {
        guard let current = answer else { return [] }
        answer = nil
        var out: [DatagridSimulatorAction] = [
            .turnEnded(number: current.turn, outcome: "interrupted", chunks: current.sent)
        ]
        if echo { out.append(.send(.interrupted)) }
        return out
    }

    private mutating func stop() -> [DatagridSimulatorAction] {
        guard phase == .active else { return [] }
        var out = interruptAnswer(echo: false)
        phase = .closed
        let conversation = conversationId.flatMap { store.conversation($0) }
        let turns = conversation?.turns ?? 0
        out.append(
            .send(
                .ended(
                    DatagridEnded(
                        creditsConsumed: Double(turns) * 0.5,
                        transcript: conversation?.transcript ?? []
                    )
                )
            )
        )
        out.append(.close(code: 1000, reason: "stopped"))
        return out
    }

    private mutating func transcript(_ role: String, _ text: String) -> DatagridSimulatorAction {
        let line = DatagridTranscriptLine(role: role, text: text)
        if let id = conversationId { _ = store.update(conversation: id) { $0.transcript.append(line) } }
        return .send(.transcript(line))
    }

    /// Moves the answer along the session clock.
    private mutating func advance() -> [DatagridSimulatorAction] {
        var out: [DatagridSimulatorAction] = []
        while phase == .active, var current = answer {
            switch current.stage {
            case .thinking(let until):
                guard clock >= until else { return out }
                if let tool = current.tool {
                    out.append(.send(.toolCall(DatagridToolCall(toolName: tool.name, status: "started"))))
                    current.stage = .tool(until: clock + configuration.scaled(tool.duration))
                } else {
                    current.stage = .speaking(from: clock)
                }
                answer = current
            case .tool(let until):
                guard clock >= until else { return out }
                let status = current.tool?.fails == true ? "failed" : "completed"
                out.append(.send(.toolCall(DatagridToolCall(toolName: current.tool?.name ?? "", status: status))))
                current.stage = .speaking(from: clock)
                answer = current
            case .speaking(let from):
                let lead = configuration.audioLead.nanoseconds
                let pace = max(configuration.audioPace, 0.01)
                while current.sent < current.chunks {
                    let offset = Int64(current.sent) * ModelAudio.chunkDuration.nanoseconds
                    let due = from + Int64(Double(max(0, offset - lead)) / pace)
                    guard clock >= due else {
                        answer = current
                        return out
                    }
                    out.append(
                        .send(
                            .audio(
                                DatagridAudio(
                                    data: ModelAudio.chunk(turn: current.turn, index: current.sent),
                                    mimeType: ModelAudio.mimeType
                                )
                            )
                        )
                    )
                    current.sent += 1
                }
                answer = nil
                let line = transcript("agent", current.turn == 0 ? "Hello! How can I help?" : "answer \(current.turn)")
                if agentTranscripts { out.append(line) }
                out.append(.turnEnded(number: current.turn, outcome: "completed", chunks: current.sent))
                silent = 0
                for (index, fault) in configuration.faults.enumerated() where !firedFaults.contains(index) {
                    if case .afterTurn(let turn) = fault.trigger, turn == current.turn {
                        firedFaults.insert(index)
                        out += perform(fault, label: "afterTurn(\(turn))")
                    }
                }
            }
        }
        return out
    }

    private mutating func perform(_ fault: DatagridFault, label: String) -> [DatagridSimulatorAction] {
        var out: [DatagridSimulatorAction] = [.faultFired("\(label): \(fault.action)")]
        switch fault.action {
        case .close(let code, let reason):
            phase = .closed
            out.append(.close(code: code, reason: reason))
        case .drop:
            phase = .closed
            out.append(.drop)
        case .malformed:
            out.append(.sendRaw("{not json"))
            out.append(.sendRaw(#"{"payload":{"text":"no type"}}"#))
        case .unknownType:
            out.append(.sendRaw(#"{"type":"viseme","payload":{"shape":"O","offset_ms":120}}"#))
            out.append(
                .sendRaw(
                    #"{"type":"citation","payload":{"citations":[],"timestamp_ms":5,"surprise":true},"trace":"x"}"#
                )
            )
        case .error(let code, let message, let close):
            out.append(.send(.error(DatagridError(message: message, code: code))))
            if close {
                phase = .closed
                out.append(.close(code: 1000, reason: code))
            }
        }
        return out
    }
}
