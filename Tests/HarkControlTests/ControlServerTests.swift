import Foundation
import Glibc
import HarkControl
import HarkCore
import HarkTestKit
import Synchronization
import Testing

/// Answers `echo` with its arguments, `big` with a reply of `size` bytes, anything else as unknown.
struct EchoService: ControlService {
    func handle(_ request: ControlRequest) async -> ControlReply {
        switch request.op {
        case "echo": ControlReply(ok: true, message: "echo", data: .object(request.args))
        case "big":
            ControlReply(ok: true, message: String(repeating: "x", count: Int(request.args["size"]?.numberValue ?? 0)))
        default: .failure("\(request.op) is not supported by this daemon")
        }
    }
}

/// A raw client on a blocking Unix socket, as a hostile program would hold one.
final class RawClient {
    let fd: Int32

    init(path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard result == 0 else {
            close(fd)
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
    }

    deinit { close(fd) }

    /// Sends `bytes`; false once the server has closed the connection.
    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let count = bytes[offset...].withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            guard count > 0 else { return false }
            offset += count
        }
        return true
    }

    @discardableResult
    func send(_ text: String) -> Bool { send(Array(text.utf8)) }

    /// Reads up to the first newline, or until the server closes, waiting at most `timeout` for each read.
    func line(timeout: Duration = .seconds(10)) -> (line: String?, closed: Bool) {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, Int32(timeout.components.seconds * 1000)) > 0 else { return (nil, false) }
            let count = recv(fd, &buffer, buffer.count, 0)
            if count <= 0 { return (bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self), true) }
            bytes += buffer[..<count]
            if let newline = bytes.firstIndex(of: UInt8(ascii: "\n")) {
                return (String(decoding: bytes[..<newline], as: UTF8.self), false)
            }
        }
    }

    /// Waits up to `timeout` for the server to close its end (reads nothing: POLLRDHUP / POLLHUP).
    func closedByServer(within timeout: Duration) -> Bool {
        let readHangUp: Int16 = 0x2000  // POLLRDHUP, which the C library module declares only under _GNU_SOURCE
        var poller = pollfd(fd: fd, events: readHangUp, revents: 0)
        let ready = poll(&poller, 1, Int32(timeout.components.seconds * 1000))
        return ready > 0 && poller.revents & (readHangUp | Int16(POLLHUP) | Int16(POLLERR)) != 0
    }
}

func reply(_ line: String?) -> ControlReply? {
    line.flatMap { ControlReplyLine.decode(Array($0.utf8)) }
}

/// A folder of its own for each test's socket.
func scratchFolder() throws -> String {
    let path = "/tmp/hark-control-\(UUID().uuidString.prefix(8))"
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
    return path
}

