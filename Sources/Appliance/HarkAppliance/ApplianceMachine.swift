import HarkCore

/// Something that happened to the appliance, from any of its parts.
public enum ApplianceEvent: Sendable, Hashable {
    /// The button did something (after gesture recognition and the board's gesture map).
    case button(ButtonAction)
    /// The local voice detector heard speech begin (its pre-roll is held by the owner).
    case voiceStarted
    /// The local voice detector heard speech end.
    case voiceEnded
    /// The wake-word detector heard a wake word (its audio after the word is held by the owner).
    case wakeWord(WakeDetection)
    /// The stop word was heard while the answer played: stop it (as the button's cancel does); it opens nothing.
    case stopWord(WakeDetection)
    /// The session reported something.
    case session(SessionEvent)
    /// The session's `run()` returned (or threw: `failure`).
    case sessionEnded(failure: SessionFailure?)
    /// The speaker played the last sample of the answer.
    case playbackDrained
    /// Mute or unmute the microphone (a device tool asked).
    case setMuted(Bool)
    /// Time passed (idle timeouts are checked).
    case tick
}

/// What the owner does for the machine.
public enum ApplianceAction: Sendable, Hashable {
    /// Start a session. `fresh` means a new conversation (no stored resumption handle).
    case openSession(fresh: Bool)
    /// End the session politely.
    case closeSession
    /// Send an input into the open session.
    case send(SessionInput)
    /// Start (with the voice detector's pre-roll first, when `preRoll`) or stop sending microphone audio.
    case forwardMicrophone(Bool, preRoll: Bool)
    /// Mute the capture device (no frame leaves it) or unmute it.
    case muteCapture(Bool)
    /// Silence the speaker at once and drop queued answer audio.
    case interruptPlayback
    /// Report ``ApplianceEvent/playbackDrained`` once the answer's last sample has been played.
    case awaitPlaybackDrain
    /// Play a short sound.
    case earcon(Earcon)
    /// Change the volume by this many percent.
    case adjustVolume(Int)
    /// Drop the stored resumption handle: the next session is a new conversation.
    case forgetConversation
}

/// The appliance's behaviour in each mode, as a value: events in, actions out, time passed in.
/// The owner performs the actions (opens sessions, moves audio, plays sounds); tests drive it with a
/// manual clock.
public struct ApplianceMachine: Sendable {
    /// What shapes the behaviour.
    public struct Settings: Sendable, Hashable {
        /// How the device is used.
        public var mode: InteractionMode
        /// Speaker and kiosk close the session after this long with nobody talking; push-to-talk too.
        public var idleTimeout: Duration
        /// Kiosk: the text turn that makes the agent greet each visitor.
        public var greeting: String
        /// The earcons that play (the others are switched off).
        public var earcons: Set<Earcon>
        /// Speaker and kiosk: a session (a visit) opens on a wake word, not on any speech.
        public var wakeWord: Bool
        /// Speaker with a wake word: while the session is open, a follow-up question needs no wake word (the
        /// microphone stays open until the idle timeout); false closes it after each answer until the next one.
        public var followUps: Bool

        public init(
            mode: InteractionMode,
            idleTimeout: Duration = .seconds(30),
            greeting: String = "A visitor has just arrived. Greet them briefly and offer to help.",
            earcons: Set<Earcon> = Set(Earcon.allCases),
            wakeWord: Bool = false,
            followUps: Bool = true
        ) {
            self.mode = mode
            self.idleTimeout = idleTimeout
            self.greeting = greeting
            self.earcons = earcons
            self.wakeWord = wakeWord
            self.followUps = followUps
        }
    }

    public let settings: Settings
    /// A session is open (connecting, connected or reconnecting).
    public private(set) var sessionOpen = false
    /// The open session's link, nil without one.
    public private(set) var link: LinkState?
    /// The conversation state the session last reported.
    public private(set) var sessionConversation: ConversationState = .idle
    /// Answer audio is in the speaker (from its first chunk until the last sample has played).
    public private(set) var playing = false
    /// The microphone is muted.
    public private(set) var muted = false
    /// Microphone audio is being sent to the session.
    public private(set) var forwarding = false
    /// Push-to-talk: the button is held.
    public private(set) var talking = false
    /// The last time someone or something was active (speech, a button, the agent).
    public private(set) var lastActivity: Duration
    /// Kiosk: the agent's greeting is still to be heard; the microphone opens after it.
    public private(set) var awaitingGreeting = false
    private var offlineAnnounced = false
    private var errorAnnounced = false

    public init(settings: Settings, now: Duration) {
        self.settings = settings
        self.lastActivity = now
    }

    /// The conversation state to show: speaking lasts until the last sample has been played.
    public var conversation: ConversationState {
        if playing { return .speaking }
        if settings.mode == .pushToTalk && talking { return .listening }
        return sessionOpen ? sessionConversation : .idle
    }

