import Glibc

/// The one monotonic clock of the devices, the audio threads and the service manager: `CLOCK_MONOTONIC`, the
/// timebase of ALSA timestamps, GPIO and (once set) evdev events, and systemd's `MONOTONIC_USEC`. Reading it
/// allocates nothing, so it is safe on audio threads.
public enum MonotonicClock {
    /// Nanoseconds on the clock: `clock_gettime(CLOCK_MONOTONIC)`.
    @inline(__always)
    public static func nanoseconds() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }

    /// The time on the clock as a duration since its (arbitrary) origin.
    public static func now() -> Duration {
        let nanoseconds = nanoseconds()
        return .seconds(Int64(nanoseconds / 1_000_000_000)) + .nanoseconds(Int64(nanoseconds % 1_000_000_000))
    }
}

/// ``MonotonicClock/nanoseconds()``: no allocation, safe on audio threads.
@inline(__always)
public func monotonicNanoseconds() -> UInt64 { MonotonicClock.nanoseconds() }
