/* Counts the allocations of a process, for scripts/bench: LD_PRELOAD this library and set
 * MALLOC_COUNT_OUT to a file; at exit it writes "mallocs reallocs callocs" there. Every call goes on to
 * glibc's own allocator (__libc_*), so only a relaxed atomic increment is added per call.
 * Built by scripts/bench: cc -O2 -shared -fPIC -o malloc-count.so malloc-count.c */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static atomic_ulong mallocs, callocs, reallocs;

void *malloc(size_t size) {
    atomic_fetch_add_explicit(&mallocs, 1, memory_order_relaxed);
    return __libc_malloc(size);
}

void *calloc(size_t count, size_t size) {
    atomic_fetch_add_explicit(&callocs, 1, memory_order_relaxed);
    return __libc_calloc(count, size);
}

void *realloc(void *pointer, size_t size) {
    atomic_fetch_add_explicit(&reallocs, 1, memory_order_relaxed);
    return __libc_realloc(pointer, size);
}

int posix_memalign(void **out, size_t alignment, size_t size) {
    atomic_fetch_add_explicit(&mallocs, 1, memory_order_relaxed);
    void *pointer = __libc_memalign(alignment, size);
    if (!pointer) return 12; /* ENOMEM */
    *out = pointer;
    return 0;
}

void *aligned_alloc(size_t alignment, size_t size) {
    atomic_fetch_add_explicit(&mallocs, 1, memory_order_relaxed);
    return __libc_memalign(alignment, size);
}

__attribute__((destructor)) static void report(void) {
    const char *path = getenv("MALLOC_COUNT_OUT");
    if (!path) return;
    FILE *file = fopen(path, "w");
    if (!file) return;
    fprintf(file, "%lu %lu %lu\n", atomic_load(&mallocs), atomic_load(&reallocs), atomic_load(&callocs));
    fclose(file);
}
