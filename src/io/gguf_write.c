/* SPDX-License-Identifier: MIT */
/* GGUF writing: KVs and tensors are collected in memory (each add checked
 * at once, so a failed add changes nothing), then saved through
 * atomic_file.h in llama.cpp's exact layout (gguf_write_out in ggml's
 * gguf.cpp): header, KVs in order, tensor infos in order, zero padding to
 * the alignment, each tensor's data followed by zero padding to the
 * alignment (the last one too); tensor offsets are the running padded
 * total. A file read with fc_gguf_open and copied KV by KV and tensor by
 * tensor is therefore re-emitted byte for byte when it had that layout. */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/ctx.h"
#include "io/atomic_file.h"
#include "io/gguf_internal.h"

typedef struct w_tensor {
    char *name;
    uint32_t type;
    int n_dims;
    int64_t ne[FC_GGUF_MAX_DIMS];
    uint64_t nbytes;
    const void *data; /* caller's bytes (add_raw) or `owned` */
    void *owned;
} w_tensor;

struct fc_gguf_writer {
    fc_ctx *ctx;
    gguf_kv *kv;
    int64_t n_kv, cap_kv;
    w_tensor *t;
    int64_t n_t, cap_t;
    /* streaming (fc_gguf_writer_begin .. finish): the open file, the tensor
     * whose data is being appended and how many of its bytes are written */
    int streaming;
    fc_atomic_file af;
    uint32_t align;
    int64_t cur;
    uint64_t cur_done;
};

static fc_status w_fail(fc_gguf_writer *w, const char *op, fc_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static fc_status w_fail(fc_gguf_writer *w, const char *op, fc_status st, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fc_fail(w->ctx, st, "%s: %s", op, msg);
    return st;
}

fc_gguf_writer *fc_gguf_writer_new(fc_ctx *ctx)
{
    if (!ctx) return NULL;
    fc_gguf_writer *w = calloc(1, sizeof *w);
    if (!w) return fc_fail(ctx, FC_ERR_OOM, "fc_gguf_writer_new: out of memory");
    w->ctx = ctx;
    return w;
}

void fc_gguf_writer_free(fc_gguf_writer *w)
{
    if (!w) return;
    fc_gguf_writer_abort(w);
    for (int64_t i = 0; i < w->n_kv; i++) fc_gguf_kv_free(&w->kv[i]);
    free(w->kv);
    for (int64_t i = 0; i < w->n_t; i++) {
        free(w->t[i].name);
        free(w->t[i].owned);
    }
    free(w->t);
    free(w);
}

/* ---- KVs -------------------------------------------------------------------------- */

/* Checks the key and makes room; returns the slot (not yet counted). */
static gguf_kv *kv_slot(fc_gguf_writer *w, const char *op, const char *key)
{
    if (!key || !*key) return w_fail(w, op, FC_ERR_INVALID_ARG, "the key is %s", key ? "empty" : "NULL"), NULL;
    if (strlen(key) > GGUF_KEY_MAX)
        return w_fail(w, op, FC_ERR_INVALID_ARG, "the key is longer than %llu bytes",
                      (unsigned long long)GGUF_KEY_MAX), NULL;
    /* Linear: models have a few dozen KVs (tokenizer data lives in arrays). */
    for (int64_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, key))
            return w_fail(w, op, FC_ERR_INVALID_ARG, "duplicate key \"%.80s\" (KV %lld)", key, (long long)i), NULL;
    if (w->n_kv == w->cap_kv) {
        int64_t cap = w->cap_kv ? 2 * w->cap_kv : 16;
        gguf_kv *p = realloc(w->kv, (size_t)cap * sizeof *p);
        if (!p) return w_fail(w, op, FC_ERR_OOM, "out of memory"), NULL;
        w->kv = p;
        w->cap_kv = cap;
    }
    gguf_kv *kv = &w->kv[w->n_kv];
    memset(kv, 0, sizeof *kv);
    if (!(kv->key = strdup(key))) return w_fail(w, op, FC_ERR_OOM, "out of memory"), NULL;
    return kv;
}

