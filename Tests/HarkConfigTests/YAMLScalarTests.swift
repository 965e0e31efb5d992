import HarkConfig
import HarkCore
import Testing

/// The configuration file's scalars read as YAML 1.1 reads them, and the rendered configuration reads
/// back as the same values.
@Suite struct YAMLScalarTests {
    private func load(_ text: String) throws -> LoadedConfiguration {
        try ConfigurationLoader.parse(text, file: "/tmp/x/hark.yaml", folder: "/tmp/x", environment: [:])
    }

    @Test func booleansInTheirYAML11Spellings() throws {
        for text in ["true", "True", "TRUE", "yes", "Yes", "on", "ON"] {
            #expect(try load("log_transcripts: \(text)\n").configuration.logTranscripts, "\(text)")
        }
        for text in ["false", "False", "no", "NO", "off", "Off"] {
            #expect(try !load("log_transcripts: \(text)\n").configuration.logTranscripts, "\(text)")
        }
    }

    @Test func numbersAreReadFromTheirTextQuotedOrNot() throws {
        // The configuration reads numbers from the scalar's text itself, in decimal only.
        for (text, value) in [("50", 50), ("\"50\"", 50), ("'7'", 7), ("010", 10)] {
            #expect(try load("earcons:\n  volume: \(text)\n").configuration.earcons.volume == value, "\(text)")
        }
        #expect(throws: ConfigurationError.self) { try load("earcons:\n  volume: 0x10\n") }
    }

    @Test func nullLeavesTheDefault() throws {
        for text in ["~", "null", "NULL", ""] {
            #expect(try load("gemini:\n  voice: \(text)\n").configuration.text("gemini.voice") == nil, "\(text)")
        }
        #expect(try load("gemini:\n  voice: \"null\"\n").configuration.text("gemini.voice") == "null")
    }

    @Test func wordsThatYAMLReadsAsOtherThingsAreRenderedQuoted() throws {
        for word in ["null", "yes", "Off", "12", "0x1f", "1e3"] {
            let loaded = try load("gemini:\n  voice: \"\(word)\"\n")
            #expect(loaded.rendered().contains("  voice: \"\(word)\"\n"), "\(word)")
            let again = try load(loaded.rendered())
            #expect(again.configuration.text("gemini.voice") == word, "\(word)")
        }
        #expect(try load("gemini:\n  voice: Kore\n").rendered().contains("  voice: Kore\n"))
    }
}
