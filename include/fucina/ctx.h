/* SPDX-License-Identifier: MIT */
/* Fucina: the execution context.
 *
 * An fc_ctx owns what ops need besides their operands: the allocator, the
 * buffer pool that recycles tensor memory, the worker pool, the stack of exec
 * scopes and the error state. Every op takes the context first.
 *
 * Errors: an op that fails returns NULL (or a status) and the context keeps
 * the FIRST error's status and message until fc_ctx_clear_error. A NULL
 * operand makes an op return NULL without recording anything, so a chain of
 * expressions can be checked once at the end.
 *
 * Thread safety: one context may be used from several threads at once (the
 * backward pass runs ops on the workers); the pool, scopes and error state
 * are locked. Scopes are per thread (see below). */
#ifndef FUCINA_CTX_H
#define FUCINA_CTX_H

#include <stddef.h>
#include <stdint.h>

#include "fucina/export.h"
#include "fucina/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fc_ctx fc_ctx;

/* Allocator hooks: `alloc` returns `size` bytes aligned to `align` (a power
 * of two, at least 64) or NULL; `free` gets back the same pointer and size. */
typedef struct fc_allocator {
    void *(*alloc)(void *user, size_t size, size_t align);
    void (*free)(void *user, void *ptr, size_t size);
    void *user;
} fc_allocator;

typedef struct fc_ctx_options {
    int threads;               /* 0: FUCINA_THREADS, else min(cores, affinity, cgroup) */
    size_t pool_cap_bytes;     /* bytes the buffer pool may keep cached; 0: 1 GiB;
                                  SIZE_MAX: unbounded; FC_POOL_OFF: cache nothing */
    const fc_allocator *allocator; /* NULL: aligned_alloc / free */
} fc_ctx_options;

#define FC_POOL_OFF ((size_t)1)

/* A context; `opts` may be NULL. Returns NULL on failure with the reason in
 * `err` (e.g. a bad FUCINA_THREADS or FUCINA_ISA) when err is not NULL. */
FC_API fc_ctx *fc_ctx_new(const fc_ctx_options *opts, char *err, size_t errlen);
/* Frees the context. Tensors still adopted by open scopes are released;
 * every other tensor must have been released before. */
FC_API void fc_ctx_free(fc_ctx *ctx);

FC_API int fc_ctx_threads(const fc_ctx *ctx);

/* --- errors --- */
FC_API fc_status fc_ctx_status(const fc_ctx *ctx);
/* The first error's message ("" when none). Valid until the next clear. */
FC_API const char *fc_ctx_error(const fc_ctx *ctx);
FC_API void fc_ctx_clear_error(fc_ctx *ctx);

/* --- exec scopes ---
 * Every tensor a thread creates while it has a scope open is adopted by that
 * thread's innermost scope: the scope holds the reference the caller would
 * otherwise own, and fc_scope_end releases them all. So forward code can be
 * written as nested expressions without a release per intermediate. Scopes
 * belong to the thread that opened them: other threads sharing the context
 * (e.g. workers running a backward pass) are not affected by them. */
typedef struct fc_scope { uint64_t id; } fc_scope;
FC_API fc_scope fc_scope_begin(fc_ctx *ctx);
/* Ends `s` (and any scope this thread opened inside it and did not end).
 * Ending a scope that is not open on this thread is an FC_ERR_STATE error. */
FC_API void fc_scope_end(fc_ctx *ctx, fc_scope s);

/* --- buffer pool statistics --- */
typedef struct fc_pool_stats {
    uint64_t allocs;        /* buffers obtained from the allocator */
    uint64_t frees;         /* buffers returned to the allocator */
    uint64_t hits;          /* requests served from the cache */
    uint64_t requests;      /* all buffer requests */
    size_t bytes_live;      /* bytes in tensors now */
    size_t bytes_cached;    /* bytes kept for reuse */
    size_t bytes_peak;      /* high-water mark of bytes_live + bytes_cached */
    uint64_t tensors_live;  /* tensor handles alive (leak checks) */
} fc_pool_stats;
FC_API fc_pool_stats fc_ctx_pool_stats(const fc_ctx *ctx);
/* Return every cached buffer to the allocator. */
FC_API void fc_ctx_pool_trim(fc_ctx *ctx);

#ifdef __cplusplus
}
#endif
#endif
