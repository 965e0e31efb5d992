import Glibc
import Synchronization

/// A dedicated, named POSIX thread for blocking device I/O (ALSA reads and writes, polls on GPIO and input
/// descriptors): never the Swift cooperative pool. Either it started, or the initialiser threw; ``join()``
/// waits for it to end. A thread never joined is detached when this is released, so its resources are freed
/// when it ends. Stands for `pthread_create`, `pthread_join` and `pthread_detach`.
public final class DeviceThread: Sendable {
    /// The thread's name as given (the kernel keeps its first 15 bytes).
    public let name: String
    private let handle: Mutex<pthread_t?>

    /// What the new thread runs, handed over through `pthread_create`'s argument.
    private final class Start: Sendable {
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }

    /// Starts `body` on a new thread named `name` (for `top -H`, `ps -L` and /proc: otherwise it would carry
    /// its creator's name). `stackSize` in bytes, nil for the system's default. Throws ``DeviceThreadError``
    /// when the thread cannot be created (too many threads, no memory for its stack).
    public init(name: String, stackSize: Int? = nil, body: @escaping @Sendable () -> Void) throws(DeviceThreadError) {
        self.name = name
        var attributes = pthread_attr_t()
        var result = pthread_attr_init(&attributes)
        guard result == 0 else { throw DeviceThreadError(name: name, operation: "pthread_attr_init", code: result) }
        defer { pthread_attr_destroy(&attributes) }
        if let stackSize {
            result = pthread_attr_setstacksize(&attributes, max(stackSize, Int(PTHREAD_STACK_MIN)))
            guard result == 0 else {
                throw DeviceThreadError(name: name, operation: "pthread_attr_setstacksize", code: result)
            }
        }
        let start = Unmanaged.passRetained(Start(name: name, body: body))
        var created = pthread_t()
        result = pthread_create(
            &created,
            &attributes,
            { argument in
                let start = Unmanaged<Start>.fromOpaque(argument!).takeRetainedValue()
                DeviceThread.nameCallingThread(start.name)
                start.body()
                return nil
            },
            start.toOpaque()
        )
        guard result == 0 else {
            start.release()
            throw DeviceThreadError(name: name, operation: "pthread_create", code: result)
        }
        handle = Mutex(created)
    }

    deinit {
        if let thread = handle.withLock({ $0 }) { pthread_detach(thread) }
    }

    /// Waits until the thread's body has returned (`pthread_join`). Later calls return at once. Never call it
    /// from the thread itself.
    public func join() {
        let thread = handle.withLock { handle -> pthread_t? in
            defer { handle = nil }
            return handle
        }
        if let thread { pthread_join(thread, nil) }
    }

    /// Names the calling thread through `/proc/thread-self/comm`, what `prctl(PR_SET_NAME)` sets (both are out
    /// of Swift's reach: one is variadic, `pthread_setname_np` is not exported by Glibc's module). A name that
    /// cannot be set is harmless: the thread keeps its creator's.
    private static func nameCallingThread(_ name: String) {
        let descriptor = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        let bytes = Array(name.utf8.prefix(15))
        _ = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        close(descriptor)
    }
}

/// A thread could not be started.
public struct DeviceThreadError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The thread's name.
    public let name: String
    /// The call that failed.
    public let operation: String
    /// The error number it returned.
    public let code: Int32

    public var description: String {
        let reason = strerror(code).map { String(cString: $0) } ?? "error \(code)"
        return "cannot start the \(name) thread: \(operation): \(reason) (errno \(code))"
    }
}
