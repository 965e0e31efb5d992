import Glibc
import HarkCore

/// A sound the alert lane loops (a timer's or an alarm's), as Float PCM16 values at the mixer's rate. It does not
/// change once made, so the playback thread reads it while other threads hold it.
public final class MixerSound: Sendable {
    /// The samples, at most the limit it was made with.
    public let samples: [Float]

    /// The first `limit` of `samples` (at least one sample is kept: an empty sound is one of silence).
    public init(_ samples: [Int16], limit: Int) {
        let kept = samples.prefix(max(1, limit)).map(Float.init)
        self.samples = kept.isEmpty ? [0] : kept
    }
}

/// Everything the speaker plays, mixed in one place as a value before the samples reach the device (and the echo
/// canceller, which gets the sum). Lanes, highest first:
/// - **voice**: the agent's answer from the jitter buffer (earcons and announcements reach it through the same
///   queue, in order, so an announcement waits until the answer before it has been played); the caller writes it
///   into the block and says how many samples it holds. A barge-in empties it (the caller's part); the other lanes
///   play on.
/// - **alert**: a timer's or an alarm's sound, looped at full level, ducked to ``alertUnderVoice`` under the voice
///   (still heard, the words understood).
/// - **media**: music or radio read from a ``SampleRing`` another thread decodes into. It falls to ``duckGain``
///   within ``duckAttack`` samples of any reason to duck (the voice lane sounding or about to, the alert, or a
///   reason the owner sets in ``ducking``: the wake word heard, the user speaking, an announcement) and comes back
///   over ``duckRelease`` samples after the last one cleared. A ring that runs dry plays silence for what is
///   missing (counted); the mixer never waits for it.
///
/// Every gain change ramps sample by sample (no click). Real-time rules: its scratch room is reserved when it is
/// made; ``mix(_:count:voiceCount:)`` neither allocates nor locks nor waits; the sounds and rings it holds are
/// made by other threads and handed over whole.
public struct SpeakerMixer: Sendable {
    /// Samples per second of every lane.
    public let rate: Int
    /// The alert's level under the voice (0.25 is −12 dB).
    public var alertUnderVoice: Float = 0.25
    /// The media lane's level while ducked (0.1 is −20 dB).
    public private(set) var duckGain: Float
    /// Samples over which a lane fades in or out (5 ms).
    public let rampSamples: Int
    /// Samples over which the media lane falls from full level to ``duckGain`` (30 ms).
    public let duckAttack: Int
    /// Samples over which it comes back to full level after the last reason cleared (600 ms).
    public let duckRelease: Int
    /// Reasons to duck the media lane the owner sets (the playback thread's own: the voice lane and the alert, are
    /// seen by the mixer itself).
    public var ducking: DuckReason = []
    /// The voice lane has audio that will play in a block soon (the owner's prebuffer): the media lane ducks ahead
    /// of it, so the voice never starts over media at full level (see ``readyForVoice``).
    public var voiceWaiting = false

    private var alert: MixerSound?
    private var alertPosition = 0
    /// True while the alert is asked to sound (it may still fade out when false).
    public private(set) var alerting = false
    /// The alert's gain now.
    public private(set) var alertGain: Float = 0

    private var media: SampleRing?
    /// A ring attached while another still fades out: it comes in once that one is silent.
    private var nextMedia: SampleRing?
    /// True while a ring is attached (the last ``setMedia(_:)`` gave one).
    public private(set) var mediaAttached = false
    /// The media lane's fade in and out (attach, detach): 0 … 1.
    public private(set) var mediaPresence: Float = 0
    /// The media lane's duck level: ``duckGain`` … 1.
    public private(set) var mediaLevel: Float = 1
    /// True while the attached ring gave all the last block asked of it.
    public private(set) var mediaFlowing = false
    /// Times the attached ring ran dry (each episode once).
    public private(set) var mediaUnderruns = 0
    /// Samples of silence played for what the ring did not have.
    public private(set) var mediaMissing = 0

    private var scratch: [Float]

    /// A mixer at `rate` samples per second, ducking media by `duckDecibels` (clamped to −60 … 0; −20 when not a
    /// number).
    public init(rate: Int, duckDecibels: Double = -20) {
        self.rate = max(1000, rate)
        rampSamples = max(1, self.rate / 200)
        duckAttack = max(1, self.rate * 3 / 100)
        duckRelease = max(1, self.rate * 6 / 10)
        duckGain = 0.1
        scratch = [Float](repeating: 0, count: 1024)
        setDuckDecibels(duckDecibels)
    }

    /// Sets the media lane's ducked level in decibels (clamped to −60 … 0; −20 when not a number).
    public mutating func setDuckDecibels(_ decibels: Double) {
        let value = decibels.isNaN ? -20 : max(-60, min(0, decibels))
        duckGain = Float(Glibc.pow(10, value / 20))
    }

    /// True while the mix adds something to a block or will (a lane sounds, or fades out, or a ring is attached):
    /// the owner keeps the device running on it.
    public var isActive: Bool {
        alerting || alertGain > 0 || mediaAttached || mediaPresence > 0 || nextMedia != nil
    }

    /// True while the alert sounds or fades out.
    public var isAlerting: Bool { alerting || alertGain > 0 }

    /// True while media is attached and sounds (its ring gives samples).
    public var mediaPlaying: Bool { mediaAttached && mediaFlowing }

    /// True when the voice may start: no media sounds above its ducked level.
    public var readyForVoice: Bool { mediaPresence == 0 || mediaLevel <= duckGain }

