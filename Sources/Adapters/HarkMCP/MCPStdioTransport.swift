import HarkCore
import HarkHelperProcess
import Logging
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A local MCP server started as a child process: newline-delimited JSON-RPC on its standard input and output (one
/// end of a socket pair, served by a thread of its own); its standard error is its log and goes where Hark's goes.
/// A line longer than the bound is dropped unread (up to its end). Closing ends the link and waits a moment for the
/// child, then kills it.
public final class MCPStdioTransport: MCPTransport {
    private let command: [String]
    private let environment: [String: String]
    private let name: String
    private let maximumLineBytes: Int
    private let logger: Logger
    private let state = Mutex<HelperProcess?>(nil)

    /// A transport that starts `command` (a program and its arguments; a program without `/` is looked up in
    /// `PATH`) with exactly `environment`; lines up to `maximumLineBytes`. `name` names its thread.
    public init(
        command: [String],
        environment: [String: String],
        name: String,
        maximumLineBytes: Int = 1 << 20,
        logger: Logger
    ) {
        self.command = command
        self.environment = environment
        self.name = name
        self.maximumLineBytes = maximumLineBytes
        self.logger = logger
    }

    /// The program `command` names: a path as given, else the first executable in `PATH`.
    static func resolve(_ program: String, path: String?) -> String? {
        if program.contains("/") { return HelperProgram.isExecutable(program) ? program : nil }
        for folder in (path ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":") {
            let candidate = "\(folder)/\(program)"
            if HelperProgram.isExecutable(candidate) { return candidate }
        }
        return nil
    }

    public func open(deliver: @escaping @Sendable (MCPTransportEvent) -> Void) async throws(MCPError) {
        guard let program = command.first, let path = Self.resolve(program, path: environment["PATH"]) else {
            throw MCPError(.unreachable, "no program \(command.first ?? "(none)") to start")
        }
        let lines = LineSplitter(maximumLineBytes: maximumLineBytes)
        let process: HelperProcess
        do {
            process = try HelperProcess.spawn(
                path,
                arguments: Array(command.dropFirst()),
                environment: environment,
                standardStreams: true,
                name: String("mcp-\(name)".prefix(15))
            ) { incoming in
                switch incoming {
                case .bytes(let bytes):
                    for event in lines.feed(bytes) { deliver(event) }
                case .closed(let reason):
                    deliver(.closed(reason ?? "the server's process closed its output"))
                }
            }
        } catch {
            throw MCPError(.unreachable, "cannot start \(path): \(error)")
        }
        state.withLock { $0 = process }
    }

    public func send(_ message: Data, context: MCPSendContext) async throws(MCPError) {
        guard let process = state.withLock({ $0 }) else {
            throw MCPError(.unreachable, "the server's process is not running")
        }
        var bytes = [UInt8](message)
        bytes.append(0x0A)
        guard process.link.send(bytes) else {
            throw MCPError(.unreachable, "the server's process does not take input (it ended or stalled)")
        }
    }

    public func negotiated(protocolVersion: String) {}

    public func listen() {}

    public func close() async {
        guard
            let process = state.withLock({ state -> HelperProcess? in
                defer { state = nil }
                return state
            })
        else { return }
        process.link.close()
        let exit = await process.waitForExit(within: .seconds(2))
        logger.debug("the MCP server \(name) ended: \(exit)")
    }
}

/// Splits a byte stream into lines, each at most a bound (a longer one is dropped up to its end and reported).
final class LineSplitter: Sendable {
    private let maximumLineBytes: Int
    private let state = Mutex<(line: [UInt8], overflow: Int)>(([], 0))

    init(maximumLineBytes: Int) {
        self.maximumLineBytes = maximumLineBytes
    }

    /// The messages `bytes` completes.
    func feed(_ bytes: [UInt8]) -> [MCPTransportEvent] {
        state.withLock { state in
            var events: [MCPTransportEvent] = []
            var start = 0
            for index in bytes.indices where bytes[index] == 0x0A {
                take(bytes[start..<index], into: &state)
                if state.overflow > 0 {
                    events.append(.oversized(bytes: state.overflow))
                } else if !state.line.allSatisfy({ $0 == 0x20 || $0 == 0x0D || $0 == 0x09 }) {
                    events.append(.message(Data(state.line)))
                }
                state.line.removeAll(keepingCapacity: state.line.count < 64 << 10)
                state.overflow = 0
                start = index + 1
            }
            take(bytes[start...], into: &state)
            return events
        }
    }

    private func take(_ part: ArraySlice<UInt8>, into state: inout (line: [UInt8], overflow: Int)) {
        if state.overflow > 0 {
            state.overflow += part.count
        } else if state.line.count + part.count > maximumLineBytes {
            state.overflow = state.line.count + part.count
            state.line.removeAll()
        } else {
            state.line += part
        }
    }
}
