import HarkBackendKit
import HarkCore
import Testing

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The `text/event-stream` parser, by the WHATWG rules, fed chunks split anywhere.
@Suite struct ServerSentEventTests {
    /// All events of `chunks` fed in order, then the end of the stream.
    func parse(_ chunks: [[UInt8]], parser: inout ServerSentEventParser) -> [ServerSentEvent] {
        var events: [ServerSentEvent] = []
        for chunk in chunks { events += parser.feed(chunk) }
        return events + parser.finish()
    }

    func parse(_ text: String) -> [ServerSentEvent] {
        var parser = ServerSentEventParser()
        return parse([Array(text.utf8)], parser: &parser)
    }

    /// A stream as Google's streaming endpoints send it: CRLF line ends, one `data:` line of JSON per event,
    /// plus a BOM, a comment, an id and a retry, a multi-line event, a named event and non-ASCII text.
    static let googleStyle = Array(
        ("\u{FEFF}: keep-alive\r\n"
            + "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Namaskaram, നമസ്കാരം\"}]}}]}\r\n\r\n"
            + "id: 7\r\nretry: 2500\r\ndata: {\"usageMetadata\":{\"totalTokenCount\":12}}\r\n\r\n"
            + "event: update\r\ndata: first\r\ndata:second\r\n\r\n"
            + "data: 🙂 tail").utf8
    )

    static let googleStyleEvents = [
        ServerSentEvent(data: #"{"candidates":[{"content":{"parts":[{"text":"Namaskaram, നമസ്കാരം"}]}}]}"#),
        ServerSentEvent(data: #"{"usageMetadata":{"totalTokenCount":12}}"#, lastEventID: "7"),
        ServerSentEvent(type: "update", data: "first\nsecond", lastEventID: "7"),
        ServerSentEvent(data: "🙂 tail", lastEventID: "7"),
    ]

    @Test func theWholeStreamGivesItsEvents() {
        var parser = ServerSentEventParser()
        #expect(parse([Self.googleStyle], parser: &parser) == Self.googleStyleEvents)
        #expect(parser.lastEventID == "7")
        #expect(parser.retryMilliseconds == 2_500)
        #expect(parser.droppedEvents == 0)
    }

    @Test func everySplitPointGivesTheSameEvents() {
        let stream = Self.googleStyle
        for split in 0...stream.count {
            var parser = ServerSentEventParser()
            let events = parse([Array(stream[..<split]), Array(stream[split...])], parser: &parser)
            #expect(events == Self.googleStyleEvents, "split at \(split)")
            #expect(parser.retryMilliseconds == 2_500)
        }
        // Three pieces (every CR/LF pair and UTF-8 sequence broken somewhere), and one byte at a time.
        for first in stride(from: 0, through: stream.count, by: 7) {
            for second in first...min(stream.count, first + 9) {
                var parser = ServerSentEventParser()
                let pieces = [Array(stream[..<first]), Array(stream[first..<second]), Array(stream[second...])]
                #expect(parse(pieces, parser: &parser) == Self.googleStyleEvents, "split at \(first), \(second)")
            }
        }
        var parser = ServerSentEventParser()
        #expect(parse(stream.map { [$0] }, parser: &parser) == Self.googleStyleEvents)
    }

    @Test func lineEndsAreCRLFOrCROrLF() {
        let expected = [ServerSentEvent(data: "a"), ServerSentEvent(data: "b"), ServerSentEvent(data: "c")]
        #expect(parse("data: a\n\ndata: b\r\rdata: c\r\n\r\n") == expected)
        // A CR at the end of one chunk and an LF at the start of the next are one line end, not two.
        var parser = ServerSentEventParser()
        var events = parser.feed(Array("data: x\r".utf8))
        events += parser.feed(Array("\ndata: y\r".utf8))
        events += parser.feed(Array("\n\r\n".utf8))
        #expect(events == [ServerSentEvent(data: "x\ny")])
    }

    @Test func fieldsByTheRules() {
        // No colon: the whole line names the field, with an empty value. One space removed, not two.
        #expect(parse("data\ndata\n\n") == [ServerSentEvent(data: "\n")])
        #expect(parse("data:  two spaces\n\n") == [ServerSentEvent(data: " two spaces")])
        #expect(parse("data:no space\n\n") == [ServerSentEvent(data: "no space")])
        #expect(parse("data: a:b: c\n\n") == [ServerSentEvent(data: "a:b: c")])
        // Comments, unknown fields and a field name with a trailing space are ignored.
        #expect(parse(": comment\nfoo: bar\ndata : x\ndata: y\n\n") == [ServerSentEvent(data: "y")])
        // No data: nothing is dispatched, and the event type does not carry over.
        #expect(parse("event: a\n\ndata: b\n\n") == [ServerSentEvent(data: "b")])
        // An id with U+0000 is ignored; an empty id resets; the id carries over events.
        #expect(
            parse("id: 1\ndata: a\n\nid: 2\u{0}\ndata: b\n\nid\ndata: c\n\n") == [
                ServerSentEvent(data: "a", lastEventID: "1"), ServerSentEvent(data: "b", lastEventID: "1"),
                ServerSentEvent(data: "c", lastEventID: ""),
            ]
        )
        // retry: digits only.
        for (value, expected) in [("1000", 1_000), ("10x", nil), ("-5", nil), ("", nil), (" 5", nil), ("1.5", nil)] {
            var parser = ServerSentEventParser()
            _ = parse([Array("retry: \(value)\n".utf8)], parser: &parser)
            #expect(parser.retryMilliseconds == expected, "retry: \(value)")
        }
        var parser = ServerSentEventParser()
        _ = parse([Array("retry: 99999999999999999999999999\n".utf8)], parser: &parser)
        #expect(parser.retryMilliseconds == ServerSentEventParser.maximumRetryMilliseconds)
    }

    @Test func aByteOrderMarkIsSkippedOnlyAtTheStart() {
        #expect(parse("\u{FEFF}data: a\n\n") == [ServerSentEvent(data: "a")])
        // Later, it is part of the field name: an unknown field.
        #expect(parse("data: a\n\n\u{FEFF}data: b\n\n") == [ServerSentEvent(data: "a")])
        // Split inside the mark.
        var parser = ServerSentEventParser()
        let events = parse([[0xEF], [0xBB], [0xBF, 0x64], Array("ata: a\n\n".utf8)], parser: &parser)
        #expect(events == [ServerSentEvent(data: "a")])
    }

    @Test func theEndOfTheStreamDeliversTheLastEvent() {
        #expect(parse("data: a") == [ServerSentEvent(data: "a")])
        #expect(parse("data: a\n") == [ServerSentEvent(data: "a")])
        #expect(parse("data: a\r") == [ServerSentEvent(data: "a")])
        #expect(parse("event: x\n").isEmpty)
        // After finish the parser starts a new stream, keeping the last event ID.
        var parser = ServerSentEventParser()
        _ = parse([Array("id: 4\ndata: a".utf8)], parser: &parser)
        #expect(
            parse([Array("\u{FEFF}data: b\n\n".utf8)], parser: &parser) == [
                ServerSentEvent(data: "b", lastEventID: "4")
            ]
        )
    }

