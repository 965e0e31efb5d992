import Glibc
import HarkCore
import HarkLiveKitProto
import HarkPlatform
import HarkTestKit
import Logging
import SwiftProtobuf
import Synchronization
import Testing

@testable import HarkLiveKit

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The real `liblivekit_ffi.so` that scripts/setup unpacks (the tests that need it are skipped without it, saying so).
enum RealLibrary {
    static let path: String? = try? LiveKitLibrary.locate(environment: ProcessInfo.processInfo.environment)
    static let missing = "the LiveKit runtime is not installed: scripts/setup puts liblivekit_ffi.so in .hark-lib"

    static func open() throws -> LiveKitLibrary { try LiveKitLibrary.open(try #require(path)) }

    /// A token-shaped secret (a JWT's three parts) that must never reach a log line.
    static let token = Secret("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJoYXJrLXRlc3QifQ.bm90LWEtcmVhbC1zaWduYXR1cmU")
}

/// Finding the library, with and without it.
@Suite struct LiveKitLibraryLocationTests {
    @Test func aMissingLibraryNamesTheFix() throws {
        let empty = FileManager.default.temporaryDirectory.appendingPathComponent("hark-lk-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: empty, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: empty) }
        let error = #expect(throws: LiveKitError.self) {
            try LiveKitLibrary.locate(environment: ["HARK_LIB_DIR": empty.path])
        }
        #expect(error?.isLibraryMissing == true)
        #expect(error?.description.contains("scripts/setup") == true, "\(String(describing: error))")
        #expect(error?.description.contains("/usr/lib/hark") == true)
        #expect(error?.description.contains(empty.path) == true)
    }

    @Test func aFileThatIsNotTheLibraryIsRefused() throws {
        let error = #expect(throws: LiveKitError.self) { try LiveKitLibrary.open("/bin/true") }
        #expect(error?.isLibraryMissing == false)
    }

    @Test(.enabled(if: RealLibrary.path != nil, "\(RealLibrary.missing)"))
    func theDevelopmentLibraryIsFound() throws {
        let path = try #require(RealLibrary.path)
        #expect(path.hasSuffix("/liblivekit_ffi.so"))
        _ = try LiveKitLibrary.open(path)
    }
}

/// Everything that runs the real library, one test after the other (one client at a time per process).
@Suite(.serialized, .enabled(if: RealLibrary.path != nil, "\(RealLibrary.missing)"))
enum LiveKitRealLibraryTests {
    /// The client against the real library: its lifecycle, connecting, audio, the audio processing module, the
    /// resampler. One client at a time per process, so these run one after the other.
    @Suite struct Client {
        /// Initialize, then dispose; twice, since the library's server outlives a client and takes a new one.
        @Test func initializesAndDisposesAgainAndAgain() async throws {
            let library = try RealLibrary.open()
            for _ in 0..<2 {
                let value = try await withDeadline(.seconds(30), "a client to start and end") {
                    try await LiveKitClient.withClient(library: library) { client in
                        #expect(client.library.path == library.path)
                        return 42
                    }
                }
                #expect(value == 42)
            }
        }

        @Test func oneClientAtATime() async throws {
            let library = try RealLibrary.open()
            try await withDeadline(.seconds(30), "nested clients") {
                try await LiveKitClient.withClient(library: library) { _ in
                    let error = await #expect(throws: LiveKitError.self) {
                        try await LiveKitClient.withClient(library: library) { _ in }
                    }
                    #expect(error?.description.contains("already") == true)
                }
            }
        }

        @Test func requestsAfterTheEndAreRefused() async throws {
            let library = try RealLibrary.open()
            let kept = try await withDeadline(.seconds(30), "a client to start and end") {
                try await LiveKitClient.withClient(library: library) { client in client }
            }
            #expect(throws: LiveKitError.self) { _ = try kept.makeAudioSource(sampleRate: 48_000) }
        }

        /// Nothing listens on the port: the library gives up at once with an error (no hang), the token stays out of
        /// the logs and the error.
        @Test func connectingToAClosedPortFailsFast() async throws {
            let library = try RealLibrary.open()
            let port = try closedLoopbackPort()
            let logs = LogCapture()
            let started = ContinuousClock.now
            let error = try await withDeadline(.seconds(30), "the connection to fail") {
                try await LiveKitClient.withClient(library: library, logger: logs.logger("livekit")) { client in
                    var options = LiveKitRoomOptions()
                    options.timeout = .seconds(15)
                    do {
                        _ = try await client.connect(
                            url: "ws://127.0.0.1:\(port)",
                            token: RealLibrary.token,
                            options: options
                        )
                        return LiveKitError?.none
                    } catch let error as LiveKitError {
                        return error
                    }
                }
            }
            let elapsed = ContinuousClock.now - started
            let failure = try #require(error, "connecting to a closed port succeeded")
            #expect(failure.isConnectFailure, "\(failure)")
            #expect(!failure.isAuthentication && !failure.isTimeout, "\(failure)")
            #expect(elapsed < .seconds(10), "took \(elapsed)")
            let secret = RealLibrary.token.reveal()
            #expect(!failure.description.contains(secret))
            #expect(!logs.all.contains { $0.contains("bm90LWEtcmVhbC1zaWduYXR1cmU") }, "the token reached a log line")
        }

        /// A server that accepts the connection and never answers: the join gives up at its deadline, cleanly, and the
        /// client still ends at once.
        @Test func aSilentServerMeetsTheDeadline() async throws {
            let library = try RealLibrary.open()
            let server = try LoopbackServer(answer: .silence)
            defer { server.stop() }
            let started = ContinuousClock.now
            let error = try await withDeadline(.seconds(30), "the join to time out and the client to end") {
                try await LiveKitClient.withClient(library: library, logger: LogCapture().logger("livekit")) { client in
                    var options = LiveKitRoomOptions()
                    options.timeout = .seconds(1)
                    do {
                        _ = try await client.connect(
                            url: "ws://127.0.0.1:\(server.port)",
                            token: RealLibrary.token,
                            options: options
                        )
                        return LiveKitError?.none
                    } catch let error as LiveKitError {
                        return error
                    }
                }
            }
            let elapsed = ContinuousClock.now - started
            let failure = try #require(error, "a silent server let the client join")
            #expect(failure.isTimeout, "\(failure)")
            #expect(elapsed < .seconds(8), "took \(elapsed)")
        }

        /// A server that refuses every request with 401 (as LiveKit does for a bad token): an authentication error
        /// within a second or so, and the request carried the token as a bearer header, not in the URL.
        @Test func aRefusedTokenIsAnAuthenticationError() async throws {
            let library = try RealLibrary.open()
            let server = try LoopbackServer(answer: .refuse)
            defer { server.stop() }
            let logs = LogCapture()
            let started = ContinuousClock.now
            let error = try await withDeadline(.seconds(30), "the connection to be refused") {
                try await LiveKitClient.withClient(library: library, logger: logs.logger("livekit")) { client in
                    do {
                        _ = try await client.connect(url: "ws://127.0.0.1:\(server.port)", token: RealLibrary.token)
                        return LiveKitError?.none
                    } catch let error as LiveKitError {
                        return error
                    }
                }
            }
            let elapsed = ContinuousClock.now - started
            let failure = try #require(error, "a refusing server let the client join")
            #expect(failure.isAuthentication, "\(failure)")
            #expect(elapsed < .seconds(5), "took \(elapsed)")
            #expect(!failure.description.contains(RealLibrary.token.reveal()))
            #expect(!logs.all.contains { $0.contains("bm90LWEtcmVhbC1zaWduYXR1cmU") }, "the token reached a log line")
            let requests = server.requests
            #expect(!requests.isEmpty)
            #expect(
                requests.allSatisfy {
                    $0.lowercased().contains("authorization: bearer \(RealLibrary.token.reveal())".lowercased())
                }
            )
            #expect(
                requests.allSatisfy {
                    !($0.split(separator: "\r\n").first ?? "").contains("bm90LWEtcmVhbC1zaWduYXR1cmU")
                }
            )
        }