    /// The overlays to show over the conversation state (``Overlay/booting`` and ``Overlay/fatal`` are the
    /// owner's).
    public var overlays: Set<Overlay> {
        var result: Set<Overlay> = []
        switch link {
        case .connecting?, .offline?: result.insert(.offline)
        case .rejected?: result.insert(.error)
        case .connected?, .ended?, nil: break
        }
        if muted { result.insert(.muted) }
        return result
    }

    /// True while microphone audio leaves the device (the LEDs must always show it).
    public var microphoneLive: Bool { forwarding && !muted }

    /// Handles one event at `now`; returns what to do, in order.
    public mutating func handle(_ event: ApplianceEvent, now: Duration) -> [ApplianceAction] {
        switch event {
        case .button(let action):
            lastActivity = now
            return button(action)
        case .voiceStarted:
            lastActivity = now
            return voiceStarted()
        case .voiceEnded:
            lastActivity = now
            return []
        case .wakeWord:
            lastActivity = now
            return wakeWord()
        case .stopWord:
            lastActivity = now
            return playing ? cancel() : []
        case .session(let event):
            return session(event, now: now)
        case .sessionEnded:
            return sessionClosed()
        case .playbackDrained:
            lastActivity = now
            playing = false
            return greetingHeard() + answerHeard()
        case .setMuted(let value):
            return value == muted ? [] : toggleMute()
        case .tick:
            return idleCheck(now: now)
        }
    }

    // MARK: - Events

    private mutating func button(_ action: ButtonAction) -> [ApplianceAction] {
        switch action {
        case .none:
            return []
        case .talkStart:
            if settings.mode == .kiosk { return sessionOpen ? cancel() : startVisit() }
            return talkStart()
        case .talkEnd:
            return talkEnd()
        case .muteToggle:
            return toggleMute()
        case .cancel:
            if settings.mode == .kiosk && !sessionOpen { return startVisit() }
            return cancel()
        case .volumeUp:
            return [.adjustVolume(10)]
        case .volumeDown:
            return [.adjustVolume(-10)]
        case .endConversation:
            guard sessionOpen else { return [.forgetConversation] }
            return closeSession() + [.forgetConversation]
        }
    }

    private mutating func voiceStarted() -> [ApplianceAction] {
        // With a wake word, speech alone opens nothing (it still counts as activity).
        guard !muted, !sessionOpen, !settings.wakeWord else { return [] }
        switch settings.mode {
        case .alwaysListening:
            // The session opens on demand; the detector's pre-roll goes first so the first word arrives.
            sessionOpen = true
            link = .connecting(attempt: 1)
            forwarding = true
            return [.openSession(fresh: false), .forwardMicrophone(true, preRoll: true)] + sound(.listeningStart)
        case .kiosk:
            return startVisit()
        case .pushToTalk:
            return []
        }
    }

    /// A wake word: opens the session (or a visit) as speech does without one, interrupts an answer as the button
    /// does, and opens the microphone with the audio after the word first.
    private mutating func wakeWord() -> [ApplianceAction] {
        guard !muted, settings.wakeWord else { return [] }
        switch settings.mode {
        case .alwaysListening:
            var actions: [ApplianceAction] = []
            if answering {
                playing = false
                actions += [.interruptPlayback, .send(.interrupt)]
            }
            if !sessionOpen {
                sessionOpen = true
                link = .connecting(attempt: 1)
                actions.append(.openSession(fresh: false))
            }
            if !forwarding {
                forwarding = true
                actions.append(.forwardMicrophone(true, preRoll: true))
            }
            return actions + sound(.listeningStart)
        case .kiosk:
            guard sessionOpen else { return startVisit() }
            guard answering else { return [] }
            playing = false
            return [.interruptPlayback, .send(.interrupt)] + sound(.listeningStart) + greetingHeard()
        case .pushToTalk:
            return []
        }
    }

    /// The agent is answering: thinking, speaking, or its audio still playing.
    private var answering: Bool {
        sessionOpen && (playing || sessionConversation == .thinking || sessionConversation == .speaking)
    }

    /// Speaker with a wake word and no follow-ups: the answer was heard, the microphone closes until the next
    /// wake word (the session stays open until the idle timeout, so the next question resumes at once).
    private mutating func answerHeard() -> [ApplianceAction] {
        guard settings.wakeWord, !settings.followUps, settings.mode == .alwaysListening else { return [] }
        guard sessionOpen, forwarding else { return [] }
        forwarding = false
        return [.forwardMicrophone(false, preRoll: false), .send(.audioStreamEnd)]
    }

    private mutating func startVisit() -> [ApplianceAction] {
        guard !sessionOpen else { return [] }
        sessionOpen = true
        link = .connecting(attempt: 1)
        // The agent greets first: the microphone opens once the greeting has been heard (or cancelled), so
        // the visitor's "hello" does not talk over it.
        awaitingGreeting = true
        return [.openSession(fresh: true), .send(.text(settings.greeting))] + sound(.listeningStart)
    }

