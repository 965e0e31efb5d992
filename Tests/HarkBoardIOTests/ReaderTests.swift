import FoundationEssentials
import Glibc
import HarkBoard
import HarkBoardIO
import HarkCore
import HarkIndicators
import Synchronization
import Testing

/// The repository's `board/` folder.
let boardDirectory: String = {
    var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
    parts.removeLast(3)
    return parts.joined(separator: "/") + "/board"
}()

@Suite struct ButtonReaderTests {
    /// A speaker-mode button on line 17 of a fake chip, and its reader on the clock `now`.
    static func speakerButton(now: @escaping @Sendable () -> Duration) throws -> (FakeGPIOChip, ButtonReader) {
        let chip = FakeGPIOChip(labels: ["pinctrl-rp1"])
        let spec = GPIOLineSpec(chips: ["pinctrl-rp1"], offset: 17, bias: .pullUp, activeLow: true)
        let reader = ButtonReader(
            source: try chip.requestInput(spec, debounce: .milliseconds(20), consumer: "hark"),
            interpreter: ButtonInterpreter(map: .standard, mode: .alwaysListening),
            now: now
        )
        return (chip, reader)
    }

    @Test func stepsTurnFakeChipEdgesAndDeadlinesIntoActions() throws {
        let time = Mutex<Duration>(.seconds(50))
        let (chip, reader) = try Self.speakerButton { time.withLock { $0 } }
        // A tap: the action waits for the double-tap window to close.
        chip.push(17, active: true, at: .seconds(50))
        chip.push(17, active: false, at: .seconds(50) + .milliseconds(90))
        time.withLock { $0 = .seconds(50) + .milliseconds(100) }
        #expect(try reader.step() == [])
        time.withLock { $0 = .seconds(50) + .milliseconds(389) }
        #expect(try reader.step(maximumWait: .zero) == [])
        time.withLock { $0 = .seconds(50) + .milliseconds(390) }
        #expect(try reader.step() == [.cancel])
        // A long hold is reported while the button is still down.
        chip.push(17, active: true, at: .seconds(60))
        time.withLock { $0 = .seconds(60) }
        #expect(try reader.step() == [])
        time.withLock { $0 = .seconds(61) }
        #expect(try reader.step() == [.endConversation])
    }

    @Test func aReloadedModeChangesWhatTheButtonDoes() throws {
        let time = Mutex<Duration>(.seconds(50))
        let (chip, reader) = try Self.speakerButton { time.withLock { $0 } }
        // Speaker mode: a press starts nothing; a tap cancels once its double-tap window has closed.
        chip.push(17, active: true, at: .seconds(50))
        chip.push(17, active: false, at: .seconds(50) + .milliseconds(90))
        time.withLock { $0 = .seconds(51) }
        #expect(try reader.step() == [.cancel])
        // Switched to push-to-talk: a press starts talking, its release ends it.
        reader.setMode(.pushToTalk)
        chip.push(17, active: true, at: .seconds(52))
        time.withLock { $0 = .seconds(52) }
        #expect(try reader.step() == [.talkStart])
        chip.push(17, active: false, at: .seconds(54))
        time.withLock { $0 = .seconds(54) }
        #expect(try reader.step() == [.talkEnd])
    }

    @Test func evdevButtonReadsRecordedEvents() throws {
        let folder = FileManager.default.temporaryDirectory.path + "/hark-evdev-\(UInt64.random(in: 0...UInt64.max))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        func event(_ seconds: Int64, _ micros: Int64, _ type: UInt16, _ code: UInt16, _ value: Int32) -> [UInt8] {
            withUnsafeBytes(of: seconds) { Array($0) } + withUnsafeBytes(of: micros) { Array($0) }
                + withUnsafeBytes(of: type) { Array($0) } + withUnsafeBytes(of: code) { Array($0) }
                + withUnsafeBytes(of: value) { Array($0) }
        }
        let bytes = event(10, 0, 1, 0x148, 1) + event(10, 0, 0, 0, 0) + event(10, 500_000, 1, 0x148, 0)
        #expect(FileManager.default.createFile(atPath: folder + "/event0", contents: Data(bytes)))
        let button = try EvdevButton(path: folder + "/event0", keyCode: 0x148)
        #expect(
            try button.waitForEdges(timeout: .zero) == [
                LineEdge(active: true, timestamp: .seconds(10)),
                LineEdge(active: false, timestamp: .seconds(10) + .milliseconds(500)),
            ]
        )
        #expect(try button.waitForEdges(timeout: .zero) == [])
    }
}

@Suite struct BoardIOTests {
    final class MemorySink: ByteSink {
        let bytes = Mutex<[UInt8]>([])
        func write(_ bytes: [UInt8]) throws { self.bytes.withLock { $0 += bytes } }
    }

    @Test func theUSBBoardGetsGPIOLEDsAndAGPIOButtonOnWhicheverChipIsPresent() throws {
        let profile = try BoardLoader.load(path: boardDirectory + "/rpi-usb-audio.yaml")
        let chip = FakeGPIOChip(labels: ["pinctrl-bcm2711"])
        let io = BoardIO(gpio: chip, terminal: MemorySink())
        let output = try #require(try io.ledOutput(for: profile))
        try output.show([RGB(255, 255, 255)])
        #expect(chip.outputs(27) == [false, true])
        #expect(try io.buttonSource(for: profile) != nil)
        #expect(chip.requests.map(\.offset) == [27, 17])
        #expect(BoardIO.gestureTiming(for: profile).debounce == .milliseconds(20))
        // On a system with none of the labels, the error says which were tried.
        let absent = BoardIO(gpio: FakeGPIOChip(labels: ["gpio-mockup-A"]), terminal: MemorySink())
        #expect(throws: GPIOError.self) { try absent.ledOutput(for: profile) }
    }

    @Test func theHostBoardDrawsOnTheTerminal() throws {
        let profile = try BoardLoader.load(path: boardDirectory + "/host.yaml")
        let sink = MemorySink()
        let io = BoardIO(gpio: FakeGPIOChip(labels: []), terminal: sink)
        let output = try #require(try io.ledOutput(for: profile))
        var engine = profile.makeLEDEngine()
        engine.update(IndicatorInput(conversation: .listening, microphoneLive: true, level: 1), at: .zero)
        try output.show(engine.frame(at: .zero))
        #expect(sink.bytes.withLock { $0 } == Array(TerminalLEDOutput.render(engine.frame(at: .zero)).utf8))
        #expect(engine.frame(at: .zero) == [RGB(255, 0, 0), RGB(0, 0, 255), RGB(0, 0, 255)])
        #expect(try io.buttonSource(for: profile) is TerminalKeySource)
    }
}

@Suite struct TerminalEndTests {
    @Test func anInputAtItsEndIsWaitedOutNotPolledInALoop() throws {
        let null = open("/dev/null", O_RDONLY)
        defer { close(null) }
        let source = TerminalKeySource(fd: null)
        #expect(try source.waitForEdges(timeout: .milliseconds(50)).isEmpty)  // reads the end
        let clock = ContinuousClock()
        let start = clock.now
        #expect(try source.waitForEdges(timeout: .milliseconds(100)).isEmpty)
        // Waited (not returned at once, as a readable /dev/null would make poll do).
        #expect(clock.now - start >= .milliseconds(90))
    }
}
