import HarkAppliance
import HarkCore
import HarkPlatform
import Testing

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The timers and alarms as a value on a manual wall clock: deadlines, limits, the local time zone and its
/// daylight-saving changes (the C library's, under `TZ`), missed rings, two at once, and the stored file.
@Suite struct TimerBookTests {
    /// 2026-03-27 12:00:00 UTC, a Friday (computed outside the code under test).
    let friday: Double = 1_774_612_800
    let utc = UTCCalendar()

    @Test func aTimerRingsAtItsDeadlineAndNotBefore() throws {
        var book = TimerBook()
        try book.setTimer(seconds: 600, label: "pasta", now: friday)
        #expect(book.advance(now: friday + 599.9, calendar: utc).isEmpty)
        let change = book.advance(now: friday + 600, calendar: utc)
        #expect(change.started.map(\.label) == ["pasta"])
        #expect(change.started.first?.missed == false)
        #expect(book.timers.isEmpty)
        #expect(book.ringingLabels == ["pasta"])
    }

    @Test func twoTimersDueTogetherRingTogetherNamedInOrder() throws {
        var book = TimerBook()
        try book.setTimer(seconds: 300, label: "eggs", now: friday)
        try book.setTimer(seconds: 299, label: "toast", now: friday + 1)
        let change = book.advance(now: friday + 300, calendar: utc)
        #expect(change.started.map(\.label) == ["eggs", "toast"])
        #expect(
            book.perform(.list, now: friday + 300, calendar: utc).message
                == "Ringing now: the eggs timer and the toast timer."
        )
        let stopped = book.stopRinging()
        #expect(stopped.count == 2)
        #expect(book.isEmpty)
    }

    @Test func aRingStopsByItselfAfterTheRingTimeAndIsReportedMissed() throws {
        var book = TimerBook(ringFor: .seconds(300))
        try book.setTimer(seconds: 60, label: nil, now: friday)
        _ = book.advance(now: friday + 60, calendar: utc)
        #expect(book.advance(now: friday + 359, calendar: utc).isEmpty)
        let change = book.advance(now: friday + 360, calendar: utc)
        #expect(change.timedOut.map(\.label) == ["1 minute timer"])
        #expect(book.ringing.isEmpty)
    }

    @Test func boundsAreRefusedWithASentence() throws {
        var book = TimerBook()
        #expect(throws: TimerBook.Refusal.self) { try book.setTimer(seconds: 0, label: nil, now: friday) }
        #expect(throws: TimerBook.Refusal.self) { try book.setTimer(seconds: 86_401, label: nil, now: friday) }
        #expect(throws: TimerBook.Refusal.self) {
            try book.setTimer(seconds: 60, label: String(repeating: "x", count: 65), now: friday)
        }
        for index in 0..<TimerBook.limit { try book.setTimer(seconds: 60 + index, label: nil, now: friday) }
        let full = book.perform(.setTimer(seconds: 60, label: nil), now: friday, calendar: utc)
        #expect(!full.ok)
        #expect(full.message == "There are already 32 timers; cancel one first.")
        #expect(throws: TimerBook.Refusal.self) {
            try book.setAlarm(hour: 24, minute: 0, label: nil, now: friday, calendar: utc)
        }
    }

    @Test func aLabelIsMadePrintableAndBlankIsNone() throws {
        var book = TimerBook()
        let timer = try book.setTimer(seconds: 90, label: " tea\u{1B}[31m \n", now: friday)
        #expect(timer.label == "tea\\u{1B}[31m \\n")
        let unnamed = try book.setTimer(seconds: 5400, label: "   ", now: friday)
        #expect(unnamed.label == "1 hour 30 minutes timer")
    }

    @Test func cancelByLabelOrAllAndAddTime() throws {
        var book = TimerBook()
        try book.setTimer(seconds: 60, label: "Tea", now: friday)
        try book.setTimer(seconds: 120, label: "pasta", now: friday)
        let missing = book.perform(.cancelTimers(label: "rice"), now: friday, calendar: utc)
        #expect(missing.message == "There is no timer called rice; there is Tea, pasta.")
        let added = book.perform(.addTime(seconds: 60, label: "PASTA"), now: friday + 10, calendar: utc)
        #expect(added.ok)
        #expect(book.timers.last?.deadline == friday + 180)
        #expect(book.timers.last?.seconds == 180)
        #expect(
            book.perform(.cancelTimers(label: "tea"), now: friday, calendar: utc).message == "Cancelled the Tea timer."
        )
        #expect(book.timers.map(\.label) == ["pasta"])
        #expect(throws: TimerBook.Refusal.self) { try book.addTime(seconds: -200, label: nil, now: friday) }
        #expect(book.perform(.cancelTimers(label: nil), now: friday, calendar: utc).ok)
        #expect(book.timers.isEmpty)
    }

    @Test func aOneOffAlarmRingsAtTheNextSuchTimeOnce() throws {
        var book = TimerBook()
        // 12:00 UTC now: 07:00 is tomorrow, 13:00 is today.
        let morning = try book.setAlarm(hour: 7, minute: 0, label: nil, now: friday, calendar: utc)
        #expect(morning.next == friday + 19 * 3600)
        #expect(morning.label == "alarm 07:00")
        let afternoon = try book.setAlarm(hour: 13, minute: 0, label: "call", now: friday, calendar: utc)
        #expect(afternoon.next == friday + 3600)
        #expect(book.advance(now: friday + 3600, calendar: utc).started.map(\.label) == ["call"])
        #expect(book.alarms.map(\.label) == ["alarm 07:00"])
    }

    @Test func aRepeatingAlarmSkipsOtherDaysAndComesBack() throws {
        var book = TimerBook()
        // Weekdays at 07:00; now is Friday 12:00 UTC: next is Monday (3 days less 5 hours).
        let days: Set<Weekday> = [.monday, .tuesday, .wednesday, .thursday, .friday]
        let alarm = try book.setAlarm(hour: 7, minute: 0, days: days, label: "work", now: friday, calendar: utc)
        let monday = friday + 3 * 86_400 - 5 * 3600
        #expect(alarm.next == monday)
        _ = book.advance(now: monday, calendar: utc)
        #expect(book.alarms.first?.next == monday + 86_400)
        #expect(book.ringingLabels == ["work"])
    }

    @Test func snoozeStopsTheRingAndRingsAgain() throws {
        var book = TimerBook()
        try book.setAlarm(hour: 13, minute: 0, label: "nap", now: friday, calendar: utc)
        _ = book.advance(now: friday + 3600, calendar: utc)
        let outcome = book.perform(.snooze(label: nil, minutes: 9), now: friday + 3610, calendar: utc)
        #expect(outcome.ok)
        #expect(outcome.message == "Snoozed the nap alarm until 13:09.")
        #expect(book.ringing.isEmpty)
        #expect(book.advance(now: friday + 3610 + 539, calendar: utc).isEmpty)
        #expect(book.advance(now: friday + 3610 + 540, calendar: utc).started.map(\.label) == ["nap"])
        // A one-off alarm, snoozed and rung again, is gone.
        #expect(book.alarms.isEmpty)
    }

    @Test func aDailyAlarmKeepsItsLocalTimeAcrossBothDaylightSavingChanges() throws {
        let berlin = SystemCalendar(zone: "Europe/Berlin")
        var book = TimerBook()
        // Friday 2026-03-27 12:00 UTC is 13:00 CET; summer time starts on Sunday the 29th at 02:00.
        try book.setAlarm(hour: 7, minute: 0, days: Set(Weekday.allCases), label: "up", now: friday, calendar: berlin)
        #expect(book.alarms.first?.next == 1_774_677_600)  // Saturday 07:00 CET is 06:00 UTC
        _ = book.advance(now: 1_774_677_600, calendar: berlin)
        #expect(book.alarms.first?.next == 1_774_760_400)  // Sunday 07:00 CEST is 05:00 UTC: 23 hours later
        #expect(berlin.local(1_774_760_400).hour == 7)
        // Autumn: Saturday 2026-10-24 07:00 CEST (05:00 UTC), then Sunday 07:00 CET (06:00 UTC): 25 hours later.
        var autumn = TimerBook()
        try autumn.setAlarm(
            hour: 7,
            minute: 0,
            days: [.saturday, .sunday],
            label: nil,
            now: 1_792_818_000 - 60,
            calendar: berlin
        )
        #expect(autumn.alarms.first?.next == 1_792_818_000)
        _ = autumn.advance(now: 1_792_818_000, calendar: berlin)
        #expect(autumn.alarms.first?.next == 1_792_908_000)
    }

    @Test func anAlarmInTheSkippedHourStillRingsThatNight() throws {
        let berlin = SystemCalendar(zone: "Europe/Berlin")
        var book = TimerBook()
        // 02:30 does not exist in Berlin on 2026-03-29; at 01:30 CET (00:30 UTC) the alarm is set.
        let alarm = try book.setAlarm(hour: 2, minute: 30, label: nil, now: 1_774_744_200, calendar: berlin)
        // Between 03:00 and 04:00 CEST (01:00 and 02:00 UTC), not a day later.
        #expect(alarm.next >= 1_774_746_000 && alarm.next < 1_774_749_600, "\(alarm.next)")
    }

    @Test func theUTCCalendarAgreesWithKnownDates() {
        let local = utc.local(1_795_953_600)  // 2026-11-29 12:00 UTC, a Sunday
        #expect(local == LocalTime(year: 2026, month: 11, day: 29, hour: 12, minute: 0, weekday: 0))
        #expect(utc.instant(LocalTime(year: 2026, month: 11, day: 29, hour: 12, minute: 0)) == 1_795_953_600)
        #expect(
            utc.instant(LocalTime(year: 2026, month: 2, day: 29, hour: 0, minute: 0))
                == utc.instant(LocalTime(year: 2026, month: 3, day: 1, hour: 0, minute: 0))
        )
        let system = SystemCalendar(zone: "UTC")
        for instant in stride(from: Int64(0), to: 4_000_000_000, by: 86_399 * 97) {
            #expect(system.local(instant) == utc.local(instant))
        }
    }

    // MARK: Stored

    private func folder() throws -> String {
        let path = FileManager.default.temporaryDirectory.path + "/hark-timers-\(UInt64.random(in: 0...UInt64.max))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    @Test func aRestartKeepsTheDeadlinesAndRingsWhatPassedMeanwhileOnceAsMissed() throws {
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = TimerStore(path: dir + "/timers.json")
        var book = TimerBook()
        try book.setTimer(seconds: 600, label: "pasta", now: friday)
        try book.setTimer(seconds: 7200, label: "bread", now: friday)
        try book.setAlarm(hour: 13, minute: 0, days: [.friday], label: "call", now: friday, calendar: utc)
        try store.save(book)
        // Off from 12:00 to 13:30: the pasta timer and the alarm passed, the bread timer did not.
        let loaded = store.load(ringFor: .seconds(300))
        #expect(loaded.problem == nil)
        var restored = loaded.book
        #expect(restored.timers.map(\.deadline) == [friday + 600, friday + 7200])
        let change = restored.advance(now: friday + 5400, calendar: utc, resuming: true)
        #expect(change.started.map(\.label) == ["pasta", "call"])
        #expect(change.started.map(\.missed) == [true, true])
        #expect(restored.timers.map(\.label) == ["bread"])
        #expect(restored.alarms.first?.next == friday + 3600 + 7 * 86_400)  // once, then next Friday
        #expect(restored.advance(now: friday + 5401, calendar: utc).isEmpty)
    }

    @Test func aDamagedFileIsSetAsideAndTheBookStartsEmpty() throws {
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/timers.json"
        for damage in ["{\"version\": 1, \"book\": {\"tim", "[]", "{\"version\": 9, \"book\": {}}", ""] {
            try Data(damage.utf8).write(to: URL(filePath: path))
            let loaded = TimerStore(path: path).load(ringFor: .seconds(300))
            #expect(loaded.book.isEmpty)
            let problem = try #require(loaded.problem)
            #expect(problem.hasPrefix("the timers and alarms in \(path) are lost: "))
            #expect(problem.hasSuffix("the file was kept as \(path).damaged"))
            #expect(!FileManager.default.fileExists(atPath: path))
            #expect(FileManager.default.contents(atPath: path + ".damaged") == Data(damage.utf8))
        }
        #expect(TimerStore(path: dir + "/none.json").load(ringFor: .seconds(1)).problem == nil)
    }

    @Test func aFileWithImpossibleEntriesIsDamaged() throws {
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/timers.json"
        var book = TimerBook()
        try book.setTimer(seconds: 60, label: "tea", now: friday)
        try TimerStore(path: path).save(book)
        let text = try #require(String(data: try Data(contentsOf: URL(filePath: path)), encoding: .utf8))
        try Data(text.replacing("\"seconds\":60", with: "\"seconds\":-5").utf8).write(to: URL(filePath: path))
        #expect(TimerStore(path: path).load(ringFor: .seconds(300)).problem?.contains("length is out of range") == true)
    }
}
