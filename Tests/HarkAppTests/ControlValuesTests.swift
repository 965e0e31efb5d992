import Foundation
import HarkAudio
import HarkCore
import Testing

@testable import HarkApp

/// What a person types for `hark timers`, `hark alarms` and `hark announce`, as values.
@Suite struct ControlValuesTests {
    @Test(arguments: [
        ("10m", 600), ("1h30m", 5400), ("90s", 90), ("90", 90), ("1h 5m 3s", 3903), ("1H", 3600), ("24h", 86_400),
        ("1s", 1), ("2m30s", 150),
    ])
    func durations(text: String, seconds: Int) throws {
        #expect(try ControlValues.duration(text) == seconds)
    }

    @Test(arguments: [
        "0s", "0", "24h1s", "25h", "", "m", "10x", "5m10", "1m1h", "1h1h", "-5m", "1.5h",
        "999999999999999999999s", "10m\u{1b}[31m",
    ])
    func durationsOutOfBoundsOrMalformedAreRefused(text: String) {
        let refusal = #expect(throws: ControlValues.Refusal.self) { try ControlValues.duration(text) }
        #expect(refusal?.description.contains("from 1 s to 24 h") == true, "\(refusal?.description ?? "")")
        #expect(refusal?.description.unicodeScalars.contains { RemoteText.needsEscaping($0) } == false)
    }

    @Test func timesOfDay() throws {
        #expect(try ControlValues.time("07:30") == "07:30")
        #expect(try ControlValues.time("7:05") == "07:05")
        #expect(try ControlValues.time("23:59") == "23:59")
        #expect(try ControlValues.time("0:00") == "00:00")
        for bad in ["24:00", "12:60", "7:5", "07-30", "0730", "", ":", "+7:30", "07:30:00", "١٢:٣٠"] {
            #expect(throws: ControlValues.Refusal.self, "\(bad)") { try ControlValues.time(bad) }
        }
    }

    @Test func weekdays() throws {
        #expect(try ControlValues.days("mon,tue") == ["mon", "tue"])
        #expect(try ControlValues.days("fri, Monday,mon") == ["mon", "fri"])
        #expect(try ControlValues.days("weekdays") == ["mon", "tue", "wed", "thu", "fri"])
        #expect(try ControlValues.days("weekend,wed") == ["wed", "sat", "sun"])
        #expect(try ControlValues.days("daily").count == 7)
        for bad in ["", "mo", "moon", "monx", "funday", ",,,", "mon,tue,wed,thu,fri,sat,sun,mon,tue,wed,thu"] {
            #expect(throws: ControlValues.Refusal.self, "\(bad)") { try ControlValues.days(bad) }
        }
    }

    @Test func labels() throws {
        #expect(try ControlValues.label("  pasta ") == "pasta")
        #expect(try ControlValues.label("tea für zwei") == "tea für zwei")
        #expect(throws: ControlValues.Refusal.self) { try ControlValues.label("") }
        #expect(throws: ControlValues.Refusal.self) { try ControlValues.label(String(repeating: "a", count: 65)) }
        #expect(throws: ControlValues.Refusal.self) { try ControlValues.label("evil\u{1b}[2J") }
        #expect(throws: ControlValues.Refusal.self) { try ControlValues.label("rlo\u{202e}") }
    }

    @Test func spokenDurations() {
        #expect(ControlValues.spoken(seconds: 5400) == "1h30m")
        #expect(ControlValues.spoken(seconds: 59) == "59s")
        #expect(ControlValues.spoken(seconds: 0) == "0s")
        #expect(ControlValues.spoken(seconds: 3661) == "1h1m1s")
    }

    @Test func theListingShowsWhatTheDaemonSentPrintablyAndSurvivesAnything() {
        let data: JSONValue = [
            "timers": [["label": "pasta", "remaining_s": 552, "deadline": 1_000_552]],
            "alarms": [["label": "wake\u{1b}[31m", "time": "07:30", "days": ["mon", "tue"], "next": 1_050_000]],
            "ringing": ["tea"],
        ]
        let text = TimerListing.render(data, now: 1_000_000)
        #expect(text.contains("ringing: tea"))
        #expect(text.contains("pasta  9m12s left"), "\(text)")
        #expect(text.contains("07:30  mon,tue  wake"), "\(text)")
        #expect(!text.unicodeScalars.contains { $0 == "\u{1b}" })
        // Nothing, or nonsense, is a listing too.
        #expect(TimerListing.render(nil, now: 0) == "no timers\nno alarms")
        let nonsense: JSONValue = ["timers": [["remaining_s": .number(.infinity), "deadline": 1e300]], "alarms": 5]
        #expect(TimerListing.render(nonsense, now: 0).contains("(no label)"))
    }

    @Test func announcementsAreCheckedAsBoundedWAVs() throws {
        let good = WAVFile.encode(samples: [Int16](repeating: 100, count: 16_000), sampleRate: 16_000)
        #expect(throws: Never.self) { try AnnouncementSource.check(good, named: "good.wav") }
        let notWAV = Data("hello, this is not audio".utf8)
        let refusal = #expect(throws: AnnouncementSource.Refusal.self) {
            try AnnouncementSource.check(notWAV, named: "x.txt")
        }
        #expect(refusal?.description.contains("not a WAV recording") == true)
        // Too long by its header: 6 minutes of 8 kHz.
        let long =
            WAVFile.header(sampleRate: 8000, channels: 1, dataBytes: 8000 * 2 * 360)
            + Data(count: 8000 * 2 * 360)
        let tooLong = #expect(throws: AnnouncementSource.Refusal.self) {
            try AnnouncementSource.check(long, named: "long.wav")
        }
        #expect(tooLong?.description.contains("at most 300 s") == true, "\(tooLong?.description ?? "")")
        let wide = WAVFile.encode(samples: [Int16](repeating: 0, count: 600), sampleRate: 16_000, channels: 6)
        #expect(throws: AnnouncementSource.Refusal.self) { try AnnouncementSource.check(wide, named: "6ch.wav") }
    }

    @Test func anAnnouncementURLFollowsTheEndpointRules() async throws {
        for url in ["http://example.com/a.wav", "https://user:pw@example.com/a.wav", "ftp://example.com/a.wav"] {
            let refusal = await #expect(throws: AnnouncementSource.Refusal.self) {
                _ = try await AnnouncementSource.load(url)
            }
            #expect(refusal?.usage == true, "\(url)")
            #expect(refusal?.description.contains("pw") == false)
        }
    }

    @Test func theSpooledCopyIsANewFileReadableByOthers() throws {
        let folder = FileManager.default.temporaryDirectory.path + "/hark-spool-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = try AnnouncementSource.spool(Data([1, 2, 3]), in: folder)
        #expect(path.hasPrefix(folder + "/announce-"))
        #expect(FileManager.default.contents(atPath: path) == Data([1, 2, 3]))
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o644)
    }
}
