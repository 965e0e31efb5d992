#ifndef HARK_CONCURRENCY_HOOKS_H
#define HARK_CONCURRENCY_HOOKS_H
// The Swift runtime's hooks for global jobs (swift/Runtime/Concurrency.h: swift_task_enqueueGlobal_hook,
// swift_task_enqueueGlobalWithDelay_hook, swift_task_enqueueGlobalWithDeadline_hook). They are exported by
// libswift_Concurrency.so and linked in from libswift_Concurrency.a in a static-stdlib build, where dlsym
// cannot see them; referring to them here works in both.

/// Installs `hook`, a Swift `@convention(thin) (UnownedJob, original) -> Void`, when no hook is set yet.
/// Returns 1 when installed, 0 when another hook was there.
int hark_install_enqueue_global_hook(const void *hook);

/// Installs `hook`, a Swift `@convention(thin) (UInt64 nanoseconds, UnownedJob, original) -> Void`.
int hark_install_enqueue_global_with_delay_hook(const void *hook);

/// Installs `hook`, a Swift `@convention(thin) (Int64 seconds, Int64 nanoseconds, Int64 tolerance seconds,
/// Int64 tolerance nanoseconds, Int32 clock, UnownedJob, original) -> Void`; clock 1 is the continuous clock
/// (CLOCK_BOOTTIME on Linux), 2 the suspending clock (CLOCK_MONOTONIC).
int hark_install_enqueue_global_with_deadline_hook(const void *hook);
#endif
