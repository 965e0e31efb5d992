import Foundation
import HarkLiveSimulator
import HarkSimulatorKit
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization
import Testing

/// A raw TCP server on 127.0.0.1 (TLS optional) that runs one script per connection: the misbehaving peers the
/// network adapters must survive. It counts connections and notes when each one closed, so a test can await
/// "the client let go of the socket" with a deadline.
final class HostileServer: Sendable {
    /// The port it listens on.
    let port: Int
    private let listener: any Channel
    private let task: Task<Void, Never>
    private let events: Events

    private init(port: Int, listener: any Channel, task: Task<Void, Never>, events: Events) {
        self.port = port
        self.listener = listener
        self.task = task
        self.events = events
    }

    /// Starts a server running `script` for each connection (with `tls`, behind a TLS handshake).
    static func start(
        tls: TLSConfiguration? = nil,
        _ script: @escaping @Sendable (Peer) async throws -> Void
    ) async throws -> HostileServer {
        let context = try tls.map { try NIOSSLContext(configuration: $0) }
        let events = Events()
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .bind(host: "127.0.0.1", port: 0) { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let context {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    }
                    return try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        let listener = server.channel
        let port = try #require(listener.localAddress?.port)
        let task = Task<Void, Never> {
            await withDiscardingTaskGroup { group in
                try? await server.executeThenClose { connections in
                    for try await connection in connections {
                        let index = events.accepted()
                        connection.channel.closeFuture.whenComplete { _ in events.closed(index) }
                        group.addTask {
                            try? await connection.executeThenClose { inbound, outbound in
                                let peer = Peer(channel: connection.channel, inbound: inbound, outbound: outbound)
                                try await script(peer)
                            }
                        }
                    }
                }
            }
        }
        return HostileServer(port: port, listener: listener, task: task, events: events)
    }

    /// How many connections were accepted.
    var accepted: Int { events.snapshot.accepted }

    /// Waits until `count` connections were accepted.
    func waitForConnections(_ count: Int) async {
        await events.wait { $0.accepted >= count }
    }

    /// Waits until `count` connections have closed.
    func waitForClosed(_ count: Int) async {
        await events.wait { $0.closedAt.count >= count }
    }

    /// Stops listening and ends every connection.
    func stop() async {
        listener.close(promise: nil)
        task.cancel()
        await task.value
    }
}

/// What the server knows about its connections.
private final class Events: Sendable {
    struct Snapshot {
        var accepted = 0
        var closedAt: [Int: ContinuousClock.Instant] = [:]
    }

    private typealias Waiter = (ready: @Sendable (Snapshot) -> Bool, continuation: CheckedContinuation<Void, Never>)
    private let state = Mutex((snapshot: Snapshot(), waiters: [Waiter]()))

    var snapshot: Snapshot { state.withLock { $0.snapshot } }

    func accepted() -> Int {
        update { $0.accepted += 1 }
        return snapshot.accepted
    }

    func closed(_ index: Int) {
        update { $0.closedAt[index] = ContinuousClock.now }
    }

    func wait(until ready: @escaping @Sendable (Snapshot) -> Bool) async {
        await withCheckedContinuation { continuation in
            let done = state.withLock { state -> Bool in
                if ready(state.snapshot) { return true }
                state.waiters.append((ready, continuation))
                return false
            }
            if done { continuation.resume() }
        }
    }

    private func update(_ change: (inout Snapshot) -> Void) {
        let ready = state.withLock { state in
            change(&state.snapshot)
            let snapshot = state.snapshot
            let ready = state.waiters.filter { $0.ready(snapshot) }
            state.waiters.removeAll { $0.ready(snapshot) }
            return ready
        }
        for waiter in ready { waiter.continuation.resume() }
    }
}

/// One connection, as the server's script sees it.
struct Peer: Sendable {
    let channel: any Channel
    private let reader: Reader
    let outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>

    init(
        channel: any Channel,
        inbound: NIOAsyncChannelInboundStream<ByteBuffer>,
        outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>
    ) {
        self.channel = channel
        self.reader = Reader(inbound.makeAsyncIterator())
        self.outbound = outbound
    }

    /// Reads the request head (up to the blank line) and returns it.
    func readHead() async throws -> String {
        try await reader.readHead()
    }

    /// Writes `bytes`, then lets other tasks run: a script that writes in a loop must not hold a thread of the
    /// shared pool (a write that the socket takes at once does not suspend).
    func write(_ bytes: [UInt8]) async throws {
        try await outbound.write(ByteBuffer(bytes: bytes))
        await Task.yield()
    }

    /// Writes `text` as UTF-8 (see ``write(_:)-([UInt8])``).
    func write(_ text: String) async throws {
        try await outbound.write(ByteBuffer(string: text))
        await Task.yield()
    }

    /// Reads and drops everything until the client closes the connection.
    func readUntilClosed() async {
        await reader.drain()
    }

    /// Answers a WebSocket upgrade request with 101 and the right `Sec-WebSocket-Accept`.
    func acceptUpgrade() async throws {
        let head = try await readHead()
        let key =
            head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("sec-websocket-key:") }
            .map { $0.dropFirst("sec-websocket-key:".count).trimmingCharacters(in: .whitespaces) } ?? ""
        let digest = SHA1.hash((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8)
        try await write(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Accept: \(Data(digest).base64EncodedString())\r\n\r\n"
        )
    }

