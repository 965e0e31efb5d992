import Glibc

/// A counting semaphore a thread can wait on, with or without a timeout (`sem_t`): posting never allocates, and
/// waiting takes no thread of Swift's pool or of Dispatch.
public final class Wakeup: @unchecked Sendable {
    private let semaphore: UnsafeMutablePointer<sem_t>

    public init() {
        semaphore = .allocate(capacity: 1)
        sem_init(semaphore, 0, 0)
    }

    deinit {
        sem_destroy(semaphore)
        semaphore.deallocate()
    }

    /// `sem_post`.
    public func signal() { sem_post(semaphore) }

    /// Waits for a signal (`sem_wait`).
    public func wait() {
        while sem_wait(semaphore) != 0, errno == EINTR {}
    }

    /// Waits up to `nanoseconds` for a signal (`sem_timedwait`); true when signalled.
    @discardableResult
    public func wait(nanoseconds: UInt64) -> Bool {
        var deadline = timespec()
        clock_gettime(CLOCK_REALTIME, &deadline)
        let total = UInt64(deadline.tv_nsec) + nanoseconds
        deadline.tv_sec += Int(total / 1_000_000_000)
        deadline.tv_nsec = Int(total % 1_000_000_000)
        while true {
            if sem_timedwait(semaphore, &deadline) == 0 { return true }
            if errno != EINTR { return false }
        }
    }
}
