import HarkBackendKit
import HarkCore
import HarkGemini
import HarkSimulatorKit
import Logging
import NIOCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// One Live API connection: runs its ``LiveSimulatorSession``, turns the session's actions into frames in the
/// current output style (faults change it), and records and logs.
struct LiveConnection: SimulatorConnection {
    let logger: Logger
    private let service: LiveService
    private let number: Int
    private var session: LiveSimulatorSession
    private var encoder = ServerMessageEncoder()
    private var style: OutputStyle
    /// Model output (audio, text, transcription, an interruption) went out since the last `turnComplete`.
    private var outputSinceTurnComplete = false
    /// The keep-alive fault: from its start only this text goes out, one frame every `every` (wall clock).
    private var trickle: (text: String, every: Duration, next: ContinuousClock.Instant)?

    init(service: LiveService, endpoint: LiveEndpoint, credentials: LiveCredentials, path: String) {
        self.service = service
        let number = service.store.nextConnectionNumber()
        self.number = number
        self.session = LiveSimulatorSession(
            configuration: service.configuration,
            connection: LiveConnectionInfo(number: number, endpoint: endpoint, credentials: credentials),
            store: service.store,
            wallNow: service.store.wallNow()
        )
        self.style = session.style
        var logger = service.logger
        logger[metadataKey: "connection"] = "\(number)"
        self.logger = logger
        let record = ConnectionRecord(
            number: number,
            path: path,
            apiVersion: endpoint.version,
            constrained: endpoint.constrained,
            credential: credentials.summary
        )
        service.recorder.update { $0.connections.append(record) }
        logger.info("connection opened", metadata: ["path": .remote(path), "credential": "\(credentials.summary)"])
    }

    mutating func received(_ payload: ByteBuffer, binary: Bool) -> [SimulatorOutput] {
        let decoded = LiveSimulatorSession.decode(Data(payload.readableBytesView))
        record(decoded, binary: binary)
        return perform(session.received(decoded, wallNow: service.store.wallNow()))
    }

    mutating func tick() -> [SimulatorOutput] {
        var outputs = perform(session.tick(wallNow: service.store.wallNow()))
        if let trickle, ContinuousClock.now >= trickle.next {
            outputs.append(.frame(trickle.text, binary: style.binaryFrames))
            self.trickle?.next = .now + trickle.every
        }
        return outputs
    }

    /// Tells the session its socket is gone, and records how the connection ended (once).
    mutating func ended(by initiator: SimulatorCloseInitiator, code: Int?, reason: String?, first: Bool) {
        session.socketClosed(wallNow: service.store.wallNow())
        guard first else {
            if initiator == .network { logger.info("connection closed") }
            return
        }
        let close = CloseRecord(code: code, reason: reason, initiator: initiator.rawValue)
        service.recorder.updateConnection(number) { $0.close = close }
        // The simulator's own closes were logged with their reason when the session decided them.
        guard initiator == .client || initiator == .network else { return }
        var metadata: Logger.Metadata = ["by": "\(initiator.rawValue)"]
        if let code { metadata["code"] = "\(code)" }
        if let reason, !reason.isEmpty { metadata["reason"] = .remote(reason) }
        logger.info(initiator == .client ? "client closed the connection" : "connection closed", metadata: metadata)
    }

    private func record(_ decoded: DecodedClientFrame, binary: Bool) {
        service.recorder.updateConnection(number) { record in
            record.frames += 1
            if binary { record.binaryFrames += 1 } else { record.textFrames += 1 }
            switch decoded {
            case .message(let message, _):
                KindRun.append(message.simulatorKind, to: &record.receivedKinds)
                switch message {
                case .realtimeInput(let input):
                    let samples = message.audioSampleCount
                    if samples > 0 {
                        let rate = input.audio?.pcmRate ?? input.mediaChunks?.first?.pcmRate ?? 16_000
                        record.audioSamples += Int64(samples)
                        if record.firstAudio.count < ConnectionRecord.firstAudioLimit {
                            let room = ConnectionRecord.firstAudioLimit - record.firstAudio.count
                            for data in [input.audio?.data.data].compactMap({ $0 })
                                + (input.mediaChunks ?? []).filter({ $0.mimeType.hasPrefix("audio/") }).map(\.data.data)
                            {
                                record.firstAudio += PCM16.samples(data.prefix(2 * room))
                            }
                            if record.firstAudio.count > ConnectionRecord.firstAudioLimit {
                                record.firstAudio.removeLast(record.firstAudio.count - ConnectionRecord.firstAudioLimit)
                            }
                        }
                        record.audioSeconds += Double(samples) / Double(max(rate, 1))
                    }
                case .setup(let setup):
                    record.setup = setup
                    record.resumptionHandle = setup.sessionResumption?.handle
                    record.transcriptionLanguages = setup.inputAudioTranscription?.languageCodes
                    record.customVocabulary = setup.inputAudioTranscription?.customVocabulary
                case .toolResponse(let response):
                    record.toolResponseIDs += response.functionResponses.map(\.id)
                case .clientContent:
                    break
                case .contextUpdate(let update):
                    if let tools = update.tools {
                        record.contextUpdates.append(tools.flatMap { $0.functionDeclarations ?? [] }.map(\.name))
                    }
                }
            case .invalid:
                record.invalidFrames += 1
                KindRun.append("invalid", to: &record.receivedKinds)
            }
        }
    }

