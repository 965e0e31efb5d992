import HarkAudio
import HarkCore
import HarkPlatform
import Logging
import Synchronization

/// Plays music and radio: opens a URL or a local file with libavformat (HTTP(S), Icecast with ICY titles, HLS,
/// files; MP3, AAC, Ogg Vorbis and Opus, FLAC, WAV), decodes it on a thread of its own and writes mono Float
/// samples in PCM16 scale at ``Configuration/outputRate`` into a ``SampleRing`` the playback's media lane reads.
///
/// Each ``play(_:name:)`` makes a new ring (so a ring has one writer for ever: the old thread ends before the
/// new one opens anything) and returns it for the owner to attach. ``pause()`` stops reading (the owner detaches
/// the ring; what was decoded waits in it), ``resume()`` reads on, ``stop()`` ends the thread. Everything from
/// outside is bounded: the allow-list checks every URL opened, opening has a deadline, no decoded audio for the
/// stall timeout fails the source, probing reads a bounded amount, a file streams (never read whole). Status
/// changes reach `onChange` (on the decoding thread or the caller's: keep it short).
public final class MediaPlayer: Sendable {
    /// The player's settings.
    public struct Configuration: Sendable {
        /// The rate the ring's samples are at: the playback's `inputRate`.
        public var outputRate: Int
        /// What the ring holds, in time (0.25 to 30 s).
        public var buffer: Duration
        /// How long opening a source may take.
        public var openTimeout: Duration
        /// How long playing may go without decoded audio before the source counts as stalled.
        public var stallTimeout: Duration
        /// What may be opened.
        public var allow: MediaAllowList
        /// The most bytes probed to find the container and codec.
        public var probeBytes = 256 * 1024
        /// The most stream time probed.
        public var analyzeDuration: Duration = .seconds(2)
        /// The most streams a source may hold.
        public var maximumStreams = 16

        /// Settings for a ring at `outputRate`.
        public init(
            outputRate: Int,
            buffer: Duration = .seconds(2),
            openTimeout: Duration = .seconds(10),
            stallTimeout: Duration = .seconds(8),
            allow: MediaAllowList = .standard
        ) {
            self.outputRate = max(8000, min(192_000, outputRate))
            self.buffer = max(.milliseconds(250), min(.seconds(30), buffer))
            self.openTimeout = max(.milliseconds(100), min(.seconds(120), openTimeout))
            self.stallTimeout = max(.milliseconds(100), min(.seconds(120), stallTimeout))
            self.allow = allow
        }

        /// The ring's capacity in samples.
        var ringCapacity: Int {
            let milliseconds = Int(MediaWatch.nanoseconds(buffer) / 1_000_000)
            return max(1024, outputRate * milliseconds / 1000)
        }
    }

    private struct Current {
        var status = MediaStatus()
        var generation = 0
        var control: MediaControl?
        var thread: DeviceThread?
        var ring: SampleRing?
    }

    /// The settings.
    public let configuration: Configuration
    private let current = Mutex(Current())
    private let onChange: @Sendable (MediaStatus) -> Void
    private let logger: Logger

    /// A player with these settings; `onChange` hears every status change.
    public init(
        configuration: Configuration,
        logger: Logger = Logger(label: "hark.media"),
        onChange: @escaping @Sendable (MediaStatus) -> Void = { _ in }
    ) {
        self.configuration = configuration
        self.logger = logger
        self.onChange = onChange
        FFmpegLog.install(logger)
    }

    deinit {
        let (control, thread) = current.withLock { ($0.control, $0.thread) }
        control?.stopRequested.store(true, ordering: .releasing)
        control?.wakeup.signal()
        thread?.join()
    }

    /// The status now.
    public var status: MediaStatus { current.withLock { $0.status } }

    /// The ring of what plays (or paused), if anything.
    public var ring: SampleRing? { current.withLock { $0.ring } }

