/* SPDX-License-Identifier: MIT */
/* Internal side of the execution context: the tensor and storage structs,
 * and the calls ops use to allocate, adopt and report.
 *
 * Storage is refcounted (atomic). Pool storage returns its buffer to the
 * context's size-bucketed LIFO cache when the last reference goes; borrowed
 * storage runs the user's release hook. Tensor headers and storage headers
 * are recycled through free lists too, so a steady-state loop of ops does
 * not call the allocator at all. */
#ifndef FC_EXEC_CTX_H
#define FC_EXEC_CTX_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "fucina/ctx.h"
#include "fucina/dtype.h"
#include "fucina/tensor.h"
#include "exec/workers.h"

/* Data a layer above derives from a storage's bytes and keeps with them
 * (quantized weights repacked for prefill): a lock-free list, pushed with a
 * compare-and-swap, freed with the storage. Each entry records the storage
 * version it was derived at; an entry of an older version is never returned
 * (an in-place write made it stale) and is freed with the rest. */
typedef struct fc_storage_cache {
    struct fc_storage_cache *next;
    uint32_t kind;      /* the deriving layer's tag */
    const void *key;    /* what it was derived from (e.g. a view's first byte) */
    unsigned version;   /* the storage version it was derived at */
    void (*free)(struct fc_storage_cache *e);
} fc_storage_cache;

typedef struct fc_storage {
    atomic_long refs;
    void *data;
    size_t nbytes;              /* bytes the tensor may address */
    size_t cap;                 /* bytes allocated (the pool bucket's size); 0 when borrowed */
    int bucket;                 /* pool bucket, -1 when borrowed or uncached */
    fc_ctx *ctx;
    void (*user_release)(void *user, void *data);
    void *user;
    /* Bumped by every in-place write through any view of this storage:
     * autograd compares it with the value it saw when it saved a tensor. */
    atomic_uint version;
    _Atomic(fc_storage_cache *) cache;
    struct fc_storage *next_free;
} fc_storage;

/* The newest entry of `kind` for `key` derived at the current version, or
 * NULL. Entries are immutable once pushed; they live until the storage is
 * released. */
fc_storage_cache *fc_storage_cache_find(fc_storage *s, uint32_t kind, const void *key);
/* Adds e (its next is set here). Two threads deriving the same entry at once
 * both push; find returns the newer and both are freed with the storage. */
void fc_storage_cache_push(fc_storage *s, fc_storage_cache *e);

struct fc_tensor {
    atomic_long refs;
    fc_dtype dtype;
    int rank;
    int64_t dim[FC_MAX_RANK];
    int64_t stride[FC_MAX_RANK]; /* elements */
    const char *axis[FC_MAX_RANK]; /* interned */
    int64_t offset;              /* elements from storage->data */
    fc_storage *storage;
    fc_ctx *ctx;
    /* Autograd's state for this value (the layer above owns its meaning);
     * grad_release runs when the handle dies. */
    void *grad;
    void (*grad_release)(struct fc_tensor *t);
    struct fc_tensor *next_free;
};

/* The worker pool of a context (never NULL after fc_ctx_new). */
fc_workers *fc_ctx_workers(fc_ctx *ctx);

/* Record an error (only the first is kept). Returns NULL for chaining. */
void *fc_fail(fc_ctx *ctx, fc_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void *fc_failv(fc_ctx *ctx, fc_status st, const char *fmt, va_list ap);

/* A new storage of nbytes from the pool (contents undefined); NULL + error on OOM. */
fc_storage *fc_storage_new(fc_ctx *ctx, size_t nbytes);
fc_storage *fc_storage_borrow(fc_ctx *ctx, void *data, size_t nbytes,
                              void (*release)(void *user, void *data), void *user);
void fc_storage_retain(fc_storage *s);
void fc_storage_release(fc_storage *s);
/* Record an in-place write to s (see fc_storage.version). */
static inline void fc_storage_touch(fc_storage *s)
{
    atomic_fetch_add_explicit(&s->version, 1u, memory_order_relaxed);
}

/* A tensor header (refs = 1, no storage, grad NULL) adopted by the current
 * scope. The caller fills it in. NULL + error on OOM. */
fc_tensor *fc_tensor_header(fc_ctx *ctx);

/* Drop a tensor an op made but will not return: out of any scope, then
 * released. */
void fc_discard(fc_ctx *ctx, fc_tensor *t);

/* Ops take scratch memory for temporaries as storage too
 * (fc_storage_new / fc_storage_release): it comes from the same pool and is
 * counted the same way. */

/* Attention scratch owned by the context: a LIFO list of workspaces (one
 * per concurrent caller), so steady-state attention allocates nothing.
 * Acquire returns NULL only when a new workspace cannot be made; the caller
 * then passes NULL (per-call scratch). */
struct fc_attn_workspace;
struct fc_attn_workspace *fc_ctx_attn_workspace_acquire(fc_ctx *ctx);
void fc_ctx_attn_workspace_release(fc_ctx *ctx, struct fc_attn_workspace *ws);

/* The pool's size class of a request: the bytes a bucket hands out. */
size_t fc_pool_class_bytes(size_t nbytes);

#endif
