/* SPDX-License-Identifier: MIT */
/* GGUF reading: the whole file is mapped (or read) once, the header is
 * parsed through a bounds-checked cursor and validated completely at open
 * (rules in docs/IO.md), KV values are copied out, tensors are wrapped
 * zero-copy over the mapping, which is refcounted so it outlives the handle
 * for as long as any of those tensors. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/axis.h"
#include "exec/ctx.h"
#include "io/atomic_file.h"
#include "io/file_map.h"
#include "io/gguf_internal.h"

#define SHOW 80 /* bytes of a key or name quoted in a message */

typedef struct g_tensor {
    char *name;
    uint32_t type;
    int n_dims;
    int64_t ne[FC_GGUF_MAX_DIMS];
    uint64_t nbytes, offset;
    uint64_t at; /* file offset of the info, for messages */
    int part;    /* split file holding the data: 0 this one, k parts[k - 1] */
} g_tensor;

typedef struct g_idx {
    const char *s;
    int64_t i;
} g_idx;

struct fc_gguf {
    fc_ctx *ctx;
    char *path;
    uint32_t version, alignment;
    uint64_t data_off;
    gguf_kv *kv;
    int64_t n_kv;
    g_idx *kv_sorted;
    g_tensor *t;
    int64_t n_t;
    g_idx *t_sorted;
    fc_file_map *map;
    const unsigned char *bytes; /* the whole file */
    struct fc_gguf **parts;     /* split files 2..n (llama.cpp's gguf-split), opened with the first */
    int n_parts;
};

/* ---- messages ------------------------------------------------------------------- */

typedef struct g_src {
    fc_ctx *ctx;
    const char *op, *path;
} g_src;

