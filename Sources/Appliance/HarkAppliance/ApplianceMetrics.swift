import HarkCore

/// The appliance's counters and gauges for a fleet's Prometheus (node_exporter's textfile collector): made from the
/// status `hark status` shows and the updater's record, so the three always agree. Only counts, states, versions
/// and times: no audio, no transcript, no key, no word anyone said, no timer's label.
public enum ApplianceMetrics {
    /// Every state the `hark_state` gauge names (one series each, 1 for the state shown now): the conversation
    /// states, the overlays, `stopped`, and `other` for anything else a file may hold.
    public static let states: [String] =
        ConversationState.allCases.map(\.rawValue) + Overlay.allCases.map(\.rawValue) + ["stopped", "other"]

    /// The families for `status` (written at `now`, seconds since 1970) of the daemon of `version`, with the
    /// updater's `update` record if there is one.
    public static func families(
        _ status: ApplianceStatus,
        version: String,
        update: UpdateRecord?,
        now: Double
    ) -> PrometheusText {
        var text = PrometheusText()
        let count = { (value: Int) in Double(max(0, value)) }
        text.add(
            "hark_build_info",
            .gauge,
            help: "The running hark: 1, labelled with its version, mode, backend and board.",
            samples: [
                .init(
                    labels: [
                        .init("version", version), .init("mode", status.mode), .init("backend", status.backend),
                        .init("board", status.board),
                    ],
                    value: 1
                )
            ]
        )
        let started = status.startedAt.isFinite ? status.startedAt : 0
        text.add(
            "hark_start_time_seconds",
            .gauge,
            help: "When the daemon started, seconds since 1970.",
            value: started
        )
        text.add(
            "hark_uptime_seconds",
            .gauge,
            help: "Seconds since the daemon started.",
            value: max(0, now - started)
        )
        let shown = states.contains(status.state) ? status.state : "other"
        text.add(
            "hark_state",
            .gauge,
            help: "The state the LEDs show: 1 for the state now, 0 for the others.",
            samples: states.map { .init(labels: [.init("state", $0)], value: $0 == shown ? 1 : 0) }
        )
        // The counters the status keeps, since the start.
        let counters: [(name: String, help: String, value: Double)] = [
            ("hark_sessions_opened_total", "Sessions opened since the start.", count(status.sessions)),
            (
                "hark_reconnects_total",
                "Connections after the first of each session (resumptions and reconnects) since the start.",
                count(status.reconnects)
            ),
            (
                "hark_audio_dropped_frames_total",
                "Microphone frames dropped (a full queue, or beyond the hold bound of a session switch).",
                count(status.droppedFrames)
            ),
            (
                "hark_audio_resent_samples_total",
                "Microphone samples sent again on a new connection because the service had not confirmed them.",
                count(status.resentSamples ?? 0)
            ),
            (
                "hark_audio_xruns_total", "ALSA capture overruns plus playback underruns the device reported.",
                count(status.xruns)
            ),
            (
                "hark_audio_underruns_total", "Times the jitter buffer ran empty while answer audio was expected.",
                count(status.underruns)
            ),
            (
                "hark_watchdog_pings_total", "systemd watchdog pings sent (each after every part showed progress).",
                count(status.watchdogPings)
            ),
        ]
        for counter in counters { text.add(counter.name, .counter, help: counter.help, value: counter.value) }
        if let wake = status.wake {
            text.add(
                "hark_wake_detections_total",
                .counter,
                help: "Wake words heard.",
                value: count(wake.detections)
            )
            text.add(
                "hark_wake_false_starts_total",
                .counter,
                help: "Wake words heard that no speech followed.",
                value: count(wake.falseStarts)
            )
        }
        for (name, help, summary) in [
            (
                "hark_capture_to_wire_seconds", "A microphone frame from its capture to its message on the connection.",
                status.captureToWire
            ),
            (
                "hark_received_to_speaker_seconds",
                "Answer audio that found the jitter buffer empty, from its arrival to the speaker.",
                status.receivedToSpeaker
            ),
        ] {
            guard let summary else { continue }
            var samples: [PrometheusText.Sample] = [
                .init(labels: [.init("quantile", "0.5")], value: summary.p50 / 1000),
                .init(labels: [.init("quantile", "0.99")], value: summary.p99 / 1000),
                .init(labels: [.init("quantile", "1")], value: summary.max / 1000),
            ]
            if let sum = summary.sum { samples.append(.init(suffix: "_sum", value: max(0, sum) / 1000)) }
            samples.append(.init(suffix: "_count", value: count(summary.count)))
            text.add(name, .summary, help: help + " Since the start.", samples: samples)
        }
        if let interrupt = status.lastInterruptMilliseconds, interrupt.isFinite {
            text.add(
                "hark_interrupt_to_silence_seconds",
                .gauge,
                help: "The last interruption, from its cause to the speaker's silence.",
                value: max(0, interrupt) / 1000
            )
        }
        if let timers = status.timers {
            text.add(
                "hark_timers",
                .gauge,
                help: "Timers and alarms set, and ringing now.",
                samples: [
                    .init(labels: [.init("kind", "timer")], value: Double(timers.timers.count)),
                    .init(labels: [.init("kind", "alarm")], value: Double(timers.alarms.count)),
                    .init(labels: [.init("kind", "ringing")], value: Double(timers.ringing.count)),
                    .init(labels: [.init("kind", "missed")], value: Double(timers.missed.count)),
                ]
            )
        }
        if let reloads = status.reloads {
            text.add(
                "hark_reloads_total",
                .counter,
                help: "Configuration reloads asked for since the start.",
                value: count(reloads.count)
            )
            text.add(
                "hark_reload_failed",
                .gauge,
                help: "1 when the last reload could not be applied (the daemon runs the configuration before it).",
                value: reloads.failure == nil ? 0 : 1
            )
        }
        if let update {
            text.add(
                "hark_update_rollbacks_total",
                .counter,
                help: "Releases rolled back by the health gate, as the updater recorded them.",
                value: count(update.rollbacks ?? 0)
            )
            text.add(
                "hark_update_held_versions",
                .gauge,
                help: "Releases held back after failing the health gate.",
                value: Double(update.held?.count ?? 0)
            )
            if let last = update.lastUpdate {
                text.add(
                    "hark_update_last_timestamp_seconds",
                    .gauge,
                    help: "When the last update ended, seconds since 1970; labelled with its outcome.",
                    samples: [.init(labels: [.init("outcome", last.outcome ?? "unknown")], value: last.at)]
                )
            }
            if let rollback = update.lastRollback {
                text.add(
                    "hark_update_last_rollback_timestamp_seconds",
                    .gauge,
                    help: "When the last rollback ended, seconds since 1970.",
                    value: rollback.at
                )
            }
        }
        return text
    }
}
