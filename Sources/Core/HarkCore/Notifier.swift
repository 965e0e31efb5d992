/// Tells the service manager how the daemon is doing: ready, what it is doing, alive, stopping.
/// systemd implements it through `sd_notify`; tests and development runs use ``SilentNotifier``.
public protocol ServiceNotifier: Sendable {
    /// The devices are open and the daemon serves (`READY=1`), with a first status line.
    func ready(status: String)
    /// A line a person can read in `systemctl status` (`STATUS=`).
    func status(_ text: String)
    /// Every service has shown progress since the last ping (`WATCHDOG=1`).
    func watchdog()
    /// Shutting down (`STOPPING=1`).
    func stopping()
    /// Reloading the configuration (`RELOADING=1`); call ``ready(status:)`` when done.
    func reloading()
    /// How often the watchdog wants a ping (half the manager's timeout), or nil when there is no watchdog.
    var watchdogInterval: Duration? { get }
}

/// A notifier that tells no one (not under a service manager).
public struct SilentNotifier: ServiceNotifier {
    public init() {}
    public func ready(status: String) {}
    public func status(_ text: String) {}
    public func watchdog() {}
    public func stopping() {}
    public func reloading() {}
    public var watchdogInterval: Duration? { nil }
}