@Suite(.timeLimit(.minutes(1))) struct ControlServerTests {
    @Test func theSocketIsTheUsersWithMode0660AndServesRequests() async throws {
        let folder = try scratchFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/control.sock"
        let logs = LogCapture()
        // A umask that would leave the socket open to everyone: the mode is set regardless.
        let old = umask(0)
        defer { umask(old) }
        let server = try await ControlServer.open(path: path, service: EchoService(), logger: logs.logger())
        var status = stat()
        #expect(lstat(path, &status) == 0)
        #expect(status.st_mode & S_IFMT == S_IFSOCK)
        #expect(status.st_mode & 0o7777 == 0o660, "mode \(String(status.st_mode & 0o7777, radix: 8))")
        #expect(status.st_uid == geteuid())
        #expect(status.st_gid == getegid())
        #expect(server.replacedStale == false)

        let answer = try await ControlClient(path: path).send(ControlRequest(op: "echo", args: ["n": 3]))
        #expect(answer == ControlReply(ok: true, message: "echo", data: ["n": 3]))
        let unknown = try await ControlClient(path: path).send(ControlRequest(op: "timers.list"))
        #expect(unknown == .failure("timers.list is not supported by this daemon"))
        // The client's credentials (SO_PEERCRED) are logged with its request.
        #expect(
            logs.all.contains { $0.contains("control: echo from pid \(getpid()), uid \(geteuid())") },
            "\(logs.all)"
        )
        // The server names itself the same way to a client.
        #expect(try ControlClient(path: path).server().get()?.pid == getpid())

        await server.close()
        #expect(lstat(path, &status) != 0, "the socket file outlived its server")
    }

    @Test func hostileClientsAreCutWhileAWellBehavedOneIsServed() async throws {
        let folder = try scratchFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/control.sock"
        var limits = ControlLimits()
        limits.readDeadline = .seconds(1)
        limits.writeDeadline = .seconds(1)
        let logs = LogCapture()
        let server = try await ControlServer.open(
            path: path,
            service: EchoService(),
            limits: limits,
            logger: logs.logger()
        )
        defer { Task { await server.close() } }

        // A huge line: refused at the bound with a reason, then cut, though it keeps sending.
        let huge = try RawClient(path: path)
        let flood = [UInt8](repeating: UInt8(ascii: "a"), count: 64 * 1024)
        var sent = 0
        while sent < 4 << 20, huge.send(flood) { sent += flood.count }
        let hugeReply = huge.line()
        #expect(reply(hugeReply.line)?.message == "request longer than 16384 bytes", "\(hugeReply)")
        #expect(huge.closedByServer(within: .seconds(5)))
        #expect(sent < 4 << 20, "the server kept reading a flood (\(sent) bytes taken)")

        // Malformed JSON and deep nesting: a reason each, then cut.
        let malformed = try RawClient(path: path)
        malformed.send("{\"op\": \"echo\", \"args\": {\n")
        #expect(reply(malformed.line().line)?.message.hasPrefix("not a request") == true)
        #expect(malformed.closedByServer(within: .seconds(5)))
        let deep = try RawClient(path: path)
        deep.send("{\"op\":\"echo\",\"args\":{\"a\":" + String(repeating: "[", count: 10_000) + "\n")
        #expect(reply(deep.line().line)?.message == "request nested deeper than 8 levels")

        // A client that sends a byte at a time, slowly, and one that sends nothing: cut at the read deadline.
        let slow = try RawClient(path: path)
        let silent = try RawClient(path: path)
        let started = ContinuousClock.now
        let request = Array("{\"op\":\"echo\"}".utf8)
        var trickled = 0
        while trickled < request.count, slow.send([request[trickled]]) {
            trickled += 1
            // The client's own pace (a byte every 200 ms), not a wait for the server.
            try await Task.sleep(for: .milliseconds(200))
            if ContinuousClock.now - started > .seconds(4) { break }
        }
        let slowReply = slow.line()
        #expect(reply(slowReply.line)?.message.hasPrefix("no whole request within") == true, "\(slowReply)")
        #expect(ContinuousClock.now - started < .seconds(3), "the slow client was not cut at its deadline")
        #expect(silent.closedByServer(within: .seconds(5)))

        // A client that asks for large replies and never reads: cut at the write deadline.
        let deaf = try RawClient(path: path)
        for _ in 0..<8 { deaf.send("{\"op\":\"big\",\"args\":{\"size\":900000}}\n") }
        #expect(deaf.closedByServer(within: .seconds(5)))
        #expect(logs.all.contains { $0.contains("did not take its reply") }, "\(logs.all)")

        // Meanwhile, and after, a well-behaved client is served.
        let fine = try await ControlClient(path: path, timeout: .seconds(5)).send(
            ControlRequest(op: "echo", args: ["a": "b"])
        )
        #expect(fine.ok && fine.data == ["a": "b"])
    }

    @Test func clientsPastTheLimitAreToldTheDaemonIsBusy() async throws {
        let folder = try scratchFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/control.sock"
        var limits = ControlLimits()
        limits.clients = 3
        limits.readDeadline = .seconds(1)
        let server = try await ControlServer.open(
            path: path,
            service: EchoService(),
            limits: limits,
            logger: LogCapture().logger()
        )
        defer { Task { await server.close() } }
        let held = try (0..<3).map { _ in try RawClient(path: path) }
        // The three are counted once the server has accepted them: one asks and is answered.
        #expect(held[0].send("{\"op\":\"echo\"}\n"))
        #expect(reply(held[0].line().line)?.ok == true)
        let extra = try RawClient(path: path)
        let busy = extra.line()
        #expect(reply(busy.line)?.message == "the daemon is busy: 3 clients are connected; try again", "\(busy)")
        // Once the idle ones are cut at their deadline, a new client is served again.
        for client in held { #expect(client.closedByServer(within: .seconds(5))) }
        let served = try await withDeadline(.seconds(5), "a client after the idle ones were cut") {
            while true {
                let answer = try await ControlClient(path: path, timeout: .seconds(2)).send(ControlRequest(op: "echo"))
                if answer.ok { return answer }
                await Task.yield()
            }
        }
        #expect(served.ok)
    }

    @Test func aStaleSocketIsReplacedALiveOneIsRefusedAndOtherFilesAreLeftAlone() async throws {
        let folder = try scratchFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/control.sock"
        // A daemon that died: its socket file stays, nobody listens.
        let dead = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(dead, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        #expect(bound == 0)
        close(dead)

        // A client finds no daemon there, and says why.
        let error = await #expect(throws: ControlSocketError.self) {
            _ = try await ControlClient(path: path).send(ControlRequest(op: "status"))
        }
        #expect(error?.kind == .stale)
        #expect(error?.description.contains("stale") == true)

        let logs = LogCapture()
        let server = try await ControlServer.open(path: path, service: EchoService(), logger: logs.logger())
        #expect(server.replacedStale)
        #expect(logs.all.contains { $0.contains("replaced a stale control socket") })

        // A second daemon on the same socket: refused, naming the first; the first still serves.
        let second = await #expect(throws: ControlSocketError.self) {
            _ = try await ControlServer.open(path: path, service: EchoService(), logger: LogCapture().logger())
        }
        #expect(second?.kind == .inUse)
        #expect(second?.description.contains("process \(getpid())") == true, "\(second?.description ?? "")")
        #expect(try await ControlClient(path: path).send(ControlRequest(op: "echo")).ok)
        await server.close()

        // Something that is not a socket is never removed.
        let file = folder + "/not-a-socket"
        try "keep me".write(toFile: file, atomically: false, encoding: .utf8)
        let refused = await #expect(throws: ControlSocketError.self) {
            _ = try await ControlServer.open(path: file, service: EchoService(), logger: LogCapture().logger())
        }
        #expect(refused?.kind == .unusable)
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "keep me")
    }

    @Test func noDaemonIsAnErrorOfItsOwn() async throws {
        let folder = try scratchFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let error = await #expect(throws: ControlSocketError.self) {
            _ = try await ControlClient(path: folder + "/control.sock").send(ControlRequest(op: "status"))
        }
        #expect(error?.kind == .missing)
        #expect(error?.description == "no daemon: no control socket at \(folder)/control.sock")
        // A folder that does not exist is the same: no daemon.
        let missing = await #expect(throws: ControlSocketError.self) {
            _ = try await ControlClient(path: folder + "/nowhere/control.sock").send(ControlRequest(op: "status"))
        }
        #expect(missing?.kind == .missing)
    }

    @Test(.enabled(if: geteuid() != 0, "root may use any socket: run as another user to see the refusal"))
    func aUserOutsideTheGroupIsRefused() async throws {
        let folder = try scratchFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/control.sock"
        let server = try await ControlServer.open(
            path: path,
            service: EchoService(),
            mode: 0o000,
            logger: LogCapture().logger()
        )
        defer { Task { await server.close() } }
        let error = await #expect(throws: ControlSocketError.self) {
            _ = try await ControlClient(path: path).send(ControlRequest(op: "status"))
        }
        #expect(error?.kind == .permissionDenied)
    }
}
