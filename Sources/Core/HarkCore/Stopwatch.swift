extension Clock where Duration == Swift.Duration {
    /// A function that tells the time on this clock since now: the "now" of a state machine that takes its time
    /// as an offset from its start.
    public func stopwatch() -> @Sendable () -> Duration {
        let start = now
        return { start.duration(to: self.now) }
    }
}