    /// The frames and wire effects of the session's actions, in order; records what is sent and the events.
    private mutating func perform(_ actions: [SimulatorAction]) -> [SimulatorOutput] {
        var outputs: [SimulatorOutput] = []
        // Where the keep-alive fault begins in these outputs (0: it began before).
        var trickleFrom: Int? = trickle == nil ? nil : 0
        var sentKinds: [String] = []
        var turnCompletes: [TurnCompleteRecord] = []
        for action in actions {
            switch action {
            case .send(let message):
                do {
                    let text = try encoder.encode(message, style: style)
                    outputs.append(.frame(text, binary: ServerMessageEncoder.isBinary(message, style: style)))
                    sentKinds.append(message.simulatorKind)
                    if case .serverContent(let content) = message.payload {
                        if content.modelTurn != nil || content.outputTranscription != nil
                            || content.generationComplete == true || content.interrupted == true
                        {
                            outputSinceTurnComplete = true
                        }
                        if content.turnComplete == true {
                            turnCompletes.append(
                                TurnCompleteRecord(
                                    interactionStatus: content.interactionStatus,
                                    reason: content.turnCompleteReason,
                                    bare: !outputSinceTurnComplete
                                )
                            )
                            outputSinceTurnComplete = false
                        }
                    }
                } catch {
                    logger.error("cannot encode a server message", metadata: ["error": .remote("\(error)")])
                }
            case .sendRaw(let text):
                outputs.append(.frame(text, binary: style.binaryFrames))
                sentKinds.append("raw")
            case .trickle(let text, let every):
                trickle = (text, every, .now + every)
                trickleFrom = trickleFrom ?? outputs.count
                logger.info("keeping the link alive, and nothing more", metadata: ["every": "\(every)"])
            case .sendRepeated(let text, let count):
                outputs += repeatElement(.frame(text, binary: style.binaryFrames), count: count)
                sentKinds += repeatElement("raw", count: count)
            case .close(let code, let reason):
                outputs.append(.close(code: code, reason: reason))
            case .drop:
                outputs.append(.drop)
            case .stall(let duration):
                outputs.append(.stall(duration))
            case .slowReplies(let delay):
                outputs.append(.slowReplies(delay))
            case .outputStyle(let newStyle):
                style = newStyle
            case .event(let event):
                handle(event)
            }
        }
        if let from = trickleFrom {
            // Only the keep-alive goes out from now on (what came before the fault still went).
            outputs =
                Array(outputs.prefix(from))
                + outputs.dropFirst(from).filter {
                    if case .frame = $0 { false } else { true }
                }
        }
        if !sentKinds.isEmpty {
            service.recorder.updateConnection(number) { record in
                for kind in sentKinds { KindRun.append(kind, to: &record.sentKinds) }
                record.turnCompletes += turnCompletes
            }
        }
        return outputs
    }

    // MARK: Events