    /// Answers the request with `status` and an empty body, then closes.
    func answer(status: Int) async throws {
        _ = try await readHead()
        try await write("HTTP/1.1 \(status) Whatever\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    }

    /// Reads one client frame (masked): its opcode and unmasked payload; nil at the end of the connection.
    func readFrame() async throws -> (opcode: UInt8, payload: [UInt8])? {
        try await reader.readFrame()
    }

    /// An unmasked server frame.
    static func frame(opcode: UInt8, _ payload: [UInt8], fin: Bool = true) -> [UInt8] {
        var bytes: [UInt8] = [(fin ? 0x80 : 0) | opcode]
        switch payload.count {
        case ..<126: bytes.append(UInt8(payload.count))
        case ..<65536: bytes += [126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        default: bytes += [127] + (0..<8).reversed().map { UInt8((payload.count >> ($0 * 8)) & 0xFF) }
        }
        return bytes + payload
    }
}

/// The server side's reading, for one task at a time.
private final class Reader: @unchecked Sendable {
    private var iterator: NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator
    private var pending: [UInt8] = []

    init(_ iterator: NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator) {
        self.iterator = iterator
    }

    private func fill() async throws -> Bool {
        guard let buffer = try await iterator.next() else { return false }
        pending += buffer.readableBytesView
        return true
    }

    func readHead() async throws -> String {
        let end: [UInt8] = Array("\r\n\r\n".utf8)
        while true {
            if let range = pending.firstRange(of: end) {
                let head = String(decoding: pending[..<range.lowerBound], as: UTF8.self)
                pending.removeSubrange(..<range.upperBound)
                return head
            }
            guard try await fill() else { throw CancellationError() }
        }
    }

    func readFrame() async throws -> (opcode: UInt8, payload: [UInt8])? {
        func need(_ count: Int) async throws -> Bool {
            while pending.count < count { guard try await fill() else { return false } }
            return true
        }
        guard try await need(2) else { return nil }
        let opcode = pending[0] & 0x0F
        var length = Int(pending[1] & 0x7F)
        var offset = 2
        if length == 126 {
            guard try await need(4) else { return nil }
            length = Int(pending[2]) << 8 | Int(pending[3])
            offset = 4
        } else if length == 127 {
            guard try await need(10) else { return nil }
            length = pending[2..<10].reduce(0) { $0 << 8 | Int($1) }
            offset = 10
        }
        guard try await need(offset + 4 + length) else { return nil }
        let mask = Array(pending[offset..<offset + 4])
        let payload = pending[(offset + 4)..<(offset + 4 + length)].enumerated().map { $1 ^ mask[$0 % 4] }
        pending.removeFirst(offset + 4 + length)
        return (opcode, payload)
    }

    func drain() async {
        pending = []
        while (try? await iterator.next()) ?? nil != nil {}
    }
}

/// Certificates for the tests: a CA, and a server certificate for `127.0.0.1` and/or `localhost`.
enum TestCertificates {
    /// A CA and a leaf for the given names and addresses, with the CA written to a temporary PEM file.
    static func make(dnsNames: [String], ipAddresses: [String]) throws -> (server: TLSConfiguration, caFile: String) {
        let certificates = try SimulatorCertificates.generate(dnsNames: dnsNames, ipAddresses: ipAddresses)
        let path = FileManager.default.temporaryDirectory.path + "/hark-net-ca-\(UUID().uuidString).pem"
        try certificates.caPEM.write(toFile: path, atomically: true, encoding: .utf8)
        return (try certificates.serverConfiguration(), path)
    }
}

/// A count several tasks add to.
final class Counter: Sendable {
    private let value = Mutex(0)

    /// The count now.
    var current: Int { value.withLock { $0 } }

    /// Adds `amount`; returns the new count.
    @discardableResult
    func add(_ amount: Int = 1) -> Int {
        value.withLock {
            $0 += amount
            return $0
        }
    }
}

/// `operation`'s result, or ``Overdue`` once `timeout` has passed. Unlike a task group, it does not wait for an
/// operation that ignores cancellation: it cancels it and returns, so a client that hangs fails the test
/// instead of hanging it.
func within<T: Sendable>(
    _ timeout: Duration,
    _ what: String,
    _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    let race = Race<T>()
    let work = Task {
        do {
            race.finish(.success(try await operation()))
        } catch {
            race.finish(.failure(error))
        }
    }
    let timer = Task {
        try? await Task.sleep(for: timeout)
        race.finish(.failure(Overdue(what: what, timeout: timeout)))
    }
    defer {
        timer.cancel()
        work.cancel()
    }
    return try await withTaskCancellationHandler {
        try await race.value()
    } onCancel: {
        race.finish(.failure(CancellationError()))
    }
}

/// Something awaited in a test did not happen in time.
struct Overdue: Error, CustomStringConvertible {
    var what: String
    var timeout: Duration
    var description: String { "\(what) did not happen within \(timeout)" }
}

/// The first of several results, for one waiter.
private final class Race<T: Sendable>: Sendable {
    private let state = Mutex<(result: Result<T, any Error>?, waiter: CheckedContinuation<T, any Error>?)>((nil, nil))

    func finish(_ result: Result<T, any Error>) {
        let waiter = state.withLock { state -> CheckedContinuation<T, any Error>? in
            guard state.result == nil else { return nil }
            state.result = result
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(with: result)
    }

    func value() async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let result = state.withLock { state -> Result<T, any Error>? in
                if state.result == nil { state.waiter = continuation }
                return state.result
            }
            if let result { continuation.resume(with: result) }
        }
    }
}
