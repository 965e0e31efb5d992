import Glibc
import HarkBoardIO
import HarkIndicators
import Testing

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The terminal LEDs draw on the inherited standard output only when it is a terminal: `hark run > log`
/// keeps its log, and a pipe gets no escape sequences.
@Suite struct TerminalSinkTests {
    private let frame = [RGB(255, 0, 0), RGB(0, 0, 255)]

    @Test func aFileKeepsItsLogAndGetsNoFrames() throws {
        let path = FileManager.default.temporaryDirectory.path + "/hark-stdout-\(UInt64.random(in: 0...UInt64.max))"
        defer { unlink(path) }
        // Standard output redirected to a file, as by `hark run > log`: a log line is already written.
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        try #require(fd >= 0)
        defer { close(fd) }
        #expect(write(fd, "first log line\n", 15) == 15)
        let sink = TerminalSink(descriptor: fd)
        #expect(!sink.isTerminal)
        try TerminalLEDOutput(sink: sink).show(frame)
        #expect(write(fd, "second log line\n", 16) == 16)
        let text = String(decoding: try Data(contentsOf: URL(filePath: path)), as: UTF8.self)
        #expect(text == "first log line\nsecond log line\n")
    }

    @Test func aPipeGetsNoFrames() throws {
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        defer {
            close(ends[0])
            close(ends[1])
        }
        let sink = TerminalSink(descriptor: ends[1])
        #expect(!sink.isTerminal)
        try TerminalLEDOutput(sink: sink).show(frame)
        #expect(write(ends[1], "log\n", 4) == 4)
        var bytes = [UInt8](repeating: 0, count: 256)
        let count = bytes.withUnsafeMutableBytes { read(ends[0], $0.baseAddress, 256) }
        #expect(String(decoding: bytes.prefix(max(0, count)), as: UTF8.self) == "log\n")
    }

    @Test func aTerminalGetsTheFrames() throws {
        var controller: Int32 = -1
        var terminal: Int32 = -1
        try #require(openpty(&controller, &terminal, nil, nil, nil) == 0)
        defer {
            close(controller)
            close(terminal)
        }
        // Raw output, so the frame arrives as written (no newline translation).
        var settings = termios()
        tcgetattr(terminal, &settings)
        cfmakeraw(&settings)
        tcsetattr(terminal, TCSANOW, &settings)
        let sink = TerminalSink(descriptor: terminal)
        #expect(sink.isTerminal)
        try TerminalLEDOutput(sink: sink).show(frame)
        let expected = Array(TerminalLEDOutput.render(frame).utf8)
        var received: [UInt8] = []
        var descriptor = pollfd(fd: controller, events: Int16(POLLIN), revents: 0)
        while received.count < expected.count, poll(&descriptor, 1, 5000) > 0 {
            var bytes = [UInt8](repeating: 0, count: 512)
            let count = bytes.withUnsafeMutableBytes { read(controller, $0.baseAddress, 512) }
            guard count > 0 else { break }
            received += bytes.prefix(count)
        }
        #expect(received == expected)
    }
}
