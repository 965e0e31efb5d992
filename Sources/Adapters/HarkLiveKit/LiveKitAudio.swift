import HarkLiveKitProto
import Synchronization

/// One frame of 16-bit audio, interleaved when it has several channels.
public struct LiveKitAudioFrame: Sendable, Equatable {
    /// The samples, `samplesPerChannel × channels` of them.
    public var samples: [Int16]
    /// Samples per second.
    public var sampleRate: Int
    /// Channels (interleaved).
    public var channels: Int

    /// A frame of `samples` (interleaved) at `sampleRate` with `channels` channels.
    public init(samples: [Int16], sampleRate: Int, channels: Int) {
        self.samples = samples
        self.sampleRate = sampleRate
        self.channels = channels
    }

    /// Samples per channel.
    public var samplesPerChannel: Int { channels > 0 ? samples.count / channels : 0 }

    /// The largest sample rate accepted from or given to the library.
    public static let maximumSampleRate = 192_000
    /// The most channels accepted from or given to the library.
    public static let maximumChannels = 8

    /// The samples a library-owned buffer describes, copied out, or nil when its description is out of bounds
    /// (no pointer, 1 to ``maximumChannels`` channels, a rate up to ``maximumSampleRate``, at most one second).
    /// The caller drops the buffer's handle after.
    static func copy(_ info: Livekit_Proto_AudioFrameBufferInfo) -> LiveKitAudioFrame? {
        guard (1...UInt32(maximumChannels)).contains(info.numChannels),
            (1...UInt32(maximumSampleRate)).contains(info.sampleRate),
            info.samplesPerChannel <= info.sampleRate
        else { return nil }
        let count = Int(info.numChannels) * Int(info.samplesPerChannel)
        guard count > 0 else {
            return LiveKitAudioFrame(samples: [], sampleRate: Int(info.sampleRate), channels: Int(info.numChannels))
        }
        guard let pointer = UnsafePointer<Int16>(bitPattern: UInt(info.dataPtr)) else { return nil }
        return LiveKitAudioFrame(
            samples: Array(UnsafeBufferPointer(start: pointer, count: count)),
            sampleRate: Int(info.sampleRate),
            channels: Int(info.numChannels)
        )
    }

    /// Checks a rate and channel count given to the library.
    static func validate(sampleRate: Int, channels: Int, _ what: String) throws(LiveKitError) {
        guard (8_000...maximumSampleRate).contains(sampleRate) else {
            throw LiveKitError.invalidArgument("\(what): a sample rate of \(sampleRate) Hz is out of range")
        }
        guard (1...maximumChannels).contains(channels) else {
            throw LiveKitError.invalidArgument("\(what): \(channels) channels is out of range")
        }
    }
}

/// An audio source in the library (`NewAudioSource`): the microphone's way into a room. Frames pushed with
/// ``capture(_:)`` wait in the source's queue (up to its ``queueDuration``) until WebRTC takes them every 10 ms;
/// push at the capture rate (the caller paces, e.g. one 20 ms frame per 20 ms), and `capture` answers once the
/// frame is in the queue. Publish it in a room with ``LiveKitRoom/publish(_:name:)``. The source's handle is
/// dropped with the last reference.
public final class LiveKitAudioSource: Sendable {
    /// Samples per second of the frames it takes.
    public let sampleRate: Int
    /// Channels of the frames it takes.
    public let channels: Int
    /// How much audio its queue holds.
    public let queueDuration: Duration
    let handle: OwnedHandle
    private let client: LiveKitClient

    /// The longest frame one ``capture(_:)`` takes.
    public static let maximumFrameDuration: Duration = .seconds(1)

