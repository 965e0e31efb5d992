import Foundation
import HarkApp
import HarkCore
import HarkHelperProcess
import HarkLiveKitAgent
import HarkLiveKitWire
import HarkTestKit
import Logging
import Synchronization
import Testing

/// A helper program on a socket pair: what goes in comes back, and how it ends.
@Suite struct HelperProcessTests {
    /// Bytes received by a link, awaited.
    final class Received: Sendable {
        let state = Mutex<(bytes: [UInt8], closed: String??)>(([], nil))

        func receive(_ incoming: SocketLink.Incoming) {
            state.withLock { state in
                switch incoming {
                case .bytes(let bytes): state.bytes += bytes
                case .closed(let reason): state.closed = .some(reason)
                }
            }
        }

        func wait(_ what: String, until condition: @escaping @Sendable ((bytes: [UInt8], closed: String??)) -> Bool)
            async throws
        {
            try await withDeadline(.seconds(10), what) {
                while !condition(self.state.withLock { $0 }) { try await Task.sleep(for: .milliseconds(5)) }
            }
        }
    }

    @Test func whatGoesInComesBackAndClosingEndsTheChild() async throws {
        let received = Received()
        let child = try HelperProcess.spawn("/bin/sh", arguments: ["-c", "exec cat <&3 >&3"], name: "test-link") {
            received.receive($0)
        }
        let message = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        #expect(child.link.send(message))
        try await received.wait("the echo") { $0.bytes.count >= message.count }
        #expect(received.state.withLock { $0.bytes } == message)
        // Closing this side: cat reads its end, exits, and is reaped.
        let exit = await child.end(grace: .seconds(5))
        #expect(exit == .exited(0))
        #expect(!child.link.send([1]), "nothing goes out after the end")
    }

    @Test func aChildThatOutlivesItsGraceIsKilledAndTheOtherSideSeesItsEnd() async throws {
        let received = Received()
        let child = try HelperProcess.spawn("/bin/sh", arguments: ["-c", "exec sleep 60"], name: "test-link") {
            received.receive($0)
        }
        let clock = ContinuousClock()
        let started = clock.now
        let exit = await child.waitForExit(within: .milliseconds(300))
        #expect(exit == .signalled(SIGKILL))
        #expect(clock.now - started < .seconds(5))
        // A child that exits by itself: its end reaches this side as a close without a failure.
        let quitter = Received()
        let quick = try HelperProcess.spawn("/bin/sh", arguments: ["-c", "exit 3"], name: "test-link") {
            quitter.receive($0)
        }
        try await quitter.wait("the close") { $0.closed != nil }
        #expect(quitter.state.withLock { $0.closed } == .some(nil))
        #expect(await quick.waitForExit(within: .seconds(5)) == .exited(3))
    }

    @Test func aProgramThatIsNotThereIsAnErrorAndAStalledPeerIsBounded() async throws {
        let error = #expect(throws: HelperProcessError.self) {
            try HelperProcess.spawn("/nonexistent/hark-livekit", name: "test-link") { _ in }
        }
        #expect(error?.description.contains("posix_spawn") == true)
        // A peer that never reads: sends are refused once the bound is reached, never block.
        var ends: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &ends) == 0)
        defer { close(ends[1]) }
        let link = try SocketLink(descriptor: ends[0], name: "test-link", maximumPending: 64 << 10) { _ in }
        var refused = false
        for _ in 0..<1000 where link.send([UInt8](repeating: 1, count: 16 << 10)) == false {
            refused = true
            break
        }
        #expect(refused)
        #expect(link.pendingBytes <= 64 << 10)
        link.close()
        link.join()
    }
}

extension HelperProcess {
    /// Closes this side and waits for the child.
    func end(grace: Duration) async -> Exit {
        link.close()
        return await waitForExit(within: grace)
    }
}

/// The session and its helper: a helper that is missing, broken, of another version or killed.
@Suite(.serialized) struct LiveKitHelperFailureTests {
    /// A session that joins through `helper` once (a one-shot run), its failure returned.
    func failure(of helper: LiveKitHelperProgram) async throws -> SessionFailure? {
        var configuration = LiveKitAgentConfiguration(
            helper: helper,
            tokens: .mint(
                serverURL: "ws://127.0.0.1:9",
                apiKey: "key",
                apiSecret: Secret("secret"),
                lifetime: .seconds(60)
            )
        )
        configuration.link = LinkSettings(giveUpOnRejection: true, maxConsecutiveFailures: 1)
        configuration.helperStartTimeout = .seconds(5)
        let logs = LogCapture()
        let session = LiveKitAgentSession(
            configuration: configuration,
            http: NetworkClients.nio(logger: logs.logger()).http(nil, false),
            logger: logs.logger()
        )
        do {
            try await withDeadline(.seconds(30), "the session to give up") { try await session.run() }
            return nil
        } catch let failure as SessionFailure {
            #expect(!logs.all.contains { $0.contains("secret") && !$0.contains("api_secret") })
            return failure
        }
    }

