import Foundation
import HarkAudio
import HarkBackendKit
import HarkCore
import HarkDSP
import HarkTestKit
import Testing

@Suite struct FlexDecodingTests {
    struct Probe: Decodable {
        var turnComplete: Bool?
        var index: Int64?
        var items: [String]?
        init(from decoder: any Decoder) throws {
            let c = try decoder.flexContainer(known: ["turnComplete", "index", "items"])
            turnComplete = try c.flexBool("turnComplete")
            index = try c.flexInt("index")
            items = try c.flexArray(String.self, "items")
        }
    }

    @Test func acceptsBothCasingsStringsForNumbersAndSingleItems() throws {
        let collector = UnknownFieldCollector()
        let decoder = JSONDecoder()
        decoder.userInfo[UnknownFieldCollector.userInfoKey] = collector
        let camel = try decoder.decode(
            Probe.self,
            from: Data(#"{"turnComplete":true,"index":"42","items":["a"]}"#.utf8)
        )
        #expect(camel.turnComplete == true && camel.index == 42 && camel.items == ["a"])
        let snake = try decoder.decode(
            Probe.self,
            from: Data(#"{"turn_complete":"TRUE","index":7,"items":"b","extra_field":1}"#.utf8)
        )
        #expect(snake.turnComplete == true && snake.index == 7 && snake.items == ["b"])
        #expect(collector.paths == ["extra_field"])
    }

    @Test func casingConversions() {
        #expect(FlexKey.snakeCase("lastConsumedClientMessageIndex") == "last_consumed_client_message_index")
        #expect(FlexKey.camelCase("turn_complete") == "turnComplete")
        #expect(FlexKey.camelCase("plain") == "plain")
        #expect(FlexKey.snakeCase("plain") == "plain")
        #expect(FlexKey.snakeCase("setupComplete") == "setup_complete")
        #expect(FlexKey.camelCase("interim_input_transcription") == "interimInputTranscription")
        #expect(FlexKey.camelCase("odd__key_9_é") == "oddKey9é")
    }

    @Test func base64BothAlphabetsWithAndWithoutPadding() throws {
        let bytes = Data([0xFB, 0xFF, 0xBF, 0x00, 0x10])
        let standard = bytes.base64EncodedString()
        #expect(standard.contains("+") || standard.contains("/"))
        #expect(Base64Bytes.decode(standard) == bytes)
        let urlSafe = Base64Bytes.urlSafeString(bytes)
        #expect(!urlSafe.contains("+") && !urlSafe.contains("/") && !urlSafe.hasSuffix("="))
        #expect(Base64Bytes.decode(urlSafe) == bytes)
        #expect(Base64Bytes.decode("not base64!") == nil)
        let encoder = JSONEncoder()
        encoder.outputFormatting = .withoutEscapingSlashes
        let encoded = try encoder.encode(Base64Bytes(bytes))
        #expect(String(decoding: encoded, as: UTF8.self) == "\"\(standard)\"")
    }

    @Test(arguments: [
        ("30s", Duration.seconds(30)), ("49.990s", .milliseconds(49_990)), ("0.5s", .milliseconds(500)),
        ("-1.5s", .milliseconds(-1500)), ("1.000000001s", .nanoseconds(1_000_000_001)),
    ])
    func protoDurations(text: String, expected: Duration) {
        #expect(ProtoDuration.parse(text) == expected)
    }

    @Test func protoDurationRejectsAndFormats() {
        #expect(ProtoDuration.parse("30") == nil)
        #expect(ProtoDuration.parse("s") == nil)
        #expect(ProtoDuration.parse("1.2.3s") == nil)
        #expect(ProtoDuration.format(.milliseconds(9990)) == "9.990s")
        #expect(ProtoDuration.format(.seconds(30)) == "30s")
    }

    @Test func jsonValueRoundTripKeepsKeysAndIntegers() throws {
        let value: JSONValue = [
            "room_name": "kitchen", "level": 3, "ratio": 0.5, "on": true, "tags": ["a"], "none": nil,
        ]
        let data = try JSONEncoder().encode(value)
        #expect(String(decoding: data, as: UTF8.self).contains("\"level\":3"))
        #expect(try JSONDecoder().decode(JSONValue.self, from: data) == value)
    }
}

@Suite struct BackoffTests {
    @Test func growsJitteredUpToTheCapAndResets() {
        var backoff = Backoff(initial: .milliseconds(500), cap: .seconds(30))
        var random = SeededRandom(seed: 7)
        var ceilings: [Int64] = []
        for _ in 0..<10 {
            let ceiling = backoff.currentCeiling.milliseconds
            let delay = backoff.next(using: &random).milliseconds
            #expect(delay >= ceiling / 2 && delay <= ceiling)
            ceilings.append(ceiling)
        }
        #expect(ceilings.prefix(4) == [500, 1000, 2000, 4000])
        #expect(ceilings.last == 30_000)
        backoff.reset()
        #expect(backoff.currentCeiling == .milliseconds(500))
    }

    @Test func sameSeedSameDelays() {
        var a = Backoff()
        var b = Backoff()
        var ra = SeededRandom(seed: 1)
        var rb = SeededRandom(seed: 1)
        for _ in 0..<5 { #expect(a.next(using: &ra) == b.next(using: &rb)) }
    }

    @Test func humanDurations() {
        #expect(Duration.seconds(8).humanDescription == "8 s")
        #expect(Duration.milliseconds(250).humanDescription == "250 ms")
        #expect(Duration.milliseconds(1500).humanDescription == "1.5 s")
    }
}

@Suite struct InputQueueTests {
    func audio(_ count: Int, value: Int16 = 1) -> SessionInput {
        .audio(AudioChunk(samples: [Int16](repeating: value, count: count), sampleRate: 16_000))
    }

    @Test func dropsOldestAudioBeyondTheBoundAndCountsIt() async {
        let queue = SessionInputQueue(audioBound: .milliseconds(100), sampleRate: 16_000)  // 1600 samples
        queue.push(.activityStart)
        for value in 1...5 { queue.push(audio(480, value: Int16(value))) }  // 2400 samples
        #expect(queue.droppedSamples == 960)
        #expect(queue.queuedSamples == 1440)
        #expect(await queue.next(maxAudio: 10_000) == .activityStart)
        guard case .audio(let merged)? = await queue.next(maxAudio: 10_000) else {
            Issue.record("expected audio")
            return
        }
        #expect(merged.samples.count == 1440)
        #expect(merged.samples.first == 3)
    }

    @Test func aMergedChunkCarriesItsNewestCaptureTimeOrNoneWhenAPartHasNone() async {
        let queue = SessionInputQueue()
        let stamped = { (time: UInt64) in
            SessionInput.audio(AudioChunk(samples: [1, 2], sampleRate: 16_000, capturedAt: time))
        }
        queue.push(stamped(100))
        queue.push(stamped(200))
        queue.push(stamped(300))
        queue.push(.audioStreamEnd)
        queue.push(audio(2))  // a pre-roll frame: no capture time
        queue.push(stamped(500))
        guard case .audio(let first)? = await queue.next(maxAudio: 100),
            await queue.next(maxAudio: 100) == .audioStreamEnd,
            case .audio(let second)? = await queue.next(maxAudio: 100)
        else {
            Issue.record("expected audio, the stream end, audio")
            return
        }
        #expect(first.samples.count == 6 && first.capturedAt == 300)
        #expect(second.samples.count == 4 && second.capturedAt == nil)
        // The capture time is not part of the chunk's value.
        let stampedChunk = AudioChunk(samples: [1], sampleRate: 16_000, capturedAt: 1)
        #expect(stampedChunk == AudioChunk(samples: [1], sampleRate: 16_000))
    }

    @Test func mergesUpToTheChunkLimitAndKeepsOrder() async {
        let queue = SessionInputQueue()
        queue.push(audio(320))
        queue.push(audio(320))
        queue.push(audio(320))
        queue.push(.audioStreamEnd)
        queue.push(audio(320))
        var sizes: [Int] = []
        var kinds: [String] = []
        for _ in 0..<4 {
            switch await queue.next(maxAudio: 640) {
            case .audio(let chunk)?:
                sizes.append(chunk.samples.count)
                kinds.append("audio")
            case let other?: kinds.append("\(other)")
            case nil: kinds.append("nil")
            }
        }
        #expect(sizes == [640, 320, 320])
        #expect(kinds == ["audio", "audio", "audioStreamEnd", "audio"])
    }

    @Test func pushFrontRestoresOrder() async {
        let queue = SessionInputQueue()
        queue.push(audio(10, value: 2))
        let first = await queue.next(maxAudio: 5)  // takes all 10: one chunk is never split
        #expect(first == audio(10, value: 2))
        queue.push(audio(10, value: 3))
        queue.pushFront([first!])
        #expect(await queue.next(maxAudio: 10) == audio(10, value: 2))
    }

    @Test func consumerWakesOnPushAndCloseEndsIt() async throws {
        let queue = SessionInputQueue()
        let consumer = Task { await queue.next(maxAudio: 100) }
        queue.push(.text("hello"))
        #expect(await consumer.value == .text("hello"))
        let ended = Task { await queue.next(maxAudio: 100) }
        queue.close()
        #expect(await ended.value == nil)
    }

    @Test func microphoneFramesAreGatheredToTheMinimumAndAnythingElseFlushesThem() async throws {
        let queue = SessionInputQueue()
        let gathered = Task { await queue.next(maxAudio: 1600, minAudio: 640) }
        queue.push(audio(160, value: 1))
        queue.push(audio(160, value: 2))
        queue.push(audio(160, value: 3))
        #expect(queue.queuedSamples == 480)  // below the minimum: the consumer still sleeps
        queue.push(audio(160, value: 4))
        let first = try await withDeadline(.seconds(5), "gathered audio") { await gathered.value }
        guard case .audio(let chunk)? = first else {
            Issue.record("expected audio")
            return
        }
        #expect(chunk.samples.count == 640 && chunk.samples.first == 1 && chunk.samples.last == 4)
        // Less than the minimum goes at once when something else follows it, in order.
        let flushed = Task { await queue.next(maxAudio: 1600, minAudio: 640) }
        queue.push(audio(160, value: 5))
        queue.push(.activityEnd)
        #expect(try await withDeadline(.seconds(5), "flushed audio") { await flushed.value } == audio(160, value: 5))
        #expect(await queue.next(maxAudio: 1600, minAudio: 640) == .activityEnd)
        // And at the end.
        queue.push(audio(160, value: 6))
        queue.close()
        #expect(await queue.next(maxAudio: 1600, minAudio: 640) == audio(160, value: 6))
        #expect(await queue.next(maxAudio: 1600, minAudio: 640) == nil)
    }

    @Test func waitForRoomReturnsWhenTheConsumerDrains() async throws {
        let queue = SessionInputQueue()
        queue.push(audio(1000))
        let waiter = Task { await queue.waitForRoom(below: 500) }
        _ = await queue.next(maxAudio: 2000)
        try await withDeadline(.seconds(5), "room") { await waiter.value }
        #expect(queue.queuedSamples == 0)
    }
}

@Suite struct AudioFileTests {
    @Test func wavRoundTripAndFormats() throws {
        let samples: [Int16] = [0, 1000, -1000, 32767, -32768]
        let data = WAVFile.encode(samples: samples, sampleRate: 24_000)
        let decoded = try WAVFile.decode(data)
        #expect(decoded == WAVAudio(samples: samples, sampleRate: 24_000, channels: 1))

        // 24-bit stereo: two frames
        var wav = Data("RIFF".utf8) + le32(36 + 12) + Data("WAVEfmt ".utf8) + le32(16)
        wav += le16(1) + le16(2) + le32(48_000) + le32(48_000 * 6) + le16(6) + le16(24)
        wav += Data("data".utf8) + le32(12)
        wav += Data([0x00, 0x00, 0x10, 0x00, 0x00, 0xF0, 0x00, 0x00, 0x20, 0x00, 0x00, 0xE0])
        let stereo = try WAVFile.decode(wav)
        #expect(stereo.channels == 2 && stereo.sampleRate == 48_000)
        #expect(stereo.samples == [0x1000, -0x1000, 0x2000, -0x2000])
        #expect(stereo.mono == [0, 0])
        #expect(throws: WAVError.self) { try WAVFile.decode(Data("nonsense".utf8)) }
    }

    @Test func resamplerKeepsLengthAndTone() throws {
        // 1 s of a 440 Hz tone at 48 kHz → 16 kHz: 16000 samples, same zero-crossing count.
        let input = (0..<48_000).map { Int16(8000 * sin(2 * Double.pi * 440 * Double($0) / 48_000)) }
        let output = try Resampler.convert(input, from: 48_000, to: 16_000)
        #expect(output.count == 16_000)
        let crossings = zip(output.dropFirst(200), output.dropFirst(201)).filter { ($0 < 0) != ($1 < 0) }.count
        #expect(abs(crossings - 880 * (16_000 - 201) / 16_000) <= 4)
        #expect(PCM16.levelDBFS(output[1000..<15_000]) > -16)
    }

    func le32(_ value: Int) -> Data { withUnsafeBytes(of: UInt32(value).littleEndian) { Data($0) } }
    func le16(_ value: Int) -> Data { withUnsafeBytes(of: UInt16(value).littleEndian) { Data($0) } }
}

@Suite struct SecretTests {
    @Test func neverPrintsItself() {
        let secret = Secret("AIza-super-secret")
        #expect("\(secret)" == "<redacted>")
        #expect(String(reflecting: secret) == "<redacted>")
        #expect(secret.reveal() == "AIza-super-secret")
    }

    @Test func loadsInOrderFromFileEnvironmentAndCredentials() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("key").path
        try "  from-file\n".write(toFile: file, atomically: true, encoding: .utf8)
        try "from-credential".write(
            toFile: directory.appendingPathComponent("gemini-api-key").path,
            atomically: true,
            encoding: .utf8
        )
        let environment = ["GEMINI_API_KEY": "from-env", "CREDENTIALS_DIRECTORY": directory.path]
        #expect(
            try Secret.load(from: [.file(file), .environment("GEMINI_API_KEY")], environment: environment)?.reveal()
                == "from-file"
        )
        #expect(
            try Secret.load(from: [.environment("GEMINI_API_KEY")], environment: environment)?.reveal() == "from-env"
        )
        #expect(
            try Secret.load(from: [.environment("NOPE"), .credential("gemini-api-key")], environment: environment)?
                .reveal() == "from-credential"
        )
        #expect(try Secret.load(from: [.environment("NOPE")], environment: environment) == nil)
        #expect(throws: Secret.LoadError.self) {
            try Secret.load(from: [.file(directory.path + "/missing")], environment: [:])
        }
    }

    @Test func redactsCredentialsInURLs() {
        #expect(URLRedaction.redact("wss://h/ws/voice?token=abc&x=1") == "wss://h/ws/voice?token=REDACTED&x=REDACTED")
        #expect(URLRedaction.redact("wss://h/p?key=K") == "wss://h/p?key=REDACTED")
        #expect(URLRedaction.redact("wss://h/p?access_token=T") == "wss://h/p?access_token=REDACTED")
        #expect(URLRedaction.redact("wss://h/p") == "wss://h/p")
    }
}