    init(client: LiveKitClient, sampleRate: Int, channels: Int, queueDuration: Duration) throws(LiveKitError) {
        try LiveKitAudioFrame.validate(sampleRate: sampleRate, channels: channels, "an audio source")
        let milliseconds =
            queueDuration.components.seconds * 1000 + queueDuration.components.attoseconds / 1_000_000_000_000_000
        guard (10...10_000).contains(milliseconds) else {
            throw LiveKitError.invalidArgument(
                "an audio source's queue of \(queueDuration) is out of range (10 ms to 10 s)"
            )
        }
        var request = Livekit_Proto_FfiRequest()
        var source = Livekit_Proto_NewAudioSourceRequest()
        source.type = .audioSourceNative
        source.sampleRate = UInt32(sampleRate)
        source.numChannels = UInt32(channels)
        source.queueSizeMs = UInt32(milliseconds)
        // The device's own front end cancels echo and suppresses noise; WebRTC's would do it twice.
        var options = Livekit_Proto_AudioSourceOptions()
        options.echoCancellation = false
        options.noiseSuppression = false
        options.autoGainControl = false
        source.options = options
        request.newAudioSource = source
        let response = try client.request(request, "create an audio source")
        guard case .newAudioSource(let created) = response.message, created.source.hasHandle else {
            throw LiveKitError.response("create an audio source: the response holds no source")
        }
        self.client = client
        self.sampleRate = sampleRate
        self.channels = channels
        self.queueDuration = .milliseconds(milliseconds)
        handle = OwnedHandle(created.source.handle, library: client.library)
    }

    /// Queues `samples` (interleaved, at the source's rate and channels, at most ``maximumFrameDuration``) in
    /// the source (`CaptureAudioFrame`) and returns once they are in its queue, or throws after `timeout`.
    public func capture(_ samples: [Int16], timeout: Duration? = nil) async throws {
        guard !samples.isEmpty else { return }
        let id = try begin(samples)
        try check(try await client.answer(id, "capture audio", timeout: timeout))
    }

    /// ``capture(_:timeout:)`` without a deadline of its own, for a caller that bounds the wait itself (the LiveKit
    /// helper: hark gives up on a helper that takes no audio): no timer per frame.
    public func captureWithoutDeadline(_ samples: [Int16]) async throws {
        guard !samples.isEmpty else { return }
        let id = try begin(samples)
        try check(try await client.answerWithoutDeadline(id, "capture audio"))
    }

    /// Sends the `CaptureAudioFrame` request for `samples`: the id its answer comes with.
    private func begin(_ samples: [Int16]) throws(LiveKitError) -> UInt64 {
        guard samples.count % channels == 0 else {
            throw LiveKitError.invalidArgument(
                "capture: \(samples.count) samples are not whole frames of \(channels) channels"
            )
        }
        let perChannel = samples.count / channels
        guard perChannel <= sampleRate else {
            throw LiveKitError.invalidArgument("capture: \(perChannel) samples per channel are more than a second")
        }
        let handle = self.handle
        let sampleRate = self.sampleRate
        let channels = self.channels
        let client = self.client
        // The library copies the samples while it handles the request, so the pointer only has to live that long.
        let id = try samples.withUnsafeBufferPointer { buffer throws(LiveKitError) in
            let address = UInt64(UInt(bitPattern: buffer.baseAddress))
            return try client.begin("capture audio") { id in
                var request = Livekit_Proto_FfiRequest()
                var capture = Livekit_Proto_CaptureAudioFrameRequest()
                capture.sourceHandle = handle.id
                capture.requestAsyncID = id
                var info = Livekit_Proto_AudioFrameBufferInfo()
                info.dataPtr = address
                info.numChannels = UInt32(channels)
                info.sampleRate = UInt32(sampleRate)
                info.samplesPerChannel = UInt32(perChannel)
                capture.buffer = info
                request.captureAudioFrame = capture
                return request
            } answeredID: {
                $0.captureAudioFrame.asyncID
            }
        }
        return id
    }

    /// Throws the error a capture's answer carries.
    private func check(_ event: Livekit_Proto_FfiEvent) throws(LiveKitError) {
        if case .captureAudioFrame(let answer) = event.message, answer.hasError {
            throw LiveKitError.failed("capture audio", answer.error)
        }
    }

    /// Empties the source's queue (`ClearAudioBuffer`): what was pushed and not yet sent is dropped.
    public func clearQueue() throws(LiveKitError) {
        var request = Livekit_Proto_FfiRequest()
        var clear = Livekit_Proto_ClearAudioBufferRequest()
        clear.sourceHandle = handle.id
        request.clearAudioBuffer_p = clear
        _ = try client.request(request, "clear the audio source's queue")
    }
}

