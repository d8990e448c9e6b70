/* SPDX-License-Identifier: MIT */
/* The execution context: allocator, buffer pool, tensor headers, scopes,
 * error state, worker pool.
 *
 * Buffer pool. Requests round up to a size class: multiples of 64 bytes up
 * to 1 KiB, then four classes per power of two (1, 1.25, 1.5, 1.75 x 2^k),
 * so at most 25% of a buffer is slack. Each class keeps a LIFO list of
 * released storages with their buffers, so the buffer released last is the
 * one handed out next (its cache lines are the warmest). A cap bounds the
 * bytes kept; a release beyond it goes back to the allocator. */
#include "exec/ctx.h"
#include "exec/attention.h"
#include "fucina/dispatch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FC_POOL_CLASSES 160
#define FC_ERRMSG_MAX 1024
#define FC_DEFAULT_POOL_CAP ((size_t)1 << 30)

/* An open scope: the thread that opened it adopts into it; other threads
 * using the same context never see it (a backward pass running ops on the
 * workers, or two threads running forward code, each get their own). */
typedef struct fc_scope_list {
    fc_tensor **items;
    size_t n, cap;
    uint64_t id;
    pthread_t owner;
} fc_scope_list;

struct fc_ctx {
    pthread_mutex_t lock;
    fc_allocator alloc;
    size_t pool_cap;
    fc_storage *bucket[FC_POOL_CLASSES];
    fc_storage *free_storages;  /* headers without buffers */
    fc_tensor *free_tensors;
    fc_pool_stats stats;
    fc_scope_list *scopes;      /* open scopes of every thread, oldest first */
    int n_scopes, scopes_cap;
    uint64_t next_scope_id;
    fc_status status;
    char errmsg[FC_ERRMSG_MAX];
    fc_workers *workers;
    int threads;
    fc_attn_workspace *attn_ws[8]; /* idle attention workspaces, LIFO */
    int n_attn_ws;
    /* Item arrays of ended scopes, kept for the next fc_scope_begin, so a
     * steady-state loop of scopes (an LLM decode step) does not allocate. */
    fc_tensor **spare_items[16];
    size_t spare_cap[16];
    int n_spare;
};

/* --- default allocator --- */
static void *default_alloc(void *user, size_t size, size_t align)
{
    (void)user;
    size = (size + align - 1) & ~(align - 1);
    return aligned_alloc(align, size ? size : align);
}
static void default_free(void *user, void *ptr, size_t size) { (void)user; (void)size; free(ptr); }

/* --- size classes --- */
static int class_of(size_t n, size_t *bytes)
{
    if (n == 0) n = 1;
    if (n <= 1024) {
        size_t c = (n + 63) / 64; /* 1..16 */
        *bytes = c * 64;
        return (int)c - 1;
    }
    /* n > 1024: the smallest 2^k * (4 + q) / 4 >= n, q in 0..3. */
    int k = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* 2^k <= n-1 < 2^(k+1) */
    size_t base = (size_t)1 << k;
    for (int q = 1; q <= 4; q++) {
        size_t b = base + (base / 4) * (size_t)q;
        if (b >= n) {
            *bytes = b;
            int idx = 16 + (k - 10) * 4 + (q - 1);
            return idx < FC_POOL_CLASSES ? idx : -1;
        }
    }
    *bytes = base * 2;
    return -1;
}

size_t fc_pool_class_bytes(size_t nbytes)
{
    size_t b = nbytes;
    class_of(nbytes, &b);
    return b;
}

/* --- errors --- */
void *fc_failv(fc_ctx *ctx, fc_status st, const char *fmt, va_list ap)
{
    if (!ctx) return NULL;
    pthread_mutex_lock(&ctx->lock);
    if (ctx->status == FC_OK) {
        ctx->status = st;
        vsnprintf(ctx->errmsg, sizeof ctx->errmsg, fmt, ap);
    }
    pthread_mutex_unlock(&ctx->lock);
    return NULL;
}

