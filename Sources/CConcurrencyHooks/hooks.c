#include "hooks.h"

#include <stddef.h>

extern const void *swift_task_enqueueGlobal_hook;
extern const void *swift_task_enqueueGlobalWithDelay_hook;
extern const void *swift_task_enqueueGlobalWithDeadline_hook;

static int install(const void **slot, const void *hook) {
    const void *expected = NULL;
    return __atomic_compare_exchange_n(slot, &expected, hook, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

int hark_install_enqueue_global_hook(const void *hook) { return install(&swift_task_enqueueGlobal_hook, hook); }

int hark_install_enqueue_global_with_delay_hook(const void *hook) {
    return install(&swift_task_enqueueGlobalWithDelay_hook, hook);
}

int hark_install_enqueue_global_with_deadline_hook(const void *hook) {
    return install(&swift_task_enqueueGlobalWithDeadline_hook, hook);
}
