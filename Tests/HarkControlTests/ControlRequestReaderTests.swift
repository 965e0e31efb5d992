import HarkControl
import HarkCore
import Testing

/// The request reader as a value: bytes in, requests or refusals out, never more held than its bound.
@Suite struct ControlRequestReaderTests {
    @Test func aLineIsARequestAndTheRestWaits() {
        var reader = ControlRequestReader()
        #expect(reader.take(Array(#"{"op":"timers.add","args":{"seconds":600,"#.utf8)) == .needMore)
        let outcome = reader.take(Array("\"label\":\"pasta\"}}\r\n{\"op\":\"status\"}\n".utf8))
        #expect(outcome == .request(ControlRequest(op: "timers.add", args: ["seconds": 600, "label": "pasta"])))
        // The second line, sent ahead of its reply, is there when asked for; "args" may be left out.
        #expect(reader.next() == .request(ControlRequest(op: "status")))
        #expect(reader.next() == .needMore)
        #expect(reader.pending == 0)
    }

    @Test func aLineLongerThanTheBoundIsRefusedBeforeItEnds() {
        var limits = ControlLimits()
        limits.requestBytes = 1024
        var reader = ControlRequestReader(limits: limits)
        #expect(reader.take([UInt8](repeating: UInt8(ascii: "a"), count: 1000)) == .needMore)
        // No newline within the bound: refused at the bound, the bytes dropped.
        #expect(
            reader.take([UInt8](repeating: UInt8(ascii: "a"), count: 100)) == .refused("request longer than 1024 bytes")
        )
        #expect(reader.pending == 0)
        // A flood in one read is refused without being held.
        var flooded = ControlRequestReader(limits: limits)
        guard case .refused = flooded.take([UInt8](repeating: UInt8(ascii: "{"), count: 1 << 20)) else {
            Issue.record("a megabyte in one read was not refused")
            return
        }
        #expect(flooded.pending == 0)
    }

    @Test(arguments: [
        ("not json\n", "not a request"),
        ("{\"args\":{}}\n", "not a request"),
        ("{\"op\":5}\n", "not a request"),
        ("{\"op\":\"a\\u001b[31m\"}\n", "is not a name"),
        ("{\"op\":\"\"}\n", "is not a name"),
        ("\n", "empty request"),
    ])
    func malformedLinesAreRefusedWithAReason(line: String, reason: String) {
        var reader = ControlRequestReader()
        guard case .refused(let why) = reader.take(Array(line.utf8)) else {
            Issue.record("\(line) was not refused")
            return
        }
        #expect(why.contains(reason), "\(why)")
        // What is said of it is printable: no escape reaches a log line.
        #expect(!why.unicodeScalars.contains { RemoteText.needsEscaping($0) }, "\(why)")
    }

    @Test func deepNestingIsRefusedBeforeDecoding() {
        var reader = ControlRequestReader()
        let deep =
            "{\"op\":\"status\",\"args\":{\"a\":" + String(repeating: "[", count: 5000)
            + String(repeating: "]", count: 5000) + "}}\n"
        #expect(reader.take(Array(deep.utf8)) == .refused("request nested deeper than 8 levels"))
        // Brackets inside strings are not nesting.
        var strings = ControlRequestReader()
        let quoted = "{\"op\":\"announce\",\"args\":{\"file\":\"" + String(repeating: "[", count: 100) + "\\\"\"}}\n"
        guard case .request(let request) = strings.take(Array(quoted.utf8)) else {
            Issue.record("brackets in a string were taken for nesting")
            return
        }
        #expect(request.args["file"] == .string(String(repeating: "[", count: 100) + "\""))
    }

    @Test func tooManyArgumentsAndNotUTF8AreRefused() {
        var reader = ControlRequestReader()
        let args = (0..<40).map { "\"k\($0)\":1" }.joined(separator: ",")
        #expect(
            reader.take(Array("{\"op\":\"x\",\"args\":{\(args)}}\n".utf8)) == .refused("40 arguments, more than 32")
        )
        #expect(reader.take([0x7B, 0xFF, 0xFE, 0x7D, 0x0A]) == .refused("request is not UTF-8"))
    }

    @Test func repliesAreOneLineAndRoundTrip() throws {
        let reply = ControlReply(ok: true, message: "line one\nline two", data: ["timers": [["label": "tea"]]])
        let line = ControlReplyLine.encode(reply)
        #expect(line.last == UInt8(ascii: "\n"))
        #expect(line.dropLast().contains(UInt8(ascii: "\n")) == false)
        #expect(ControlReplyLine.decode(line.dropLast()) == reply)
        // A reply past the bound says so instead of being sent.
        let huge = ControlReply(ok: true, message: String(repeating: "x", count: 5000))
        let refused = try #require(ControlReplyLine.decode(ControlReplyLine.encode(huge, limit: 1000).dropLast()))
        #expect(refused.ok == false)
        #expect(refused.message.contains("too large"))
    }
}