void *fc_fail(fc_ctx *ctx, fc_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fc_failv(ctx, st, fmt, ap);
    va_end(ap);
    return NULL;
}

fc_status fc_ctx_status(const fc_ctx *ctx) { return ctx ? ctx->status : FC_ERR_INVALID_ARG; }

const char *fc_ctx_error(const fc_ctx *ctx)
{
    if (!ctx) return "no context";
    return ctx->status == FC_OK ? "" : ctx->errmsg;
}

void fc_ctx_clear_error(fc_ctx *ctx)
{
    if (!ctx) return;
    pthread_mutex_lock(&ctx->lock);
    ctx->status = FC_OK;
    ctx->errmsg[0] = 0;
    pthread_mutex_unlock(&ctx->lock);
}

/* --- context --- */
fc_ctx *fc_ctx_new(const fc_ctx_options *opts, char *err, size_t errlen)
{
    fc_ctx_options o = {0};
    if (opts) o = *opts;
    if (o.threads < 0 || o.threads > 1024) {
        if (err) snprintf(err, errlen, "fc_ctx_new: threads = %d is out of range (0 for the default, 1..1024)", o.threads);
        return NULL;
    }
    /* An invalid FUCINA_ISA fails here, as a bad FUCINA_THREADS does below:
     * otherwise every kernel would silently run with the scalar cap. */
    if (fc_dispatch_init() != FC_OK) {
        if (err) snprintf(err, errlen, "fc_ctx_new: %s", fc_dispatch_error());
        return NULL;
    }
    int threads = o.threads;
    if (threads == 0) {
        char why[256] = "";
        threads = fc_default_threads(why, sizeof why);
        if (threads < 1) {
            if (err) snprintf(err, errlen, "fc_ctx_new: %s", why);
            return NULL;
        }
    }
    uint64_t spin_ns;
    char spin_why[256] = "";
    if (fc_workers_spin_from_env(&spin_ns, spin_why, sizeof spin_why) != 0) {
        if (err) snprintf(err, errlen, "fc_ctx_new: %s", spin_why);
        return NULL;
    }
    fc_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        if (err) snprintf(err, errlen, "fc_ctx_new: out of memory");
        return NULL;
    }
    pthread_mutex_init(&ctx->lock, NULL);
    if (o.allocator && o.allocator->alloc && o.allocator->free) ctx->alloc = *o.allocator;
    else ctx->alloc = (fc_allocator){default_alloc, default_free, NULL};
    ctx->pool_cap = o.pool_cap_bytes == 0 ? FC_DEFAULT_POOL_CAP : o.pool_cap_bytes == FC_POOL_OFF ? 0 : o.pool_cap_bytes;
    ctx->threads = threads;
    ctx->workers = fc_workers_new(threads);
    if (!ctx->workers) {
        if (err) snprintf(err, errlen, "fc_ctx_new: cannot start %d worker threads", threads);
        pthread_mutex_destroy(&ctx->lock);
        free(ctx);
        return NULL;
    }
    fc_workers_set_spin(ctx->workers, spin_ns);
    return ctx;
}

int fc_ctx_threads(const fc_ctx *ctx) { return ctx ? ctx->threads : 0; }
fc_workers *fc_ctx_workers(fc_ctx *ctx) { return ctx->workers; }

void fc_ctx_pool_trim(fc_ctx *ctx)
{
    if (!ctx) return;
    pthread_mutex_lock(&ctx->lock);
    for (int b = 0; b < FC_POOL_CLASSES; b++) {
        while (ctx->bucket[b]) {
            fc_storage *s = ctx->bucket[b];
            ctx->bucket[b] = s->next_free;
            ctx->alloc.free(ctx->alloc.user, s->data, s->cap);
            ctx->stats.frees++;
            ctx->stats.bytes_cached -= s->cap;
            s->data = NULL;
            s->next_free = ctx->free_storages;
            ctx->free_storages = s;
        }
    }
    pthread_mutex_unlock(&ctx->lock);
}

