#ifndef HARK_CONCURRENCY_HOOKS_H
#define HARK_CONCURRENCY_HOOKS_H
// The Swift runtime's hook for global jobs (swift/Runtime/Concurrency.h: swift_task_enqueueGlobal_hook). It
// is exported by libswift_Concurrency.so and linked in from libswift_Concurrency.a in a static-stdlib build,
// where dlsym cannot see it; referring to it here works in both. (The runtime's delay and deadline hooks are
// left alone: in Swift 6.3 `Task.sleep` no longer goes through them.)

/// Installs `hook`, a Swift `@convention(thin) (UnownedJob, original) -> Void`, when no hook is set yet.
/// Returns 1 when installed, 0 when another hook was there.
int hark_install_enqueue_global_hook(const void *hook);
#endif