    /// Starts playing `source` (a URL or an absolute path), shown as `name` when given (a station's name);
    /// whatever played stops. Returns the new ring to attach to the playback, or throws why the source is
    /// refused (nothing changes then). Connecting and decoding go on on the decoding thread: a failure there
    /// shows in ``status`` and reaches `onChange`.
    @discardableResult
    public func play(_ source: String, name: String? = nil) throws(MediaFailure) -> SampleRing {
        let target = try configuration.allow.target(source)
        let ring = SampleRing(capacity: configuration.ringCapacity)
        let control = MediaControl()
        let shown = name.map { RemoteText.printable($0, limit: 64) } ?? target.shown
        let limits = MediaLimits(
            outputRate: configuration.outputRate,
            openTimeout: configuration.openTimeout,
            stallTimeout: configuration.stallTimeout,
            probeBytes: configuration.probeBytes,
            analyzeDuration: configuration.analyzeDuration,
            maximumStreams: configuration.maximumStreams
        )
        let allow = configuration.allow
        let (generation, previous, status) = current.withLock { current in
            current.generation += 1
            current.control?.stopRequested.store(true, ordering: .releasing)
            current.control?.wakeup.signal()
            let previous = current.thread
            current.control = control
            current.ring = ring
            current.thread = nil
            current.status = MediaStatus(state: .connecting, source: shown)
            return (current.generation, previous, current.status)
        }
        onChange(status)
        logger.info("media: opening \(shown)")
        do {
            let thread = try DeviceThread(name: "hark-media") { [weak self] in
                // One writer per ring, and one source open at a time: the previous thread ends first.
                previous?.join()
                guard !control.stopRequested.load(ordering: .acquiring) else { return }
                let decoder = MediaDecoder(
                    target: target,
                    allow: allow,
                    limits: limits,
                    ring: ring,
                    control: control
                ) { event in
                    self?.handle(event, generation: generation)
                }
                let outcome = decoder.run()
                self?.handle(.finished(outcome), generation: generation)
            }
            current.withLock { current in
                if current.generation == generation { current.thread = thread } else { thread.join() }
            }
        } catch {
            let failure = MediaFailure(.device, error.description)
            update(generation: generation) {
                $0.state = .failed; $0.failure = failure
            }
            throw failure
        }
        return ring
    }

    /// Pauses what plays (the owner detaches the ring); false when nothing plays.
    @discardableResult
    public func pause() -> Bool {
        let changed = current.withLock { current -> MediaStatus? in
            guard let control = current.control, [.playing, .connecting].contains(current.status.state) else {
                return nil
            }
            control.paused.store(true, ordering: .releasing)
            control.wakeup.signal()
            current.status.state = .paused
            return current.status
        }
        if let changed { onChange(changed) }
        return changed != nil
    }

    /// Resumes what was paused (the owner attaches ``ring`` again); false when nothing is paused.
    @discardableResult
    public func resume() -> Bool {
        let changed = current.withLock { current -> MediaStatus? in
            guard let control = current.control, current.status.state == .paused else { return nil }
            control.paused.store(false, ordering: .releasing)
            control.wakeup.signal()
            current.status.state = .playing
            return current.status
        }
        if let changed { onChange(changed) }
        return changed != nil
    }

    /// Stops what plays or is paused (the thread ends within libavformat's next interrupt check); false when
    /// nothing did. Does not wait for the thread.
    @discardableResult
    public func stop() -> Bool {
        let changed = current.withLock { current -> MediaStatus? in
            guard let control = current.control, [.connecting, .playing, .paused].contains(current.status.state)
            else { return nil }
            control.stopRequested.store(true, ordering: .releasing)
            control.wakeup.signal()
            current.generation += 1
            current.status.state = .stopped
            return current.status
        }
        if let changed {
            logger.info("media: stopped \(changed.source ?? "")")
            onChange(changed)
        }
        return changed != nil
    }

    /// Stops and waits until the decoding thread has ended (for shutdown; blocks up to one interrupt check).
    public func shutdown() {
        stop()
        let thread = current.withLock { current in
            defer { current.thread = nil }
            return current.thread
        }
        thread?.join()
    }

    private func handle(_ event: MediaEvent, generation: Int) {
        switch event {
        case .playing(let format):
            update(generation: generation) { status in
                if status.state == .connecting { status.state = .playing }
                status.format = format
            }
        case .title(let title):
            update(generation: generation) { $0.title = title }
        case .finished(.stopped):
            break
        case .finished(.ended):
            update(generation: generation) { status in
                status.state = .stopped
                status.ended = true
            }
        case .finished(.failed(let failure)):
            logger.warning("media: \(failure)")
            update(generation: generation) { status in
                status.state = .failed
                status.failure = failure
            }
        }
    }

    private func update(generation: Int, _ change: (inout MediaStatus) -> Void) {
        let changed = current.withLock { current -> MediaStatus? in
            guard current.generation == generation else { return nil }
            let before = current.status
            change(&current.status)
            return current.status == before ? nil : current.status
        }
        if let changed { onChange(changed) }
    }
}