    /// A shell script standing in for the helper.
    func script(_ body: String) throws -> LiveKitHelperProgram {
        let path = FileManager.default.temporaryDirectory.path + "/hark-lk-helper-\(UUID().uuidString).sh"
        try Data(("#!/bin/sh\n" + body + "\n").utf8).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: path)
        return LiveKitHelperProgram(path: path)
    }

    @Test func aHelperThatSpeaksGarbageOrAnotherVersionIsAClearConfigurationError() async throws {
        let garbage = try script("printf 'garbage, not frames' >&3; sleep 5")
        defer { try? FileManager.default.removeItem(atPath: garbage.path) }
        let noise = try #require(try await failure(of: garbage))
        #expect(noise.kind == .configuration)
        #expect(noise.message.contains("did not start"), "\(noise.message)")
        #expect(noise.message.contains("larger than the protocol allows"), "\(noise.message)")
        // A hello of version 99: 14 bytes after the length (type, magic, version, an empty library name).
        let newer = try script(#"printf '\016\000\000\000AHARK-LK\143\000\000\000\000\000' >&3; sleep 5"#)
        defer { try? FileManager.default.removeItem(atPath: newer.path) }
        let version = try #require(try await failure(of: newer))
        #expect(version.kind == .configuration)
        #expect(version.message.contains("version 99"), "\(version.message)")
        #expect(version.message.contains("same release"), "\(version.message)")
        let quits = try script("exit 3")
        defer { try? FileManager.default.removeItem(atPath: quits.path) }
        let exited = try #require(try await failure(of: quits))
        #expect(exited.message.contains("exited with status 3"), "\(exited.message)")
    }

    @Test func aMissingHelperOrLibraryNamesWhatToInstall() throws {
        let helper = #expect(throws: BackendSetupError.self) {
            try LiveKitHelperProgram.locate(environment: [LiveKitHelperProgram.variable: "/nonexistent/hark-livekit"])
        }
        #expect(helper?.description.contains("hark-livekit package") == true, "\(String(describing: helper))")
        #expect(helper?.description.contains("/nonexistent/hark-livekit") == true)
        guard let built = HelperProgram.locate("hark-livekit", variable: "UNSET", environment: [:]) else { return }
        let empty = FileManager.default.temporaryDirectory.path + "/hark-lk-empty-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: empty) }
        let library = #expect(throws: BackendSetupError.self) {
            try LiveKitHelperProgram.locate(environment: [LiveKitHelperProgram.variable: built, "HARK_LIB_DIR": empty])
        }
        #expect(library?.description.contains("liblivekit_ffi.so") == true, "\(String(describing: library))")
        #expect(library?.description.contains(empty) == true)
    }

    @Test func configCheckSaysSoWhenTheHelperIsNotInstalled() throws {
        let folder = FileManager.default.temporaryDirectory.path + "/hark-lk-config-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/hark.yaml"
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path
        let text = """
            board: host
            board_dir: \(root)/board
            backend: livekit
            livekit:
              token_url: https://example.com/token
            """
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        let result = ConfigCheck.run(
            path: path,
            environment: [LiveKitHelperProgram.variable: "/nonexistent/hark-livekit"],
            systemRoot: folder
        )
        #expect(result.exitCode == 2)
        #expect(result.output.contains("helper (hark-livekit) is not installed"), "\(result.output)")
    }

    @Test(.enabled(if: LiveKitStandIn.available, "\(LiveKitStandIn.missing)"))
    func theHelperLoadsTheLibraryForTheDoctorAndSaysWhyWhenItCannot() async throws {
        let helper = try LiveKitHelperProgram.locate(environment: ProcessInfo.processInfo.environment)
        let library = try await helper.probe().get()
        #expect(library.hasPrefix("livekit 1.2.1 ("), "\(library)")
        let empty = FileManager.default.temporaryDirectory.path + "/hark-lk-empty-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: empty) }
        let broken = LiveKitHelperProgram(path: helper.path, environment: ["HARK_LIB_DIR": empty])
        guard case .failure(let error) = await broken.probe() else {
            Issue.record("a helper without its library greeted as if it had it")
            return
        }
        #expect(error.description.contains("not installed"), "\(error)")
    }
}