/// The audio of a remote track (`NewAudioStream`), as frames at the rate and channels asked for (the library
/// resamples), of the duration asked for (10 ms unless told: each frame is one event from the library). Frames are copied out of the library's buffers by the client's event pump (each buffer's handle
/// dropped at once) and wait in a bounded buffer: when the reader falls behind, the oldest go, counted in
/// ``LiveKitClient/Statistics/droppedFrames``. The stream's handle is dropped, and its frames end, when this goes.
public final class LiveKitAudioStream: Sendable {
    /// The frames, until the track ends or the stream is released.
    public let frames: AsyncStream<LiveKitAudioFrame>
    /// Samples per second of the frames.
    public let sampleRate: Int
    /// Channels of the frames.
    public let channels: Int
    let handle: OwnedHandle
    /// The track's handle: the library ends the stream when it is dropped, so the stream keeps it.
    private let track: OwnedHandle
    private let client: LiveKitClient

    init(
        client: LiveKitClient,
        track: LiveKitRemoteTrack,
        sampleRate: Int,
        channels: Int,
        frameCapacity: Int,
        frameDuration: Duration?
    ) throws(LiveKitError) {
        try LiveKitAudioFrame.validate(sampleRate: sampleRate, channels: channels, "an audio stream")
        var request = Livekit_Proto_FfiRequest()
        var open = Livekit_Proto_NewAudioStreamRequest()
        open.trackHandle = track.handle.id
        open.type = .audioStreamNative
        open.sampleRate = UInt32(sampleRate)
        open.numChannels = UInt32(channels)
        if let frameDuration {
            let milliseconds =
                frameDuration.components.seconds * 1000
                + frameDuration.components.attoseconds / 1_000_000_000_000_000
            guard (10...1000).contains(milliseconds) else {
                throw LiveKitError.invalidArgument("an audio stream's frames of \(frameDuration) are out of range")
            }
            open.frameSizeMs = UInt32(milliseconds)
        }
        request.newAudioStream = open
        let (frames, continuation) = AsyncStream.makeStream(
            of: LiveKitAudioFrame.self,
            bufferingPolicy: .bufferingNewest(max(1, frameCapacity))
        )
        let opened = try client.openAudioStream(request, continuation: continuation)
        self.client = client
        self.track = track.handle
        self.frames = frames
        self.sampleRate = sampleRate
        self.channels = channels
        handle = OwnedHandle(opened, library: client.library)
        let id = opened
        continuation.onTermination = { [weak client] _ in client?.unroute(audioStream: id) }
    }

    deinit {
        client.unroute(audioStream: handle.id)
    }
}

/// A text stream a participant opened (`TextStreamOpened`): a transcription segment, a chat message. Its text
/// comes chunk by chunk from ``chunks()``; a stream that fails part-way still gave the chunks that came before.
public final class LiveKitTextStreamReader: Sendable {
    /// The header's information (topic, attributes).
    public let info: LiveKitStreamInfo
    /// The identity of the participant who sends it.
    public let sender: String
    let handle: OwnedHandle
    private let client: LiveKitClient
    private let started = Mutex(false)

    init(_ reader: Livekit_Proto_OwnedTextStreamReader, sender: String, client: LiveKitClient) {
        info = LiveKitStreamInfo(reader.info)
        self.sender = sender
        self.client = client
        handle = OwnedHandle(reader.handle, library: client.library)
    }

    /// The stream's text as it comes (`TextStreamReaderReadIncremental`), ending when the sender closes it, or with
    /// an error when the stream ends abnormally (the chunks before it are kept by whoever read them). At most
    /// `chunkCapacity` chunks wait unread (the oldest go beyond). Once per reader.
    public func chunks(chunkCapacity: Int = 256) throws(LiveKitError) -> AsyncThrowingStream<String, any Error> {
        let first = started.withLock { started in
            defer { started = true }
            return !started
        }
        guard first else { throw LiveKitError.invalidArgument("a text stream is read once") }
        var request = Livekit_Proto_FfiRequest()
        var read = Livekit_Proto_TextStreamReaderReadIncrementalRequest()
        read.readerHandle = handle.id
        request.textReadIncremental = read
        let (stream, continuation) = AsyncThrowingStream.makeStream(
            of: String.self,
            throwing: (any Error).self,
            bufferingPolicy: .bufferingNewest(max(1, chunkCapacity))
        )
        try client.openTextReader(request, handle: handle.id, continuation: continuation)
        // Reading takes the reader out of the library's handles: it forgets the handle itself.
        handle.relinquish()
        let id = handle.id
        continuation.onTermination = { [weak client] _ in client?.unroute(textReader: id) }
        return stream
    }
}

