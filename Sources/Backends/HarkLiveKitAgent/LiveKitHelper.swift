import HarkCore
import HarkHelperProcess
import HarkLiveKitWire
import HarkPlatform
import Synchronization

/// The program that does a LiveKit session's work, `hark-livekit`: it opens LiveKit's library (and with it WebRTC
/// and full Foundation), joins the room and moves audio and events over a socket pair; `hark` keeps the settings,
/// the secrets and every decision. One runs per connection.
public struct LiveKitHelperProgram: Sendable, Hashable {
    /// Its file name.
    public static let fileName = "hark-livekit"
    /// The environment variable that names it (tests, a development build elsewhere).
    public static let variable = "HARK_LIVEKIT_HELPER"
    /// The LiveKit library it opens.
    public static let libraryFileName = "liblivekit_ffi.so"

    /// Where it is.
    public var path: String
    /// What it is started with: where the native libraries are, nothing else (no secret travels in it).
    public var environment: [String: String]

    public init(path: String, environment: [String: String] = [:]) {
        self.path = path
        self.environment = environment
    }

    /// The helper beside this `hark` or in `/usr/lib/hark` (or where `HARK_LIVEKIT_HELPER` says), and LiveKit's
    /// library where it will look; throws an error that names what to install when either is missing.
    public static func locate(environment: [String: String]) throws(BackendSetupError) -> LiveKitHelperProgram {
        guard let path = HelperProgram.locate(fileName, variable: variable, environment: environment) else {
            let places = environment[variable].map { [$0] } ?? HelperProgram.candidates(fileName)
            throw BackendSetupError(
                """
                the LiveKit backend's helper (\(fileName)) is not installed: looked for \
                \(places.joined(separator: ", ")). Install the hark-livekit package, or build it in a checkout \
                (swift build --product \(fileName)), or set \(variable) to its path
                """
            )
        }
        var kept: [String: String] = [:]
        kept[NativeLibraryFolders.variable] = environment[NativeLibraryFolders.variable]
        // The library is looked for from the helper's own place (a checkout's .hark-lib above it, /usr/lib/hark).
        guard
            let folder = NativeLibraryFolders.folder(for: libraryFileName, environment: environment, executable: path)
        else {
            let candidates = NativeLibraryFolders.candidates(
                for: libraryFileName,
                environment: environment,
                executable: path
            )
            throw BackendSetupError(
                """
                the LiveKit backend's library (\(libraryFileName)) is not installed: looked in \
                \(candidates.joined(separator: ", ")). Install the hark-livekit package, or run scripts/setup in a \
                checkout, or set \(NativeLibraryFolders.variable) to a folder that holds it
                """
            )
        }
        // A damaged library crashes the helper in the dynamic loader: it is checked here, where the error can say
        // which file it is and how to restore it.
        do {
            try NativeLibraryCheck.verify(folder + "/" + libraryFileName)
        } catch {
            throw BackendSetupError("\(error)")
        }
        return LiveKitHelperProgram(path: path, environment: kept)
    }
}

extension LiveKitHelperProgram {
    /// Starts the helper to see that it runs and loads LiveKit's library (`hark doctor`): what it said it runs (the
    /// library's version and path), or why it does not.
    public func probe(within timeout: Duration = .seconds(10)) async -> Result<String, BackendSetupError> {
        let link: LiveKitHelperLink
        do {
            link = try LiveKitHelperLink.start(self)
        } catch {
            return .failure(BackendSetupError("\(path) cannot be started: \(error)"))
        }
        link.send(.hello)
        link.send(.leave)
        let said = await withTaskGroup(of: (library: String?, failure: String?).self) { group in
            group.addTask {
                var library: String?
                for await event in link.events {
                    switch event {
                    case .hello(let name): library = RemoteText.printable(name)
                    case .failed(_, let message): return (library, RemoteText.printable(message))
                    default: break
                    }
                }
                return (library, nil)
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return (nil, "it did not answer within \(timeout)")
            }
            defer { group.cancelAll() }
            return await group.next() ?? (nil, nil)
        }
        let exit = await link.end(grace: .seconds(2))
        if let failure = said.failure { return .failure(BackendSetupError(failure)) }
        guard let library = said.library else {
            return .failure(
                BackendSetupError("\(path) \(exit) without a greeting\(link.failure.map { ": \($0)" } ?? "")")
            )
        }
        return .success(library)
    }
}

/// One run of the helper for one connection: commands go to it, its events come back decoded, in order. The events
/// end when the helper ends, when it sends something that is not the protocol (``failure`` says what), or when the
/// session falls too far behind them.
final class LiveKitHelperLink: Sendable {
    /// The helper's events.
    let events: AsyncStream<LiveKitEvent>
    private let process: HelperProcess
    private let state: State

    /// The most events waiting to be handled; past them the link is given up.
    static let eventCapacity = 1024

    private final class State: Sendable {
        let decoder = Mutex(LiveKitFrameDecoder())
        let failure = Mutex<String?>(nil)
        let link = Mutex<SocketLink?>(nil)
    }

    private init(events: AsyncStream<LiveKitEvent>, process: HelperProcess, state: State) {
        self.events = events
        self.process = process
        self.state = state
    }

