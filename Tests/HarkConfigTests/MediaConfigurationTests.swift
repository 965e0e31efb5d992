import HarkConfig
import HarkCore
import Testing

/// `media:`: the stations, the allow-list they must fit, the ducking and the bounds.
struct MediaConfigurationTests {
    func parse(_ text: String, environment: [String: String] = [:]) throws -> ApplianceConfiguration {
        try ConfigurationLoader.parse(text, file: "/srv/hark.yaml", folder: "/srv", environment: environment)
            .configuration
    }

    func problem(_ text: String, environment: [String: String] = [:]) -> String {
        do {
            _ = try parse(text, environment: environment)
            return ""
        } catch {
            return "\(error)"
        }
    }

    @Test func defaults() throws {
        let media = try parse("").media
        #expect(media.enabled)
        #expect(media.stations.isEmpty)
        #expect(media.allowSchemes == ["https"])
        #expect(media.allowHosts.isEmpty)
        #expect(media.duckDecibels == -20)
        #expect(media.buffer == .seconds(2))
        #expect(media.stallTimeout == .seconds(10))
    }

    @Test func stationsAndTheAllowList() throws {
        let media = try parse(
            """
            media:
              stations:
                Jazz FM: https://jazz.example/stream.mp3
                news: http://news.example/live
              allow_schemes: [https, http]
              allow_hosts: jazz.example, .news.example
              duck_db: -30
              buffer: 4s
              stall_timeout: 20s
            """
        ).media
        #expect(media.stations.map(\.name) == ["Jazz FM", "news"])
        #expect(media.station(named: " jazz fm ")?.url == "https://jazz.example/stream.mp3")
        #expect(media.allowSchemes == ["https", "http"])
        #expect(media.allowHosts == ["jazz.example", "news.example"])
        #expect(media.duckDecibels == -30)
        #expect(media.stallTimeout == .seconds(20))
        #expect(media.buffer == .seconds(4))
    }

    @Test func refusesWhatDoesNotFit() {
        // A station the allow-list refuses is named.
        #expect(problem("media:\n  stations:\n    news: http://news.example/live\n").contains("news"))
        #expect(problem("media:\n  stations:\n    a: https://x.example/\n  allow_hosts: y.example\n").contains("y"))
        #expect(problem("media:\n  stations:\n    a: ftp://x.example/\n").contains("media.stations"))
        #expect(problem("media:\n  stations:\n    \"a\\nb\": https://x.example/\n").contains("name"))
        #expect(
            problem("media:\n  stations:\n    a: https://x.example/\n    A: https://y.example/\n").contains("twice")
        )
        #expect(problem("media:\n  stations: [https://x.example/]\n").contains("mapping"))
        #expect(problem("media:\n  allow_schemes: gopher\n").contains("https, http, file"))
        #expect(problem("media:\n  allow_hosts: https://x.example/\n").contains("host"))
        #expect(problem("media:\n  duck_db: 6\n").contains("media.duck_db"))
        #expect(problem("media:\n  stall_timeout: 0s\n").contains("media.stall_timeout"))
        #expect(problem("media:\n  loud: true\n").contains("loud"))
        let many = (0...64).map { "    s\($0): https://x.example/\($0)" }.joined(separator: "\n")
        #expect(problem("media:\n  stations:\n" + many + "\n").contains("64"))
        // The environment can widen the allow-list; then the station passes.
        #expect(
            problem(
                "media:\n  stations:\n    news: http://news.example/live\n",
                environment: [
                    "HARK_MEDIA_ALLOW_SCHEMES": "https,http"
                ]
            ).isEmpty
        )
    }

    @Test func theRenderedConfigurationReadsBackTheSame() throws {
        let text = """
            media:
              stations:
                Jazz FM: https://jazz.example/stream.mp3
              allow_hosts: jazz.example
              duck_db: -12
            """
        let loaded = try ConfigurationLoader.parse(text, file: "/srv/hark.yaml", folder: "/srv", environment: [:])
        let again = try parse(loaded.rendered())
        #expect(again.media == loaded.configuration.media)
    }
}
