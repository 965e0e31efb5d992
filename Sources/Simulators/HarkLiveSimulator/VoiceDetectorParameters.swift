import HarkGemini
import HarkSimulatorKit

extension SimulatorVoiceDetector.Parameters {
    /// The parameters for a setup's `automaticActivityDetection`:
    /// - start: `START_SENSITIVITY_HIGH` (default) −50 dBFS and 40 ms of prefix padding;
    ///   `START_SENSITIVITY_LOW` −38 dBFS and 100 ms; `prefixPaddingMs` overrides the padding.
    /// - end: `END_SENSITIVITY_HIGH` (default) −44 dBFS and 500 ms of silence;
    ///   `END_SENSITIVITY_LOW` −56 dBFS and 800 ms; `silenceDurationMs` overrides the silence.
    public init(_ detection: RealtimeInputConfig.AutomaticActivityDetection?) {
        let lowStart = detection?.startOfSpeechSensitivity == .low
        let lowEnd = detection?.endOfSpeechSensitivity == .low
        self.init(
            startThresholdDBFS: lowStart ? -38 : -50,
            endThresholdDBFS: lowEnd ? -56 : -44,
            prefixPadding: .milliseconds(max(0, detection?.prefixPaddingMs ?? (lowStart ? 100 : 40))),
            silenceDuration: .milliseconds(max(0, detection?.silenceDurationMs ?? (lowEnd ? 800 : 500)))
        )
    }
}