        /// An audio source takes 20 ms frames, paced as a capture would be, answering each once it is queued; its queue
        /// can be emptied; frames of the wrong shape are refused before they reach the library.
        @Test func theAudioSourceAcceptsFrames() async throws {
            let library = try RealLibrary.open()
            try await withDeadline(.seconds(30), "frames to be accepted") {
                try await LiveKitClient.withClient(library: library) { client in
                    let source = try client.makeAudioSource(
                        sampleRate: 48_000,
                        channels: 1,
                        queueDuration: .milliseconds(500)
                    )
                    let frame = TestSignals.tone(seconds: 0.02, frequency: 440, sampleRate: 48_000)
                    let clock = ContinuousClock()
                    var next = clock.now
                    for _ in 0..<10 {
                        try await source.capture(frame, timeout: .seconds(5))
                        next += .milliseconds(20)
                        try await clock.sleep(until: next)
                    }
                    try source.clearQueue()
                    let stereo = try client.makeAudioSource(sampleRate: 16_000, channels: 2)
                    await #expect(throws: LiveKitError.self) { try await stereo.capture([1, 2, 3]) }
                    await #expect(throws: LiveKitError.self) {
                        try await source.capture([Int16](repeating: 0, count: 48_001))
                    }
                    #expect(throws: LiveKitError.self) { _ = try client.makeAudioSource(sampleRate: 1000) }
                }
            }
        }

        /// WebRTC's audio processing module processes 10 ms frames in place, near and far, and takes a delay.
        @Test func theAudioProcessorProcessesTenMillisecondFrames() async throws {
            let library = try RealLibrary.open()
            try await withDeadline(.seconds(30), "frames to be processed") {
                try await LiveKitClient.withClient(library: library) { client in
                    let processor = try client.makeAudioProcessor()
                    try processor.setStreamDelay(.milliseconds(40))
                    let tone = TestSignals.tone(seconds: 1, frequency: 300, sampleRate: 16_000)
                    var changed = false
                    for index in 0..<100 {
                        var far = Array(tone[(index * 160)..<((index + 1) * 160)])
                        try processor.processReverse(&far, sampleRate: 16_000, channels: 1)
                        var near = far
                        let before = near
                        try processor.process(&near, sampleRate: 16_000, channels: 1)
                        if near != before { changed = true }
                    }
                    #expect(changed, "the processor never changed a frame")
                    var wrong = [Int16](repeating: 0, count: 100)
                    #expect(throws: LiveKitError.self) {
                        try processor.process(&wrong, sampleRate: 16_000, channels: 1)
                    }
                }
            }
        }

        /// The resampler changes 10 ms frames of 48 kHz mono into 16 kHz mono, keeping the tone; other frame lengths
        /// are refused.
        @Test func theResamplerChangesTheRate() async throws {
            let library = try RealLibrary.open()
            try await withDeadline(.seconds(30), "frames to be resampled") {
                try await LiveKitClient.withClient(library: library) { client in
                    let resampler = try client.makeResampler()
                    let tone = TestSignals.tone(seconds: 1, frequency: 440, sampleRate: 48_000)
                    var output: [Int16] = []
                    for index in 0..<100 {
                        let slice = Array(tone[(index * 480)..<((index + 1) * 480)])
                        let converted = try resampler.convert(
                            LiveKitAudioFrame(samples: slice, sampleRate: 48_000, channels: 1),
                            sampleRate: 16_000,
                            channels: 1
                        )
                        #expect(converted.sampleRate == 16_000 && converted.channels == 1)
                        #expect(converted.samples.count == 160)
                        output += converted.samples
                    }
                    // 440 Hz over the last half second: about 220 upward zero crossings.
                    let tail = output.suffix(8000)
                    let crossings = zip(tail, tail.dropFirst()).filter { $0 < 0 && $1 >= 0 }.count
                    #expect((215...225).contains(crossings), "\(crossings) crossings")
                    #expect(throws: LiveKitError.self) {
                        _ = try resampler.convert(
                            LiveKitAudioFrame(samples: Array(tone[0..<4800]), sampleRate: 48_000, channels: 1),
                            sampleRate: 16_000,
                            channels: 1
                        )
                    }
                }
            }
        }
    }

    /// The boundary itself, fed through the library's callback path (``CallbackRouting/deliver(_:_:)``, what the Rust
    /// threads call) with events made here, beside the real library's own: nothing here waits by sleeping — a real
    /// answer queued after the made-up events shows they were handled.
    @Suite struct Boundary {
        /// Calls the callback as the library would, with `bytes`.
        static func deliver(_ bytes: [UInt8]) {
            bytes.withUnsafeBufferPointer { CallbackRouting.deliver($0.baseAddress, $0.count) }
        }

        static func encoded(_ event: Livekit_Proto_FfiEvent) throws -> [UInt8] { try event.serializedBytes() }

        /// One 20 ms frame into a fresh source: its answer comes through the same queue, after what was delivered.
        static func captureOnce(_ client: LiveKitClient) async throws {
            let source = try client.makeAudioSource(sampleRate: 48_000)
            try await source.capture([Int16](repeating: 0, count: 960), timeout: .seconds(5))
        }

        /// Garbage, an event too large for the queue and an answer nobody waits for are counted and skipped; the
        /// client carries on.
        @Test func unreadableOversizedAndUnclaimedEventsAreCountedAndSkipped() async throws {
            let library = try RealLibrary.open()
            var settings = LiveKitClient.Configuration()
            settings.eventByteCapacity = 64 << 10
            let configuration = settings
            let statistics = try await withDeadline(.seconds(30), "the client to skip bad events") {
                try await LiveKitClient.withClient(library: library, configuration: configuration) { client in
                    Self.deliver([0xFF, 0xFF, 0xFF, 0x0F, 0x01, 0x02])
                    Self.deliver([UInt8](repeating: 0x0A, count: 100 << 10))
                    var stray = Livekit_Proto_FfiEvent()
                    var answer = Livekit_Proto_SetLocalAttributesCallback()
                    answer.asyncID = 12_345
                    stray.setLocalAttributes = answer
                    Self.deliver(try Self.encoded(stray))
                    try await Self.captureOnce(client)
                    return client.statistics
                }
            }
            #expect(statistics.undecodable == 1, "\(statistics)")
            #expect(statistics.tooLarge == 1, "\(statistics)")
            #expect(statistics.unclaimed >= 1, "\(statistics)")
        }

        /// Ten thousand log batches at once: their own queue sheds the oldest, and an answer that comes after them
        /// still reaches its waiter.
        @Test func aFloodOfLogsCannotPushOutAnAnswer() async throws {
            let library = try RealLibrary.open()
            var settings = LiveKitClient.Configuration()
            settings.logCapacity = 64
            let configuration = settings
            let statistics = try await withDeadline(.seconds(30), "the capture to be answered after the flood") {
                try await LiveKitClient.withClient(library: library, configuration: configuration) { client in
                    var record = Livekit_Proto_LogRecord()
                    record.level = .logTrace
                    record.target = "libwebrtc"
                    record.message = String(repeating: "chatter ", count: 32)
                    var batch = Livekit_Proto_LogBatch()
                    batch.records = [record]
                    var event = Livekit_Proto_FfiEvent()
                    event.logs = batch
                    let bytes = try Self.encoded(event)
                    for _ in 0..<10_000 { Self.deliver(bytes) }
                    try await Self.captureOnce(client)
                    return client.statistics
                }
            }
            // At most 64 batches waited at once (each costs at least its share, 1 MiB / 64), and the oldest went.
            #expect(statistics.logs.highWater <= 1 << 20, "\(statistics)")
            #expect(statistics.logs.dropped > 0, "\(statistics)")
            #expect(statistics.logs.queued >= 10_000, "\(statistics)")
            #expect(statistics.events.dropped == 0, "\(statistics)")
        }

        /// A panic from the library ends the client's usefulness at once: what waits fails, and every later request is
        /// refused, saying so; the next client starts afresh.
        @Test func aPanicFailsWhatWaitsAndWhatComes() async throws {
            let library = try RealLibrary.open()
            try await withDeadline(.seconds(30), "the panic to reach the waiters") {
                try await LiveKitClient.withClient(library: library, logger: LogCapture().logger("livekit")) { client in
                    var event = Livekit_Proto_FfiEvent()
                    var panic = Livekit_Proto_Panic()
                    panic.message = "made up for the test"
                    event.panic = panic
                    Self.deliver(try Self.encoded(event))
                    let error = await #expect(throws: LiveKitError.self) { try await Self.captureOnce(client) }
                    #expect(error?.isPanic == true, "\(String(describing: error))")
                    let later = #expect(throws: LiveKitError.self) {
                        _ = try client.makeAudioSource(sampleRate: 48_000)
                    }
                    #expect(later?.isPanic == true)
                }
            }
            try await withDeadline(.seconds(30), "a new client after the panic") {
                try await LiveKitClient.withClient(library: library) { client in try await Self.captureOnce(client) }
            }
        }
    }
}