static void *g_fail(const g_src *o, fc_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void *g_fail(const g_src *o, fc_status st, const char *fmt, ...)
{
    char msg[768], pb[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return fc_fail(o->ctx, st, "%s: %s: %s", o->op, fc_io_path_for_msg(o->path, pb, sizeof pb), msg);
}

/* A key or name for a message: at most SHOW bytes, control bytes as '?'. */
static const char *show(char buf[SHOW + 4], const char *s, size_t n)
{
    size_t k = n < SHOW ? n : SHOW;
    for (size_t i = 0; i < k; i++) buf[i] = (unsigned char)s[i] < 0x20 ? '?' : s[i];
    if (k < n) memcpy(buf + k, "...", 4);
    else buf[k] = 0;
    return buf;
}

/* ---- the mapping ---------------------------------------------------------------- */

static fc_file_map *map_file(const g_src *o, int fd, uint64_t fsize, int flags)
{
    fc_status st = FC_OK;
    fc_file_map *m = fc_file_map_new(fd, flags & FC_GGUF_READ, fsize, 0, fsize, &st);
    if (m) return m;
    if (st == FC_ERR_OOM) return g_fail(o, FC_ERR_OOM, "out of memory (%llu bytes)", (unsigned long long)fsize);
    if (flags & FC_GGUF_READ)
        return g_fail(o, FC_ERR_IO, "cannot read %llu bytes: %s", (unsigned long long)fsize, fc_file_read_error());
    return g_fail(o, FC_ERR_IO, "cannot mmap %llu bytes: %s (FC_GGUF_READ reads instead)", (unsigned long long)fsize,
                  strerror(errno));
}

/* ---- KV values ------------------------------------------------------------------ */

void fc_gguf_kv_free(gguf_kv *kv)
{
    if (!kv) return;
    free(kv->key);
    free(kv->str);
    free(kv->data);
    if (kv->strs)
        for (uint64_t i = 0; i < kv->n; i++) free(kv->strs[i]);
    free(kv->strs);
    free(kv->lens);
    memset(kv, 0, sizeof *kv);
}

static char *dup_bytes(const void *p, size_t n)
{
    char *s = malloc(n + 1);
    if (!s) return NULL;
    if (n) memcpy(s, p, n);
    s[n] = 0;
    return s;
}

int fc_gguf_kv_clone(gguf_kv *dst, const gguf_kv *src)
{
    memset(dst, 0, sizeof *dst);
    dst->type = src->type;
    dst->elem = src->elem;
    dst->n = src->n;
    memcpy(dst->raw, src->raw, 8);
    if (!(dst->key = dup_bytes(src->key, strlen(src->key)))) goto oom;
    if (src->str && !(dst->str = dup_bytes(src->str, (size_t)src->n))) goto oom;
    if (src->data) {
        size_t nb = (size_t)src->n * fc_gguf_vtype_size(src->elem);
        if (!(dst->data = malloc(nb))) goto oom;
        memcpy(dst->data, src->data, nb);
    }
    if (src->strs) {
        /* calloc so that a partial copy frees cleanly */
        dst->strs = calloc((size_t)src->n ? (size_t)src->n : 1, sizeof *dst->strs);
        dst->lens = malloc(((size_t)src->n ? (size_t)src->n : 1) * sizeof *dst->lens);
        if (!dst->strs || !dst->lens) goto oom;
        for (uint64_t i = 0; i < src->n; i++) {
            dst->lens[i] = src->lens[i];
            if (!(dst->strs[i] = dup_bytes(src->strs[i], (size_t)src->lens[i]))) goto oom;
        }
    }
    return 1;
oom:
    fc_gguf_kv_free(dst);
    return 0;
}

/* ---- the cursor ----------------------------------------------------------------- */

typedef struct cur {
    const g_src *o;
    const unsigned char *p;
    uint64_t len, off;
} cur;

static uint64_t left(const cur *c) { return c->len - c->off; }

/* Every failure to read names the field and where it starts. */
static int need(cur *c, uint64_t n, const char *field)
{
    if (n <= left(c)) return 1;
    g_fail(c->o, FC_ERR_FORMAT, "%s at byte %llu: needs %llu bytes, only %llu left in the file (truncated?)", field,
           (unsigned long long)c->off, (unsigned long long)n, (unsigned long long)left(c));
    return 0;
}

static int rd(cur *c, void *out, size_t n, const char *field)
{
    if (!need(c, n, field)) return 0;
    memcpy(out, c->p + c->off, n);
    c->off += n;
    return 1;
}

static int rd_u32(cur *c, uint32_t *v, const char *field) { return rd(c, v, 4, field); }
static int rd_u64(cur *c, uint64_t *v, const char *field) { return rd(c, v, 8, field); }

/* A string: u64 length (<= cap, <= bytes left) and the bytes, copied with a
 * NUL. `what` names it in messages. */
static char *rd_str(cur *c, uint64_t cap, uint64_t *len_out, const char *what)
{
    uint64_t at = c->off, n;
    char f[256];
    snprintf(f, sizeof f, "%s length", what);
    if (!rd_u64(c, &n, f)) return NULL;
    if (n > cap)
        return g_fail(c->o, FC_ERR_FORMAT, "%s at byte %llu: length %llu exceeds the limit of %llu bytes", what,
                      (unsigned long long)at, (unsigned long long)n, (unsigned long long)cap);
    if (n > left(c))
        return g_fail(c->o, FC_ERR_FORMAT, "%s at byte %llu: length %llu but only %llu bytes left in the file", what,
                      (unsigned long long)at, (unsigned long long)n, (unsigned long long)left(c));
    char *s = dup_bytes(c->p + c->off, (size_t)n);
    if (!s) return g_fail(c->o, FC_ERR_OOM, "out of memory");
    c->off += n;
    *len_out = n;
    return s;
}

static int valid_vtype(uint32_t t) { return t <= FC_GGUF_F64; }

/* The value of kv (its type already read at byte tat). */
static int rd_value(cur *c, gguf_kv *kv, uint64_t tat, const char *qk)
{
    char f[256];
    if (!valid_vtype(kv->type)) {
        g_fail(c->o, FC_ERR_FORMAT, "key \"%s\": value type at byte %llu: %u is not a GGUF value type (0..12)", qk,
               (unsigned long long)tat, kv->type);
        return 0;
    }
    size_t es = fc_gguf_vtype_size(kv->type);
    if (es) {
        uint64_t at = c->off;
        snprintf(f, sizeof f, "key \"%s\": %s value", qk, fc_gguf_vtype_name((int)kv->type));
        if (!rd(c, kv->raw, es, f)) return 0;
        if (kv->type == FC_GGUF_BOOL && kv->raw[0] > 1) {
            g_fail(c->o, FC_ERR_FORMAT, "key \"%s\": BOOL value at byte %llu is %u, not 0 or 1", qk,
                   (unsigned long long)at, kv->raw[0]);
            return 0;
        }
        return 1;
    }
    if (kv->type == FC_GGUF_STR) {
        snprintf(f, sizeof f, "key \"%s\": string value", qk);
        return (kv->str = rd_str(c, GGUF_STR_MAX, &kv->n, f)) != NULL;
    }
    /* ARRAY: element type, count, elements. */
    uint64_t eat = c->off;
    snprintf(f, sizeof f, "key \"%s\": array element type", qk);
    if (!rd_u32(c, &kv->elem, f)) return 0;
    if (!valid_vtype(kv->elem)) {
        g_fail(c->o, FC_ERR_FORMAT, "key \"%s\": array element type at byte %llu: %u is not a GGUF value type", qk,
               (unsigned long long)eat, kv->elem);
        return 0;
    }
    if (kv->elem == FC_GGUF_ARR) {
        g_fail(c->o, FC_ERR_FORMAT, "key \"%s\": array element type at byte %llu: nested arrays are not supported",
               qk, (unsigned long long)eat);
        return 0;
    }
    uint64_t nat = c->off, n;
    snprintf(f, sizeof f, "key \"%s\": array length", qk);
    if (!rd_u64(c, &n, f)) return 0;
    /* Each element takes at least its size (8 for a string's length), so a
     * count the file cannot hold is rejected before any allocation. */
    uint64_t min_el = kv->elem == FC_GGUF_STR ? 8 : fc_gguf_vtype_size(kv->elem);
    if (n > left(c) / min_el) {
        g_fail(c->o, FC_ERR_FORMAT, "key \"%s\": array length at byte %llu: %llu %s elements need at least %llu "
               "bytes per element, only %llu bytes left in the file", qk, (unsigned long long)nat,
               (unsigned long long)n, fc_gguf_vtype_name((int)kv->elem), (unsigned long long)min_el,
               (unsigned long long)left(c));
        return 0;
    }
    if (kv->elem != FC_GGUF_STR) {
        size_t nb = (size_t)n * min_el;
        uint64_t at = c->off;
        if (nb) {
            if (!(kv->data = malloc(nb))) return g_fail(c->o, FC_ERR_OOM, "out of memory"), 0;
            memcpy(kv->data, c->p + c->off, nb);
            c->off += nb;
        }
        kv->n = n;
        if (kv->elem == FC_GGUF_BOOL)
            for (uint64_t i = 0; i < n; i++)
                if (((unsigned char *)kv->data)[i] > 1) {
                    g_fail(c->o, FC_ERR_FORMAT, "key \"%s\": BOOL array element %llu at byte %llu is %u, not 0 or 1",
                           qk, (unsigned long long)i, (unsigned long long)(at + i), ((unsigned char *)kv->data)[i]);
                    return 0;
                }
        return 1;
    }
    kv->strs = calloc((size_t)n ? (size_t)n : 1, sizeof *kv->strs);
    kv->lens = calloc((size_t)n ? (size_t)n : 1, sizeof *kv->lens);
    if (!kv->strs || !kv->lens) return g_fail(c->o, FC_ERR_OOM, "out of memory"), 0;
    kv->n = n; /* set first: fc_gguf_kv_free frees the strings read so far */
    for (uint64_t i = 0; i < n; i++) {
        snprintf(f, sizeof f, "key \"%s\": string %llu of the array", qk, (unsigned long long)i);
        if (!(kv->strs[i] = rd_str(c, GGUF_STR_MAX, &kv->lens[i], f))) return 0;
    }
    return 1;
}

/* ---- open ----------------------------------------------------------------------- */

static void g_free(fc_gguf *g)
{
    if (!g) return;
    for (int64_t i = 0; i < g->n_kv; i++) fc_gguf_kv_free(&g->kv[i]);
    free(g->kv);
    free(g->kv_sorted);
    for (int64_t i = 0; i < g->n_t; i++) free(g->t[i].name);
    free(g->t);
    free(g->t_sorted);
    fc_file_map_unref(g->map);
    for (int k = 0; k < g->n_parts; k++) g_free(g->parts[k]);
    free(g->parts);
    free(g->path);
    free(g);
}

static int cmp_idx(const void *a, const void *b)
{
    const g_idx *x = a, *y = b;
    int c = strcmp(x->s, y->s);
    if (c) return c;
    return (x->i > y->i) - (x->i < y->i); /* ties in file order: the later one is the duplicate */
}

static int cmp_u64p(const void *a, const void *b)
{
    const g_tensor *x = *(const g_tensor *const *)a, *y = *(const g_tensor *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return (x->nbytes > y->nbytes) - (x->nbytes < y->nbytes);
}

static int parse_kvs(cur *c, fc_gguf *g, uint64_t n_kv)
{
    if (!(g->kv = calloc((size_t)n_kv + 1, sizeof *g->kv))) return g_fail(c->o, FC_ERR_OOM, "out of memory"), 0;
    for (uint64_t i = 0; i < n_kv; i++) {
        gguf_kv *kv = &g->kv[i];
        g->n_kv = (int64_t)i + 1;
        uint64_t at = c->off, klen;
        char f[96], qk[SHOW + 4];
        snprintf(f, sizeof f, "KV %llu key", (unsigned long long)i);
        if (!(kv->key = rd_str(c, GGUF_KEY_MAX, &klen, f))) return 0;
        if (klen == 0)
            return g_fail(c->o, FC_ERR_FORMAT, "KV %llu key at byte %llu: the key is empty", (unsigned long long)i,
                          (unsigned long long)at), 0;
        if (strlen(kv->key) != klen)
            return g_fail(c->o, FC_ERR_FORMAT, "KV %llu key at byte %llu: the key contains a NUL byte",
                          (unsigned long long)i, (unsigned long long)at), 0;
        show(qk, kv->key, klen);
        uint64_t tat = c->off;
        snprintf(f, sizeof f, "key \"%.60s\": value type", qk);
        if (!rd_u32(c, &kv->type, f)) return 0;
        if (!rd_value(c, kv, tat, qk)) return 0;
    }
    /* Duplicates: sort (key, index); equal neighbours are duplicates. */
    if (!(g->kv_sorted = malloc(((size_t)n_kv + 1) * sizeof *g->kv_sorted)))
        return g_fail(c->o, FC_ERR_OOM, "out of memory"), 0;
    for (int64_t i = 0; i < g->n_kv; i++) g->kv_sorted[i] = (g_idx){g->kv[i].key, i};
    qsort(g->kv_sorted, (size_t)g->n_kv, sizeof *g->kv_sorted, cmp_idx);
    for (int64_t i = 1; i < g->n_kv; i++)
        if (!strcmp(g->kv_sorted[i].s, g->kv_sorted[i - 1].s)) {
            char qk[SHOW + 4];
            return g_fail(c->o, FC_ERR_FORMAT, "KV %lld: duplicate key \"%s\" (first at KV %lld)",
                          (long long)g->kv_sorted[i].i, show(qk, g->kv_sorted[i].s, strlen(g->kv_sorted[i].s)),
                          (long long)g->kv_sorted[i - 1].i), 0;
        }
    return 1;
}

static int parse_alignment(const g_src *o, fc_gguf *g)
{
    g->alignment = FC_GGUF_DEFAULT_ALIGNMENT;
    int64_t i = fc_gguf_find_kv(g, "general.alignment");
    if (i < 0) return 1;
    const gguf_kv *kv = &g->kv[i];
    if (kv->type != FC_GGUF_U32)
        return g_fail(o, FC_ERR_FORMAT, "key \"general.alignment\" (KV %lld) is %s; it must be UINT32", (long long)i,
                      fc_gguf_vtype_name((int)kv->type)), 0;
    uint32_t a;
    memcpy(&a, kv->raw, 4);
    if (a == 0 || (a & (a - 1)) || a > GGUF_ALIGN_MAX)
        return g_fail(o, FC_ERR_FORMAT, "key \"general.alignment\" (KV %lld) is %u; it must be a power of two "
                      "<= %u", (long long)i, a, GGUF_ALIGN_MAX), 0;
    g->alignment = a;
    return 1;
}

static int parse_tensor(cur *c, fc_gguf *g, uint64_t i)
{
    g_tensor *t = &g->t[i];
    char f[160], q[SHOW + 4];
    uint64_t at = c->off, nlen;
    t->at = at;
    snprintf(f, sizeof f, "tensor %llu name", (unsigned long long)i);
    if (!(t->name = rd_str(c, FC_GGUF_MAX_NAME, &nlen, f))) return 0;
    if (nlen == 0 || strlen(t->name) != nlen)
        return g_fail(c->o, FC_ERR_FORMAT, "tensor %llu name at byte %llu: %s", (unsigned long long)i,
                      (unsigned long long)at, nlen ? "the name contains a NUL byte" : "the name is empty"), 0;
    show(q, t->name, nlen);
    uint64_t dat = c->off;
    uint32_t nd;
    snprintf(f, sizeof f, "tensor \"%s\" n_dims", q);
    if (!rd_u32(c, &nd, f)) return 0;
    if (nd < 1 || nd > FC_GGUF_MAX_DIMS)
        return g_fail(c->o, FC_ERR_FORMAT, "tensor \"%s\" n_dims at byte %llu: %u, must be 1..%d", q,
                      (unsigned long long)dat, nd, FC_GGUF_MAX_DIMS), 0;
    t->n_dims = (int)nd;
    for (int d = 0; d < FC_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < nd; d++) {
        uint64_t v, vat = c->off;
        snprintf(f, sizeof f, "tensor \"%s\" ne[%u]", q, d);
        if (!rd_u64(c, &v, f)) return 0;
        if (v < 1 || v > (uint64_t)INT64_MAX)
            return g_fail(c->o, FC_ERR_FORMAT, "tensor \"%s\" ne[%u] at byte %llu: %llu, must be 1..INT64_MAX", q, d,
                          (unsigned long long)vat, (unsigned long long)v), 0;
        t->ne[d] = (int64_t)v;
    }
    uint64_t tat = c->off;
    snprintf(f, sizeof f, "tensor \"%s\" type", q);
    if (!rd_u32(c, &t->type, f)) return 0;
    const gguf_type_info *ti = fc_gguf_type_info(t->type);
    if (!ti)
        return g_fail(c->o, FC_ERR_FORMAT, "tensor \"%s\" type at byte %llu: unknown ggml type id %u", q,
                      (unsigned long long)tat, t->type), 0;
    const char *why = NULL;
    if (!fc_gguf_tensor_nbytes(ti, t->n_dims, t->ne, &t->nbytes, &why))
        return g_fail(c->o, FC_ERR_FORMAT, "tensor \"%s\" (%s, ne[0] %lld, block %u) at byte %llu: %s", q, ti->name,
                      (long long)t->ne[0], ti->blck, (unsigned long long)dat, why), 0;
    uint64_t oat = c->off;
    snprintf(f, sizeof f, "tensor \"%s\" offset", q);
    if (!rd_u64(c, &t->offset, f)) return 0;
    if (t->offset % g->alignment)
        return g_fail(c->o, FC_ERR_FORMAT, "tensor \"%s\" offset at byte %llu: %llu is not a multiple of the "
                      "alignment %u", q, (unsigned long long)oat, (unsigned long long)t->offset, g->alignment), 0;
    return 1;
}

/* g->t_sorted over all tensors (of every split part); 0 on a duplicate name. */
static int index_tensors(const g_src *o, fc_gguf *g)
{
    free(g->t_sorted);
    if (!(g->t_sorted = malloc(((size_t)g->n_t + 1) * sizeof *g->t_sorted)))
        return g_fail(o, FC_ERR_OOM, "out of memory"), 0;
    for (int64_t i = 0; i < g->n_t; i++) g->t_sorted[i] = (g_idx){g->t[i].name, i};
    qsort(g->t_sorted, (size_t)g->n_t, sizeof *g->t_sorted, cmp_idx);
    for (int64_t i = 1; i < g->n_t; i++)
        if (!strcmp(g->t_sorted[i].s, g->t_sorted[i - 1].s)) {
            char q[SHOW + 4];
            const g_tensor *t = &g->t[g->t_sorted[i].i];
            if (t->part)
                return g_fail(o, FC_ERR_FORMAT, "split %d: tensor \"%s\" (info at byte %llu) is also in an "
                              "earlier split", t->part + 1, show(q, t->name, strlen(t->name)),
                              (unsigned long long)t->at), 0;
            return g_fail(o, FC_ERR_FORMAT, "tensor %lld at byte %llu: duplicate tensor name \"%s\"",
                          (long long)g->t_sorted[i].i, (unsigned long long)t->at, show(q, t->name, strlen(t->name))), 0;
        }
    return 1;
}

static int parse_tensors(cur *c, fc_gguf *g, uint64_t n_t, uint64_t fsize)
{
    if (!(g->t = calloc((size_t)n_t + 1, sizeof *g->t))) return g_fail(c->o, FC_ERR_OOM, "out of memory"), 0;
    for (uint64_t i = 0; i < n_t; i++) {
        g->n_t = (int64_t)i + 1;
        if (!parse_tensor(c, g, i)) return 0;
    }
    if (!index_tensors(c->o, g)) return 0;
    /* The data section starts at the next multiple of the alignment. */
    uint64_t hdr_end = c->off, a = g->alignment;
    g->data_off = hdr_end + (a - hdr_end % a) % a; /* hdr_end <= fsize < 2^63: no wrap */
    if (g->data_off > fsize)
        return g_fail(c->o, FC_ERR_FORMAT, "data section at byte %llu: past the end of the file (expected at least "
                      "%llu bytes, file has %llu; truncated?)", (unsigned long long)g->data_off,
                      (unsigned long long)g->data_off, (unsigned long long)fsize), 0;
    uint64_t room = fsize - g->data_off;
    /* Every tensor, with its padding to the alignment (llama.cpp reads the
     * padded data section as one block), must lie in the file. */
    const g_tensor **by_off = malloc(((size_t)n_t + 1) * sizeof *by_off);
    if (!by_off) return g_fail(c->o, FC_ERR_OOM, "out of memory"), 0;
    int ok = 1;
    for (int64_t i = 0; i < g->n_t && ok; i++) {
        const g_tensor *t = &g->t[i];
        by_off[i] = t;
        uint64_t padded = t->nbytes + (a - t->nbytes % a) % a; /* nbytes <= INT64_MAX: no wrap */
        if (t->offset > room || padded > room - t->offset) {
            char q[SHOW + 4];
            uint64_t end = t->offset > UINT64_MAX - g->data_off - padded ? UINT64_MAX
                                                                          : g->data_off + t->offset + padded;
            g_fail(c->o, FC_ERR_FORMAT, "tensor \"%s\" (info at byte %llu): data [%llu, +%llu) with padding ends "
                   "past the end of the file: expected at least %llu bytes, file has %llu (truncated download?)",
                   show(q, t->name, strlen(t->name)), (unsigned long long)t->at, (unsigned long long)t->offset,
                   (unsigned long long)padded, (unsigned long long)end, (unsigned long long)fsize);
            ok = 0;
        }
    }
    if (ok) {
        qsort(by_off, (size_t)g->n_t, sizeof *by_off, cmp_u64p);
        for (int64_t i = 1; i < g->n_t && ok; i++) {
            const g_tensor *x = by_off[i - 1], *y = by_off[i];
            if (x->offset + x->nbytes > y->offset) {
                char q1[SHOW + 4], q2[SHOW + 4];
                g_fail(c->o, FC_ERR_FORMAT, "tensors \"%s\" [%llu, %llu) and \"%s\" [%llu, %llu) overlap in the "
                       "data section (infos at bytes %llu and %llu)", show(q1, x->name, strlen(x->name)),
                       (unsigned long long)x->offset, (unsigned long long)(x->offset + x->nbytes),
                       show(q2, y->name, strlen(y->name)), (unsigned long long)y->offset,
                       (unsigned long long)(y->offset + y->nbytes), (unsigned long long)x->at,
                       (unsigned long long)y->at);
                ok = 0;
            }
        }
    }
    free(by_off);
    return ok;
}

static fc_gguf *g_open(const g_src *o, int flags)
{
    /* O_NONBLOCK: a FIFO would block open() until a writer came; fstat refuses
     * it below, and the flag is cleared for the regular file. */
    int fd = open(o->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return g_fail(o, FC_ERR_IO, "cannot open: %s", strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        g_fail(o, FC_ERR_IO, "cannot stat: %s", strerror(errno));
        close(fd);
        return NULL;
    }
    if (!S_ISREG(sb.st_mode)) {
        g_fail(o, FC_ERR_IO, "not a regular file");
        close(fd);
        return NULL;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        g_fail(o, FC_ERR_IO, "cannot clear O_NONBLOCK: %s", strerror(errno));
        close(fd);
        return NULL;
    }
    uint64_t fsize = (uint64_t)sb.st_size;
    if (fsize < 24) {
        g_fail(o, FC_ERR_FORMAT, "header at byte 0: the file is %llu bytes, a GGUF header needs 24 (truncated?)",
               (unsigned long long)fsize);
        close(fd);
        return NULL;
    }
    fc_file_map *m = map_file(o, fd, fsize, flags);
    close(fd);
    if (!m) return NULL;
    fc_gguf *g = calloc(1, sizeof *g);
    if (!g || !(g->path = strdup(o->path))) {
        fc_file_map_unref(m);
        free(g);
        return g_fail(o, FC_ERR_OOM, "out of memory");
    }
    g->ctx = o->ctx;
    g->map = m;
    g->bytes = m->base;
    cur c = {o, g->bytes, fsize, 0};
    if (memcmp(g->bytes, "GGUF", 4) != 0) {
        char b[SHOW + 4];
        g_fail(o, FC_ERR_FORMAT, "magic at byte 0: \"%s\" is not \"GGUF\" (not a GGUF file)",
               show(b, (const char *)g->bytes, 4));
        goto fail;
    }
    c.off = 4;
    rd_u32(&c, &g->version, "version");
    if (g->version == 1) {
        g_fail(o, FC_ERR_FORMAT, "version at byte 4: GGUF v1 (32-bit counts) is not supported; re-convert the "
               "model with a current llama.cpp");
        goto fail;
    }
    if ((g->version & 0xFFFF) == 0 && g->version != 0) {
        g_fail(o, FC_ERR_FORMAT, "version at byte 4: 0x%08x looks byte-swapped (a big-endian GGUF file); only "
               "little-endian files are supported", g->version);
        goto fail;
    }
    if (g->version < 2 || g->version > 3) {
        g_fail(o, FC_ERR_FORMAT, "version at byte 4: %u is not supported (versions 2 and 3 are)", g->version);
        goto fail;
    }
    uint64_t n_t, n_kv;
    rd_u64(&c, &n_t, "tensor count");
    rd_u64(&c, &n_kv, "KV count");
    /* Cheap bounds before any allocation: a KV takes at least 14 bytes
     * (8-byte key length, 1 key byte, 4-byte type, 1-byte value), a tensor
     * info at least 33 (name length + 1 byte, n_dims, one dim, type,
     * offset). */
    if (n_kv > left(&c) / 14) {
        g_fail(o, FC_ERR_FORMAT, "KV count at byte 16: %llu KV pairs cannot fit in the %llu bytes left in the file",
               (unsigned long long)n_kv, (unsigned long long)left(&c));
        goto fail;
    }
    if (n_t > left(&c) / 33) {
        g_fail(o, FC_ERR_FORMAT, "tensor count at byte 8: %llu tensor infos cannot fit in the %llu bytes left in "
               "the file", (unsigned long long)n_t, (unsigned long long)left(&c));
        goto fail;
    }
    if (!parse_kvs(&c, g, n_kv)) goto fail;
    if (!parse_alignment(o, g)) goto fail;
    if (n_t > left(&c) / 33) {
        g_fail(o, FC_ERR_FORMAT, "tensor count at byte 8: %llu tensor infos cannot fit in the %llu bytes left "
               "after the KV pairs", (unsigned long long)n_t, (unsigned long long)left(&c));
        goto fail;
    }
    if (!parse_tensors(&c, g, n_t, fsize)) goto fail;
    return g;
fail:
    g_free(g);
    return NULL;
}

/* ---- split files ---------------------------------------------------------------- */

static int64_t find(const g_idx *v, int64_t n, const char *s);

/* An integer KV of the split keys (llama.cpp writes split.no and split.count
 * as u16, split.tensors.count as i32): 1 found, 0 absent, -1 wrong type. */
static int split_key(const fc_gguf *g, const char *key, uint64_t *out)
{
    int64_t i = find(g->kv_sorted, g->n_kv, key);
    if (i < 0) return 0;
    const gguf_kv *kv = &g->kv[i];
    switch (kv->type) {
    case FC_GGUF_U16: { uint16_t v; memcpy(&v, kv->raw, 2); *out = v; return 1; }
    case FC_GGUF_U32: { uint32_t v; memcpy(&v, kv->raw, 4); *out = v; return 1; }
    case FC_GGUF_I32: { int32_t v; memcpy(&v, kv->raw, 4); if (v < 0) return -1; *out = (uint64_t)v; return 1; }
    default: return -1;
    }
}

/* After the first split file is open: open parts 2..n next to it (names
 * PREFIX-0000k-of-0000n.gguf, as llama.cpp's gguf-split writes them), check
 * each says it is part k of n, and take in their tensors, whose bytes stay
 * in the part's own mapping. KVs come from the first file only. */
static int open_splits(const g_src *o, fc_gguf *g, int flags)
{
    uint64_t count = 1, no = 0, total = 0;
    int has_count = split_key(g, "split.count", &count), has_no = split_key(g, "split.no", &no);
    if (has_count < 0 || has_no < 0)
        return g_fail(o, FC_ERR_FORMAT, "key \"%s\" must be an unsigned integer",
                      has_count < 0 ? "split.count" : "split.no"), 0;
    if (!has_count || count <= 1) return 1;
    if (count > 99999) return g_fail(o, FC_ERR_FORMAT, "split.count %llu exceeds 99999", (unsigned long long)count), 0;
    if (no != 0)
        return g_fail(o, FC_ERR_FORMAT, "this is split %llu of %llu: open the first split (-00001-of-%05llu.gguf)",
                      (unsigned long long)no + 1, (unsigned long long)count, (unsigned long long)count), 0;
    char suffix[64];
    snprintf(suffix, sizeof suffix, "-00001-of-%05llu.gguf", (unsigned long long)count);
    size_t plen = strlen(o->path), slen = strlen(suffix);
    if (plen < slen || strcmp(o->path + plen - slen, suffix) != 0)
        return g_fail(o, FC_ERR_FORMAT, "split.count is %llu but the file name does not end in \"%s\", so the other "
                      "splits cannot be found", (unsigned long long)count, suffix), 0;
    if (!(g->parts = calloc((size_t)count, sizeof *g->parts))) return g_fail(o, FC_ERR_OOM, "out of memory"), 0;
    char *path = malloc(plen + 1);
    if (!path) return g_fail(o, FC_ERR_OOM, "out of memory"), 0;
    int ok = 1;
    for (uint64_t k = 1; k < count && ok; k++) {
        snprintf(path, plen + 1, "%.*s-%05llu-of-%05llu.gguf", (int)(plen - slen), o->path,
                 (unsigned long long)k + 1, (unsigned long long)count);
        g_src po = {o->ctx, o->op, path};
        fc_gguf *p = g_open(&po, flags);
        if (!p) {
            ok = 0;
            break;
        }
        g->parts[g->n_parts++] = p;
        uint64_t pc = 0, pn = 0;
        if (split_key(p, "split.count", &pc) != 1 || split_key(p, "split.no", &pn) != 1 || pc != count || pn != k) {
            g_fail(&po, FC_ERR_FORMAT, "expected split %llu of %llu, but its split.no/split.count say otherwise",
                   (unsigned long long)k + 1, (unsigned long long)count);
            ok = 0;
            break;
        }
        g_tensor *t = realloc(g->t, ((size_t)(g->n_t + p->n_t) + 1) * sizeof *t);
        if (!t) {
            g_fail(o, FC_ERR_OOM, "out of memory");
            ok = 0;
            break;
        }
        g->t = t;
        for (int64_t i = 0; i < p->n_t; i++) {
            g_tensor *d = &g->t[g->n_t];
            *d = p->t[i];
            d->part = g->n_parts;
            if (!(d->name = strdup(p->t[i].name))) {
                g_fail(o, FC_ERR_OOM, "out of memory");
                ok = 0;
                break;
            }
            g->n_t++;
        }
    }
    free(path);
    if (ok) ok = index_tensors(o, g);
    if (ok && split_key(g, "split.tensors.count", &total) == 1 && total != (uint64_t)g->n_t) {
        g_fail(o, FC_ERR_FORMAT, "split.tensors.count is %llu but the %llu splits hold %lld tensors",
               (unsigned long long)total, (unsigned long long)count, (long long)g->n_t);
        ok = 0;
    }
    return ok;
}

/* ---- public: handle and KVs ---------------------------------------------------- */

fc_gguf *fc_gguf_open(fc_ctx *ctx, const char *path, int flags)
{
    if (!ctx) return NULL;
    if (!path) return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_gguf_open: path is NULL");
    g_src o = {ctx, "fc_gguf_open", path};
    fc_gguf *g = g_open(&o, flags);
    if (g && !open_splits(&o, g, flags)) {
        g_free(g);
        return NULL;
    }
    return g;
}

int fc_gguf_split_count(const fc_gguf *g) { return g ? 1 + g->n_parts : 0; }

void fc_gguf_close(fc_gguf *g) { g_free(g); }

uint32_t fc_gguf_version(const fc_gguf *g) { return g ? g->version : 0; }
uint32_t fc_gguf_alignment(const fc_gguf *g) { return g ? g->alignment : 0; }
uint64_t fc_gguf_data_offset(const fc_gguf *g) { return g ? g->data_off : 0; }
int64_t fc_gguf_kv_count(const fc_gguf *g) { return g ? g->n_kv : 0; }

const gguf_kv *fc_gguf_kv_at(const fc_gguf *g, int64_t i)
{
    return g && i >= 0 && i < g->n_kv ? &g->kv[i] : NULL;
}

const char *fc_gguf_kv_key(const fc_gguf *g, int64_t i)
{
    const gguf_kv *kv = fc_gguf_kv_at(g, i);
    return kv ? kv->key : NULL;
}

int fc_gguf_kv_type(const fc_gguf *g, int64_t i)
{
    const gguf_kv *kv = fc_gguf_kv_at(g, i);
    return kv ? (int)kv->type : -1;
}

static int64_t find(const g_idx *v, int64_t n, const char *s)
{
    if (!s || n == 0) return -1;
    int64_t lo = 0, hi = n - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int cmp = strcmp(v[mid].s, s);
        if (cmp == 0) return v[mid].i;
        if (cmp < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

int64_t fc_gguf_find_kv(const fc_gguf *g, const char *key) { return g ? find(g->kv_sorted, g->n_kv, key) : -1; }

/* The KV `key` of type `want` (for arrays: ARR), or NULL + error. */
static const gguf_kv *get_kv(fc_gguf *g, const char *op, const char *key, int want)
{
    if (!g) return NULL;
    g_src o = {g->ctx, op, g->path};
    if (!key) return g_fail(&o, FC_ERR_INVALID_ARG, "the key is NULL");
    char qk[SHOW + 4];
    int64_t i = fc_gguf_find_kv(g, key);
    if (i < 0) return g_fail(&o, FC_ERR_INVALID_ARG, "no key \"%s\" in the file", show(qk, key, strlen(key)));
    const gguf_kv *kv = &g->kv[i];
    if ((int)kv->type != want)
        return g_fail(&o, FC_ERR_DTYPE, "key \"%s\" is %s, not %s", show(qk, key, strlen(key)),
                      fc_gguf_vtype_name((int)kv->type), fc_gguf_vtype_name(want));
    return kv;
}

#define GETTER(fn, T, VT)                                                  \
    fc_status fn(fc_gguf *g, const char *key, T *out)                      \
    {                                                                      \
        if (!g) return FC_ERR_INVALID_ARG;                                 \
        const gguf_kv *kv = get_kv(g, #fn, key, VT);                       \
        if (!kv) return fc_ctx_status(g->ctx);                             \
        if (out) memcpy(out, kv->raw, sizeof(T));                          \
        return FC_OK;                                                      \
    }
GETTER(fc_gguf_get_u8, uint8_t, FC_GGUF_U8)
GETTER(fc_gguf_get_i8, int8_t, FC_GGUF_I8)
GETTER(fc_gguf_get_u16, uint16_t, FC_GGUF_U16)
GETTER(fc_gguf_get_i16, int16_t, FC_GGUF_I16)
GETTER(fc_gguf_get_u32, uint32_t, FC_GGUF_U32)
GETTER(fc_gguf_get_i32, int32_t, FC_GGUF_I32)
GETTER(fc_gguf_get_u64, uint64_t, FC_GGUF_U64)
GETTER(fc_gguf_get_i64, int64_t, FC_GGUF_I64)
GETTER(fc_gguf_get_f32, float, FC_GGUF_F32)
GETTER(fc_gguf_get_f64, double, FC_GGUF_F64)
#undef GETTER

fc_status fc_gguf_get_bool(fc_gguf *g, const char *key, int *out)
{
    if (!g) return FC_ERR_INVALID_ARG;
    const gguf_kv *kv = get_kv(g, "fc_gguf_get_bool", key, FC_GGUF_BOOL);
    if (!kv) return fc_ctx_status(g->ctx);
    if (out) *out = kv->raw[0];
    return FC_OK;
}

fc_status fc_gguf_get_str(fc_gguf *g, const char *key, const char **out, size_t *len)
{
    if (!g) return FC_ERR_INVALID_ARG;
    const gguf_kv *kv = get_kv(g, "fc_gguf_get_str", key, FC_GGUF_STR);
    if (!kv) return fc_ctx_status(g->ctx);
    if (out) *out = kv->str;
    if (len) *len = (size_t)kv->n;
    return FC_OK;
}

fc_status fc_gguf_get_arr(fc_gguf *g, const char *key, int *elem_type, uint64_t *n)
{
    if (!g) return FC_ERR_INVALID_ARG;
    const gguf_kv *kv = get_kv(g, "fc_gguf_get_arr", key, FC_GGUF_ARR);
    if (!kv) return fc_ctx_status(g->ctx);
    if (elem_type) *elem_type = (int)kv->elem;
    if (n) *n = kv->n;
    return FC_OK;
}

fc_status fc_gguf_get_arr_data(fc_gguf *g, const char *key, int elem_type, const void **data, uint64_t *n)
{
    if (!g) return FC_ERR_INVALID_ARG;
    const gguf_kv *kv = get_kv(g, "fc_gguf_get_arr_data", key, FC_GGUF_ARR);
    if (!kv) return fc_ctx_status(g->ctx);
    if ((int)kv->elem != elem_type || elem_type == FC_GGUF_STR) {
        g_src o = {g->ctx, "fc_gguf_get_arr_data", g->path};
        char qk[SHOW + 4];
        g_fail(&o, FC_ERR_DTYPE, "key \"%s\" is an array of %s, not of %s%s", show(qk, key, strlen(key)),
               fc_gguf_vtype_name((int)kv->elem), fc_gguf_vtype_name(elem_type),
               kv->elem == FC_GGUF_STR ? " (use fc_gguf_get_arr_str)" : "");
        return FC_ERR_DTYPE;
    }
    if (data) *data = kv->data;
    if (n) *n = kv->n;
    return FC_OK;
}

fc_status fc_gguf_get_arr_str(fc_gguf *g, const char *key, uint64_t i, const char **out, size_t *len)
{
    if (!g) return FC_ERR_INVALID_ARG;
    const gguf_kv *kv = get_kv(g, "fc_gguf_get_arr_str", key, FC_GGUF_ARR);
    if (!kv) return fc_ctx_status(g->ctx);
    g_src o = {g->ctx, "fc_gguf_get_arr_str", g->path};
    char qk[SHOW + 4];
    if (kv->elem != FC_GGUF_STR) {
        g_fail(&o, FC_ERR_DTYPE, "key \"%s\" is an array of %s, not of STRING", show(qk, key, strlen(key)),
               fc_gguf_vtype_name((int)kv->elem));
        return FC_ERR_DTYPE;
    }
    if (i >= kv->n) {
        g_fail(&o, FC_ERR_INVALID_ARG, "key \"%s\": index %llu out of range (%llu strings)",
               show(qk, key, strlen(key)), (unsigned long long)i, (unsigned long long)kv->n);
        return FC_ERR_INVALID_ARG;
    }
    if (out) *out = kv->strs[i];
    if (len) *len = (size_t)kv->lens[i];
    return FC_OK;
}

/* ---- public: tensors ------------------------------------------------------------ */

int64_t fc_gguf_tensor_count(const fc_gguf *g) { return g ? g->n_t : 0; }

int64_t fc_gguf_find_tensor(const fc_gguf *g, const char *name) { return g ? find(g->t_sorted, g->n_t, name) : -1; }

int fc_gguf_tensor_info_at(const fc_gguf *g, int64_t i, fc_gguf_tensor_info *out)
{
    if (!g || i < 0 || i >= g->n_t || !out) return 0;
    const g_tensor *t = &g->t[i];
    memset(out, 0, sizeof *out);
    out->name = t->name;
    out->type = t->type;
    out->type_name = fc_ggml_type_name(t->type);
    out->n_dims = t->n_dims;
    memcpy(out->ne, t->ne, sizeof t->ne);
    out->nbytes = t->nbytes;
    out->offset = t->offset;
    const fc_gguf *src = t->part ? g->parts[t->part - 1] : g;
    out->data = src->bytes + src->data_off + t->offset;
    out->split = t->part;
    return 1;
}

fc_tensor *fc_gguf_tensor(fc_gguf *g, const char *name)
{
    if (!g) return NULL;
    g_src o = {g->ctx, "fc_gguf_tensor", g->path};
    if (!name) return g_fail(&o, FC_ERR_INVALID_ARG, "the name is NULL");
    char q[SHOW + 4];
    int64_t i = fc_gguf_find_tensor(g, name);
    if (i < 0) return g_fail(&o, FC_ERR_INVALID_ARG, "no tensor \"%s\" in the file", show(q, name, strlen(name)));
    const g_tensor *t = &g->t[i];
    const gguf_type_info *ti = fc_gguf_type_info(t->type);
    if (ti->dtype < 0) /* cannot happen: every known id has a dtype (gguf_types.c) */
        return g_fail(&o, FC_ERR_DTYPE, "tensor \"%s\": type %s has no tensor dtype", show(q, name, strlen(name)),
                      ti->name);
    fc_dtype dt = (fc_dtype)ti->dtype;
    fc_dim dims[FC_GGUF_MAX_DIMS];
    for (int d = 0; d < t->n_dims; d++) dims[d] = (fc_dim){fc_axis_positional(d), t->ne[t->n_dims - 1 - d]};
    const fc_gguf *src = t->part ? g->parts[t->part - 1] : g;
    void *p = (void *)(src->bytes + src->data_off + t->offset);
    /* Block tensors need no alignment (the codecs read bytes); they are
     * always wrapped zero-copy. */
    if (!fc_dtype_is_block(dt) && (uintptr_t)p % fc_dtype_size(dt) != 0)
        return fc_from_data(g->ctx, dt, dims, t->n_dims, p, (size_t)t->nbytes);
    return fc_file_map_wrap(g->ctx, src->map, dt, dims, t->n_dims, p, (size_t)t->nbytes);
}
