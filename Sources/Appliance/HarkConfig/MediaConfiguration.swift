import HarkCore
import HarkMedia
import HarkPlatform

/// One station of `media.stations`: a name people and the agent say, and where it streams from.
public struct MediaStation: Sendable, Hashable {
    /// The name (1 to 48 letters, digits, spaces, `-`, `_`, `.`, `'`).
    public var name: String
    /// The URL (or absolute path), checked against the allow-list.
    public var url: String

    /// A station.
    public init(name: String, url: String) {
        self.name = name
        self.url = url
    }
}

/// Music and radio (`media:`): the stations, what may be played, how it ducks under speech, its bounds.
public struct MediaSettings: Sendable, Hashable {
    /// The most stations.
    public static let stationLimit = 64
    /// The longest station name, in characters.
    public static let nameLimit = 48

    /// `media.enabled`: false turns music and radio off (no tools; the control socket refuses).
    public var enabled = true
    /// `media.stations`: name → URL, in the file's order.
    public var stations: [MediaStation] = []
    /// `media.allow_schemes`: https, http, file.
    public var allowSchemes = ["https"]
    /// `media.allow_hosts`: the hosts (and their subdomains) streams may come from; empty allows any.
    public var allowHosts: [String] = []
    /// `media.duck_db`: how far music falls under speech, alarms and announcements, in dB (−60 to 0).
    public var duckDecibels = -20.0
    /// `media.buffer`: decoded audio held ahead of the speaker.
    public var buffer: Duration = .seconds(2)
    /// `media.open_timeout`: how long connecting and probing a source may take.
    public var openTimeout: Duration = .seconds(10)
    /// `media.stall_timeout`: how long playing may go without decoded audio before the source counts as stalled.
    public var stallTimeout: Duration = .seconds(10)

    public init() {}

    /// The allow-list of `allow_schemes` and `allow_hosts`.
    public var allowList: MediaAllowList { MediaAllowList(schemes: Set(allowSchemes), hosts: allowHosts) }

    /// The station called `name` (case and surrounding spaces do not matter).
    public func station(named name: String) -> MediaStation? {
        let wanted = name.trimmedWhitespace.lowercased()
        return stations.first { $0.name.lowercased() == wanted }
    }

    /// The player's settings at the playback's `rate`.
    public func playerConfiguration(outputRate rate: Int) -> MediaPlayer.Configuration {
        MediaPlayer.Configuration(
            outputRate: rate,
            buffer: buffer,
            openTimeout: openTimeout,
            stallTimeout: stallTimeout,
            allow: allowList
        )
    }

    /// Why the stations do not fit the allow-list, as (station, problem), or nil.
    func refusedStation() -> (String, String)? {
        let allow = allowList
        for station in stations {
            do {
                _ = try allow.target(station.url)
            } catch {
                return (station.name, error.message)
            }
        }
        return nil
    }
}

extension ConfigurationKey {
    /// A list of single values (comma-separated or a YAML sequence), each checked by `check`, at most `limit`.
    static func strings(
        _ path: String,
        _ keyPath: Path<[String]>,
        limit: Int,
        check: @escaping (String) throws -> String
    ) -> ConfigurationKey {
        ConfigurationKey(
            path: path,
            isList: true,
            set: { configuration, text in
                let items = SettingKey.items(text ?? "")
                guard items.count <= limit else { throw InvalidValue(problem: "holds more than \(limit) items") }
                var checked: [String] = []
                for item in items {
                    let value = try check(item)
                    if !checked.contains(value) { checked.append(value) }
                }
                configuration[keyPath: keyPath] = checked
            },
            render: { $0[keyPath: keyPath].isEmpty ? .null : .plain($0[keyPath: keyPath].joined(separator: ", ")) }
        )
    }

    /// `media.allow_schemes`: each one of https, http, file.
    static func mediaScheme(_ item: String) throws -> String {
        let scheme = item.lowercased()
        guard MediaAllowList.knownSchemes.contains(scheme) else {
            throw InvalidValue(problem: "must name schemes of https, http, file \(got(item))")
        }
        return scheme
    }

    /// `media.allow_hosts`: each a host name or an IP address.
    static func mediaHost(_ item: String) throws -> String {
        let host = item.lowercased().hasPrefix(".") ? String(item.lowercased().dropFirst()) : item.lowercased()
        guard EndpointURL("https://" + (host.contains(":") ? "[\(host)]" : host)) != nil else {
            throw InvalidValue(problem: "must be host names or addresses, without a scheme or path \(got(item))")
        }
        return host
    }
}

/// Reads `media.stations`: a mapping of name to URL.
enum MediaConfigurationReader {
    static func stations(_ field: YAMLField<ConfigurationError>) throws(ConfigurationError) -> [MediaStation] {
        guard !field.isNull else { return [] }
        let entries = try field.entries()
        guard entries.count <= MediaSettings.stationLimit else {
            throw field.error("holds more than \(MediaSettings.stationLimit) stations")
        }
        var stations: [MediaStation] = []
        for (name, value) in entries {
            guard !name.isEmpty, name.count <= MediaSettings.nameLimit,
                name.unicodeScalars.allSatisfy({
                    $0.properties.isAlphabetic || ("0"..."9").contains($0) || " -_.'&".unicodeScalars.contains($0)
                })
            else {
                throw value.error(
                    "a station's name has 1 to \(MediaSettings.nameLimit) letters, digits, spaces, - _ . ' & \(got(name))"
                )
            }
            guard !stations.contains(where: { $0.name.lowercased() == name.lowercased() }) else {
                throw value.error("names a station twice")
            }
            let url = try value.string()
            guard url.utf8.count <= MediaAllowList.maximumURLLength else {
                throw value.error("a station's URL is longer than \(MediaAllowList.maximumURLLength) bytes")
            }
            stations.append(MediaStation(name: name, url: url))
        }
        return stations
    }

    /// The rendered lines of `stations:`.
    static func rendered(_ stations: [MediaStation]) -> [String] {
        guard !stations.isEmpty else { return ["  stations: {}"] }
        return ["  stations:"]
            + stations.map { station in
                "    \(RenderedValue.scalar(station.name)): \(RenderedValue.scalar(URLRedaction.redact(station.url)))"
            }
    }
}
