import Foundation
import HarkApp
import HarkAudio
import HarkCore
import HarkLiveKitAgent
import HarkLiveKitWire
import HarkPlatform
import HarkTestKit
import Logging
import Synchronization
import Testing

@testable import HarkLiveKitAgent
@testable import HarkLiveKitHelper

#if canImport(FoundationEssentials)
    import FoundationEssentials
#endif

/// Tokens, token servers' answers and the settings, without a room.
@Suite struct LiveKitTokenTests {
    static let join = LiveKitJoin(room: "kiosk-1", identity: "hark-kiosk", name: "Hark", agentName: "tutor")

    @Test func aMintedTokenIsSignedWithTheSecretAndCarriesTheGrants() throws {
        let secret = Secret("a-secret-of-some-length-0123456789")
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let token = try LiveKitToken.mint(
            Self.join,
            apiKey: "APIkey",
            apiSecret: secret,
            lifetime: .seconds(3600),
            now: now
        ).reveal()
        let parts = token.split(separator: ".").map(String.init)
        try #require(parts.count == 3)
        #expect(!token.contains("=") && !token.contains("+") && !token.contains("/"))
        // The signature itself is checked by an independent implementation in TokenVerificationTests (PyJWT) and the
        // HMAC in HMACTests; here, that it signs what the first two parts say with the secret, and nothing else.
        let expected = SHA256.hmac(key: secret.reveal().utf8, message: (parts[0] + "." + parts[1]).utf8)
        #expect(parts[2] == LiveKitToken.base64URL(Data(expected)))
        let claims = try JSONDecoder().decode(JSONValue.self, from: try #require(Self.decode(parts[1])))
        let header = try JSONDecoder().decode(JSONValue.self, from: try #require(Self.decode(parts[0])))
        #expect(header["alg"]?.stringValue == "HS256")
        #expect(claims["iss"]?.stringValue == "APIkey")
        #expect(claims["sub"]?.stringValue == "hark-kiosk")
        #expect(claims["exp"]?.numberValue == 1_800_003_600)
        #expect(claims["nbf"]?.numberValue == 1_799_999_990)
        #expect(claims["video"]?["room"]?.stringValue == "kiosk-1")
        #expect(claims["video"]?["roomJoin"] == .bool(true))
        #expect(claims["video"]?["canPublish"] == .bool(true))
        #expect(claims["video"]?["canSubscribe"] == .bool(true))
        #expect(claims["roomConfig"]?["agents"]?.arrayValue?.first?["agentName"]?.stringValue == "tutor")
    }

    static func decode(_ part: String) -> Data? {
        var text = part.replacing("-", with: "+").replacing("_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        return Data(base64Encoded: text)
    }

    @Test func aTokenServersAnswerIsReadInEitherCasingAndChecked() throws {
        let snake = Data(#"{"server_url":"https://project.livekit.cloud","participant_token":"aaa.bbb.ccc"}"#.utf8)
        let (url, token) = try LiveKitTokenSource.connectionDetails(snake, what: "t", allowInsecure: false)
        #expect(url == "wss://project.livekit.cloud")
        #expect(token.reveal() == "aaa.bbb.ccc")
        let camel = Data(#"{"serverUrl":"ws://127.0.0.1:7880","participantToken":"x.y.z"}"#.utf8)
        #expect(
            try LiveKitTokenSource.connectionDetails(camel, what: "t", allowInsecure: false).url
                == "ws://127.0.0.1:7880"
        )
        // An answer naming no server: the configured one.
        let bare = Data(#"{"participant_token":"x.y.z"}"#.utf8)
        #expect(
            try LiveKitTokenSource.connectionDetails(
                bare,
                what: "t",
                allowInsecure: false,
                serverURL: "wss://configured.example.com"
            ).url == "wss://configured.example.com"
        )
        let refused: [(String, String)] = [
            (#"{"server_url":"ws://livekit.example.com","participant_token":"x.y.z"}"#, "clear text"),
            (#"{"server_url":"wss://a.example.com","participant_token":"x.y\nz"}"#, "participant_token"),
            (#"{"server_url":"wss://a.example.com"}"#, "participant_token"),
            (#"{"participant_token":"x.y.z"}"#, "livekit_url"),
            ("<html>not json</html>", "not a JSON object"),
        ]
        for (body, problem) in refused {
            let error = #expect(throws: SessionFailure.self) {
                try LiveKitTokenSource.connectionDetails(Data(body.utf8), what: "t", allowInsecure: false)
            }
            #expect(error?.kind == .configuration)
            #expect(error?.message.contains(problem) == true, "\(String(describing: error)) for \(body)")
        }
        let huge = Data(
            ("{\"server_url\":\"wss://a.example.com\",\"participant_token\":\"" + String(repeating: "a", count: 20_000)
                + "\"}").utf8
        )
        #expect(throws: SessionFailure.self) {
            try LiveKitTokenSource.connectionDetails(huge, what: "t", allowInsecure: false)
        }
    }

    @Test func theSettingsNameWhereTheTokenComesFrom() {
        func check(_ values: [String: String]) -> String? {
            var settings = LiveKitAgentBackend.defaultSettings
            for (key, value) in values { settings[key] = .text(value) }
            return LiveKitAgentBackend.crossCheck(settings)?.key
        }
        #expect(check([:]) == nil)  // an unused section may be empty: the backend says so when it is made
        #expect(check(["token_url": "https://example.com/token"]) == nil)
        #expect(check(["sandbox_id": "abc"]) == nil)
        #expect(check(["api_key": "k"]) == "livekit_url")
        #expect(check(["api_key": "k", "livekit_url": "wss://x.example.com"]) == nil)
        #expect(check(["api_key": "k", "livekit_url": "wss://x.example.com", "sandbox_id": "s"]) == "api_key")
    }

    @Test func theAgentsStatesMapOntoTheAppliances() {
        #expect(LiveKitAgentState.conversation("initializing") == .listening)
        #expect(LiveKitAgentState.conversation("listening") == .listening)
        #expect(LiveKitAgentState.conversation("thinking") == .thinking)
        #expect(LiveKitAgentState.conversation("speaking") == .speaking)
        #expect(LiveKitAgentState.conversation("idle") == .idle)
        #expect(LiveKitAgentState.conversation("dancing") == nil)
    }
}

/// The backend against the stand-in room, through LiveKit's real library (one client per process: one at a time).
@Suite(.serialized, .enabled(if: LiveKitStandIn.available, "\(LiveKitStandIn.missing)"))
struct LiveKitRoomTests {
    /// 0.4 s of quiet, 2 s of speech, 1.2 s of quiet.
    static let question: [Int16] =
        [Int16](repeating: 0, count: 6400) + TestSignals.speech(total: .seconds(2), burst: .seconds(2), gap: .zero)
        + [Int16](repeating: 0, count: 19_200)

    func converse(
        _ settings: [String: String],
        environment: [String: String] = [:],
        logs: LogCapture = LogCapture(),
        lines: Lines? = nil
    ) async throws -> (ConverseOutcome, [Int16]) {
        let input = try TestSignals.writeTemporaryWAV(Self.question)
        let output = input + "-out.wav"
        defer {
            try? FileManager.default.removeItem(atPath: input)
            try? FileManager.default.removeItem(atPath: output)
        }
        var options = ConverseOptions(input: input, output: output)
        options.backend = "livekit"
        options.settings = settings
        options.timeout = .seconds(40)
        options.maxRetries = 1
        let outcome = await ConverseRunner(
            options: options,
            network: .nio(logger: logs.logger("transport")),
            environment: environment,
            logger: logs.logger(),
            transcriptSink: { line in lines?.value.withLock { $0.append(line) } }
        ).run()
        let answer = (try? WAVFile.read(path: output).samples) ?? []
        return (outcome, answer)
    }

    /// The loudest frequency of `samples` at 24 kHz among `candidates` (Goertzel).
    static func strongest(_ samples: ArraySlice<Int16>, among candidates: [Double]) -> Double {
        candidates.max { power(samples, $0) < power(samples, $1) } ?? 0
    }

    static func power(_ samples: ArraySlice<Int16>, _ frequency: Double) -> Double {
        let coefficient = 2 * cos(2 * Double.pi * frequency / 24_000)
        var (s1, s2) = (0.0, 0.0)
        for sample in samples {
            let s = Double(sample) + coefficient * s1 - s2
            s2 = s1
            s1 = s
        }
        return s1 * s1 + s2 * s2 - coefficient * s1 * s2
    }

    @Test func aSpokenTurnThroughTheRoomWithTheFirstWordsKeptForALateAgent() async throws {
        let standIn = try await LiveKitStandIn.start(["--agent-delay", "1"])
        defer { standIn.stop() }
        let lines = Lines()
        let logs = LogCapture()
        let (outcome, answer) = try await converse(standIn.mintingSettings(), logs: logs, lines: lines)
        #expect(outcome.exitCode == 0, "\(outcome.message ?? "")")
        // The agent's two tones, 440 Hz then 660 Hz, half a second each, came out of its track.
        let loud = answer.indices.filter { abs(Int(answer[$0])) > 3000 }
        #expect(loud.count > 12_000, "answer audio: \(answer.count) samples, \(loud.count) loud")
        guard loud.count > 12_000 else { return }
        let first = loud[0]
        #expect(Self.strongest(answer[(first + 1200)..<(first + 6000)], among: [440, 660]) == 440)
        #expect(Self.strongest(answer[(first + 13_200)..<(first + 18_000)], among: [440, 660]) == 660)
        let said = lines.value.withLock { $0 }
        #expect(said.contains("model: Answer 1 in two tones."), "\(said)")
        #expect(said.contains { $0.hasPrefix("user: (an utterance of") }, "\(said)")
        let record = standIn.record()
        let preConnect = try #require(record["pre_connect"]?.arrayValue?.first)
        #expect(preConnect["for_track"] == .bool(true))
        #expect(preConnect["attributes"]?["sampleRate"]?.stringValue == "16000")
        #expect(preConnect["attributes"]?["channels"]?.stringValue == "1")
        // What the agent got before it joined and what its track carried together hold the whole question.
        let early = try #require(preConnect["seconds"]?.numberValue)
        #expect(early >= 0.8, "\(early) s before the agent joined")
        // ... and nothing twice: the buffer (0.4 s of quiet and the first words) and the rest of the speech on the
        // track add up to the 2.4 s the question lasted up to its last word.
        let utterance = record["utterances"]?.arrayValue?.first?.numberValue ?? 0
        #expect(abs(early + utterance - 2.4) < 0.3, "\(early) s before the agent joined, \(utterance) s after")
        #expect(record["turns"]?.numberValue == 1)
        #expect(!logs.all.contains { $0.contains(LiveKitStandIn.apiSecret) })
        #expect(
            !logs.all.contains { $0.contains("Attempted to drop unknown") },
            "\(logs.all.filter { $0.contains("drop") })"
        )
    }

    @Test func aRefusedTokenIsAnAuthenticationError() async throws {
        let standIn = try await LiveKitStandIn.start(["--reject-token"])
        defer { standIn.stop() }
        let logs = LogCapture()
        let (outcome, _) = try await converse(standIn.mintingSettings(), logs: logs)
        #expect(outcome.exitCode == 3, "\(outcome.message ?? "")")
        #expect(outcome.message?.contains("LiveKit refused the token") == true, "\(outcome.message ?? "")")
        #expect(outcome.statistics?.failures == 1, "a refused token is not tried again by a one-shot run")
        #expect(standIn.record()["rejected_tokens"]?.numberValue ?? 0 >= 1)
        #expect(!logs.all.contains { $0.contains(LiveKitStandIn.apiSecret) || $0.contains("eyJ") })
    }

    @Test func theTokenComesFromTheDevicesBackendWithItsCredential() async throws {
        let standIn = try await LiveKitStandIn.start([
            "--token-port", "0", "--token-credential", "device-credential-77",
        ])
        defer { standIn.stop() }
        let tokenURL = try #require(standIn.tokenURL)
        let credential = try writeTemporaryText("device-credential-77")
        defer { try? FileManager.default.removeItem(atPath: credential) }
        let settings = [
            "token_url": tokenURL + "/token", "token_key_file": credential, "room": "kiosk-1",
            "identity": "kiosk-device", "agent_name": "tutor",
        ]
        let logs = LogCapture()
        let (outcome, _) = try await converse(settings, logs: logs)
        #expect(outcome.exitCode == 0, "\(outcome.message ?? "")")
        let record = standIn.record()
        let request = try #require(record["token_requests"]?.arrayValue?.first)
        #expect(request["body"]?["room_name"]?.stringValue == "kiosk-1")
        #expect(request["body"]?["participant_identity"]?.stringValue == "kiosk-device")
        #expect(request["body"]?["room_config"]?["agents"]?.arrayValue?.first?["agent_name"]?.stringValue == "tutor")
        let join = try #require(record["joins"]?.arrayValue?.first)
        #expect(join["room"]?.stringValue == "kiosk-1")
        #expect(join["agents"]?.arrayValue == [.string("tutor")])
        #expect(!logs.all.contains { $0.contains("device-credential-77") })

        // A credential the endpoint does not know is an authentication error, without a join.
        let wrong = try writeTemporaryText("not-the-credential")
        defer { try? FileManager.default.removeItem(atPath: wrong) }
        var refused = settings
        refused["token_key_file"] = wrong
        let (second, _) = try await converse(refused)
        #expect(second.exitCode == 3, "\(second.message ?? "")")
        #expect(second.message?.contains("HTTP 401") == true, "\(second.message ?? "")")
        #expect(standIn.record()["joins"]?.arrayValue?.count == 1)
    }

    @Test func theSandboxTokenServer() async throws {
        let standIn = try await LiveKitStandIn.start(["--token-port", "0", "--sandbox-id", "sandbox-42"])
        defer { standIn.stop() }
        let tokenURL = try #require(standIn.tokenURL)
        let logs = LogCapture()
        let (outcome, answer) = try await converse(
            ["sandbox_id": "sandbox-42", "token_url": tokenURL + "/api/sandbox/connection-details"],
            logs: logs
        )
        #expect(outcome.exitCode == 0, "\(outcome.message ?? "")\n\(logs.all.joined(separator: "\n"))")
        #expect(!answer.isEmpty)
        #expect(
            standIn.record()["token_requests"]?.arrayValue?.first?["path"]?.stringValue
                == "/api/sandbox/connection-details"
        )
    }

    /// A session made directly, its events collected.
    func session(
        _ standIn: LiveKitStandIn,
        logs: LogCapture = LogCapture(),
        extra: [String: String] = [:],
        carriesConversation: Bool = true
    ) throws -> (any VoiceSession, EventLog, Task<Void, any Error>) {
        var settings = LiveKitAgentBackend.defaultSettings
        for (key, value) in standIn.mintingSettings().merging(extra, uniquingKeysWith: { $1 }) {
            settings[key] = .text(value)
        }
        let backend = try LiveKitAgentBackend(
            context: BackendContext(
                settings: settings,
                environment: ProcessInfo.processInfo.environment,
                network: .nio(logger: logs.logger("transport")),
                usage: .daemon(stateDirectory: "/nonexistent", pace: 1),
                logger: logs.logger()
            )
        )
        let session = backend.makeSession(
            SessionRequest(carriesConversation: carriesConversation, logger: logs.logger())
        )
        let events = EventLog(session.events)
        let run = Task { try await session.run() }
        return (session, events, run)
    }

    /// Feeds `samples` in 20 ms chunks at the capture rate.
    func speak(_ session: any VoiceSession, _ samples: [Int16]) async throws {
        let clock = ContinuousClock()
        var next = clock.now
        for start in stride(from: 0, to: samples.count, by: 320) {
            session.send(
                .audio(AudioChunk(samples: Array(samples[start..<min(samples.count, start + 320)]), sampleRate: 16_000))
            )
            next += .milliseconds(20)
            try await clock.sleep(until: next)
        }
    }

    @Test func typedInputGetsASpokenAnswerAndTheStatesFollowTheAgent() async throws {
        let standIn = try await LiveKitStandIn.start()
        defer { standIn.stop() }
        let (session, events, run) = try session(standIn)
        try await events.waitFor("the room") { $0.links.contains(.connected) }
        // (initializing shows as listening too: the agent's own record says when it listens)
        try await standIn.waitForRecord("the agent listening") {
            $0["states"]?.arrayValue?.contains(.string("listening")) == true
        }
        session.send(.text("what time is it"))
        try await events.waitFor("the answer") { $0.turns >= 1 }
        #expect(standIn.record()["chats"]?.arrayValue == [.string("what time is it")])
        // The agent's state after the answer comes on its own, possibly after the turn's end: awaited.
        try await events.waitFor("the agent listening after the answer") {
            Array($0.states.suffix(3)) == [.thinking, .speaking, .listening]
        }
        let snapshot = events.snapshot
        #expect(snapshot.audioSamples > 20_000)
        let agent = snapshot.transcripts.filter { $0.role == .agent }
        #expect(agent.last?.isFinal == true)
        #expect(agent.last?.text == "Answer 1 in two tones.")
        #expect(agent.dropLast().allSatisfy { !$0.isFinal && "Answer 1 in two tones.".hasPrefix($0.text) })
        session.finish()
        try await withDeadline(.seconds(20), "the session to end") { try await run.value }
    }

    @Test func aCancelledAnswerIsSilencedAtOnce() async throws {
        let standIn = try await LiveKitStandIn.start()
        defer { standIn.stop() }
        let (session, events, run) = try session(standIn)
        try await standIn.waitForRecord("the agent listening") {
            $0["states"]?.arrayValue?.contains(.string("listening")) == true
        }
        session.send(.text("tell me a story"))
        try await events.waitFor("the answer's first audio") { $0.states.last == .speaking && $0.audioSamples > 2400 }
        session.send(.interrupt)
        try await events.waitFor("the interruption") { $0.events.contains(.interrupted) }
        try await events.waitFor("the agent's turn to end") { $0.turns >= 1 }
        let after = events.snapshot.events.drop { $0 != .interrupted }.dropFirst()
        let audioAfter = after.prefix { $0 != .turnComplete }.filter { if case .audio = $0 { true } else { false } }
        #expect(audioAfter.isEmpty, "\(audioAfter.count) audio events after the interruption")
        session.finish()
        try await withDeadline(.seconds(20), "the session to end") { try await run.value }
    }

    @Test func aKioskVisitorGetsARoomOfItsOwnAndAnotherSessionTheConfiguredOne() async throws {
        let standIn = try await LiveKitStandIn.start()
        defer { standIn.stop() }
        for carries in [false, true] {
            let (session, events, run) = try session(standIn, extra: ["room": "lobby"], carriesConversation: carries)
            try await events.waitFor("the room") { $0.links.contains(.connected) }
            session.finish()
            try await withDeadline(.seconds(20), "the session to end") { try await run.value }
        }
        let rooms = standIn.record()["joins"]?.arrayValue?.compactMap { $0["room"]?.stringValue } ?? []
        #expect(rooms.count == 2 && rooms[0].hasPrefix("lobby-") && rooms[0].count > 8, "\(rooms)")
        #expect(rooms.last == "lobby", "\(rooms)")
    }

    @Test func theAgentLeavingEndsTheSession() async throws {
        let standIn = try await LiveKitStandIn.start(["--agent-leave-after", "2"])
        defer { standIn.stop() }
        let (_, events, run) = try session(standIn)
        try await events.waitFor("the session to end") { $0.ended }
        try await withDeadline(.seconds(20), "run to return") { try await run.value }
        #expect(events.snapshot.events.contains(.notice("the agent left the room")))
    }

    @Test func aDeletedRoomEndsTheSession() async throws {
        let standIn = try await LiveKitStandIn.start(["--delete-room-after", "2"])
        defer { standIn.stop() }
        let (_, events, run) = try session(standIn)
        try await events.waitFor("the session to end") { $0.ended }
        try await withDeadline(.seconds(20), "run to return") { try await run.value }
        #expect(
            events.snapshot.events.contains {
                if case .notice(let text) = $0 { text.contains("ROOM_DELETED") } else { false }
            }
        )
    }

    @Test func aDroppedConnectionIsJoinedAgainAndTheAgentAnswersAfter() async throws {
        let standIn = try await LiveKitStandIn.start(["--drop-after", "2"])
        defer { standIn.stop() }
        let (session, events, run) = try session(standIn)
        try await standIn.waitForRecord("the drop") { $0["faults"]?.arrayValue?.contains(.string("drop")) == true }
        try await standIn.waitForRecord("the rejoin") { ($0["joins"]?.arrayValue?.count ?? 0) >= 2 }
        try await events.waitFor("the room again") { $0.links.last == .connected }
        try await speak(session, Self.question)
        try await events.waitFor("the answer after the rejoin") { $0.turns >= 1 }
        #expect(events.snapshot.audioSamples > 20_000)
        session.finish()
        try await withDeadline(.seconds(20), "the session to end") { try await run.value }
    }
}

extension LiveKitRoomTests {
    @Test func aHelperThatDiesMidSessionIsReplacedByANewOne() async throws {
        let standIn = try await LiveKitStandIn.start()
        defer { standIn.stop() }
        let (session, events, run) = try session(standIn)
        try await events.waitFor("the room") { $0.links.contains(.connected) }
        let first = try #require(Self.helpers().first, "no hark-livekit child of this process")
        kill(first, SIGKILL)
        try await events.waitFor("a new helper in the room", within: .seconds(30)) {
            $0.links.filter { $0 == .connected }.count >= 2
        }
        #expect(!Self.helpers().contains(first))
        #expect(session.statistics.failures == 1)
        #expect(session.statistics.connections == 2)
        try await standIn.waitForRecord("the agent listening") {
            $0["states"]?.arrayValue?.contains(.string("listening")) == true
        }
        session.send(.text("are you still there"))
        try await events.waitFor("the answer through the new helper", within: .seconds(30)) { $0.turns >= 1 }
        session.finish()
        try await withDeadline(.seconds(20), "the session to end") { try await run.value }
        try await withDeadline(.seconds(10), "the helpers to end") {
            while !Self.helpers().isEmpty { try await Task.sleep(for: .milliseconds(50)) }
        }
    }

    /// The `hark-livekit` processes this one started (from /proc: the parent's pid and the command's name).
    static func helpers() -> [Int32] {
        let me = getpid()
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { entry -> Int32? in
            guard let pid = Int32(entry),
                let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")")
            else { return nil }
            let name = stat[stat.index(after: open)..<close]
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard name == "hark-livekit", fields.count > 1, fields[0] != "Z", Int32(fields[1]) == me else { return nil }
            return pid
        }
    }
}

/// Writes `text` to a new file in the temporary directory (mode 600) and returns its path.
func writeTemporaryText(_ text: String) throws -> String {
    let path = FileManager.default.temporaryDirectory.path + "/hark-lk-\(UInt64.random(in: 0...UInt64.max)).txt"
    try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
    return path
}

/// Transcript lines as `hark converse` prints them.
final class Lines: Sendable {
    let value = Mutex<[String]>([])
}