void fc_ctx_free(fc_ctx *ctx)
{
    if (!ctx) return;
    /* Release what open scopes still hold, newest first. */
    for (int lv = ctx->n_scopes - 1; lv >= 0; lv--) {
        fc_scope_list *l = &ctx->scopes[lv];
        for (size_t i = l->n; i-- > 0;) fc_release(l->items[i]);
        free(l->items);
    }
    free(ctx->scopes);
    for (int i = 0; i < ctx->n_spare; i++) free(ctx->spare_items[i]);
    for (int i = 0; i < ctx->n_attn_ws; i++) fc_attn_workspace_free(ctx->attn_ws[i]);
    fc_workers_free(ctx->workers);
    fc_ctx_pool_trim(ctx);
    while (ctx->free_storages) {
        fc_storage *s = ctx->free_storages;
        ctx->free_storages = s->next_free;
        free(s);
    }
    while (ctx->free_tensors) {
        fc_tensor *t = ctx->free_tensors;
        ctx->free_tensors = t->next_free;
        free(t);
    }
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

fc_pool_stats fc_ctx_pool_stats(const fc_ctx *ctx)
{
    fc_pool_stats s = {0};
    if (!ctx) return s;
    pthread_mutex_lock((pthread_mutex_t *)&ctx->lock);
    s = ctx->stats;
    pthread_mutex_unlock((pthread_mutex_t *)&ctx->lock);
    return s;
}

/* --- storage --- */
static fc_storage *storage_header_locked(fc_ctx *ctx)
{
    fc_storage *s = ctx->free_storages;
    if (s) ctx->free_storages = s->next_free;
    else s = malloc(sizeof *s);
    return s;
}

static void note_peak_locked(fc_ctx *ctx)
{
    size_t total = ctx->stats.bytes_live + ctx->stats.bytes_cached;
    if (total > ctx->stats.bytes_peak) ctx->stats.bytes_peak = total;
}

fc_storage *fc_storage_new(fc_ctx *ctx, size_t nbytes)
{
    size_t bytes;
    int b = class_of(nbytes, &bytes);
    if (b < 0 || bytes < nbytes) return fc_fail(ctx, FC_ERR_OOM, "cannot allocate %zu bytes: too large", nbytes);
    pthread_mutex_lock(&ctx->lock);
    ctx->stats.requests++;
    fc_storage *s = ctx->bucket[b];
    if (s) {
        ctx->bucket[b] = s->next_free;
        ctx->stats.hits++;
        ctx->stats.bytes_cached -= s->cap;
    } else {
        s = storage_header_locked(ctx);
        if (!s) {
            pthread_mutex_unlock(&ctx->lock);
            return fc_fail(ctx, FC_ERR_OOM, "out of memory (a storage header)");
        }
        pthread_mutex_unlock(&ctx->lock);
        void *data = ctx->alloc.alloc(ctx->alloc.user, bytes, 64);
        pthread_mutex_lock(&ctx->lock);
        if (!data) {
            s->next_free = ctx->free_storages;
            ctx->free_storages = s;
            pthread_mutex_unlock(&ctx->lock);
            return fc_fail(ctx, FC_ERR_OOM, "out of memory: cannot allocate %zu bytes", bytes);
        }
        ctx->stats.allocs++;
        s->data = data;
        s->cap = bytes;
        s->bucket = b;
    }
    ctx->stats.bytes_live += s->cap;
    note_peak_locked(ctx);
    pthread_mutex_unlock(&ctx->lock);
    atomic_init(&s->refs, 1);
    atomic_init(&s->version, 0u);
    atomic_init(&s->cache, NULL);
    s->nbytes = nbytes;
    s->ctx = ctx;
    s->user_release = NULL;
    s->user = NULL;
    s->next_free = NULL;
    return s;
}

fc_storage *fc_storage_borrow(fc_ctx *ctx, void *data, size_t nbytes,
                              void (*release)(void *user, void *data), void *user)
{
    pthread_mutex_lock(&ctx->lock);
    fc_storage *s = storage_header_locked(ctx);
    pthread_mutex_unlock(&ctx->lock);
    if (!s) return fc_fail(ctx, FC_ERR_OOM, "out of memory (a storage header)");
    atomic_init(&s->refs, 1);
    atomic_init(&s->version, 0u);
    atomic_init(&s->cache, NULL);
    s->data = data;
    s->nbytes = nbytes;
    s->cap = 0;
    s->bucket = -1;
    s->ctx = ctx;
    s->user_release = release;
    s->user = user;
    s->next_free = NULL;
    return s;
}

void fc_storage_retain(fc_storage *s) { atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed); }

