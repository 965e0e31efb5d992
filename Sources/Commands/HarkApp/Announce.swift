import ArgumentParser
import HarkAudio
import HarkControl
import HarkCore
import HarkHTTP

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// `hark announce FILE|URL [--chime]`: plays a recording through the appliance's speaker.
struct Announce: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Play an announcement (a WAV file or URL) through the appliance's speaker.",
        discussion: """
            The daemon plays it through its own speaker path (so the echo canceller hears it); during a \
            conversation it waits until the agent has finished speaking. --chime plays a short chime first.

            A file or a download must be a PCM WAV (RIFF/WAVE) of at most 16 MiB and 5 minutes, 8 to 48 kHz, one \
            or two channels; it is checked here first. A URL is fetched by this command with the rules of every \
            other endpoint: https:// (plain http:// only to this machine), no user name or password in it, \
            10 s to connect and 30 s in all, no redirects. The checked recording is copied beside the control \
            socket, where the daemon (whose /tmp and /home are its own) can read it, and removed once the \
            daemon has read it.

              hark announce /usr/share/sounds/doorbell.wav --chime
              hark announce https://intranet.example/announcements/lunch.wav

            \(ControlExit.table)
            """
    )

    @Argument(help: ArgumentHelp("A WAV file, or an https:// URL of one.", valueName: "FILE|URL"))
    var source: String

    @Flag(help: "Play a short chime before it.")
    var chime = false

    @OptionGroup var socket: ControlSocketOptions

    func run() async throws {
        let bytes: Data
        do {
            bytes = try await AnnouncementSource.load(source)
        } catch {
            printError("hark announce: \(error.description)")
            throw ExitCode(error.usage ? ControlExit.usage : ControlExit.refused)
        }
        let path = socket.path()
        let spool = path.lastIndex(of: "/").map { String(path[..<$0]) }.map { $0.isEmpty ? "/" : $0 } ?? "."
        let copy: String
        do {
            copy = try AnnouncementSource.spool(bytes, in: spool)
        } catch {
            printError(
                "hark announce: cannot put the recording where the daemon reads it (\(error.description)); "
                    + "the folder of the control socket is the service's group's: add yourself to it, or use sudo"
            )
            throw ExitCode(ControlExit.permission)
        }
        defer { unlink(copy) }
        let reply = try await socket.send(
            ControlRequest(op: "announce", args: ["file": .string(copy), "chime": .bool(chime)]),
            command: "announce",
            timeout: .seconds(30)
        )
        try finishControl(reply, command: "announce")
    }
}

/// Where an announcement comes from: a local file or a URL, checked as a bounded WAV before the daemon sees it.
enum AnnouncementSource {
    /// The largest recording taken.
    static let byteLimit = 16 << 20
    /// The longest recording taken, in seconds.
    static let secondsLimit = 300.0

    /// Why a recording is not taken.
    struct Refusal: Error, CustomStringConvertible {
        var description: String
        /// A value the command does not take (exit 2) rather than a source that failed.
        var usage = false
    }