static fc_status set_scalar(fc_gguf_writer *w, const char *op, const char *key, uint32_t type, const void *v)
{
    if (!w) return FC_ERR_INVALID_ARG;
    gguf_kv *kv = kv_slot(w, op, key);
    if (!kv) return fc_ctx_status(w->ctx);
    kv->type = type;
    memcpy(kv->raw, v, fc_gguf_vtype_size(type));
    w->n_kv++;
    return FC_OK;
}

#define SETTER(fn, T, VT) \
    fc_status fn(fc_gguf_writer *w, const char *key, T v) { return set_scalar(w, #fn, key, VT, &v); }
SETTER(fc_gguf_set_u8, uint8_t, FC_GGUF_U8)
SETTER(fc_gguf_set_i8, int8_t, FC_GGUF_I8)
SETTER(fc_gguf_set_u16, uint16_t, FC_GGUF_U16)
SETTER(fc_gguf_set_i16, int16_t, FC_GGUF_I16)
SETTER(fc_gguf_set_u32, uint32_t, FC_GGUF_U32)
SETTER(fc_gguf_set_i32, int32_t, FC_GGUF_I32)
SETTER(fc_gguf_set_u64, uint64_t, FC_GGUF_U64)
SETTER(fc_gguf_set_i64, int64_t, FC_GGUF_I64)
SETTER(fc_gguf_set_f32, float, FC_GGUF_F32)
SETTER(fc_gguf_set_f64, double, FC_GGUF_F64)
#undef SETTER

fc_status fc_gguf_set_bool(fc_gguf_writer *w, const char *key, int v)
{
    uint8_t b = v != 0;
    return set_scalar(w, "fc_gguf_set_bool", key, FC_GGUF_BOOL, &b);
}

static char *dup_n(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (!p) return NULL;
    if (n) memcpy(p, s, n);
    p[n] = 0;
    return p;
}

fc_status fc_gguf_set_strn(fc_gguf_writer *w, const char *key, const char *s, size_t len)
{
    static const char *op = "fc_gguf_set_str";
    if (!w) return FC_ERR_INVALID_ARG;
    if (!s && len) return w_fail(w, op, FC_ERR_INVALID_ARG, "key \"%.80s\": the string is NULL", key ? key : "");
    if (len > GGUF_STR_MAX)
        return w_fail(w, op, FC_ERR_INVALID_ARG, "key \"%.80s\": the string is longer than %llu bytes",
                      key ? key : "", (unsigned long long)GGUF_STR_MAX);
    gguf_kv *kv = kv_slot(w, op, key);
    if (!kv) return fc_ctx_status(w->ctx);
    if (!(kv->str = dup_n(s, len))) {
        fc_gguf_kv_free(kv);
        return w_fail(w, op, FC_ERR_OOM, "out of memory");
    }
    kv->type = FC_GGUF_STR;
    kv->n = len;
    w->n_kv++;
    return FC_OK;
}

fc_status fc_gguf_set_str(fc_gguf_writer *w, const char *key, const char *s)
{
    return fc_gguf_set_strn(w, key, s, s ? strlen(s) : 0);
}

fc_status fc_gguf_set_arr(fc_gguf_writer *w, const char *key, int elem_type, const void *data, uint64_t n)
{
    static const char *op = "fc_gguf_set_arr";
    if (!w) return FC_ERR_INVALID_ARG;
    size_t es = elem_type >= 0 ? fc_gguf_vtype_size((uint32_t)elem_type) : 0;
    if (!es)
        return w_fail(w, op, FC_ERR_INVALID_ARG, "key \"%.80s\": element type %d is not a scalar GGUF type%s",
                      key ? key : "", elem_type, elem_type == FC_GGUF_STR ? " (use fc_gguf_set_arr_str)" : "");
    if (n > ((uint64_t)1 << 40) / es || (n && !data))
        return w_fail(w, op, FC_ERR_INVALID_ARG, "key \"%.80s\": bad array (%llu elements, data %s)",
                      key ? key : "", (unsigned long long)n, data ? "set" : "NULL");
    if (elem_type == FC_GGUF_BOOL)
        for (uint64_t i = 0; i < n; i++)
            if (((const unsigned char *)data)[i] > 1)
                return w_fail(w, op, FC_ERR_INVALID_ARG, "key \"%.80s\": BOOL element %llu is %u, not 0 or 1",
                              key ? key : "", (unsigned long long)i, ((const unsigned char *)data)[i]);
    gguf_kv *kv = kv_slot(w, op, key);
    if (!kv) return fc_ctx_status(w->ctx);
    if (n && !(kv->data = malloc((size_t)n * es))) {
        fc_gguf_kv_free(kv);
        return w_fail(w, op, FC_ERR_OOM, "out of memory");
    }
    if (n) memcpy(kv->data, data, (size_t)n * es);
    kv->type = FC_GGUF_ARR;
    kv->elem = (uint32_t)elem_type;
    kv->n = n;
    w->n_kv++;
    return FC_OK;
}

fc_status fc_gguf_set_arr_str(fc_gguf_writer *w, const char *key, const char *const *s, const size_t *lens,
                              uint64_t n)
{
    static const char *op = "fc_gguf_set_arr_str";
    if (!w) return FC_ERR_INVALID_ARG;
    if ((n && !s) || n > ((uint64_t)1 << 32))
        return w_fail(w, op, FC_ERR_INVALID_ARG, "key \"%.80s\": bad string array", key ? key : "");
    for (uint64_t i = 0; i < n; i++)
        if ((!s[i] && (!lens || lens[i])) || (lens && lens[i] > GGUF_STR_MAX))
            return w_fail(w, op, FC_ERR_INVALID_ARG, "key \"%.80s\": string %llu is NULL or too long",
                          key ? key : "", (unsigned long long)i);
    gguf_kv *kv = kv_slot(w, op, key);
    if (!kv) return fc_ctx_status(w->ctx);
    kv->type = FC_GGUF_ARR;
    kv->elem = FC_GGUF_STR;
    kv->strs = calloc((size_t)n + 1, sizeof *kv->strs);
    kv->lens = calloc((size_t)n + 1, sizeof *kv->lens);
    if (!kv->strs || !kv->lens) goto oom;
    kv->n = n;
    for (uint64_t i = 0; i < n; i++) {
        size_t l = lens ? lens[i] : strlen(s[i]);
        kv->lens[i] = l;
        if (!(kv->strs[i] = dup_n(s[i] ? s[i] : "", l))) goto oom;
    }
    w->n_kv++;
    return FC_OK;
oom:
    fc_gguf_kv_free(kv);
    return w_fail(w, op, FC_ERR_OOM, "out of memory");
}

fc_status fc_gguf_writer_copy_kv(fc_gguf_writer *w, const fc_gguf *g, int64_t i)
{
    static const char *op = "fc_gguf_writer_copy_kv";
    if (!w) return FC_ERR_INVALID_ARG;
    const gguf_kv *src = fc_gguf_kv_at(g, i);
    if (!src) return w_fail(w, op, FC_ERR_INVALID_ARG, "KV %lld is out of range", (long long)i);
    gguf_kv *kv = kv_slot(w, op, src->key);
    if (!kv) return fc_ctx_status(w->ctx);
    free(kv->key);
    if (!fc_gguf_kv_clone(kv, src)) return w_fail(w, op, FC_ERR_OOM, "out of memory");
    w->n_kv++;
    return FC_OK;
}

/* ---- tensors ---------------------------------------------------------------------- */

static w_tensor *t_slot(fc_gguf_writer *w, const char *op, const char *name)
{
    if (!name || !*name) return w_fail(w, op, FC_ERR_INVALID_ARG, "the tensor name is %s", name ? "empty" : "NULL"), NULL;
    if (strlen(name) > FC_GGUF_MAX_NAME)
        return w_fail(w, op, FC_ERR_INVALID_ARG, "tensor name \"%.80s\" is longer than %d bytes (ggml's limit)", name,
                      FC_GGUF_MAX_NAME), NULL;
    for (int64_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name))
            return w_fail(w, op, FC_ERR_INVALID_ARG, "duplicate tensor name \"%s\" (tensor %lld)", name,
                          (long long)i), NULL;
    if (w->n_t == w->cap_t) {
        int64_t cap = w->cap_t ? 2 * w->cap_t : 16;
        w_tensor *p = realloc(w->t, (size_t)cap * sizeof *p);
        if (!p) return w_fail(w, op, FC_ERR_OOM, "out of memory"), NULL;
        w->t = p;
        w->cap_t = cap;
    }
    w_tensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    if (!(t->name = strdup(name))) return w_fail(w, op, FC_ERR_OOM, "out of memory"), NULL;
    return t;
}

/* Type and dims checked as the reader checks them; *nbytes the size. */
static int check_shape(fc_gguf_writer *w, const char *op, const char *name, uint32_t type, int n_dims,
                       const int64_t *ne, uint64_t *nbytes)
{
    const gguf_type_info *ti = fc_gguf_type_info(type);
    if (!ti) return w_fail(w, op, FC_ERR_INVALID_ARG, "tensor \"%.80s\": unknown ggml type id %u", name, type), 0;
    if (n_dims < 1 || n_dims > FC_GGUF_MAX_DIMS || !ne)
        return w_fail(w, op, FC_ERR_INVALID_ARG, "tensor \"%.80s\": n_dims %d, must be 1..%d", name, n_dims,
                      FC_GGUF_MAX_DIMS), 0;
    const char *why = NULL;
    if (!fc_gguf_tensor_nbytes(ti, n_dims, ne, nbytes, &why))
        return w_fail(w, op, FC_ERR_SHAPE, "tensor \"%.80s\" (%s, block %u): %s", name, ti->name, ti->blck, why), 0;
    return 1;
}

fc_status fc_gguf_writer_add_raw(fc_gguf_writer *w, const char *name, uint32_t type, int n_dims, const int64_t *ne,
                                 const void *data, uint64_t nbytes)
{
    static const char *op = "fc_gguf_writer_add_raw";
    if (!w) return FC_ERR_INVALID_ARG;
    uint64_t want;
    if (!check_shape(w, op, name ? name : "", type, n_dims, ne, &want)) return fc_ctx_status(w->ctx);
    if (nbytes != want || !data)
        return w_fail(w, op, FC_ERR_INVALID_ARG, "tensor \"%.80s\": %llu bytes given, %s needs %llu%s",
                      name ? name : "", (unsigned long long)nbytes, fc_ggml_type_name(type),
                      (unsigned long long)want, data ? "" : " (data is NULL)");
    w_tensor *t = t_slot(w, op, name);
    if (!t) return fc_ctx_status(w->ctx);
    t->type = type;
    t->n_dims = n_dims;
    for (int d = 0; d < FC_GGUF_MAX_DIMS; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
    t->nbytes = nbytes;
    t->data = data;
    w->n_t++;
    return FC_OK;
}

fc_status fc_gguf_writer_add_info(fc_gguf_writer *w, const char *name, uint32_t type, int n_dims, const int64_t *ne)
{
    static const char *op = "fc_gguf_writer_add_info";
    if (!w) return FC_ERR_INVALID_ARG;
    if (w->streaming) return w_fail(w, op, FC_ERR_INVALID_ARG, "the file is already being written");
    uint64_t nbytes;
    if (!check_shape(w, op, name ? name : "", type, n_dims, ne, &nbytes)) return fc_ctx_status(w->ctx);
    w_tensor *t = t_slot(w, op, name);
    if (!t) return fc_ctx_status(w->ctx);
    t->type = type;
    t->n_dims = n_dims;
    for (int d = 0; d < FC_GGUF_MAX_DIMS; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
    t->nbytes = nbytes;
    t->data = NULL; /* streamed by fc_gguf_writer_write */
    w->n_t++;
    return FC_OK;
}

fc_status fc_gguf_writer_add_tensor(fc_gguf_writer *w, const char *name, const fc_tensor *x)
{
    static const char *op = "fc_gguf_writer_add_tensor";
    if (!w) return FC_ERR_INVALID_ARG;
    if (!x) return w_fail(w, op, FC_ERR_INVALID_ARG, "tensor \"%.80s\" is NULL", name ? name : "");
    fc_dtype dt = fc_tensor_dtype(x);
    int type = fc_gguf_type_of_dtype(dt);
    if (type < 0)
        return w_fail(w, op, FC_ERR_DTYPE, "tensor \"%.80s\": dtype %s has no ggml type", name ? name : "",
                      fc_dtype_name(dt));
    int rank = fc_tensor_rank(x);
    if (rank > FC_GGUF_MAX_DIMS)
        return w_fail(w, op, FC_ERR_SHAPE, "tensor \"%.80s\": rank %d, GGUF holds at most %d dims", name ? name : "",
                      rank, FC_GGUF_MAX_DIMS);
    int64_t ne[FC_GGUF_MAX_DIMS] = {1, 1, 1, 1};
    int n_dims = rank ? rank : 1;
    for (int d = 0; d < rank; d++) ne[d] = fc_tensor_dim(x, rank - 1 - d);
    uint64_t nbytes;
    if (!check_shape(w, op, name ? name : "", (uint32_t)type, n_dims, ne, &nbytes)) return fc_ctx_status(w->ctx);
    void *buf = malloc(nbytes ? (size_t)nbytes : 1);
    if (!buf) return w_fail(w, op, FC_ERR_OOM, "out of memory");
    fc_status st = fc_tensor_read(w->ctx, x, buf, (size_t)nbytes);
    if (st != FC_OK) {
        free(buf);
        return st;
    }
    w_tensor *t = t_slot(w, op, name);
    if (!t) {
        free(buf);
        return fc_ctx_status(w->ctx);
    }
    t->type = (uint32_t)type;
    t->n_dims = n_dims;
    memcpy(t->ne, ne, sizeof ne);
    t->nbytes = nbytes;
    t->data = t->owned = buf;
    w->n_t++;
    return FC_OK;
}

/* ---- save ------------------------------------------------------------------------- */

/* The header (everything before the data section), built in memory. */
typedef struct buf {
    unsigned char *p;
    size_t n, cap;
    int oom;
} buf;

static void put(buf *b, const void *p, size_t n)
{
    if (b->oom) return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n) cap *= 2;
        unsigned char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void put_u32(buf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(buf *b, uint64_t v) { put(b, &v, 8); }
static void put_str(buf *b, const char *s, uint64_t n)
{
    put_u64(b, n);
    put(b, s, (size_t)n);
}

static void put_kv(buf *b, const gguf_kv *kv)
{
    put_str(b, kv->key, strlen(kv->key));
    put_u32(b, kv->type);
    switch (kv->type) {
    case FC_GGUF_STR: put_str(b, kv->str, kv->n); break;
    case FC_GGUF_ARR:
        put_u32(b, kv->elem);
        put_u64(b, kv->n);
        if (kv->elem == FC_GGUF_STR)
            for (uint64_t i = 0; i < kv->n; i++) put_str(b, kv->strs[i], kv->lens[i]);
        else if (kv->n)
            put(b, kv->data, (size_t)kv->n * fc_gguf_vtype_size(kv->elem));
        break;
    default: put(b, kv->raw, fc_gguf_vtype_size(kv->type)); break;
    }
}

static const unsigned char zeros[4096];

static int write_zeros(fc_atomic_file *af, uint64_t n)
{
    while (n > 0) {
        size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;
        if (!fc_atomic_write(af, zeros, k)) return 0;
        n -= k;
    }
    return 1;
}

/* The header (everything before the data section) into *b, and the
 * alignment; every check that can fail without I/O happens here. */
static fc_status build_header(fc_gguf_writer *w, const char *op, const char *path, buf *b, uint32_t *align_out)
{
    char pb[160];
    uint32_t align = FC_GGUF_DEFAULT_ALIGNMENT;
    for (int64_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, "general.alignment")) continue;
        const gguf_kv *kv = &w->kv[i];
        if (kv->type != FC_GGUF_U32)
            return w_fail(w, op, FC_ERR_INVALID_ARG, "%s: \"general.alignment\" is %s; it must be UINT32",
                          fc_io_path_for_msg(path, pb, sizeof pb), fc_gguf_vtype_name((int)kv->type));
        memcpy(&align, kv->raw, 4);
        if (align == 0 || (align & (align - 1)) || align > GGUF_ALIGN_MAX)
            return w_fail(w, op, FC_ERR_INVALID_ARG, "%s: \"general.alignment\" is %u; it must be a power of two "
                          "<= %u", fc_io_path_for_msg(path, pb, sizeof pb), align, GGUF_ALIGN_MAX);
    }
    memset(b, 0, sizeof *b);
    put(b, "GGUF", 4);
    put_u32(b, 3);
    put_u64(b, (uint64_t)w->n_t);
    put_u64(b, (uint64_t)w->n_kv);
    for (int64_t i = 0; i < w->n_kv; i++) put_kv(b, &w->kv[i]);
    uint64_t off = 0;
    for (int64_t i = 0; i < w->n_t; i++) {
        const w_tensor *t = &w->t[i];
        put_str(b, t->name, strlen(t->name));
        put_u32(b, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++) put_u64(b, (uint64_t)t->ne[d]);
        put_u32(b, t->type);
        put_u64(b, off);
        uint64_t pad = (align - t->nbytes % align) % align;
        if (t->nbytes + pad > UINT64_MAX - off) {
            free(b->p);
            b->p = NULL;
            return w_fail(w, op, FC_ERR_INVALID_ARG, "the data section overflows 64 bits");
        }
        off += t->nbytes + pad;
    }
    put(b, zeros, (align - b->n % align) % align);
    if (b->oom) {
        free(b->p);
        b->p = NULL;
        return w_fail(w, op, FC_ERR_OOM, "out of memory");
    }
    *align_out = align;
    return FC_OK;
}

fc_status fc_gguf_writer_save(fc_gguf_writer *w, const char *path)
{
    static const char *op = "fc_gguf_writer_save";
    if (!w) return FC_ERR_INVALID_ARG;
    if (!path) return w_fail(w, op, FC_ERR_INVALID_ARG, "path is NULL");
    if (w->streaming) return w_fail(w, op, FC_ERR_INVALID_ARG, "the file is being streamed (fc_gguf_writer_begin)");
    for (int64_t i = 0; i < w->n_t; i++)
        if (!w->t[i].data)
            return w_fail(w, op, FC_ERR_INVALID_ARG, "tensor \"%s\" has no data (added with fc_gguf_writer_add_info: "
                          "use fc_gguf_writer_begin / write / finish)", w->t[i].name);
    buf b;
    uint32_t align;
    fc_status st = build_header(w, op, path, &b, &align);
    if (st != FC_OK) return st;
    fc_atomic_file af;
    int ok = fc_atomic_open(&af, w->ctx, op, path) && fc_atomic_write(&af, b.p, b.n);
    free(b.p);
    for (int64_t i = 0; ok && i < w->n_t; i++) {
        const w_tensor *t = &w->t[i];
        ok = fc_atomic_write(&af, t->data, (size_t)t->nbytes) && write_zeros(&af, (align - t->nbytes % align) % align);
    }
    if (ok) ok = fc_atomic_commit(&af);
    return ok ? FC_OK : fc_ctx_status(w->ctx);
}

/* ---- streaming: the same bytes as save, the data appended piece by piece ----------- */

fc_status fc_gguf_writer_begin(fc_gguf_writer *w, const char *path)
{
    static const char *op = "fc_gguf_writer_begin";
    if (!w) return FC_ERR_INVALID_ARG;
    if (!path) return w_fail(w, op, FC_ERR_INVALID_ARG, "path is NULL");
    if (w->streaming) return w_fail(w, op, FC_ERR_INVALID_ARG, "the file is already being written");
    buf b;
    uint32_t align;
    fc_status st = build_header(w, op, path, &b, &align);
    if (st != FC_OK) return st;
    int ok = fc_atomic_open(&w->af, w->ctx, op, path);
    if (ok) {
        w->streaming = 1; /* from here on, abort removes the temporary */
        ok = fc_atomic_write(&w->af, b.p, b.n);
    }
    free(b.p);
    if (!ok) {
        w->streaming = 0;
        return fc_ctx_status(w->ctx);
    }
    w->align = align;
    w->cur = 0;
    w->cur_done = 0;
    return FC_OK;
}

fc_status fc_gguf_writer_write(fc_gguf_writer *w, const void *data, uint64_t nbytes)
{
    static const char *op = "fc_gguf_writer_write";
    if (!w) return FC_ERR_INVALID_ARG;
    if (!w->streaming) return w_fail(w, op, FC_ERR_INVALID_ARG, "no file is being written (fc_gguf_writer_begin)");
    if (nbytes && !data) return w_fail(w, op, FC_ERR_INVALID_ARG, "data is NULL");
    while (nbytes > 0) {
        if (w->cur >= w->n_t) {
            fc_gguf_writer_abort(w);
            return w_fail(w, op, FC_ERR_INVALID_ARG, "more data than the tensors hold");
        }
        const w_tensor *t = &w->t[w->cur];
        uint64_t k = t->nbytes - w->cur_done < nbytes ? t->nbytes - w->cur_done : nbytes;
        if (!fc_atomic_write(&w->af, data, (size_t)k)) {
            w->streaming = 0; /* fc_atomic_write aborted the file */
            return fc_ctx_status(w->ctx);
        }
        data = (const unsigned char *)data + k;
        nbytes -= k;
        w->cur_done += k;
        if (w->cur_done == t->nbytes) {
            if (!write_zeros(&w->af, (w->align - t->nbytes % w->align) % w->align)) {
                w->streaming = 0;
                return fc_ctx_status(w->ctx);
            }
            w->cur++;
            w->cur_done = 0;
        }
    }
    return FC_OK;
}

fc_status fc_gguf_writer_finish(fc_gguf_writer *w)
{
    static const char *op = "fc_gguf_writer_finish";
    if (!w) return FC_ERR_INVALID_ARG;
    if (!w->streaming) return w_fail(w, op, FC_ERR_INVALID_ARG, "no file is being written (fc_gguf_writer_begin)");
    /* A tensor of 0 bytes cannot exist (dims >= 1), so cur counts the complete ones. */
    if (w->cur != w->n_t) {
        fc_gguf_writer_abort(w);
        return w_fail(w, op, FC_ERR_INVALID_ARG, "only %lld of %lld tensors were written", (long long)w->cur,
                      (long long)w->n_t);
    }
    w->streaming = 0;
    return fc_atomic_commit(&w->af) ? FC_OK : fc_ctx_status(w->ctx);
}

void fc_gguf_writer_abort(fc_gguf_writer *w)
{
    if (!w || !w->streaming) return;
    fc_atomic_abort(&w->af);
    w->streaming = 0;
}
