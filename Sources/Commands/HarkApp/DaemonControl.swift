import HarkAppliance
import HarkControl
import HarkCore
import HarkNet
import Logging
import ServiceLifecycle

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The operations `hark run` serves on its control socket: `reload` and `status` here, every other one by the
/// supervisor's side (`others`: timers, alarms, announcements), or refused as not supported when there is none.
struct DaemonControl: ControlService {
    let core: Supervisor
    /// Loads the configuration again (as SIGHUP does): the behaviour to apply, or why the file cannot run.
    let reload: @Sendable () -> Result<ApplianceBehaviour, ReloadFailure>
    /// What serves every other operation.
    let others: (any ControlService)?
    /// How long a reload may take to be applied by the supervisor's loop.
    var applyDeadline: Duration = .seconds(20)
    /// What else keeps an update waiting besides a conversation and a ring: each hook says why (a few words), or
    /// nil when its part is not busy (media that plays adds its own).
    var busy: [@Sendable () async -> String?] = []

    func handle(_ request: ControlRequest) async -> ControlReply {
        switch request.op {
        case "reload":
            return await reloaded()
        case "status":
            return await status()
        case "update.ready":
            return await updateReady()
        default:
            guard let others else {
                return .failure("\(request.op) is not supported by this daemon")
            }
            return await others.handle(request)
        }
    }

    /// Loads the file; applies it and replies once it is in force, or replies why not (the running configuration
    /// stays).
    private func reloaded() async -> ControlReply {
        switch reload() {
        case .failure(let failure):
            core.reloadFailed(failure.description)
            return .failure("refused, the daemon keeps its running configuration: \(failure.description)")
        case .success(let behaviour):
            core.reload(behaviour)
            let applied = await withTaskGroup(of: Bool.self) { group in
                group.addTask {
                    await core.settled()
                    return !Task.isCancelled
                }
                group.addTask { [applyDeadline] in
                    try? await EventLoopClock().sleep(for: applyDeadline)
                    return false
                }
                let first = await group.next() ?? false
                group.cancelAll()
                return first
            }
            guard applied else {
                return .failure("the daemon did not apply the configuration within \(applyDeadline)")
            }
            let status = await core.currentStatus()
            return ControlReply(ok: true, message: "in force (mode \(status.mode), \(status.backend))")
        }
    }

    /// `update.ready`: `{"ready": true}` when an update may be installed now, else `{"ready": false, "busy":
    /// [reasons]}` (`hark-update` waits and asks again).
    private func updateReady() async -> ControlReply {
        var reasons = await core.updateBusyReasons()
        for hook in busy.prefix(16) {
            if let reason = await hook() { reasons.append(RemoteText.printable(reason, limit: 120)) }
        }
        guard !reasons.isEmpty else {
            return ControlReply(ok: true, message: "ready", data: .object(["ready": .bool(true)]))
        }
        return ControlReply(
            ok: true,
            message: "busy: " + reasons.joined(separator: ", "),
            data: .object(["ready": .bool(false), "busy": .array(reasons.map { .string($0) })])
        )
    }

    private func status() async -> ControlReply {
        let status = await core.currentStatus()
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        guard let data = try? encoder.encode(status), let value = try? JSONDecoder().decode(JSONValue.self, from: data)
        else { return .failure("the status could not be encoded") }
        return ControlReply(ok: true, message: status.line, data: value)
    }
}

/// The control socket as a service of the daemon's group: serves until the group shuts down, then stops accepting
/// and removes the socket file.
struct ControlSocketService: Service {
    let server: ControlServer

    func run() async throws {
        try? await gracefulShutdown()
        await server.close()
    }
}