    /// The bytes of `source` (a path, or an http(s) URL), checked with ``check(_:named:)``.
    static func load(
        _ source: String,
        client: NIOHTTPClient = NIOHTTPClient(maxResponseBytes: byteLimit, connectTimeout: .seconds(10))
    ) async throws(Refusal) -> Data {
        if source.contains("://") {
            if let problem = EndpointPolicy.check(url: source, allowInsecure: client.allowInsecure) {
                throw Refusal(description: problem, usage: true)
            }
            guard let url = EndpointURL(source), url.scheme == "http" || url.scheme == "https" else {
                throw Refusal(description: "an announcement URL is http:// or https://", usage: true)
            }
            let shown = NIOHTTPClient.redactedHost(source)
            let response: HTTPResponse
            do {
                response = try await client.send(HTTPRequest(url: source, timeout: .seconds(30)))
            } catch {
                throw Refusal(description: "cannot fetch the announcement from \(shown): \(error)")
            }
            guard response.status == 200 else {
                throw Refusal(description: "\(shown) answered HTTP \(response.status), not the recording")
            }
            try check(response.body, named: URLRedaction.redact(source))
            return response.body
        }
        let shown = RemoteText.printable(source, limit: 200)
        let attributes: [FileAttributeKey: Any]
        do {
            attributes = try ReadableFile.attributes(atPath: source)
        } catch {
            throw Refusal(description: "cannot read \(shown): \(FileFailure.reason(error))", usage: true)
        }
        guard attributes[.type] as? FileAttributeType == .typeRegular else {
            throw Refusal(description: "\(shown) is not a regular file", usage: true)
        }
        let size = (attributes[.size] as? UInt).map { Int(clamping: $0) } ?? (attributes[.size] as? Int) ?? 0
        guard size <= byteLimit else {
            throw Refusal(
                description: "\(shown): \(size) bytes, more than the \(byteLimit >> 20) MiB an announcement may be"
            )
        }
        let data: Data
        do {
            data = try Data(contentsOf: URL(filePath: source))
        } catch {
            throw Refusal(description: "cannot read \(shown): \(FileFailure.reason(error))")
        }
        try check(data, named: shown)
        return data
    }

    /// Throws unless `data` is a PCM WAV within the bounds (size, length, rate, channels).
    static func check(_ data: Data, named name: String) throws(Refusal) {
        guard data.count <= byteLimit else {
            throw Refusal(description: "\(name): more than the \(byteLimit >> 20) MiB an announcement may be")
        }
        let header: (format: WAVFormat, frames: Int)
        do {
            header = try WAVFile.header(data)
        } catch {
            throw Refusal(description: "\(name) is not a WAV recording Hark plays: \(error)")
        }
        guard (8000...48000).contains(header.format.sampleRate) else {
            throw Refusal(description: "\(name): \(header.format.sampleRate) Hz; an announcement is 8 to 48 kHz")
        }
        guard (1...2).contains(header.format.channels) else {
            throw Refusal(description: "\(name): \(header.format.channels) channels; an announcement has one or two")
        }
        let seconds = Double(header.frames) / Double(header.format.sampleRate)
        guard seconds <= secondsLimit else {
            throw Refusal(
                description: "\(name): \(Int(seconds)) s long; an announcement is at most \(Int(secondsLimit)) s"
            )
        }
    }

    /// Writes `data` to a new file in `folder` (never over an existing file or through a link), readable by the
    /// daemon; returns its path.
    static func spool(_ data: Data, in folder: String) throws(Refusal) -> String {
        var random = SystemRandomNumberGenerator()
        for _ in 0..<8 {
            let name = "announce-\(getpid())-\(String(random.next() as UInt64, radix: 36)).wav"
            let path = (folder.hasSuffix("/") ? folder : folder + "/") + name
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
            if fd < 0 {
                if errno == EEXIST { continue }
                throw Refusal(
                    description: "\(RemoteText.printable(folder, limit: 200)): \(String(cString: strerror(errno)))"
                )
            }
            defer { close(fd) }
            // The mode stays 0644 whatever the umask: the daemon runs as another user.
            fchmod(fd, 0o644)
            let written = data.withUnsafeBytes { raw -> Bool in
                var offset = 0
                while offset < raw.count {
                    let count = write(fd, raw.baseAddress! + offset, raw.count - offset)
                    if count < 0, errno == EINTR { continue }
                    guard count > 0 else { return false }
                    offset += count
                }
                return true
            }
            guard written else {
                let reason = String(cString: strerror(errno))
                unlink(path)
                throw Refusal(description: "\(RemoteText.printable(path, limit: 200)): \(reason)")
            }
            return path
        }
        throw Refusal(description: "no free name for the recording in \(RemoteText.printable(folder, limit: 200))")
    }
}