/// WebRTC's audio processing module in the library (`NewApm`): echo cancellation, noise suppression, gain control
/// and a high-pass filter over 10 ms frames of 16-bit audio, processed in place. Feed the speaker's audio to
/// ``processReverse(_:sampleRate:channels:)`` and the microphone's to ``process(_:sampleRate:channels:)``, and
/// set the delay between them with ``setStreamDelay(_:)``. Synchronous calls; one caller at a time.
public final class LiveKitAudioProcessor: Sendable {
    let handle: OwnedHandle
    private let client: LiveKitClient

    init(
        client: LiveKitClient,
        echoCancellation: Bool,
        noiseSuppression: Bool,
        gainControl: Bool,
        highPassFilter: Bool
    ) throws(LiveKitError) {
        var request = Livekit_Proto_FfiRequest()
        var apm = Livekit_Proto_NewApmRequest()
        apm.echoCancellerEnabled = echoCancellation
        apm.noiseSuppressionEnabled = noiseSuppression
        apm.gainControllerEnabled = gainControl
        apm.highPassFilterEnabled = highPassFilter
        request.newApm = apm
        let response = try client.request(request, "create an audio processor")
        guard case .newApm(let created) = response.message, created.apm.hasHandle else {
            throw LiveKitError.response("create an audio processor: the response holds no processor")
        }
        self.client = client
        handle = OwnedHandle(created.apm.handle, library: client.library)
    }

    /// Processes 10 ms of the microphone's audio in place (`ApmProcessStream`).
    public func process(_ samples: inout [Int16], sampleRate: Int, channels: Int) throws(LiveKitError) {
        try run(&samples, sampleRate: sampleRate, channels: channels, reverse: false)
    }

    /// Processes 10 ms of the speaker's audio, the echo's reference (`ApmProcessReverseStream`).
    public func processReverse(_ samples: inout [Int16], sampleRate: Int, channels: Int) throws(LiveKitError) {
        try run(&samples, sampleRate: sampleRate, channels: channels, reverse: true)
    }

    /// Tells the canceller how long the speaker's audio takes to come back into the microphone
    /// (`ApmSetStreamDelay`).
    public func setStreamDelay(_ delay: Duration) throws(LiveKitError) {
        let milliseconds = delay.components.seconds * 1000 + delay.components.attoseconds / 1_000_000_000_000_000
        guard (0...1000).contains(milliseconds) else {
            throw LiveKitError.invalidArgument("an echo delay of \(delay) is out of range (0 to 1 s)")
        }
        var request = Livekit_Proto_FfiRequest()
        var set = Livekit_Proto_ApmSetStreamDelayRequest()
        set.apmHandle = handle.id
        set.delayMs = Int32(milliseconds)
        request.apmSetStreamDelay = set
        let response = try client.request(request, "set the echo delay")
        if case .apmSetStreamDelay(let answer) = response.message, answer.hasError {
            throw LiveKitError.failed("set the echo delay", answer.error)
        }
    }

