// hark-cascade-bench: the cascade's user-perceived latency, end of speech -> first answer audio, split into the
// services' share and Hark's own. Run through scripts/bench (--cascade-only runs just the cascade's part).
//
// One process, one clock: the cascade simulator (TLS, with the services' delays set) and a cascade session (the
// project's own WebSocket and HTTP clients over loopback) side by side, a microphone stand-in handing the session
// 20 ms frames in real time (tone bursts of 1.5 s every 6.02 s), and the session's events read as the appliance reads
// them. For each turn, on the same ContinuousClock:
//
//   end of speech   the frame holding the utterance's last speech sample was handed to the session (the
//                   simulator's voice detector says which sample that is)
//   services        speech-to-text: the endpointing's silence (audio time) + endpoint -> final transcript sent;
//                   text: request received -> the piece completing the first sentence sent; speech: the message
//                   that started the first synthesis (a flush, or a text filling the buffer) received -> first
//                   audio sent
//   Hark            microphone frame completing the endpointing's silence handed over -> at the service,
//                   transcript sent -> request received, first sentence's piece sent -> its synthesis asked for at
//                   the speech socket, speech audio sent -> the session's audio event
//   stand-in        the microphone stand-in's own lateness: when the frame completing the silence was handed over,
//                   against the end-of-speech frame's hand-over + the silence (the stand-in is a task that sleeps
//                   until each frame's time; a machine busy with other work wakes it late, which a microphone's
//                   driver is not). Neither the services' time nor Hark's: shown apart, and in the total.
//
// total = services + Hark + stand-in, to the nanosecond. The load average is printed with the figures, since
// the machine's other work shows in all of them.
//
// Prints p50 / p99 / max per part and writes them as JSON (--json).
import ArgumentParser
import HarkBackendKit
import HarkCascade
import HarkCascadeSimulator
import HarkCore
import HarkHTTP
import HarkNet
import Logging
import NIOCore
import NIOPosix
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