@Suite struct ResumptionStoreTests {
    @Test func savesAtomicallyAndExpires() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString).path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let store = ResumptionStore(path: path)
        #expect(store.load(model: "m", now: 1000) == nil)
        try store.save(handle: "h1", model: "m", now: 1000)
        #expect(store.load(model: "m", now: 1000 + 7199) == "h1")
        #expect(store.load(model: "m", now: 1000 + 7201) == nil)
        #expect(store.load(model: "other", now: 1001) == nil)
        store.clear()
        #expect(store.load(model: "m", now: 1001) == nil)
    }
}

@Suite struct ToolRegistryTests {
    struct Broken: Error, CustomStringConvertible { var description: String { "broken" } }

    @Test func dispatchesAndReportsErrorsAsResults() async {
        let registry = ToolRegistry([
            LocalTool(name: "echo", description: "echo") { args in ["got": args] },
            LocalTool(name: "fail", description: "fails") { _ in throw Broken() },
        ])
        let echo = await registry.call(name: "echo", arguments: ["a": 1])
        #expect(echo.succeeded && echo.result == ["got": ["a": 1]])
        let fail = await registry.call(name: "fail", arguments: nil)
        #expect(!fail.succeeded && fail.result == ["error": "broken"])
        let missing = await registry.call(name: "nope", arguments: nil)
        #expect(!missing.succeeded)
    }
}

