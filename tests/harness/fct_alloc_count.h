/* SPDX-License-Identifier: MIT */
/* Counting the C allocator in a test binary: including this header (in ONE
 * translation unit of the binary) interposes malloc & co with versions that
 * count every allocating call, from any thread, in fct_n_malloc. Only with
 * glibc and without a sanitizer (which interposes them itself); COUNT_MALLOC
 * says whether counting is on. Used by the steady-state decode tests: after
 * warm-up, a decode step must not allocate. */
#ifndef FCT_ALLOC_COUNT_H
#define FCT_ALLOC_COUNT_H

#include <stdatomic.h>
#include <stddef.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#endif
#if defined(__GLIBC__) && !defined(SANITIZED)
#define COUNT_MALLOC 1
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t align, size_t n);
extern void __libc_free(void *p);
static atomic_ulong fct_n_malloc; /* every allocating call, from any thread */
void *malloc(size_t n) {
    atomic_fetch_add_explicit(&fct_n_malloc, 1, memory_order_relaxed);
    return __libc_malloc(n);
}
void *calloc(size_t n, size_t size) {
    atomic_fetch_add_explicit(&fct_n_malloc, 1, memory_order_relaxed);
    return __libc_calloc(n, size);
}
void *realloc(void *p, size_t n) {
    atomic_fetch_add_explicit(&fct_n_malloc, 1, memory_order_relaxed);
    return __libc_realloc(p, n);
}
void *aligned_alloc(size_t align, size_t n) {
    atomic_fetch_add_explicit(&fct_n_malloc, 1, memory_order_relaxed);
    return __libc_memalign(align, n);
}
int posix_memalign(void **out, size_t align, size_t n) {
    atomic_fetch_add_explicit(&fct_n_malloc, 1, memory_order_relaxed);
    void *p = __libc_memalign(align, n);
    if (!p) return 12; /* ENOMEM */
    *out = p;
    return 0;
}
void free(void *p) { __libc_free(p); }
#else
#define COUNT_MALLOC 0
#endif

#endif
