import Foundation
import HarkApp
import HarkAudio
import HarkCore
import HarkLiveSimulator
import HarkSimulatorKit
import HarkTestKit
import Testing

/// `hark converse` with sound devices: a microphone and a speaker through the real alsa-lib code paths
/// (the `file` plugin over `null`), against the simulator.
@Suite(.timeLimit(.minutes(2))) struct ConverseDeviceTests {
    @Test func aMicrophoneAndASpeakerReplaceTheFiles() async throws {
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        let directory = FileManager.default.temporaryDirectory.path + "/hark-devices-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // What the microphone hears: an utterance, then silence (a file device repeats its last buffer when
        // the file runs out, so it ends in silence).
        let heard = TestSignals.speech(total: .seconds(6), burst: .milliseconds(1600), gap: .seconds(10))
        try PCM16.bytes(heard).write(to: URL(fileURLWithPath: directory + "/mic.raw"))

        let run = try await converse(simulator, input: []) {
            $0.input = ""
            $0.captureDevice = .rawFile(
                output: directory + "/unused.raw",
                input: directory + "/mic.raw",
                name: "hark_mic"
            )
            $0.captureRequest = PCMRequest(formats: [.s16LE], channels: 1, rates: [16_000])
            $0.captureBackpressure = true
            $0.listen = .milliseconds(600)
            $0.playbackDevice = .rawFile(output: directory + "/speaker.raw", name: "hark_speaker")
            $0.playbackRequest = PCMRequest(formats: [.s16LE], channels: 1, rates: [24_000])
        }
        #expect(run.outcome.exitCode == 0, "\(run.outcome.message ?? "")")
        #expect(run.transcript.contains("model: answering turn 1"))
        let snapshot = simulator.recorder.snapshot()
        #expect(snapshot.audioSamples >= 16_000 * 2)  // the utterance and the silence that ended it
        // The speaker played exactly the answer (with silence where the network was slower than playback).
        let answer = try #require(run.output).samples
        let played = PCM16.samples(try Data(contentsOf: URL(fileURLWithPath: directory + "/speaker.raw")))
        #expect(!answer.isEmpty)
        #expect(played.filter { $0 != 0 } == answer.filter { $0 != 0 })
    }

    @Test func aDeviceThatCannotOpenIsAUsageError() async throws {
        let simulator = try await startSimulator()
        defer { Task { try? await simulator.stop() } }
        let run = try await converse(simulator) { $0.playbackDevice = .named("hark_no_such_device") }
        #expect(run.outcome.exitCode == 2)
        #expect(run.outcome.message?.contains("hark_no_such_device") == true)
    }
}
