import HarkCore
import HarkMedia
import Testing

/// The allow-list, the deadlines and the ICY parser as values.
struct MediaValueTests {
    @Test func theAllowListFollowsTheConfiguration() throws {
        let standard = MediaAllowList.standard
        #expect(try standard.target("https://radio.example/live.mp3").protocols == "https,tls,tcp,crypto")
        // http only to this machine unless allowed.
        #expect(throws: MediaFailure.self) { try standard.target("http://radio.example/live") }
        #expect(try standard.target("http://127.0.0.1:8000/live").protocols.contains("http"))
        let http = MediaAllowList(schemes: ["https", "http"], hosts: ["Example.org"])
        #expect(try http.target("http://stream.example.org/live").url == "http://stream.example.org/live")
        #expect(throws: MediaFailure.self) { try http.target("http://example.org.evil.net/live") }
        #expect(throws: MediaFailure.self) { try http.target("http://notexample.org/live") }
        // Files only when allowed; the whitelist then names only `file`.
        #expect(throws: MediaFailure.self) { try http.target("/music/a.flac") }
        let files = MediaAllowList(schemes: ["file"], hosts: [])
        let file = try files.target("/music/a.flac")
        #expect(file.url == "file:/music/a.flac" && file.protocols == "file")
        #expect(try files.target("file:///music/a.flac").url == "file:/music/a.flac")
        #expect(throws: MediaFailure.self) { try files.target("https://radio.example/") }
        // Bounds and hostile text.
        #expect(throws: MediaFailure.self) {
            try standard.target("https://radio.example/" + String(repeating: "a", count: 2100))
        }
        #expect(throws: MediaFailure.self) { try standard.target("https://radio.example/a b") }
        #expect(throws: MediaFailure.self) { try standard.target("https://radio.example/\u{1B}[2J") }
        #expect(throws: MediaFailure.self) { try standard.target("subfile,,0,10,:/etc/passwd") }
        #expect(throws: MediaFailure.self) { try standard.target("https://u:secret@radio.example/") }
        do {
            _ = try standard.target("http://radio.example/live?token=secret")
            Issue.record("http was allowed")
        } catch {
            #expect(!error.message.contains("secret"))
        }
    }

    @Test func nestedURLsFollowTheSameRules() {
        let list = MediaAllowList(schemes: ["https"], hosts: ["radio.example"])
        #expect(list.allowsNested("https://cdn.radio.example/seg1.ts"))
        #expect(list.allowsNested("crypto+https://radio.example/seg1.ts"))
        #expect(!list.allowsNested("file:/etc/passwd"))
        #expect(!list.allowsNested("https://elsewhere.example/seg1.ts"))
        #expect(!list.allowsNested("concat:https://radio.example/a|file:/etc/passwd"))
    }

    @Test func theWatchExpiresPerPhase() {
        var watch = MediaWatch(openTimeout: .seconds(10), stallTimeout: .seconds(3))
        #expect(watch.expired(now: 0) == nil)
        watch.opening(now: 1_000_000_000)
        #expect(watch.expired(now: 10_999_999_999) == nil)
        #expect(watch.expired(now: 11_000_000_000) == .timedOut)
        watch.heard(now: 12_000_000_000)
        #expect(watch.expired(now: 14_999_999_999) == nil)
        #expect(watch.expired(now: 15_000_000_000) == .stalled)
        watch.rest()
        #expect(watch.expired(now: 999_000_000_000) == nil)
    }

    @Test func icyTitlesAreParsedPrintableAndBounded() {
        #expect(ICYMetadata.title(Array("StreamTitle='Artist - Song';StreamUrl='';".utf8)) == "Artist - Song")
        #expect(ICYMetadata.title(Array("StreamTitle='It''s';".utf8)) == "It''s")
        #expect(ICYMetadata.title(Array("StreamUrl='x';".utf8)) == nil)
        #expect(ICYMetadata.title(Array("StreamTitle='';".utf8)) == nil)
        let hostile = ICYMetadata.title(Array("StreamTitle='a\r\nb\u{1B}[31m';".utf8))
        #expect(hostile == "a\\r\\nb\\u{1B}[31m")
        let long = ICYMetadata.title(Array(("StreamTitle='" + String(repeating: "x", count: 5000) + "';").utf8))
        #expect((long?.unicodeScalars.count ?? 0) <= ICYMetadata.titleLimit)
        #expect(ICYMetadata.title([0xFF, 0xFE] + Array("StreamTitle='\u{FF}';".utf8)) != nil)
    }
}