/// A loopback port nothing listens on: bound, read and closed again.
func closedLoopbackPort() throws -> Int {
    let socketFD = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    try #require(socketFD >= 0)
    defer { close(socketFD) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(socketFD, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    try #require(bound == 0)
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let named = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socketFD, $0, &length) }
    }
    try #require(named == 0)
    return Int(UInt16(bigEndian: address.sin_port))
}

/// A server on loopback that answers every HTTP request `401 Unauthorized` (as a LiveKit server does for a bad
/// token, on the WebSocket upgrade and on `/rtc/validate`), or accepts connections and never answers; it keeps the
/// requests' heads. Runs on a thread of its own until ``stop()``.
final class LoopbackServer: Sendable {
    enum Answer: Sendable {
        /// `401 Unauthorized`, then close.
        case refuse
        /// Nothing: the connection stays open, silent, until the server stops.
        case silence
    }

    let port: Int
    private let listener: Int32
    private let shared = Shared()
    private let thread: DeviceThread?

    /// What the server's thread and its owner share.
    private final class Shared: Sendable {
        let stopped = Atomic<Bool>(false)
        let heads = Mutex<[String]>([])
    }

    init(answer: Answer) throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(listener >= 0)
        var yes: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        try #require(bound == 0 && listen(listener, 16) == 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        self.listener = listener
        port = Int(UInt16(bigEndian: address.sin_port))
        let shared = self.shared
        thread = try DeviceThread(name: "loopback-server") {
            Self.serve(listener, answer: answer, shared: shared)
        }
    }

    /// The heads (request line and headers) of the requests so far.
    var requests: [String] { shared.heads.withLock { $0 } }

    func stop() {
        shared.stopped.store(true, ordering: .relaxed)
        thread?.join()
        close(listener)
    }

    private static func serve(_ listener: Int32, answer: Answer, shared: Shared) {
        var silent: [Int32] = []
        defer { silent.forEach { close($0) } }
        while !shared.stopped.load(ordering: .relaxed) {
            var poller = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 50) > 0 else { continue }
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { continue }
            if case .silence = answer {
                silent.append(connection)
                continue
            }
            var head: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while head.count < 16_384 {
                var ready = pollfd(fd: connection, events: Int16(POLLIN), revents: 0)
                guard poll(&ready, 1, 2000) > 0 else { break }
                let count = read(connection, &buffer, buffer.count)
                guard count > 0 else { break }
                head += buffer[0..<count]
                if String(decoding: head, as: UTF8.self).contains("\r\n\r\n") { break }
            }
            shared.heads.withLock { $0.append(String(decoding: head, as: UTF8.self)) }
            let body = "invalid token"
            let response =
                "HTTP/1.1 401 Unauthorized\r\nContent-Type: text/plain\r\nContent-Length: \(body.utf8.count)\r\n"
                + "Connection: close\r\n\r\n\(body)"
            _ = Array(response.utf8).withUnsafeBytes { write(connection, $0.baseAddress, $0.count) }
            close(connection)
        }
    }
}
