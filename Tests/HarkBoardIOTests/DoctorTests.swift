import FoundationEssentials
import HarkBoard
import HarkBoardIO
import HarkCore
import HarkIndicators
import Synchronization
import Testing

@Suite struct BoardDoctorTests {
    final class NullSink: ByteSink {
        let writes = Mutex(0)
        func write(_ bytes: [UInt8]) throws { writes.withLock { $0 += 1 } }
    }

    func root(model: String, cards: [String]) throws -> String {
        let root = FileManager.default.temporaryDirectory.path + "/hark-doctor-\(UInt64.random(in: 0...UInt64.max))"
        try FileManager.default.createDirectory(atPath: root + "/proc/device-tree", withIntermediateDirectories: true)
        #expect(
            FileManager.default.createFile(
                atPath: root + "/proc/device-tree/model",
                contents: Data((model + "\0").utf8)
            )
        )
        for (index, card) in cards.enumerated() {
            try FileManager.default.createDirectory(
                atPath: root + "/proc/asound/card\(index)",
                withIntermediateDirectories: true
            )
            #expect(
                FileManager.default.createFile(atPath: root + "/proc/asound/card\(index)/id", contents: Data(card.utf8))
            )
        }
        return root
    }

    @Test func aDetectedUSBBoardWithItsChipPassesAndDrivesTheLED() throws {
        let system = try root(model: "Raspberry Pi 5 Model B Rev 1.0", cards: ["vc4hdmi0", "Device"])
        defer { try? FileManager.default.removeItem(atPath: system) }
        let chip = FakeGPIOChip(labels: ["pinctrl-rp1"])
        let doctor = BoardDoctor(
            boardDirectory: boardDirectory,
            systemRoot: system,
            io: BoardIO(gpio: chip, terminal: NullSink())
        )
        let (items, profile) = doctor.run(board: nil)
        #expect(profile?.name == "rpi-usb-audio")
        #expect(items.map(\.verdict) == [.ok, .ok, .ok])
        #expect(
            items[0].description.hasPrefix(
                "[ok  ] board: detected rpi-usb-audio (model 'Raspberry Pi 5 Model B Rev 1.0'"
            )
        )
        #expect(
            items[1].description == "[ok  ] button: line 17 on pinctrl-rp1/pinctrl-bcm2711/pinctrl-bcm2835: released"
        )
        #expect(chip.outputs(27) == [false, true, true, true, false])
    }

    @Test func failuresSayWhatToDo() throws {
        let system = try root(model: "Raspberry Pi 4 Model B Rev 1.4", cards: ["seeed2micvoicec"])
        defer { try? FileManager.default.removeItem(atPath: system) }
        let doctor = BoardDoctor(
            boardDirectory: boardDirectory,
            systemRoot: system,
            io: BoardIO(gpio: FakeGPIOChip(labels: []), terminal: NullSink())
        )
        let (items, profile) = doctor.run(board: nil)
        #expect(profile?.name == "rpi4-respeaker-2mic")
        #expect(items.map(\.verdict) == [.ok, .failed, .failed])
        #expect(items[1].description.contains("no GPIO chip labelled pinctrl-bcm2711"))
        #expect(
            items[2].description
                == "[FAIL] SPI: /dev/spidev0.1 is missing (fix: enable SPI: dtparam=spi=on in config.txt, then reboot)"
        )

        let named = doctor.run(board: "host")
        #expect(named.items.first?.verdict == .warning)
        #expect(named.items.first?.detail.hasPrefix("host selected, but this looks like rpi4-respeaker-2mic") == true)
        let unknown = doctor.run(board: "toaster")
        #expect(unknown.profile == nil)
        #expect(unknown.items.last?.fix.contains("rpi5-respeaker-2mic") == true)

        let bare = try root(model: "Some PC", cards: ["PCH"])
        defer { try? FileManager.default.removeItem(atPath: bare) }
        let undetected = BoardDoctor(boardDirectory: boardDirectory, systemRoot: bare, io: doctor.io).run(board: nil)
        #expect(undetected.items.map(\.verdict) == [.failed])
        #expect(undetected.items[0].fix == "select one with --board NAME")
    }
}
