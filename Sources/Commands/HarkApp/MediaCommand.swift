import ArgumentParser
import HarkCore

/// `hark media`: the daemon's music and radio.
struct Media: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Play, pause, resume and stop music and radio on the appliance.",
        discussion: """
            Music and radio play through the appliance's one speaker path, ducked under its voice, alarms and \
            announcements. Stations are named in the configuration (media.stations); a URL must fit its allow-list \
            (media.allow_schemes, media.allow_hosts). Each command asks the running daemon through its control socket.

              hark media play jazz                      the station named jazz
              hark media play https://radio.example/live.mp3    a stream (Icecast, HLS, a file over https)
              hark media pause | resume | stop
              hark media status                         what plays, its title, and the stations

            \(ControlExit.table)
            """,
        subcommands: [Play.self, Pause.self, Resume.self, Stop.self, Status.self],
        defaultSubcommand: Status.self
    )

    /// The longest source taken on the command line (a station's name or a URL).
    static let sourceLimit = 2048

    /// Sends `op` and prints the reply (the status's line when there is one).
    static func send(_ op: String, args: [String: JSONValue] = [:], socket: ControlSocketOptions) async throws {
        let command = "media " + op.dropFirst("media.".count)
        // A play waits until the stream plays or fails (its open timeout, up to 2 minutes).
        let reply = try await socket.send(
            ControlRequest(op: op, args: args),
            command: command,
            timeout: op == "media.play" ? .seconds(130) : .seconds(10)
        )
        try finishControl(reply, command: command)
    }

    /// `hark media play NAME|URL`.
    struct Play: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Play a station by its name, or a URL.",
            discussion: ControlExit.table
        )

        @Argument(help: ArgumentHelp("A station's name (media.stations) or a URL.", valueName: "NAME|URL"))
        var source: String

        @OptionGroup var socket: ControlSocketOptions

        func validate() throws {
            guard !source.isEmpty, source.utf8.count <= Media.sourceLimit,
                source.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F })
            else {
                throw ValidationError(
                    "NAME|URL must be a station's name or a URL of at most \(Media.sourceLimit) bytes, without control characters"
                )
            }
        }

        func run() async throws {
            try await Media.send("media.play", args: ["source": .string(source)], socket: socket)
        }
    }

    /// `hark media pause`.
    struct Pause: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Pause what plays.", discussion: ControlExit.table)
        @OptionGroup var socket: ControlSocketOptions
        func run() async throws { try await Media.send("media.pause", socket: socket) }
    }

    /// `hark media resume`.
    struct Resume: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Resume what was paused.",
            discussion: ControlExit.table
        )
        @OptionGroup var socket: ControlSocketOptions
        func run() async throws { try await Media.send("media.resume", socket: socket) }
    }

    /// `hark media stop`.
    struct Stop: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Stop what plays.", discussion: ControlExit.table)
        @OptionGroup var socket: ControlSocketOptions
        func run() async throws { try await Media.send("media.stop", socket: socket) }
    }

    /// `hark media status`.
    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Tell what plays, its title, and the stations.",
            discussion: ControlExit.table
        )
        @OptionGroup var socket: ControlSocketOptions
        func run() async throws { try await Media.send("media.status", socket: socket) }
    }
}
