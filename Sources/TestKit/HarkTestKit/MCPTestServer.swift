import Foundation
import HarkCore

#if canImport(Glibc)
    import Glibc
#endif

/// The MCP test server (scripts/lib/mcp-test-server.py, on the official Python SDK) as a process of the test, in the
/// environment scripts/setup makes (.venv-mcp). Tests that need it are skipped without it, saying so.
public final class MCPTestServer: Sendable {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().path
    /// The Python of the environment.
    public static let python = root + "/.venv-mcp/bin/python"
    /// The server's script.
    public static let script = root + "/scripts/lib/mcp-test-server.py"
    /// Whether the environment is here.
    public static let available = FileManager.default.isExecutableFile(atPath: python)
    /// Why a test is skipped without it.
    public static let missing = "the MCP test server's Python (mcp) is not installed: scripts/setup makes .venv-mcp"
    /// The command that serves it over stdio.
    public static let stdioCommand = [python, script, "stdio"]

    /// `http://127.0.0.1:PORT/mcp`.
    public let url: String
    private let process: Process

    private init(process: Process, url: String) {
        self.process = process
        self.url = url
    }

    /// Starts it over streamable HTTP with `flags` (`--json`, `--page-size 3`) and waits for it to listen.
    public static func startHTTP(_ flags: [String] = []) async throws -> MCPTestServer {
        let base = FileManager.default.temporaryDirectory.path + "/hark-mcp-\(UInt64.random(in: 0...UInt64.max))"
        let outputPath = base + "-out.txt"
        let logPath = base + "-log.txt"
        for path in [outputPath, logPath] { _ = FileManager.default.createFile(atPath: path, contents: nil) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [script, "http", "--port", "0"] + flags
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        try process.run()
        let port = try await withDeadline(.seconds(30), "the MCP test server to listen") {
            while true {
                let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
                if let line = text.split(separator: "\n").first, let port = Int(line) { return port }
                if !process.isRunning {
                    let log = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
                    throw MCPTestServerError("the MCP test server ended before it listened: \(log.suffix(2000))")
                }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        // uvicorn accepts once it started serving: wait for the port to take connections.
        try await withDeadline(.seconds(30), "the MCP test server to accept") {
            while !Self.accepts(port: port) { try await Task.sleep(for: .milliseconds(50)) }
        }
        return MCPTestServer(process: process, url: "http://127.0.0.1:\(port)/mcp")
    }

    private static func accepts(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    /// True while its process runs.
    public var isRunning: Bool { process.isRunning }

    /// Ends it: SIGTERM, then SIGKILL after 2 s.
    public func stop() {
        let pid = process.processIdentifier
        guard process.isRunning else { return }
        kill(pid, SIGTERM)
        var waited = 0
        while process.isRunning && waited < 200 {
            usleep(10_000)
            waited += 1
        }
        if process.isRunning { kill(pid, SIGKILL) }
    }

    deinit { stop() }
}

/// The MCP test server failed to start.
public struct MCPTestServerError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
