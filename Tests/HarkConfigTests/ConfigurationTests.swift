import HarkConfig
import Testing

@Suite struct ConfigurationTests {
    @Test func theDefaultsAreTheSpeakerModeOnGemini() {
        let configuration = ApplianceConfiguration()
        #expect(configuration.mode == .speaker)
        #expect(configuration.backend == .gemini)
    }
}
