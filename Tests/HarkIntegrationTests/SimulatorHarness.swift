import HarkBackendKit
import HarkCore
import HarkGemini
import HarkLiveSimulator

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Drives one ``LiveSimulatorSession`` as a value, with a manual wall clock.
struct Harness {
    var session: LiveSimulatorSession
    var wall: Duration
    var actions: [SimulatorAction] = []

    init(
        _ configuration: LiveSimulatorConfiguration = LiveSimulatorConfiguration(),
        store: SimulatorStore = SimulatorStore(),
        endpoint: LiveEndpoint = LiveEndpoint(version: "v1beta"),
        credentials: LiveCredentials = LiveCredentials(),
        number: Int = 1,
        wall: Duration = .zero
    ) {
        self.wall = wall
        self.session = LiveSimulatorSession(
            configuration: configuration,
            connection: LiveConnectionInfo(number: number, endpoint: endpoint, credentials: credentials),
            store: store,
            wallNow: wall
        )
    }

    var sent: [ServerMessage] {
        actions.compactMap { if case .send(let message) = $0 { message } else { nil } }
    }

    var kinds: [String] { sent.map(\.simulatorKind) }

    var closes: [(code: Int, reason: String)] {
        actions.compactMap { if case .close(let code, let reason) = $0 { (code, reason) } else { nil } }
    }

    var dropped: Bool { actions.contains(.drop) }

    var events: [SimulatorEvent] {
        actions.compactMap { if case .event(let event) = $0 { event } else { nil } }
    }

    var audioChunks: [Data] {
        sent.compactMap { message in
            guard case .serverContent(let content) = message.payload else { return nil }
            return content.modelTurn?.parts.first?.inlineData?.data.data
        }
    }

    var outputTranscript: String {
        sent.compactMap { message in
            guard case .serverContent(let content) = message.payload else { return nil }
            return content.outputTranscription?.text
        }.joined()
    }

    var resumptionUpdates: [SessionResumptionUpdate] {
        sent.compactMap { message in
            if case .sessionResumptionUpdate(let update) = message.payload { update } else { nil }
        }
    }

    var lastHandle: String? { resumptionUpdates.compactMap(\.resumableHandle).last }

    mutating func receive(_ message: ClientMessage) {
        actions += session.received(message, wallNow: wall)
    }

    mutating func receive(json: String) {
        actions += session.receivedFrame(Data(json.utf8), wallNow: wall)
    }

    /// Sends audio in 100 ms chunks as fast as a client can: 1 ms of wall-clock time per chunk.
    mutating func audio(_ samples: [Int16], chunk: Int = 1600) {
        var start = 0
        while start < samples.count {
            let end = min(start + chunk, samples.count)
            wall += .milliseconds(1)
            let blob = Blob(mimeType: "audio/pcm;rate=16000", data: PCM16.bytes(Array(samples[start..<end])))
            receive(.realtimeInput(RealtimeInput(audio: blob)))
            start = end
        }
    }

    /// Lets wall-clock time pass with no input, ticking every 10 ms.
    mutating func idle(_ duration: Duration) {
        let end = wall + duration
        while wall < end {
            wall += .milliseconds(10)
            actions += session.tick(wallNow: wall)
        }
    }

    func index(of kind: String, after start: Int = 0) -> Int? {
        kinds.indices.first { $0 >= start && kinds[$0] == kind }
    }

    func lastIndex(of kind: String) -> Int? {
        kinds.lastIndex(of: kind)
    }
}
