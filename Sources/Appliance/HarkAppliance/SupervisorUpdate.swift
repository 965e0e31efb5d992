/// What the updater asks the daemon before it installs a release (the control socket's `update.ready`).
extension Supervisor {
    /// Why an update should wait now, one short reason each; empty when nothing stops it. A conversation that is
    /// open and a timer or alarm that rings are the supervisor's; other parts (media) add theirs through the
    /// control service's `busy` hooks.
    public func updateBusyReasons() -> [String] {
        var reasons: [String] = []
        if slot.session != nil { reasons.append("a conversation is open") }
        if isRinging { reasons.append("a timer or an alarm rings") }
        return reasons
    }
}
