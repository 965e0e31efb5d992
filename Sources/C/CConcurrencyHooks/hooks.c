#include "hooks.h"

#include <stddef.h>

extern const void *swift_task_enqueueGlobal_hook;

int hark_install_enqueue_global_hook(const void *hook) {
    const void *expected = NULL;
    return __atomic_compare_exchange_n(&swift_task_enqueueGlobal_hook, &expected, hook, 0, __ATOMIC_SEQ_CST,
                                       __ATOMIC_SEQ_CST);
}