fc_storage_cache *fc_storage_cache_find(fc_storage *s, uint32_t kind, const void *key)
{
    unsigned v = atomic_load_explicit(&s->version, memory_order_acquire);
    for (fc_storage_cache *e = atomic_load_explicit(&s->cache, memory_order_acquire); e; e = e->next)
        if (e->kind == kind && e->key == key && e->version == v) return e;
    return NULL;
}

void fc_storage_cache_push(fc_storage *s, fc_storage_cache *e)
{
    fc_storage_cache *head = atomic_load_explicit(&s->cache, memory_order_relaxed);
    do {
        e->next = head;
    } while (!atomic_compare_exchange_weak_explicit(&s->cache, &head, e, memory_order_release,
                                                    memory_order_relaxed));
}

void fc_storage_release(fc_storage *s)
{
    if (!s) return;
    if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1) return;
    fc_ctx *ctx = s->ctx;
    /* Derived data goes with the bytes, before the header is reused. */
    for (fc_storage_cache *e = atomic_exchange_explicit(&s->cache, NULL, memory_order_acquire), *next; e; e = next) {
        next = e->next;
        e->free(e);
    }
    if (s->bucket < 0) { /* borrowed */
        if (s->user_release) s->user_release(s->user, s->data);
        pthread_mutex_lock(&ctx->lock);
        s->data = NULL;
        s->next_free = ctx->free_storages;
        ctx->free_storages = s;
        pthread_mutex_unlock(&ctx->lock);
        return;
    }
    pthread_mutex_lock(&ctx->lock);
    ctx->stats.bytes_live -= s->cap;
    if (ctx->stats.bytes_cached + s->cap <= ctx->pool_cap) {
        s->next_free = ctx->bucket[s->bucket];
        ctx->bucket[s->bucket] = s;
        ctx->stats.bytes_cached += s->cap;
        pthread_mutex_unlock(&ctx->lock);
        return;
    }
    void *data = s->data;
    size_t cap = s->cap;
    s->data = NULL;
    s->next_free = ctx->free_storages;
    ctx->free_storages = s;
    ctx->stats.frees++;
    pthread_mutex_unlock(&ctx->lock);
    ctx->alloc.free(ctx->alloc.user, data, cap);
}

/* --- tensor headers and scopes --- */
static int scope_push_locked(fc_ctx *ctx, int level, fc_tensor *t)
{
    fc_scope_list *l = &ctx->scopes[level];
    if (l->n == l->cap) {
        size_t ncap = l->cap ? l->cap * 2 : 64;
        fc_tensor **ni = realloc(l->items, ncap * sizeof *ni);
        if (!ni) return 0;
        l->items = ni;
        l->cap = ncap;
    }
    l->items[l->n++] = t;
    return 1;
}

/* The innermost scope of the calling thread at or below `from`, or -1. */
static int own_scope_locked(const fc_ctx *ctx, int from)
{
    pthread_t self = pthread_self();
    for (int lv = from; lv >= 0; lv--)
        if (pthread_equal(ctx->scopes[lv].owner, self)) return lv;
    return -1;
}

