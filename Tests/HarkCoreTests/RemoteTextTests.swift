import HarkCore
import Testing

@Suite struct RemoteTextTests {
    @Test func plainTextIsKeptAsItIs() {
        let text = "Kore says: héllo, नमस्ते 👋🏽 — C:\\path (50%)"
        #expect(RemoteText.printable(text) == text)
    }

    @Test func aNewlineCannotForgeALogLine() {
        let forged = "bad key\n2025-01-01T00:00:00 info hark: authenticated as admin\r\n"
        let shown = RemoteText.printable(forged)
        #expect(!shown.contains("\n") && !shown.contains("\r"))
        #expect(shown == "bad key\\n2025-01-01T00:00:00 info hark: authenticated as admin\\r\\n")
        #expect(RemoteText.printable("a\tb\0c") == "a\\tb\\0c")
    }

    @Test func terminalEscapesNeverReachTheTerminal() {
        // CSI (clear screen), OSC 52 (write the clipboard) ended by BEL, the one-byte C1 CSI, DEL.
        let hostile = "\u{1B}[2J\u{1B}]52;c;cm0gLXJmIC8=\u{07}\u{9B}31m\u{7F}"
        let shown = RemoteText.printable(hostile)
        #expect(shown == "\\u{1B}[2J\\u{1B}]52;c;cm0gLXJmIC8=\\u{07}\\u{9B}31m\\u{7F}")
        #expect(shown.unicodeScalars.allSatisfy { !RemoteText.needsEscaping($0) })
    }

    @Test func separatorsAndDirectionControlsAreEscaped() {
        let shown = RemoteText.printable("a\u{2028}b\u{2029}c\u{202E}d\u{2066}e\u{200F}")
        #expect(shown == "a\\u{2028}b\\u{2029}c\\u{202E}d\\u{2066}e\\u{200F}")
    }

    @Test func everyControlCharacterIsEscaped() {
        var all = String.UnicodeScalarView()
        for value in UInt32(0)...0xA0 { all.append(Unicode.Scalar(value)!) }
        let shown = RemoteText.printable(String(all), limit: 10_000)
        #expect(shown.unicodeScalars.allSatisfy { $0.value >= 0x20 && !(0x7F...0x9F).contains($0.value) })
        #expect(
            shown.hasSuffix(
                "~\\u{7F}\\u{80}" + (0x81...0x9F).map { "\\u{\(String($0, radix: 16, uppercase: true))}" }.joined()
                    + "\u{A0}"
            )
        )
    }

    @Test func longTextIsCutWithAMarker() {
        let huge = String(repeating: "x", count: 5 * 1024 * 1024)
        let shown = RemoteText.printable(huge, limit: 200)
        #expect(shown.unicodeScalars.count <= 200)
        #expect(shown.hasPrefix("xxxx"))
        #expect(shown.hasSuffix("…[cut, 5242880 bytes in all]"))
        // At the limit exactly: not cut.
        let exact = String(repeating: "y", count: 200)
        #expect(RemoteText.printable(exact, limit: 200) == exact)
        // An escape is never split by the cut.
        let escapes = String(repeating: "\u{1B}", count: 100)
        let cut = RemoteText.printable(escapes, limit: 100)
        #expect(cut.unicodeScalars.count <= 100)
        #expect(cut.hasPrefix("\\u{1B}") && cut.contains("\\u{1B}…[cut, 100 bytes in all]"))
    }

    @Test func printableTextStaysTheSame() {
        for text in ["a\nb\u{1B}[0m", String(repeating: "é\n", count: 1000), "plain"] {
            let once = RemoteText.printable(text, limit: 300)
            #expect(RemoteText.printable(once, limit: 300) == once)
        }
    }

    @Test func invalidUTF8IsReplacedAndBytesAreBounded() {
        let bytes: [UInt8] = [0x61, 0xFF, 0xC3, 0x28, 0x0A, 0x1B, 0x62]
        #expect(RemoteText.printable(bytes: bytes) == "a\u{FFFD}\u{FFFD}(\\n\\u{1B}b")
        // A window boundary splitting a multi-byte character is never shown as a replacement.
        let many = [UInt8](repeating: 0, count: 0) + Array(String(repeating: "€", count: 100_000).utf8)
        let shown = RemoteText.printable(bytes: many, limit: 100)
        #expect(!shown.contains("\u{FFFD}"))
        #expect(shown.hasSuffix("…[cut, 300000 bytes in all]"))
        #expect(shown.unicodeScalars.count <= 100)
    }

    @Test func aTinyLimitStillLeavesRoomForTheMarker() {
        let shown = RemoteText.printable(String(repeating: "z", count: 1000), limit: 1)
        #expect(shown.unicodeScalars.count == RemoteText.minimumLimit)
        #expect(shown.hasPrefix("z") && shown.hasSuffix("…[cut, 1000 bytes in all]"))
    }
}