@Suite struct ManualClockTests {
    @Test func sleepersWakeOnlyWhenAdvanced() async throws {
        let clock = ManualClock()
        let sleeper = Task { try await clock.sleep(for: .seconds(5)) }
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(4))
        #expect(clock.sleeperCount == 1)
        clock.advance(by: .seconds(1))
        try await sleeper.value
        #expect(clock.requestedSleeps == [.seconds(5)])
    }
}

@Suite struct ReconnectPolicyTests {
    func policy(giveUp: Bool = false, limit: Int? = nil) -> ReconnectPolicy {
        ReconnectPolicy(
            backoff: Backoff(initial: .seconds(1), cap: .seconds(8)),
            rejectedRetryDelay: .seconds(300),
            giveUpOnRejection: giveUp,
            maxConsecutiveFailures: limit,
            seed: 3
        )
    }

    let dropped = SessionFailure(.transient, "connection lost")
    let refused = SessionFailure(.authentication, "the service refused access (close 1008)", closeCode: 1008)

    @Test func transientFailuresBackOffAndAHealthyConnectionResets() {
        var policy = policy()
        var ceilings: [Int64] = []
        for _ in 0..<5 {
            guard
                case .retry(let delay, .offline(let reason, let shown), let message) = policy.failed(
                    dropped,
                    healthy: false
                )
            else {
                Issue.record("expected a retry while offline")
                return
            }
            #expect(delay == shown && reason == "connection lost" && message.hasPrefix("offline: connection lost"))
            ceilings.append(delay.milliseconds)
        }
        #expect(zip(ceilings, [1000, 2000, 4000, 8000, 8000] as [Int64]).allSatisfy { $0 >= $1 / 2 && $0 <= $1 })
        guard case .retry(let afterHealthy, _, _) = policy.failed(dropped, healthy: true) else {
            Issue.record("expected a retry")
            return
        }
        #expect(afterHealthy <= .seconds(1))
        #expect(policy.consecutiveFailures == 1)
    }