fc_tensor *fc_tensor_header(fc_ctx *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    fc_tensor *t = ctx->free_tensors;
    if (t) ctx->free_tensors = t->next_free;
    else t = malloc(sizeof *t);
    if (!t) {
        pthread_mutex_unlock(&ctx->lock);
        return fc_fail(ctx, FC_ERR_OOM, "out of memory (a tensor header)");
    }
    memset(t, 0, sizeof *t);
    atomic_init(&t->refs, 1);
    t->ctx = ctx;
    ctx->stats.tensors_live++;
    int lv = ctx->n_scopes > 0 ? own_scope_locked(ctx, ctx->n_scopes - 1) : -1;
    if (lv >= 0 && !scope_push_locked(ctx, lv, t)) {
        t->next_free = ctx->free_tensors;
        ctx->free_tensors = t;
        ctx->stats.tensors_live--;
        pthread_mutex_unlock(&ctx->lock);
        return fc_fail(ctx, FC_ERR_OOM, "out of memory (a scope list)");
    }
    pthread_mutex_unlock(&ctx->lock);
    return t;
}

fc_tensor *fc_retain(fc_tensor *t)
{
    if (t) atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
    return t;
}

void fc_release(fc_tensor *t)
{
    if (!t) return;
    if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1) return;
    if (t->grad_release) t->grad_release(t);
    fc_storage_release(t->storage);
    fc_ctx *ctx = t->ctx;
    pthread_mutex_lock(&ctx->lock);
    t->next_free = ctx->free_tensors;
    ctx->free_tensors = t;
    ctx->stats.tensors_live--;
    pthread_mutex_unlock(&ctx->lock);
}

fc_scope fc_scope_begin(fc_ctx *ctx)
{
    if (!ctx) return (fc_scope){0};
    pthread_mutex_lock(&ctx->lock);
    if (ctx->n_scopes == ctx->scopes_cap) {
        int ncap = ctx->scopes_cap ? ctx->scopes_cap * 2 : 8;
        fc_scope_list *ns = realloc(ctx->scopes, (size_t)ncap * sizeof *ns);
        if (!ns) {
            pthread_mutex_unlock(&ctx->lock);
            fc_fail(ctx, FC_ERR_OOM, "fc_scope_begin: out of memory");
            return (fc_scope){0};
        }
        ctx->scopes = ns;
        ctx->scopes_cap = ncap;
    }
    uint64_t id = ++ctx->next_scope_id;
    ctx->scopes[ctx->n_scopes] = (fc_scope_list){NULL, 0, 0, id, pthread_self()};
    if (ctx->n_spare > 0) {
        ctx->n_spare--;
        ctx->scopes[ctx->n_scopes].items = ctx->spare_items[ctx->n_spare];
        ctx->scopes[ctx->n_scopes].cap = ctx->spare_cap[ctx->n_spare];
    }
    ctx->n_scopes++;
    pthread_mutex_unlock(&ctx->lock);
    return (fc_scope){id};
}

void fc_scope_end(fc_ctx *ctx, fc_scope s)
{
    if (!ctx) return;
    pthread_t self = pthread_self();
    pthread_mutex_lock(&ctx->lock);
    int at = -1;
    for (int lv = ctx->n_scopes - 1; lv >= 0; lv--)
        if (ctx->scopes[lv].id == s.id && pthread_equal(ctx->scopes[lv].owner, self)) at = lv;
    if (s.id == 0 || at < 0) {
        int open = ctx->n_scopes;
        pthread_mutex_unlock(&ctx->lock);
        fc_fail(ctx, FC_ERR_STATE, "fc_scope_end: scope %llu is not open on this thread (%d open in the context)",
                (unsigned long long)s.id, open);
        return;
    }
    /* Take this thread's scopes from `at` up (the one ending and any opened
     * inside it); other threads' scopes stay, in order. The taken lists are
     * released after the lock is dropped (fc_release takes it). */
    /* Usually one scope ends: no allocation for up to 8. */
    fc_scope_list few[8];
    size_t ntake = (size_t)(ctx->n_scopes - at);
    fc_scope_list *taken = ntake <= 8 ? few : malloc(ntake * sizeof *taken);
    if (!taken) {
        pthread_mutex_unlock(&ctx->lock);
        fc_fail(ctx, FC_ERR_OOM, "fc_scope_end: out of memory");
        return;
    }
    int w = at, nt = 0;
    for (int lv = at; lv < ctx->n_scopes; lv++) {
        if (pthread_equal(ctx->scopes[lv].owner, self)) taken[nt++] = ctx->scopes[lv];
        else ctx->scopes[w++] = ctx->scopes[lv];
    }
    ctx->n_scopes = w;
    pthread_mutex_unlock(&ctx->lock);
    /* Release newest first: views die before the tensors they view. */
    for (int k = nt - 1; k >= 0; k--)
        for (size_t i = taken[k].n; i-- > 0;) fc_release(taken[k].items[i]);
    /* keep the item arrays for the next scopes (fc_ctx.spare_items) */
    pthread_mutex_lock(&ctx->lock);
    for (int k = 0; k < nt; k++) {
        if (taken[k].items && ctx->n_spare < 16 && taken[k].cap <= 65536) { /* keep at most 16 x 512 KiB */
            ctx->spare_items[ctx->n_spare] = taken[k].items;
            ctx->spare_cap[ctx->n_spare++] = taken[k].cap;
        } else {
            free(taken[k].items);
        }
    }
    pthread_mutex_unlock(&ctx->lock);
    if (taken != few) free(taken);
}