@main
struct HarkCascadeBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hark-cascade-bench",
        abstract: "The cascade's latency from the end of speech to the first answer audio, split by who spent it."
    )

    @Option(help: "Seconds of microphone audio (a turn every 6 s).") var seconds = 120
    @Option(help: ArgumentHelp("Endpoint to final transcript, in milliseconds.", valueName: "MS")) var sttFinal = 300
    @Option(help: ArgumentHelp("The text's first chunk, in milliseconds.", valueName: "MS")) var firstChunk = 400
    @Option(help: ArgumentHelp("Between the text's chunks, in milliseconds.", valueName: "MS")) var chunk = 30
    @Option(help: ArgumentHelp("Text to its first audio, in milliseconds.", valueName: "MS")) var ttsFirstAudio = 150
    @Flag(help: "Plain ws:// and http:// instead of TLS.") var plain = false
    @Option(help: ArgumentHelp("Write the figures here as JSON.", valueName: "PATH")) var json: String?

    /// The first three fields of /proc/loadavg ("?" where it cannot be read).
    static func loadAverage() -> String {
        guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return "?" }
        return text.split(separator: " ").prefix(3).joined(separator: " ")
    }

    /// Hark's tasks and sockets on one event loop thread, as `hark` runs them (``ConcurrencyExecutor``).
    static func main() async {
        ConcurrencyExecutor.installEventLoop()
        do {
            var command = try parseAsRoot()
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
    }

    func validate() throws {
        guard (12...3600).contains(seconds) else { throw ValidationError("--seconds: 12 to 3600") }
        for value in [sttFinal, firstChunk, chunk, ttsFirstAudio] where !(0...10_000).contains(value) {
            throw ValidationError("delays are 0 to 10000 milliseconds")
        }
    }

    func run() async throws {
        let quiet = Logger(label: "hark-cascade-bench") { _ in SwiftLogNoOpLogHandler() }
        let folder = FileManager.default.temporaryDirectory.path + "/hark-cascade-bench-\(getpid())"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }

        var settings = CascadeSimulatorConfiguration()
        settings.tls = !plain
        settings.caOut = plain ? nil : folder + "/ca.pem"
        settings.speechToTextFinalDelay = .milliseconds(sttFinal)
        settings.text.firstChunkDelay = .milliseconds(firstChunk)
        settings.text.chunkDelay = .milliseconds(chunk)
        settings.textToSpeechFirstAudioDelay = .milliseconds(ttsFirstAudio)
        // The services on a thread of their own, as they are on machines of their own: their work is not Hark's.
        let services = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let simulator = CascadeSimulator(configuration: settings, logger: quiet, eventLoopGroup: services)
        try await simulator.start()

        var configuration = CascadeConfiguration(
            sarvamEndpoint: simulator.httpBaseURL,
            geminiEndpoint: simulator.httpBaseURL,
            sarvamKey: Secret("bench"),
            geminiKey: Secret("bench")
        )
        configuration.link.randomSeed = 1
        let caFile = settings.caOut
        let session = CascadeSession(
            configuration: configuration,
            transport: NIOWebSocketTransport(caFile: caFile, logger: quiet),
            http: NIOHTTPClient(caFile: caFile),
            logger: quiet
        )
        let running = Task { try await session.run() }

        // The session's events, as the appliance reads them: the instant each answer's first audio came out.
        let firstAudio = Mutex<[ContinuousClock.Instant]>([])
        let reader = Task {
            var waiting = true
            for await event in session.events {
                switch event {
                case .audio:
                    if waiting {
                        let now = ContinuousClock.now
                        firstAudio.withLock { $0.append(now) }
                        waiting = false
                    }
                case .turnComplete, .interrupted:
                    waiting = true
                default:
                    break
                }
            }
        }

        // The microphone: 20 ms frames in real time, each handed over when its last sample is "captured".
        let frame = 320
        let frames = seconds * 50
        let speech = (0..<frame).map {
            Int16((0.25 * 32767 * sin(2 * Double.pi * 220 * Double($0) / 16_000)).rounded())
        }
        let silence = [Int16](repeating: 0, count: frame)
        var handed: [ContinuousClock.Instant] = []
        handed.reserveCapacity(frames)
        let clock = ContinuousClock()
        let start = clock.now
        print(
            "hark-cascade-bench: \(seconds) s of audio in real time against the simulator (\(plain ? "plain" : "TLS"))"
        )
        let loadBefore = Self.loadAverage()
        for index in 0..<frames {
            try await clock.sleep(until: start + .milliseconds(20 * (index + 1)))
            // 1.5 s of speech every 6.02 s: 75 frames on, 226 off (not a multiple of the frames a message gathers, so
            // the endpoint falls at every place in a message).
            let samples = index % 301 < 75 ? speech : silence
            session.send(.audio(AudioChunk(samples: samples, sampleRate: 16_000)))
            handed.append(clock.now)
        }
        // The last answer: its audio, or a few seconds.
        let deadline = clock.now + .seconds(5)
        while clock.now < deadline, simulator.snapshot.turns.count > firstAudio.withLock({ $0.count }) {
            try await clock.sleep(for: .milliseconds(50))
        }
        session.finish()
        _ = try? await running.value
        reader.cancel()
        try? await simulator.stop()
        try? await services.shutdownGracefully()

        var report = Report.make(
            turns: simulator.snapshot.turns,
            handed: handed,
            frameSamples: frame,
            firstAudio: firstAudio.withLock { $0 }
        )
        report.loadAverage = [loadBefore, Self.loadAverage()]
        print("load average (1, 5, 15 min) at the start: \(loadBefore); at the end: \(report.loadAverage[1])")
        print(report.table)
        if let json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
            try encoder.encode(report).write(to: URL(fileURLWithPath: json))
        }
    }
}

/// The figures of a run: each part's values (milliseconds), one per measured turn.
struct Report: Encodable {
    /// Turns measured, and turns left out (no endpoint in the first speech socket's stream, no answer audio).
    var turns: Int
    var skipped: Int
    /// The machine's load average (1, 5 and 15 minutes) when the run started and when it ended.
    var loadAverage: [String] = []
    /// Parts, by name, in the order printed.
    var parts: [Part]

    struct Part: Encodable {
        var name: String
        var share: String
        var values: [Double]
    }

    static func milliseconds(_ duration: Duration) -> Double { duration.seconds * 1000 }

