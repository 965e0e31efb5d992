import HarkCore
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// State shared by all connections of one simulator: sessions and their resumption handles, ephemeral
/// tokens, and which once-only faults have fired. Thread-safe.
///
/// Wall-clock times are `Duration`s since the store's epoch (``wallNow()``), so tests can pass their own.
public final class SimulatorStore: Sendable {
    /// Why a resumption was refused.
    public enum ResumeResult: Sendable, Hashable {
        /// The session, attached to the caller now, with the turn count the handle captured.
        case resumed(sessionID: Int, turnCount: Int)
        /// No such handle was ever issued.
        case unknown
        /// The handle is older than the handle lifetime.
        case expired
        /// The session still has an open socket.
        case busy
    }

    /// Why an ephemeral token was refused.
    public enum TokenCheck: Sendable, Hashable {
        case accepted
        case unknown
        case expired
        case noUsesLeft
        case newSessionWindowClosed
    }

    /// An ephemeral token as minted.
    public struct MintedToken: Sendable, Hashable {
        /// `auth_tokens/...`.
        public var name: String
        /// When it stops working.
        public var expireTime: Date
        /// New sessions must start before this.
        public var newSessionExpireTime: Date
        /// New sessions it may open; 0 = unlimited.
        public var uses: Int
    }

    /// 3.8: a NON_BLOCKING call its session still waits for, kept while no socket serves the session.
    public struct HeldCall: Sendable, Hashable {
        /// The call's id and function.
        public var id: String
        public var name: String
        /// The user turn whose answer made the call.
        public var turn: Int

        public init(id: String, name: String, turn: Int) {
            self.id = id
            self.name = name
            self.turn = turn
        }
    }

    private struct SessionState {
        var attached: Bool
        var detachedAt: Duration?
        var heldCalls: [HeldCall] = []
    }

    private struct HandleState {
        var sessionID: Int
        var turnCount: Int
        var issuedAt: Duration
    }

    private struct TokenState {
        var token: MintedToken
        var sessionsOpened: Int
    }

    private struct State {
        var nextConnection = 1
        var nextSession = 1
        var nextHandle = 1
        var sessions: [Int: SessionState] = [:]
        var handles: [String: HandleState] = [:]
        var tokens: [String: TokenState] = [:]
        var firedFaults: Set<Int> = []
    }

    private let state = Mutex(State())
    /// The instant wall-clock `Duration`s count from.
    public let epoch: ContinuousClock.Instant
    /// The calendar date at the epoch (for token expiry times).
    public let epochDate: Date
    /// How long a handle stays valid after its session last detached.
    public let handleLifetime: Duration
    private let nonce: String

    public init(
        handleLifetime: Duration = .seconds(7200),
        epoch: ContinuousClock.Instant = .now,
        epochDate: Date = Date()
    ) {
        self.handleLifetime = handleLifetime
        self.epoch = epoch
        self.epochDate = epochDate
        self.nonce = randomHex(bytes: 4)
    }

    /// Wall-clock time since the epoch.
    public func wallNow() -> Duration { ContinuousClock.now - epoch }

    /// The date of wall-clock time `wall`.
    public func date(at wall: Duration) -> Date {
        epochDate.addingTimeInterval(Double(wall.nanoseconds) / 1e9)
    }

    /// Numbers a new WebSocket connection (1-based).
    public func nextConnectionNumber() -> Int {
        state.withLock { state in
            defer { state.nextConnection += 1 }
            return state.nextConnection
        }
    }

    /// Starts a new session, attached to the caller.
    public func newSession() -> Int {
        state.withLock { state in
            let id = state.nextSession
            state.nextSession += 1
            state.sessions[id] = SessionState(attached: true, detachedAt: nil)
            return id
        }
    }