fc_tensor *fc_keep(fc_ctx *ctx, fc_tensor *t)
{
    if (!ctx || !t) return t;
    pthread_mutex_lock(&ctx->lock);
    for (int lv = own_scope_locked(ctx, ctx->n_scopes - 1); lv >= 0; lv = own_scope_locked(ctx, lv - 1)) {
        fc_scope_list *l = &ctx->scopes[lv];
        for (size_t i = l->n; i-- > 0;) {
            if (l->items[i] != t) continue;
            memmove(&l->items[i], &l->items[i + 1], (l->n - i - 1) * sizeof *l->items);
            l->n--;
            int parent = lv > 0 ? own_scope_locked(ctx, lv - 1) : -1;
            if (parent >= 0 && !scope_push_locked(ctx, parent, t)) {
                pthread_mutex_unlock(&ctx->lock);
                fc_fail(ctx, FC_ERR_OOM, "fc_keep: out of memory");
                return t; /* the caller owns it now */
            }
            pthread_mutex_unlock(&ctx->lock);
            return t;
        }
    }
    pthread_mutex_unlock(&ctx->lock);
    return t;
}

void fc_discard(fc_ctx *ctx, fc_tensor *t)
{
    if (!ctx || !t) return;
    pthread_mutex_lock(&ctx->lock);
    for (int lv = ctx->n_scopes - 1; lv >= 0; lv--) {
        fc_scope_list *l = &ctx->scopes[lv];
        for (size_t i = l->n; i-- > 0;) {
            if (l->items[i] != t) continue;
            memmove(&l->items[i], &l->items[i + 1], (l->n - i - 1) * sizeof *l->items);
            l->n--;
            pthread_mutex_unlock(&ctx->lock);
            fc_release(t);
            return;
        }
    }
    pthread_mutex_unlock(&ctx->lock);
    fc_release(t);
}

fc_attn_workspace *fc_ctx_attn_workspace_acquire(fc_ctx *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    fc_attn_workspace *ws = ctx->n_attn_ws > 0 ? ctx->attn_ws[--ctx->n_attn_ws] : NULL;
    pthread_mutex_unlock(&ctx->lock);
    return ws ? ws : fc_attn_workspace_new();
}

void fc_ctx_attn_workspace_release(fc_ctx *ctx, fc_attn_workspace *ws)
{
    if (!ws) return;
    pthread_mutex_lock(&ctx->lock);
    if (ctx->n_attn_ws < (int)(sizeof ctx->attn_ws / sizeof ctx->attn_ws[0])) {
        ctx->attn_ws[ctx->n_attn_ws++] = ws;
        ws = NULL;
    }
    pthread_mutex_unlock(&ctx->lock);
    fc_attn_workspace_free(ws); /* more idle workspaces than slots: drop this one */
}
