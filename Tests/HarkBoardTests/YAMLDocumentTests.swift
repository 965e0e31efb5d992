import HarkBoard
import HarkPlatform
import Testing

/// The YAML composer over libyaml: the shapes, lines, anchors and errors, and how plain scalars read as
/// numbers, booleans and null (YAML 1.1, as the board and configuration files are written).
@Suite struct YAMLDocumentTests {
    private func parse(_ text: String) throws -> YAMLNode? {
        try YAMLNode.document(text)
    }

    private func failure(_ text: String) -> YAMLError? {
        do {
            _ = try YAMLNode.document(text)
            return nil
        } catch {
            return error
        }
    }

    /// The plain scalar `text` as the composer reads it.
    private func plain(_ text: String) -> YAMLNode {
        .scalar(text: text, style: .plain, line: 1)
    }

    @Test func mappingsSequencesAndScalarsKeepTheirOrderAndLines() throws {
        let root = try #require(try parse("name: host\nitems:\n  - 1\n  - 'two'\nnested: {a: \"b\"}\n"))
        let pairs = try #require(root.mapping)
        #expect(pairs.map { $0.key.text } == ["name", "items", "nested"])
        #expect(pairs[0].value == .scalar(text: "host", style: .plain, line: 1))
        #expect(pairs[1].value.line == 3)
        #expect(
            pairs[1].value.sequence == [
                .scalar(text: "1", style: .plain, line: 3), .scalar(text: "two", style: .quoted, line: 4),
            ]
        )
        let nested = try #require(pairs[2].value.mapping)
        #expect(nested.count == 1)
        #expect(nested[0].value == .scalar(text: "b", style: .quoted, line: 5))
    }

    @Test func blockScalarsAndStringTagsAreText() throws {
        let root = try #require(try parse("a: |\n  5\nb: !!str yes\nc: ! 7\n"))
        let values = try #require(root.mapping).map(\.value)
        #expect(values[0] == .scalar(text: "5\n", style: .quoted, line: 1))
        #expect(values[1].bool == nil)
        #expect(values[2].int == nil)
    }

    @Test func anchorsAndAliasesRepeatTheNode() throws {
        let root = try #require(try parse("base: &b\n  x: 1\ncopy: *b\nword: &w hello\nagain: *w\n"))
        let pairs = try #require(root.mapping)
        #expect(pairs[2].value == pairs[3].value)
        #expect(pairs[0].value == pairs[1].value)
        #expect(pairs[1].value.mapping?.first?.value.int == 1)

        let undefined = try #require(failure("a: *missing\n"))
        #expect(undefined == YAMLError(line: 1, problem: "found undefined alias"))
    }

    @Test func aRepeatedKeyIsAnErrorAtItsFirstLine() throws {
        let twice = try #require(failure("x: 1\nmode: a\ny: 2\nmode: b\n"))
        #expect(twice == YAMLError(line: 2, problem: "a mapping repeats the key 'mode'"))

        let nested = try #require(failure("outer:\n  b: 1\n  a: 1\n  b: 2\n  a: 2\n"))
        #expect(nested == YAMLError(line: 3, problem: "a mapping repeats the key 'a', 'b'"))

        let quoted = try #require(failure("mode: a\n\"mode\": b\n"))
        #expect(quoted.problem == "a mapping repeats the key 'mode'")

        // A number and the text of that number are different keys.
        #expect(try parse("5: a\n\"5\": b\n")?.mapping?.count == 2)
    }

    @Test func syntaxErrorsGiveTheLineAndLibyamlsProblem() throws {
        let unclosed = try #require(failure("mode: speaker\ngemini: [unclosed\n"))
        #expect(unclosed.line == 3)
        #expect(unclosed.problem.hasPrefix("did not find expected ',' or ']'"))
        #expect(unclosed.problem.contains("(while parsing a flow sequence at line 2)"))

        let indented = try #require(failure("mode: speaker\n  backend: gemini\n"))
        #expect(indented == YAMLError(line: 2, problem: "mapping values are not allowed in this context"))

        let control = try #require(failure("a: b\nmode: x\u{1}\n"))
        #expect(control == YAMLError(line: 2, problem: "control characters are not allowed"))
    }

    @Test func nestingIsLimited() throws {
        #expect(try parse(String(repeating: "[", count: 999) + String(repeating: "]", count: 999)) != nil)
        let deep = try #require(failure(String(repeating: "[", count: 5000)))
        #expect(deep == YAMLError(line: 1, problem: "collections nest more than 1000 deep"))
        let mappings = String((0..<1001).map { String(repeating: " ", count: $0) + "a:\n" }.joined())
        #expect(failure(mappings)?.problem == "collections nest more than 1000 deep")
    }

    @Test func emptyTextHasNoDocumentAndASecondDocumentIsAnError() throws {
        #expect(try parse("") == nil)
        #expect(try parse("# only a comment\n\n") == nil)
        #expect(try parse("---\n")?.text == "")
        #expect(try parse("---\n")?.isNull == true)
        #expect(try parse("mode: kiosk\n...\n")?.mapping?.count == 1)

        let two = try #require(failure("a: 1\n---\nb: 2\n"))
        #expect(
            two
                == YAMLError(
                    line: 2,
                    problem: "but found another document (expected a single document in the stream at line 1)"
                )
        )
    }

    @Test func wholeNumbersReadAsInYAML11() {
        let cases: [(String, Int?)] = [
            ("0", 0), ("42", 42), ("+5", 5), ("-3", -3), ("1_000", 1000), ("0x10", 16), ("0x1F", 31),
            ("-0x10", -16), ("0b101", 5), ("0o17", 15), ("010", 8), ("08", nil), ("1:30", 90), ("-1:30", -90),
            ("0x", nil), ("1.5", nil), ("five", nil), ("", nil), ("99999999999999999999", nil),
            ("1:2:3:4:5:6:7:8:9:10:11:12:13", nil),
        ]
        for (text, value) in cases {
            #expect(plain(text).int == value, "\(text)")
        }
        #expect(YAMLNode.scalar(text: "5", style: .quoted, line: 1).int == nil)
        #expect(YAMLNode.scalar(text: "5", style: .quoted, line: 1).text == "5")
    }

    @Test func booleansReadAsInYAML11InAnyCase() {
        for text in ["true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "tRuE"] {
            #expect(plain(text).bool == true, "\(text)")
        }
        for text in ["false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"] {
            #expect(plain(text).bool == false, "\(text)")
        }
        for text in ["y", "n", "1", "0", "", "maybe"] {
            #expect(plain(text).bool == nil, "\(text)")
        }
        #expect(YAMLNode.scalar(text: "true", style: .quoted, line: 1).bool == nil)
    }

    @Test func nullIsTildeTheWordOrNothing() throws {
        for text in ["~", "null", "Null", "NULL", ""] {
            #expect(plain(text).isNull, "\(text)")
        }
        for text in ["nil", "none", "NuLL", "0"] {
            #expect(!plain(text).isNull, "\(text)")
        }
        #expect(!YAMLNode.scalar(text: "~", style: .quoted, line: 1).isNull)
        let root = try #require(try parse("a:\nb: ~\nc: ''\n"))
        #expect(try #require(root.mapping).map(\.value.isNull) == [true, true, false])
    }

    @Test func numbersWithFractionsReadAsInYAML11() {
        let cases: [(String, Double?)] = [
            ("1.5", 1.5), ("1_0.5", 10.5), ("1e3", 1000), ("-2", -2), (".inf", .infinity), ("-.Inf", -.infinity),
            ("1:30.5", 90.5), ("abc", nil),
        ]
        for (text, value) in cases {
            #expect(plain(text).float == value, "\(text)")
        }
        #expect(plain(".nan").float?.isNaN == true)
    }

    @Test func textIsWhatReadsBackAsTheSameString() {
        for text in ["speaker", "en-US", "/var/lib/hark", "1.5s"] {
            #expect(plain(text).isText, "\(text)")
        }
        for text in ["yes", "null", "5", "0x10", "1e3", ".inf", "~"] {
            #expect(!plain(text).isText, "\(text)")
        }
        #expect(YAMLNode.scalar(text: "5", style: .quoted, line: 1).isText)
    }

    @Test func fieldsNameTheFileTheKeyAndTheLine() throws {
        let root = try #require(try YAMLField<BoardFileError>.document("a:\n  b: 0x10\n  c: \"7\"\n", file: "f.yaml"))
        let a = try root.required("a")
        #expect(try a.required("b").int(in: 0...100) == 16)
        let quoted = try a.required("c")
        #expect(try quoted.string() == "7")
        #expect(throws: BoardFileError.self) { try quoted.int(in: 0...100) }
        do {
            _ = try YAMLField<BoardFileError>.document("a: 1\na: 2\n", file: "f.yaml")
            Issue.record("a repeated key was accepted")
        } catch {
            #expect(error.line == 1)
            #expect(error.problem == "not valid YAML: a mapping repeats the key 'a'")
        }
    }
}