    /// Starts `program`. Throws when it cannot be started.
    static func start(_ program: LiveKitHelperProgram) throws(HelperProcessError) -> LiveKitHelperLink {
        let (events, continuation) = AsyncStream.makeStream(
            of: LiveKitEvent.self,
            bufferingPolicy: .bufferingOldest(eventCapacity)
        )
        let state = State()
        let process = try HelperProcess.spawn(
            program.path,
            environment: program.environment,
            name: "hark-lk-link"
        ) { incoming in
            switch incoming {
            case .bytes(let bytes):
                let decoded = state.decoder.withLock { decoder -> Result<[LiveKitEvent], LiveKitWireError> in
                    decoder.append(bytes)
                    var events: [LiveKitEvent] = []
                    do throws(LiveKitWireError) {
                        while let body = try decoder.next() { events.append(try LiveKitEvent(decoding: body)) }
                    } catch {
                        return .failure(error)
                    }
                    return .success(events)
                }
                switch decoded {
                case .success(let events):
                    for event in events {
                        if case .dropped = continuation.yield(event) {
                            state.failure.withLock { $0 = $0 ?? "the session fell behind the helper's events" }
                            state.link.withLock { $0 }?.close()
                            continuation.finish()
                            return
                        }
                    }
                case .failure(let error):
                    state.failure.withLock { $0 = $0 ?? "the helper sent what cannot be read: \(error)" }
                    state.link.withLock { $0 }?.close()
                    continuation.finish()
                }
            case .closed(let reason):
                if let reason { state.failure.withLock { $0 = $0 ?? "the link to the helper failed: \(reason)" } }
                continuation.finish()
            }
        }
        state.link.withLock { $0 = process.link }
        return LiveKitHelperLink(events: events, process: process, state: state)
    }

    /// Sends `command`; false when the link has ended (its events end too) or the command cannot be encoded.
    @discardableResult
    func send(_ command: LiveKitCommand) -> Bool {
        guard let frame = try? command.encoded() else { return false }
        return process.link.send(frame)
    }

    /// Why the events ended other than by the helper's own end, if they did.
    var failure: String? { state.failure.withLock { $0 } }

    /// Closes the link and waits for the helper to end (killed past `grace`): how it ended.
    func end(grace: Duration) async -> HelperProcess.Exit {
        process.link.close()
        return await process.waitForExit(within: grace)
    }

    /// Waits for the helper to end by itself (it leaves the room first), then closes: how it ended.
    func finish(grace: Duration) async -> HelperProcess.Exit {
        let exit = await process.waitForExit(within: grace)
        process.link.close()
        return exit
    }

    /// How the helper ended, once it has.
    var exit: HelperProcess.Exit? { process.exitStatus }
}

/// Microphone audio sent to the helper and not yet in the track's queue, bounded: the sender waits while too much is
/// on its way (the helper's acknowledgements pace it, as the track's queue paces the helper), and learns which of its
/// chunks went in, in order.
final class AudioInFlight: Sendable {
    private struct State {
        var samples = 0
        /// What was sent, oldest first (nil for silence).
        var sent: [(chunk: AudioChunk?, count: Int)] = []
        var waiter: CheckedContinuation<Void, Never>?
        var closed = false
    }

    /// The most samples on their way before a sender waits.
    let limit: Int
    private let state = Mutex(State())

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// How a reservation went.
    enum Reservation: Sendable { case reserved, closed, timedOut }

    /// Room for `count` more samples (`chunk` being them, or nil for silence), recorded as sent: at once when there
    /// is room, else once acknowledgements make some; not when the link ended or `deadline` passed first.
    func reserve(_ count: Int, chunk: AudioChunk?, within deadline: Duration, clock: any Clock<Duration>) async
        -> Reservation
    {
        if tryReserve(count, chunk) { return .reserved }
        if isClosed { return .closed }
        return await withTaskGroup(of: Reservation.self) { group in
            group.addTask {
                while !Task.isCancelled {
                    if self.isClosed { return .closed }
                    if self.tryReserve(count, chunk) { return .reserved }
                    await self.waitForRoom(count)
                }
                return .closed
            }
            group.addTask {
                try? await clock.sleep(for: deadline)
                return .timedOut
            }
            let first = await group.next() ?? .closed
            group.cancelAll()
            wake()
            return first
        }
    }

    /// The link ended.
    var isClosed: Bool { state.withLock { $0.closed } }

    private func hasRoom(_ state: State, _ count: Int) -> Bool {
        state.samples == 0 || state.samples + count <= limit
    }

    private func tryReserve(_ count: Int, _ chunk: AudioChunk?) -> Bool {
        state.withLock { state in
            guard !state.closed, hasRoom(state, count) else { return false }
            state.samples += count
            state.sent.append((chunk, count))
            return true
        }
    }

    /// Waits until there is room for `count` samples, the link ends or the task is cancelled.
    private func waitForRoom(_ count: Int) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if state.closed || hasRoom(state, count) || Task.isCancelled { return true }
                    state.waiter = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            wake()
        }
    }

    private func wake() {
        let waiter = state.withLock { state in
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// The helper took `count` samples: the oldest message sent, whose chunk (nil for silence, or a count that does
    /// not match what was sent) is returned.
    func acknowledged(_ count: Int) -> AudioChunk? {
        let chunk = state.withLock { state -> AudioChunk? in
            guard !state.sent.isEmpty else { return nil }
            let first = state.sent.removeFirst()
            state.samples -= first.count
            return first.count == count ? first.chunk : nil
        }
        wake()
        return chunk
    }

    /// The link ended: senders stop waiting.
    func close() {
        state.withLock { $0.closed = true }
        wake()
    }
}
