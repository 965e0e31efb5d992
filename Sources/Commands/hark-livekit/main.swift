import Foundation
import HarkHelperProcess
import HarkLiveKitHelper
import HarkLiveKitWire

// hark-livekit: the LiveKit backend's helper. `hark` starts one per connection of a LiveKit session, with a socket
// pair on descriptor 3, and it joins the room there (LiveKit's library, WebRTC and full Foundation live in this
// process only). It ends when hark says leave or closes its end; it ignores SIGINT, SIGTERM and SIGHUP, which are
// hark's to handle (hark's end is the helper's end).

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments == ["--version"] {
    print("hark-livekit (protocol \(LiveKitWire.version))")
    exit(0)
}
guard arguments.isEmpty, fcntl(HelperProcess.childDescriptor, F_GETFD) != -1 else {
    FileHandle.standardError.write(
        Data(
            """
            hark-livekit is the LiveKit backend's helper: hark starts it (backend: livekit), with its end of a \
            socket pair on descriptor 3. Usage: hark-livekit [--version]

            """.utf8
        )
    )
    exit(2)
}
// LiveKit's library logs only through hark-livekit (when hark asks for debug lines), never on its own to standard
// error, where its records would reach the journal unredacted.
setenv("RUST_LOG", "off", 1)
signal(SIGINT, SIG_IGN)
signal(SIGTERM, SIG_IGN)
signal(SIGHUP, SIG_IGN)
exit(
    await LiveKitHelperService.run(
        descriptor: HelperProcess.childDescriptor,
        environment: ProcessInfo.processInfo.environment
    )
)