    private func handle(_ event: SimulatorEvent) {
        switch event {
        case .setupAccepted(let sessionID, let resumedFrom, let model, let family, let manualActivity):
            var metadata: Logger.Metadata = [
                "session": "\(sessionID)",
                "model": .remote(model),
                "family": "\(family)",
                "activity": "\(manualActivity ? "manual" : "automatic")",
            ]
            if resumedFrom != nil { metadata["resumed"] = "true" }
            logger.info("setup accepted", metadata: metadata)
            service.recorder.updateConnection(number) {
                $0.sessionID = sessionID
                $0.resumed = resumedFrom != nil
                $0.family = family
            }
        case .closing(let code, let reason, let why):
            var metadata: Logger.Metadata = ["why": .remote(why)]
            if let code { metadata["code"] = "\(code)" }
            if !reason.isEmpty { metadata["reason"] = .remote(reason) }
            logger.info(code == nil ? "dropping the connection" : "closing the connection", metadata: metadata)
        case .speechStarted(let seconds):
            logger.debug("speech started", metadata: ["at": "\(seconds)"])
        case .userTurnEnded(let turn):
            logger.info(
                "user turn ended",
                metadata: [
                    "turn": "\(turn.number)", "kind": "\(turn.kind)",
                    "speech": "\(LiveSimulatorSession.oneDecimal(turn.speechSeconds))s",
                ]
            )
            service.recorder.updateConnection(number) { $0.turns.append(turn) }
        case .interrupted(let turn, let seconds):
            logger.info("answer interrupted", metadata: ["turn": "\(turn)", "audio": "\(seconds)s"])
            updateTurn(turn) {
                $0.outcome = "interrupted"
                $0.answerAudioSeconds = seconds
            }
        case .toolCallSent(let turn, let ids, let names, let blocking):
            logger.info(
                "tool call sent",
                metadata: [
                    "turn": "\(turn)", "names": .remote(names.joined(separator: ",")), "ids": .remote("\(ids)"),
                    "blocking": "\(blocking)",
                ]
            )
        case .toolResponse(let responses):
            for response in responses {
                var metadata: Logger.Metadata = ["id": .remote(response.id)]
                if let scheduling = response.scheduling { metadata["scheduling"] = .remote(scheduling) }
                if response.willContinue == true { metadata["willContinue"] = "true" }
                logger.info(response.matched ? "tool response" : "tool response ignored", metadata: metadata)
            }
            service.recorder.updateConnection(number) { $0.toolResponses += responses }
        case .toolCallsCancelled(let ids, let why):
            logger.info("tool calls cancelled", metadata: ["ids": .remote("\(ids)"), "why": .remote(why)])
            service.recorder.updateConnection(number) { $0.cancelledToolCalls += ids }
        case .toolResult(let result):
            logger.info(
                "tool result",
                metadata: [
                    "id": .remote(result.id), "scheduling": "\(result.scheduling)", "outcome": "\(result.outcome)",
                    "audio": "\(result.audioSeconds)s",
                ]
            )
            service.recorder.updateConnection(number) { $0.toolResults.append(result) }
        case .answerRejected(let turn):
            logger.info("answer rejected", metadata: ["turn": "\(turn)"])
            updateTurn(turn) { $0.outcome = "rejected" }
        case .historySeeded(let turn, let before):
            logger.info(
                "history turn seeded",
                metadata: ["role": .remote(turn.role), "characters": "\(turn.text.count)"]
            )
            service.recorder.updateConnection(number) {
                $0.seededTurns.append(turn)
                $0.seededBeforeRealtimeInput = ($0.seededBeforeRealtimeInput ?? true) && before
            }
        case .historyComplete(let turns, let before):
            logger.info("history seeded", metadata: ["turns": "\(turns)"])
            service.recorder.updateConnection(number) {
                $0.historyComplete = true
                $0.seededBeforeRealtimeInput = ($0.seededBeforeRealtimeInput ?? true) && before
            }
        case .answerFinished(let turn, let seconds):
            logger.info("answer finished", metadata: ["turn": "\(turn)", "audio": "\(seconds)s"])
            updateTurn(turn) {
                $0.outcome = "completed"
                $0.answerAudioSeconds = seconds
            }
        case .handleIssued(let handle):
            logger.debug("resumption handle issued")
            service.recorder.updateConnection(number) {
                $0.lastHandleIssued = handle
                $0.audioSamplesAtLastHandle = $0.audioSamples
            }
        case .goAwaySent(let timeLeft):
            logger.info("goAway sent", metadata: ["timeLeft": "\(ProtoDuration.format(timeLeft))"])
        case .faultFired(let fault):
            logger.notice("fault fired", metadata: ["fault": "\(fault)"])
            service.recorder.updateConnection(number) { $0.faults.append(fault) }
        case .unknownFields(let fields):
            logger.warning("client sent unknown fields", metadata: ["fields": .remote(fields.joined(separator: ","))])
        }
    }

    private func updateTurn(_ number: Int, _ change: @escaping (inout TurnRecord) -> Void) {
        service.recorder.updateConnection(self.number) { record in
            if let index = record.turns.lastIndex(where: { $0.number == number }) {
                change(&record.turns[index])
            }
        }
    }
}