    /// True when every sound and ring the mixer holds is `sound` or `ring` (nothing given before them still fades
    /// out): its owner may then let go of older ones.
    public func holdsOnly(alert sound: MixerSound?, media ring: SampleRing?) -> Bool {
        (alert == nil || alert === sound) && (media == nil || media === ring)
            && (nextMedia == nil || nextMedia === ring)
    }

    /// Starts looping `sound` from its beginning, or fades the alert out (nil).
    public mutating func setAlert(_ sound: MixerSound?) {
        guard let sound else {
            alerting = false
            return
        }
        alert = sound
        alertPosition = 0
        alerting = true
    }

    /// Attaches `ring` to the media lane (it fades in, after the ring before it faded out), or fades the lane out
    /// and lets go of its ring (nil). The same ring again changes nothing.
    public mutating func setMedia(_ ring: SampleRing?) {
        guard let ring else {
            mediaAttached = false
            nextMedia = nil
            return
        }
        if ring === media && mediaAttached { return }
        if media == nil || mediaPresence == 0 {
            media = ring
            nextMedia = nil
        } else {
            nextMedia = ring
        }
        mediaAttached = true
        mediaFlowing = true
    }

    /// Every lane fades in again from silence (after the device dropped what it held: a barge-in), so none starts
    /// with a click.
    public mutating func restartFades() {
        alertGain = 0
        mediaPresence = 0
        if let next = nextMedia {
            media = next
            nextMedia = nil
        }
    }

    /// Mixes into the first `count` samples of `block` (Float PCM16 values; the first `voiceCount` of them are the
    /// voice lane's, the rest silence): adds the alert and the media lane, each at its gain.
    public mutating func mix(_ block: UnsafeMutablePointer<Float>, count: Int, voiceCount: Int) {
        guard isActive else { return }
        var offset = 0
        while offset < count {
            let n = min(count - offset, scratch.count)
            mixPiece(block + offset, count: n, voiceCount: max(0, min(n, voiceCount - offset)))
            offset += n
        }
    }

    private mutating func mixPiece(_ block: UnsafeMutablePointer<Float>, count: Int, voiceCount: Int) {
        // The scratch room is taken out of the value while it is used (an empty array allocates nothing).
        var room = [Float]()
        swap(&room, &scratch)
        defer { swap(&room, &scratch) }
        room.withUnsafeMutableBufferPointer { buffer in
            guard let media = buffer.baseAddress else { return }
            var got = 0
            if let ring = self.media, mediaAttached || mediaPresence > 0 {
                got = ring.read(into: media, count: count)
                if mediaAttached && nextMedia == nil {
                    if got < count {
                        mediaMissing += count - got
                        if mediaFlowing { mediaUnderruns += 1 }
                        mediaFlowing = false
                    } else {
                        mediaFlowing = true
                    }
                }
            }
            if got < count { (media + got).update(repeating: 0, count: count - got) }
            let ramp = 1 / Float(rampSamples)
            let attack = (1 - duckGain) / Float(duckAttack)
            let release = (1 - duckGain) / Float(duckRelease)
            let ducked = !ducking.isEmpty || voiceWaiting
            let presenceTarget: Float = mediaAttached && nextMedia == nil ? 1 : 0
            if let sound = alert, alerting || alertGain > 0 {
                sound.samples.withUnsafeBufferPointer { pattern in
                    for k in 0..<count {
                        let target: Float = alerting ? (k < voiceCount ? alertUnderVoice : 1) : 0
                        alertGain = target > alertGain ? min(target, alertGain + ramp) : max(target, alertGain - ramp)
                        block[k] += pattern[alertPosition] * alertGain
                        alertPosition += 1
                        if alertPosition >= pattern.count { alertPosition = 0 }
                        let levelTarget: Float = ducked || k < voiceCount || alertGain > 0 ? duckGain : 1
                        mediaStep(block, media, k, levelTarget, presenceTarget, attack, release, ramp)
                    }
                }
            } else {
                alertGain = 0
                for k in 0..<count {
                    let levelTarget: Float = ducked || k < voiceCount ? duckGain : 1
                    mediaStep(block, media, k, levelTarget, presenceTarget, attack, release, ramp)
                }
            }
        }
        if !alerting && alertGain == 0 { alert = nil }
        if mediaPresence == 0 && !mediaAttached { media = nil }
        if mediaPresence == 0, let next = nextMedia {
            media = next
            nextMedia = nil
        }
    }

    @inline(__always)
    private mutating func mediaStep(
        _ block: UnsafeMutablePointer<Float>,
        _ media: UnsafeMutablePointer<Float>,
        _ k: Int,
        _ levelTarget: Float,
        _ presenceTarget: Float,
        _ attack: Float,
        _ release: Float,
        _ ramp: Float
    ) {
        mediaLevel =
            levelTarget < mediaLevel ? max(levelTarget, mediaLevel - attack) : min(levelTarget, mediaLevel + release)
        mediaPresence =
            presenceTarget > mediaPresence
            ? min(presenceTarget, mediaPresence + ramp) : max(presenceTarget, mediaPresence - ramp)
        block[k] += media[k] * mediaLevel * mediaPresence
    }

    /// ``mix(_:count:voiceCount:)`` on an array: `voice` followed by `silence` samples (for tests; it allocates).
    public mutating func mixed(voice: [Float], silence: Int = 0) -> [Float] {
        var block = voice + [Float](repeating: 0, count: silence)
        block.withUnsafeMutableBufferPointer { buffer in
            if let base = buffer.baseAddress { mix(base, count: buffer.count, voiceCount: voice.count) }
        }
        return block
    }
}
