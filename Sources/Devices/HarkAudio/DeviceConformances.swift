import HarkCore

extension AudioCapture: Microphone {
    /// A sound card delivers in real time; a file device at its pace, or as fast as it is read (0).
    public var pace: Double {
        configuration.pace > 0 ? configuration.pace : (configuration.backpressure ? 0 : 1)
    }

    public var condition: DeviceCondition {
        let statistics = self.statistics
        return DeviceCondition(
            failingFor: statistics.failingFor,
            outages: statistics.outages,
            lastError: statistics.lastError
        )
    }

    public var counters: MicrophoneCounters {
        let statistics = self.statistics
        return MicrophoneCounters(frames: statistics.frames, dropped: statistics.dropped, overruns: statistics.overruns)
    }
}

extension AudioPlayback: Speaker {
    public var condition: DeviceCondition {
        let statistics = self.statistics
        return DeviceCondition(
            failingFor: statistics.failingFor,
            outages: statistics.outages,
            lastError: statistics.lastError
        )
    }

    public var counters: SpeakerCounters {
        let statistics = self.statistics
        return SpeakerCounters(
            framesWritten: statistics.framesWritten,
            silenceFrames: statistics.silenceFrames,
            underruns: statistics.underruns,
            deviceUnderruns: statistics.deviceUnderruns,
            interrupts: statistics.interrupts,
            lastInterruptLatency: statistics.lastInterruptLatency
        )
    }
}