    /// Kiosk: the greeting was played (or cut short): the visitor's turn.
    private mutating func greetingHeard() -> [ApplianceAction] {
        guard awaitingGreeting, sessionOpen else { return [] }
        awaitingGreeting = false
        guard !muted else { return [] }
        forwarding = true
        return [.forwardMicrophone(true, preRoll: false)]
    }

    private mutating func talkStart() -> [ApplianceAction] {
        guard settings.mode == .pushToTalk else { return [] }
        var actions: [ApplianceAction] = []
        if muted {
            muted = false
            actions.append(.muteCapture(false))
        }
        if playing {
            // Pressing while the agent speaks interrupts it at once; the service hears activityStart.
            playing = false
            actions.append(.interruptPlayback)
        }
        if !sessionOpen {
            sessionOpen = true
            link = .connecting(attempt: 1)
            actions.append(.openSession(fresh: false))
        }
        talking = true
        forwarding = true
        actions += [.send(.activityStart), .forwardMicrophone(true, preRoll: false)]
        return actions + sound(.listeningStart)
    }

    private mutating func talkEnd() -> [ApplianceAction] {
        guard settings.mode == .pushToTalk, talking else { return [] }
        talking = false
        forwarding = false
        return [.forwardMicrophone(false, preRoll: false), .send(.activityEnd)]
    }

    private mutating func toggleMute() -> [ApplianceAction] {
        muted.toggle()
        var actions: [ApplianceAction] = [.muteCapture(muted)]
        if muted {
            if forwarding {
                forwarding = false
                actions.append(.forwardMicrophone(false, preRoll: false))
            }
            if talking {
                talking = false
                actions.append(.send(.activityEnd))
            } else if sessionOpen && settings.mode != .pushToTalk {
                actions.append(.send(.audioStreamEnd))
            }
        } else if sessionOpen && settings.mode != .pushToTalk && !awaitingGreeting {
            forwarding = true
            actions.append(.forwardMicrophone(true, preRoll: false))
        }
        return actions
    }

    private mutating func cancel() -> [ApplianceAction] {
        guard answering else { return [] }
        playing = false
        return [.interruptPlayback, .send(.interrupt)] + sound(.cancel) + greetingHeard()
    }

    private mutating func session(_ event: SessionEvent, now: Duration) -> [ApplianceAction] {
        guard sessionOpen else { return [] }
        switch event {
        case .link(let state):
            link = state
            switch state {
            case .connected:
                offlineAnnounced = false
                errorAnnounced = false
                return []
            case .connecting:
                return []
            case .offline:
                guard !offlineAnnounced else { return [] }
                offlineAnnounced = true
                return sound(.offline)
            case .rejected:
                guard !errorAnnounced else { return [] }
                errorAnnounced = true
                return sound(.error)
            case .ended:
                return sessionClosed()
            }
        case .conversation(let state):
            if state != .listening { lastActivity = now }
            sessionConversation = state
            return []
        case .audio:
            lastActivity = now
            playing = true
            return []
        case .interrupted:
            lastActivity = now
            playing = false
            return [.interruptPlayback] + greetingHeard()
        case .turnComplete:
            lastActivity = now
            return playing ? [.awaitPlaybackDrain] : greetingHeard() + answerHeard()
        case .transcript, .tool:
            lastActivity = now
            return []
        case .usage, .notice:
            return []
        case .answerFailed:
            // The answer stopped short: say so rather than leave the user waiting in silence.
            lastActivity = now
            return sound(.error)
        }
    }

    private mutating func sessionClosed() -> [ApplianceAction] {
        guard sessionOpen else { return [] }
        sessionOpen = false
        link = nil
        sessionConversation = .idle
        talking = false
        awaitingGreeting = false
        guard forwarding else { return [] }
        forwarding = false
        return [.forwardMicrophone(false, preRoll: false)]
    }

    private mutating func closeSession() -> [ApplianceAction] {
        let stop = sessionClosed()
        return stop + [.closeSession]
    }

    private mutating func idleCheck(now: Duration) -> [ApplianceAction] {
        guard sessionOpen, !playing, !talking else { return [] }
        guard sessionConversation == .idle || sessionConversation == .listening else { return [] }
        guard now - lastActivity >= settings.idleTimeout else { return [] }
        // Nobody is talking: close (an empty room costs nothing). The kiosk's next visitor starts afresh.
        var actions = closeSession()
        if settings.mode == .kiosk { actions.append(.forgetConversation) }
        return actions
    }

    private func sound(_ earcon: Earcon) -> [ApplianceAction] {
        settings.earcons.contains(earcon) ? [.earcon(earcon)] : []
    }
}