    @Test func rejectionsWaitSlowlyOrEndAOneShotRun() {
        var daemon = policy()
        #expect(
            daemon.failed(refused, healthy: false)
                == .retry(
                    after: .seconds(300),
                    link: .rejected(refused, retryIn: .seconds(300)),
                    message: "the service refused access (close 1008); retrying in 300 s"
                )
        )
        var oneShot = policy(giveUp: true)
        #expect(
            oneShot.failed(refused, healthy: false)
                == .giveUp(link: .rejected(refused, retryIn: nil), message: refused.message)
        )
    }

    @Test func anUntrustedCertificateIsAnErrorRetriedSlowlyWhileOtherConnectFailuresPass() {
        let untrusted = SessionFailure.fromConnect(WebSocketConnectError(.untrusted, "the certificate is not trusted"))
        #expect(untrusted.kind == .untrusted)
        var daemon = policy()
        #expect(
            daemon.failed(untrusted, healthy: false)
                == .retry(
                    after: .seconds(300),
                    link: .rejected(untrusted, retryIn: .seconds(300)),
                    message: "the certificate is not trusted; retrying in 300 s"
                )
        )
        #expect(
            SessionFailure.fromConnect(WebSocketConnectError(.invalidRequest, "wss:// needs")).kind == .configuration
        )
        for kind in [WebSocketConnectError.Kind.dns, .refused, .timeout, .tls, .upgradeDeclined, .messageTooLarge] {
            #expect(SessionFailure.fromConnect(WebSocketConnectError(kind, "x")).kind == .transient)
        }
        let http = SessionFailure.fromHTTPClient(
            HTTPClientError("h: SSL peer certificate", untrusted: true),
            what: "token"
        )
        #expect(http.kind == .untrusted && http.message == "token: h: SSL peer certificate")
        #expect(SessionFailure.fromHTTPClient(HTTPClientError("h: refused"), what: "token").kind == .transient)
    }

    @Test func aLimitGivesUpAfterThatManyFailuresInARow() {
        var policy = policy(limit: 3)
        guard case .retry = policy.failed(dropped, healthy: false), case .retry = policy.failed(dropped, healthy: false)
        else {
            Issue.record("expected retries")
            return
        }
        guard case .giveUp(_, let message) = policy.failed(dropped, healthy: false) else {
            Issue.record("expected to give up")
            return
        }
        #expect(message == "giving up after 3 failed attempts: connection lost")
    }
}
