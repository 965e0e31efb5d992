import Foundation
import HarkAppliance
import HarkCore
import Testing

/// Arguments come from the model: anything out of range, of the wrong type, NaN, huge or negative is an
/// error result it can read, never a trap, and the device is left as it was.
@Suite struct DeviceToolArgumentTests {
    let controls = TestControls()
    var registry: ToolRegistry { ToolRegistry(DeviceTools.make(controls: controls)) }

    @Test func setVolumeRefusesEveryNumberItCannotUse() async throws {
        let wrong: [(JSONValue, String)] = [
            (.number(1e300), "got 1e+300"),
            (.number(-1e300), "got -1e+300"),
            (.number(.nan), "got nan"),
            (.number(.infinity), "got inf"),
            (.number(-.infinity), "got -inf"),
            (.number(-5), "got -5.0"),
            (.number(101), "got 101.0"),
            (.number(100.6), "got 100.6"),
            (.number(-0.6), "got -0.6"),
            (.number(Double(Int.max)), "got 9.223372036854776e+18"),
            (.string("50"), "not a string"),
            (.bool(true), "not a boolean"),
            (.null, "not null"),
            (.array([50]), "not an array"),
            (.object(["value": 50]), "not an object"),
        ]
        for (value, says) in wrong {
            let (result, succeeded) = await registry.call(name: "set_volume", arguments: ["percent": value])
            #expect(!succeeded, "\(value)")
            let message = try #require(result["error"]?.stringValue, "\(value)")
            #expect(message.hasPrefix("percent must be a whole number from 0 to 100"), "\(value)")
            #expect(message.contains(says), "\(value): \(message)")
        }
        for arguments: JSONValue in [[:], ["volume": 50], .null, [50], "percent=50", .number(50)] {
            let (result, succeeded) = await registry.call(name: "set_volume", arguments: arguments)
            #expect(!succeeded, "\(arguments)")
            #expect(result["error"]?.stringValue?.hasPrefix("percent must be") == true, "\(arguments)")
        }
        #expect(await controls.volume() == 50)
    }

    @Test func setVolumeTakesEveryNumberInRange() async {
        for (value, expected) in [(0.0, 0), (100, 100), (55.5, 56), (0.4, 0), (100.4, 100), (-0.4, 0), (42, 42)] {
            let (result, succeeded) = await registry.call(name: "set_volume", arguments: ["percent": .number(value)])
            #expect(succeeded && result == ["volume": .number(Double(expected))], "\(value)")
        }
    }

    @Test func setMicrophoneMutedTakesOnlyABoolean() async throws {
        for value: JSONValue in [0, 1, "true", .null, [true], .number(.nan)] {
            let (result, succeeded) = await registry.call(name: "set_microphone_muted", arguments: ["muted": value])
            #expect(!succeeded, "\(value)")
            #expect(result["error"]?.stringValue?.hasPrefix("muted must be true or false") == true)
        }
        let missing = await registry.call(name: "set_microphone_muted", arguments: [:])
        #expect(missing.result["error"] == "muted must be true or false; it is missing")
        #expect(await controls.isMuted() == false)
    }

    @Test func toolsWithoutArgumentsIgnoreWhateverComes() async {
        for name in ["get_volume", "get_time", "get_device_status"] {
            for arguments: JSONValue in [.null, [1e300], ["x": .number(.nan)], "text"] {
                #expect(await registry.call(name: name, arguments: arguments).succeeded, "\(name) \(arguments)")
            }
        }
    }

    @Test func theArgumentReadersAreUsableByOtherTools() throws {
        #expect(try DeviceTools.integer("n", in: ["n": 7], range: -10...10) == 7)
        #expect(try DeviceTools.integer("n", in: ["n": -10.4], range: -10...10) == -10)
        // 2^63, the Double nearest Int.max, is past Int's range.
        for huge in [1e19, Double(Int.max)] {
            #expect(throws: DeviceTools.ArgumentError.self) {
                try DeviceTools.integer("n", in: ["n": .number(huge)], range: 0...Int.max)
            }
        }
        #expect(try DeviceTools.boolean("b", in: ["b": false]) == false)
    }
}
