import HarkCore

/// What others see of the supervisor: the watchdog's readings of each part's progress, the device tools' view of
/// the appliance (volume, mute, status), and the counters of the status file `hark status` reads.
extension Supervisor {
    /// Each part's progress, for the watchdog.
    public func readings() -> [String: ProgressWatchdog.Reading] {
        let speaker = devices.speaker.counters
        var readings: [String: ProgressWatchdog.Reading] = [
            "capture": .init(counter: devices.microphone.counters.frames),
            "playback": .init(
                counter: speaker.framesWritten + speaker.silenceFrames,
                idleByDesign: !machine.playing && devices.speaker.buffered == .zero
            ),
            "supervisor": .init(counter: loopTurns),
            "session": .init(
                counter: sessionEvents + (slot.session?.statistics.audioSamplesSent ?? 0),
                idleByDesign: slot.session == nil || !machine.forwarding || machine.link != .connected
            ),
        ]
        if let indicator = devices.indicator {
            readings["leds"] = .init(counter: indicator.framesRendered, idleByDesign: indicator.isResting)
        }
        if let button = devices.button { readings["button"] = .init(counter: button.turns) }
        if let spotter = behaviour.wake?.spotter, let wake {
            // A detector that stopped hearing leaves the device deaf to its name; one that failed says so instead.
            let counters = spotter.counters
            readings["wake"] = .init(
                counter: counters.samplesHeard,
                idleByDesign: wake.caughtUp(counters) || counters.lastError != nil
            )
        }
        return readings
    }

    /// Mutes or unmutes (a device tool).
    func setMuted(_ muted: Bool) { inputs.post(.event(.setMuted(muted))) }

    var isMuted: Bool { machine.muted }

    /// The device's condition for the `get_device_status` tool.
    func deviceStatus() -> JSONValue {
        var status: [String: JSONValue] = environment.deviceFacts()
        status["state"] = .string(publisher.status.line)
        status["uptime_seconds"] = .number((environment.wallClock() - publisher.status.startedAt).rounded())
        status["volume_percent"] = .number(Double(Int((devices.speaker.volume * 100).rounded())))
        status["microphone_muted"] = .bool(machine.muted)
        status["board"] = .string(devices.board)
        return .object(status)
    }

    /// ``DeviceControls`` over the supervisor.
    struct Controls: DeviceControls {
        let supervisor: Supervisor
        func volume() async -> Int { await supervisor.volumePercent() }
        func setVolume(_ percent: Int) async -> Int { await supervisor.setVolume(percent) }
        func isMuted() async -> Bool { await supervisor.isMuted }
        func setMuted(_ muted: Bool) async { await supervisor.setMuted(muted) }
        func status() async -> JSONValue { await supervisor.deviceStatus() }
    }

    func volumePercent() -> Int { Int((devices.speaker.volume * 100).rounded()) }

    func setVolume(_ percent: Int) -> Int {
        devices.speaker.volume = Float(max(0, min(100, percent))) / 100
        return volumePercent()
    }

    /// Sets the status file's counters from the parts.
    func fillCounters(_ status: inout ApplianceStatus) {
        let microphone = devices.microphone.counters
        let speaker = devices.speaker.counters
        status.updatedAt = environment.wallClock()
        status.sessions = slot.opened
        status.reconnects = slot.reconnects
        status.serviceSession = slot.serviceSession
        // The loop's lane holds frames back rather than drop them: the microphone's queue counts every frame lost
        // before the loop; a session's hold bound counts what it lost after.
        status.droppedFrames = microphone.dropped + slot.droppedInputSamples / AudioFormat.microphone.frameSamples
        status.resentSamples = slot.resentSamples
        status.xruns = microphone.overruns + speaker.deviceUnderruns
        status.underruns = speaker.underruns
        status.watchdogPings = pings
        if speaker.interrupts > 0 { status.lastInterruptMilliseconds = Double(speaker.lastInterruptLatency) / 1e6 }
        if framesHandled > 0 {
            let recent = latencies.prefix(min(framesHandled, latencies.count)).sorted()
            status.captureLatencyMicroseconds = Double(recent[recent.count / 2]) / 1000
        }
        pipeline.collect(from: devices.speaker)
        status.captureToWire = pipeline.captureToWire
        status.receivedToSpeaker = pipeline.receivedToSpeaker
        status.lastError = lastError
        status.timers = timerStatus()
        let servers = environment.toolServers()
        status.toolServers = servers.isEmpty ? nil : servers
        status.media = environment.media()
        if let spotter = behaviour.wake?.spotter, let wake {
            status.wake = wake.status(words: spotter.words, counters: spotter.counters)
        } else {
            status.wake = nil
        }
    }
}
