import HarkCore
import Logging

/// Announcements (`hark announce`): played through the one speaker path, after the agent's answer when one plays.
extension Supervisor {
    /// Announcements waiting for the agent to finish speaking, at most this many.
    static let announcementLimit = 4

    /// Plays `chunk` (after a chime when `chime`) once the agent is not speaking; says what happened.
    public func announce(_ chunk: AudioChunk, chime: Bool) -> ControlReply {
        guard !chunk.samples.isEmpty else { return ControlReply(ok: false, message: "the recording is empty") }
        guard announcements.count < Self.announcementLimit else {
            return ControlReply(ok: false, message: "\(Self.announcementLimit) announcements are waiting already")
        }
        let seconds = Double(chunk.samples.count) / Double(max(1, chunk.sampleRate))
        announcements.append((chunk, chime))
        let waits = machine.playing
        playAnnouncements()
        logger.info("announcement of \(Int(seconds.rounded())) s\(waits ? " waits for the agent's answer" : "")")
        return ControlReply(
            ok: true,
            message: waits ? "queued: it plays when the agent has finished speaking" : "playing"
        )
    }

    /// Plays what waits, unless the agent speaks.
    func playAnnouncements() {
        guard !announcements.isEmpty, !machine.playing else { return }
        for (chunk, chime) in announcements {
            if chime { devices.speaker.enqueue(Earcon.listeningStart.chunk(level: behaviour.earconLevel)) }
            devices.speaker.enqueue(chunk)
        }
        announcements = []
        children.append(.drain(turn: nil))
    }
}