    /// Attaches the caller to the session of `handle`, if it may.
    public func resume(handle: String, wall: Duration) -> ResumeResult {
        state.withLock { state in
            guard let entry = state.handles[handle], var session = state.sessions[entry.sessionID] else {
                return .unknown
            }
            if session.attached { return .busy }
            let since = max(entry.issuedAt, session.detachedAt ?? entry.issuedAt)
            if wall - since > handleLifetime { return .expired }
            session.attached = true
            session.detachedAt = nil
            state.sessions[entry.sessionID] = session
            return .resumed(sessionID: entry.sessionID, turnCount: entry.turnCount)
        }
    }

    /// A new resumption handle for `sessionID` capturing `turnCount`.
    public func issueHandle(sessionID: Int, turnCount: Int, wall: Duration) -> String {
        state.withLock { state in
            let handle = "sim-\(nonce)-s\(sessionID)-h\(state.nextHandle)"
            state.nextHandle += 1
            state.handles[handle] = HandleState(sessionID: sessionID, turnCount: turnCount, issuedAt: wall)
            return handle
        }
    }

    /// The session's socket closed (or is closing): it may be resumed from now on, and the session that
    /// resumes it takes over `heldCalls`, the calls still running.
    public func detach(sessionID: Int, wall: Duration, heldCalls: [HeldCall] = []) {
        state.withLock { state in
            guard state.sessions[sessionID]?.attached == true else { return }
            state.sessions[sessionID]?.attached = false
            state.sessions[sessionID]?.detachedAt = wall
            state.sessions[sessionID]?.heldCalls = heldCalls
        }
    }

    /// The calls still running that session `sessionID` left when its socket closed (then forgotten here).
    public func takeHeldCalls(sessionID: Int) -> [HeldCall] {
        state.withLock { state in
            defer { state.sessions[sessionID]?.heldCalls = [] }
            return state.sessions[sessionID]?.heldCalls ?? []
        }
    }

    /// Mints an ephemeral token. Defaults as the service's: expires in 30 minutes, new sessions within
    /// 60 seconds, 1 use (0 = unlimited).
    public func mintToken(
        expireTime: Date? = nil,
        newSessionExpireTime: Date? = nil,
        uses: Int? = nil,
        wall: Duration
    ) -> MintedToken {
        let now = date(at: wall)
        let token = MintedToken(
            name: "auth_tokens/" + randomHex(bytes: 16),
            expireTime: expireTime ?? now.addingTimeInterval(30 * 60),
            newSessionExpireTime: newSessionExpireTime ?? now.addingTimeInterval(60),
            uses: max(0, uses ?? 1)
        )
        state.withLock { $0.tokens[token.name] = TokenState(token: token, sessionsOpened: 0) }
        return token
    }

    /// Checks a token for a connection's setup; a new session (not a resumption) uses it up.
    public func useToken(_ name: String, newSession: Bool, wall: Duration) -> TokenCheck {
        let now = date(at: wall)
        return state.withLock { state in
            guard var entry = state.tokens[name] else { return .unknown }
            if now >= entry.token.expireTime { return .expired }
            guard newSession else { return .accepted }
            if now >= entry.token.newSessionExpireTime { return .newSessionWindowClosed }
            if entry.token.uses > 0, entry.sessionsOpened >= entry.token.uses { return .noUsesLeft }
            entry.sessionsOpened += 1
            state.tokens[name] = entry
            return .accepted
        }
    }

    /// Claims once-only fault `index`: true the first time only.
    public func claimFault(_ index: Int) -> Bool {
        state.withLock { $0.firedFaults.insert(index).inserted }
    }
}

func randomHex(bytes: Int) -> String {
    var generator = SystemRandomNumberGenerator()
    let digits = Array("0123456789abcdef".utf8)
    var out = [UInt8]()
    out.reserveCapacity(bytes * 2)
    for _ in 0..<bytes {
        let byte = UInt8.random(in: 0...255, using: &generator)
        out.append(digits[Int(byte >> 4)])
        out.append(digits[Int(byte & 15)])
    }
    return String(decoding: out, as: UTF8.self)
}