    @Test func invalidUTF8IsReplacedNotFatal() {
        var parser = ServerSentEventParser()
        let events = parse([[0x64, 0x61, 0x74, 0x61, 0x3A, 0x20, 0xFF, 0xC3], [0x0A, 0x0A]], parser: &parser)
        #expect(events == [ServerSentEvent(data: "\u{FFFD}\u{FFFD}")])
    }

    @Test func aLineOrAnEventPastItsBoundIsDroppedAndCounted() {
        var parser = ServerSentEventParser(maximumLineBytes: 16, maximumEventBytes: 24)
        var events: [ServerSentEvent] = []
        // A 1 MB line, fed in pieces: never stored past 16 bytes, its event dropped, the next one intact.
        events += parser.feed(Array("data: ".utf8))
        for _ in 0..<1_000 { events += parser.feed([UInt8](repeating: 0x41, count: 1_000)) }
        events += parser.feed(Array("\ndata: more\n\ndata: next\n\n".utf8))
        #expect(events == [ServerSentEvent(data: "next")])
        #expect(parser.droppedEvents == 1)
        // Many short lines that add up past the event bound.
        events = parser.feed(Array(String(repeating: "data: 0123456789\n", count: 100).utf8))
        events += parser.feed(Array("\ndata: after\n\n".utf8))
        #expect(events == [ServerSentEvent(data: "after")])
        #expect(parser.droppedEvents == 2)
        // Exactly at the bounds is kept: lines of 16 bytes, 24 bytes of data (10 + 1 + 10 + 1 + 2).
        events = parser.feed(Array("data: 0123456789\ndata: 0123456789\ndata: ab\n\n".utf8))
        #expect(events == [ServerSentEvent(data: "0123456789\n0123456789\nab")])
        // One byte more of data, or of a line, is past them.
        events = parser.feed(Array("data: 0123456789\ndata: 0123456789\ndata: abc\n\n".utf8))
        events += parser.feed(Array("data: 0123456789X\n\n".utf8))
        #expect(events.isEmpty)
        #expect(parser.droppedEvents == 4)
        // A long comment is only a comment: the event around it survives.
        events = parser.feed(Array("data: a\n:".utf8) + [UInt8](repeating: 0x2D, count: 500) + Array("\n\n".utf8))
        #expect(events == [ServerSentEvent(data: "a")])
    }
}