    private func run(_ samples: inout [Int16], sampleRate: Int, channels: Int, reverse: Bool) throws(LiveKitError) {
        let what = reverse ? "process the speaker's audio" : "process the microphone's audio"
        try LiveKitAudioFrame.validate(sampleRate: sampleRate, channels: channels, what)
        guard sampleRate % 100 == 0, samples.count == sampleRate / 100 * channels else {
            throw LiveKitError.invalidArgument("\(what): frames are 10 ms (\(sampleRate / 100 * channels) samples)")
        }
        let handle = self.handle
        let client = self.client
        let response: Livekit_Proto_FfiResponse = try samples.withUnsafeMutableBufferPointer {
            buffer throws(LiveKitError) in
            var request = Livekit_Proto_FfiRequest()
            let address = UInt64(UInt(bitPattern: buffer.baseAddress))
            let size = UInt32(buffer.count * MemoryLayout<Int16>.size)
            if reverse {
                var process = Livekit_Proto_ApmProcessReverseStreamRequest()
                process.apmHandle = handle.id
                process.dataPtr = address
                process.size = size
                process.sampleRate = UInt32(sampleRate)
                process.numChannels = UInt32(channels)
                request.apmProcessReverseStream = process
            } else {
                var process = Livekit_Proto_ApmProcessStreamRequest()
                process.apmHandle = handle.id
                process.dataPtr = address
                process.size = size
                process.sampleRate = UInt32(sampleRate)
                process.numChannels = UInt32(channels)
                request.apmProcessStream = process
            }
            return try client.request(request, what)
        }
        switch response.message {
        case .apmProcessStream(let answer) where answer.hasError: throw LiveKitError.failed(what, answer.error)
        case .apmProcessReverseStream(let answer) where answer.hasError: throw LiveKitError.failed(what, answer.error)
        default: break
        }
    }
}

/// WebRTC's resampler in the library (`NewAudioResampler`): changes the rate and channel count of 10 ms frames
/// (`RemixAndResample`, which always gives 10 ms). Keeps state between frames: one resampler per stream of frames.
public final class LiveKitResampler: Sendable {
    let handle: OwnedHandle
    private let client: LiveKitClient

    init(client: LiveKitClient) throws(LiveKitError) {
        var request = Livekit_Proto_FfiRequest()
        request.newAudioResampler = Livekit_Proto_NewAudioResamplerRequest()
        let response = try client.request(request, "create a resampler")
        guard case .newAudioResampler(let created) = response.message, created.resampler.hasHandle else {
            throw LiveKitError.response("create a resampler: the response holds no resampler")
        }
        self.client = client
        handle = OwnedHandle(created.resampler.handle, library: client.library)
    }

    /// `frame` (10 ms) at `sampleRate` with `channels` channels (10 ms too).
    public func convert(_ frame: LiveKitAudioFrame, sampleRate: Int, channels: Int) throws(LiveKitError)
        -> LiveKitAudioFrame
    {
        try LiveKitAudioFrame.validate(sampleRate: frame.sampleRate, channels: frame.channels, "resample")
        try LiveKitAudioFrame.validate(sampleRate: sampleRate, channels: channels, "resample")
        guard frame.sampleRate % 100 == 0, frame.samples.count == frame.sampleRate / 100 * frame.channels else {
            throw LiveKitError.invalidArgument(
                "resample: frames are 10 ms (\(frame.sampleRate / 100 * frame.channels) samples)"
            )
        }
        let handle = self.handle
        let client = self.client
        let response: Livekit_Proto_FfiResponse = try frame.samples.withUnsafeBufferPointer {
            buffer throws(LiveKitError) in
            var request = Livekit_Proto_FfiRequest()
            var resample = Livekit_Proto_RemixAndResampleRequest()
            resample.resamplerHandle = handle.id
            resample.sampleRate = UInt32(sampleRate)
            resample.numChannels = UInt32(channels)
            var info = Livekit_Proto_AudioFrameBufferInfo()
            info.dataPtr = UInt64(UInt(bitPattern: buffer.baseAddress))
            info.sampleRate = UInt32(frame.sampleRate)
            info.numChannels = UInt32(frame.channels)
            info.samplesPerChannel = UInt32(frame.samplesPerChannel)
            resample.buffer = info
            request.remixAndResample = resample
            return try client.request(request, "resample")
        }
        guard case .remixAndResample(let answer) = response.message, answer.buffer.hasHandle else {
            throw LiveKitError.response("resample: the response holds no frame")
        }
        let buffer = OwnedHandle(answer.buffer.handle, library: client.library)
        defer { withExtendedLifetime(buffer) {} }
        guard let converted = LiveKitAudioFrame.copy(answer.buffer.info) else {
            throw LiveKitError.response("resample: the library's frame is out of bounds")
        }
        return converted
    }
}