    static func make(
        turns timings: [CascadeTurnTiming],
        handed: [ContinuousClock.Instant],
        frameSamples: Int,
        firstAudio: [ContinuousClock.Instant]
    ) -> Report {
        var columns: [String: [Double]] = [:]
        var measured = 0
        for timing in timings {
            guard let endpoint = timing.endpoint, timing.speechToTextSocket == 1,
                let endpointed = timing.endpointed, let transcript = timing.transcriptSent,
                let request = timing.requestReceived, let sentence = timing.firstSentenceSent,
                let text = timing.firstSynthesisAsked, let audio = timing.firstAudioSent,
                let out = firstAudio.first(where: { $0 >= audio })
            else { continue }
            let frame = Int(endpoint.speechEnd) / frameSamples - 1
            let commitFrame = Int(endpoint.commit) / frameSamples - 1
            guard handed.indices.contains(frame), handed.indices.contains(commitFrame) else { continue }
            let speechEnd = handed[frame]
            let committed = handed[commitFrame]
            let silence = Duration.nanoseconds((endpoint.commit - endpoint.speechEnd) * 1_000_000_000 / 16_000)
            let values: [(String, Duration)] = [
                ("total", speechEnd.duration(to: out)),
                ("stt", silence + endpointed.duration(to: transcript)),
                ("llm", request.duration(to: sentence)),
                ("tts", text.duration(to: audio)),
                ("mic", committed.duration(to: endpointed)),
                ("request", transcript.duration(to: request)),
                ("sentence", sentence.duration(to: text)),
                ("audio", audio.duration(to: out)),
                ("standIn", speechEnd.duration(to: committed) - silence),
            ]
            for (name, value) in values { columns[name, default: []].append(milliseconds(value)) }
            let services = values[1].1 + values[2].1 + values[3].1
            let hark = values[4].1 + values[5].1 + values[6].1 + values[7].1
            columns["services", default: []].append(milliseconds(services))
            columns["hark", default: []].append(milliseconds(hark))
            measured += 1
        }
        let order: [(String, String, String)] = [
            ("total", "user", "end of speech -> first answer audio out of the session"),
            ("services", "services", "the services' share (the three below)"),
            ("stt", "services", "  speech-to-text: endpointing silence + endpoint -> final transcript"),
            ("llm", "services", "  text: request received -> first sentence's piece sent"),
            ("tts", "services", "  speech: first synthesis asked for -> first audio sent"),
            ("hark", "hark", "Hark's own (the four below)"),
            ("mic", "hark", "  microphone frame -> on the wire (the endpoint's)"),
            ("request", "hark", "  transcript sent -> text request received"),
            ("sentence", "hark", "  first sentence sent -> its synthesis asked for at the speech socket"),
            ("audio", "hark", "  speech audio sent -> the session's audio event"),
            ("standIn", "bench", "the microphone stand-in's lateness (a sleeping task woken late)"),
        ]
        return Report(
            turns: measured,
            skipped: timings.count - measured,
            parts: order.map { Part(name: $0.2, share: $0.1, values: columns[$0.0] ?? []) }
        )
    }

    static func percentile(_ values: [Double], _ fraction: Double) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return .nan }
        let rank = max(1, Int((fraction * Double(sorted.count)).rounded(.up)))
        return sorted[rank - 1]
    }

    var table: String {
        /// Milliseconds with two decimals, right-aligned in 9 columns.
        func format(_ value: Double) -> String {
            let hundredths = Int((abs(value) * 100).rounded())
            let fraction = String(hundredths % 100)
            let number = (value < 0 ? "-" : "") + "\(hundredths / 100)." + (fraction.count < 2 ? "0" : "") + fraction
            return String(repeating: " ", count: max(0, 9 - number.count)) + number
        }
        var lines = ["turns measured: \(turns) (left out: \(skipped))"]
        for part in parts {
            let name = part.name + String(repeating: " ", count: max(0, 72 - part.name.count))
            guard !part.values.isEmpty else {
                lines.append("\(name) no samples")
                continue
            }
            let values = part.values
            lines.append(
                "\(name) p50 \(format(Self.percentile(values, 0.5))) ms  p99 \(format(Self.percentile(values, 0.99))) ms  max \(format(values.max() ?? 0)) ms"
            )
        }
        return lines.joined(separator: "\n")
    }
}
