/* SPDX-License-Identifier: MIT */
/* safetensors writing: every argument is checked before a file is created,
 * the header is built in memory, and the file goes through atomic_file.h
 * (temporary + fsync + rename), so a failed save leaves nothing behind.
 *
 * Layout (docs/IO.md; tests/goldens/gen_safetensors_fixtures.py rebuilds it
 * byte for byte): compact JSON, "__metadata__" first (only when there is
 * any), then the tensors in the caller's order, data back to back in that
 * order, the header padded with spaces so the data starts 8-byte aligned. */
#define _POSIX_C_SOURCE 200809L

#include "fucina/safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/axis.h"
#include "exec/ctx.h"
#include "io/atomic_file.h"
#include "io/json.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian and is written as is: a big-endian host needs byte swapping"
#endif

#define OP "fc_safetensors_save"

static const char *st_dtype_name(fc_dtype dt)
{
    switch (dt) {
    case FC_BOOL: return "BOOL";
    case FC_U8: return "U8";
    case FC_I8: return "I8";
    case FC_I16: return "I16";
    case FC_I32: return "I32";
    case FC_I64: return "I64";
    case FC_F16: return "F16";
    case FC_BF16: return "BF16";
    case FC_F32: return "F32";
    case FC_F64: return "F64";
    FC_CASE_BLOCK_DTYPES: return NULL; /* safetensors has no block formats */
    }
    return NULL;
}

/* JSON strings exactly as Python's json.dumps(..., ensure_ascii=False)
 * writes them (short escapes for \b \f \n \r \t, \u00xx for other control
 * bytes), so the fixture generator can predict the bytes. */
static void put_string(fc_json_buf *b, const char *s)
{
    fc_json_buf_raw(b, "\"", 1);
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        const char *esc = NULL;
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        default: break;
        }
        if (esc) fc_json_buf_raw(b, esc, strlen(esc));
        else if (c < 0x20) {
            char u[8];
            snprintf(u, sizeof u, "\\u%04x", c);
            fc_json_buf_raw(b, u, 6);
        } else {
            fc_json_buf_raw(b, p, 1);
        }
    }
    fc_json_buf_raw(b, "\"", 1);
}

typedef struct idx_name {
    const char *s;
    int i;
} idx_name;

static int cmp_idx_name(const void *a, const void *b)
{
    const idx_name *x = a, *y = b;
    int c = strcmp(x->s, y->s);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

/* Name in a message: shortened, control bytes as '?'. */
static const char *q(char buf[96], const char *s) { return fc_json_quote(buf, 96, s, strlen(s)); }

/* A UTF-8 string that is not empty (when nonempty is set). */
static int check_text(fc_ctx *ctx, const char *what, int i, const char *s, int nonempty)
{
    size_t bad;
    if (!s) return fc_fail(ctx, FC_ERR_INVALID_ARG, OP ": %s %d is NULL", what, i), 0;
    if (nonempty && !*s) return fc_fail(ctx, FC_ERR_INVALID_ARG, OP ": %s %d is empty", what, i), 0;
    if (!fc_utf8_valid(s, strlen(s), &bad))
        return fc_fail(ctx, FC_ERR_INVALID_ARG, OP ": %s %d is not valid UTF-8 (byte %zu)", what, i, bad), 0;
    return 1;
}

/* No two equal strings among s[i].s (sorted in place). */
static int check_unique(fc_ctx *ctx, const char *what, idx_name *s, int n)
{
    qsort(s, (size_t)n, sizeof *s, cmp_idx_name);
    for (int i = 1; i < n; i++) {
        if (strcmp(s[i].s, s[i - 1].s) == 0) {
            char b[96];
            return fc_fail(ctx, FC_ERR_INVALID_ARG, OP ": duplicate %s \"%s\" (entries %d and %d)", what, q(b, s[i].s),
                           s[i - 1].i, s[i].i), 0;
        }
    }
    return 1;
}

static int check_args(fc_ctx *ctx, const fc_named_tensor *ts, int n, const char *const *kv, int n_meta)
{
    if (n < 0 || (n > 0 && !ts) || n_meta < 0 || (n_meta > 0 && !kv))
        return fc_fail(ctx, FC_ERR_INVALID_ARG, OP ": bad tensor or metadata list (n=%d, n_meta=%d)", n, n_meta), 0;
    size_t pl = strlen(FC_ST_AXES_PREFIX);
    idx_name *s = malloc(((size_t)(n > n_meta ? n : n_meta) + 1) * sizeof *s);
    if (!s) return fc_fail(ctx, FC_ERR_OOM, OP ": out of memory"), 0;
    int ok = 1;
    for (int i = 0; ok && i < n; i++) {
        char b[96];
        ok = check_text(ctx, "tensor name", i, ts[i].name, 1);
        if (ok && strcmp(ts[i].name, "__metadata__") == 0)
            ok = (fc_fail(ctx, FC_ERR_INVALID_ARG, OP ": tensor %d: the name \"__metadata__\" is reserved", i), 0);
        if (ok && !ts[i].tensor)
            ok = (fc_fail(ctx, FC_ERR_INVALID_ARG, OP ": tensor %d (\"%s\") is NULL", i, q(b, ts[i].name)), 0);
        if (ok && fc_dtype_is_block(fc_tensor_dtype(ts[i].tensor)))
            ok = (fc_fail(ctx, FC_ERR_DTYPE, OP ": tensor \"%s\" is %s, a block-quantized dtype safetensors cannot "
                          "store (fc_dequantize it first, or save a GGUF file)", q(b, ts[i].name),
                          fc_dtype_name(fc_tensor_dtype(ts[i].tensor))), 0);
        if (ok && !st_dtype_name(fc_tensor_dtype(ts[i].tensor)))
            ok = (fc_fail(ctx, FC_ERR_DTYPE, OP ": tensor \"%s\" has an invalid dtype", q(b, ts[i].name)), 0);
        if (ok) s[i] = (idx_name){ts[i].name, i};
    }
    ok = ok && check_unique(ctx, "tensor name", s, n);
    for (int i = 0; ok && i < n_meta; i++) {
        char b[96];
        ok = check_text(ctx, "metadata key", i, kv[2 * i], 0) && check_text(ctx, "metadata value", i, kv[2 * i + 1], 0);
        if (ok && strncmp(kv[2 * i], FC_ST_AXES_PREFIX, pl) == 0)
            ok = (fc_fail(ctx, FC_ERR_INVALID_ARG, OP ": metadata key \"%s\": the prefix \"" FC_ST_AXES_PREFIX
                          "\" is reserved for axis names", q(b, kv[2 * i])), 0);
        if (ok) s[i] = (idx_name){kv[2 * i], i};
    }
    ok = ok && check_unique(ctx, "metadata key", s, n_meta);
    free(s);
    return ok;
}

/* Does t need its axis names stored: anything but _0, _1, ... in order. */
static int has_names(const fc_tensor *t)
{
    for (int a = 0; a < fc_tensor_rank(t); a++)
        if (fc_tensor_axis(t, a) != fc_axis_positional(a)) return 1;
    return 0;
}

static void put_axes_entry(fc_json_buf *b, const char *name, const fc_tensor *t)
{
    size_t pl = strlen(FC_ST_AXES_PREFIX), nl = strlen(name);
    char *key = malloc(pl + nl + 1);
    if (!key) {
        b->oom = 1;
        return;
    }
    memcpy(key, FC_ST_AXES_PREFIX, pl);
    memcpy(key + pl, name, nl + 1);
    put_string(b, key);
    free(key);
    fc_json_buf_raw(b, ":\"", 2);
    for (int a = 0; a < fc_tensor_rank(t); a++) {
        if (a) fc_json_buf_raw(b, ",", 1);
        const char *ax = fc_tensor_axis(t, a); /* [A-Za-z0-9_.]: nothing to escape */
        fc_json_buf_raw(b, ax, strlen(ax));
    }
    fc_json_buf_raw(b, "\"", 1);
}

/* The padded header, or 0 with the error recorded. */
static int build_header(fc_ctx *ctx, fc_json_buf *b, const fc_named_tensor *ts, int n, const char *const *kv, int n_meta)
{
    int n_axes = 0;
    for (int i = 0; i < n; i++) n_axes += has_names(ts[i].tensor);
    fc_json_buf_raw(b, "{", 1);
    int first = 1;
    if (n_meta + n_axes > 0) {
        fc_json_buf_raw(b, "\"__metadata__\":{", 16);
        for (int i = 0; i < n_meta; i++) {
            if (!first) fc_json_buf_raw(b, ",", 1);
            first = 0;
            put_string(b, kv[2 * i]);
            fc_json_buf_raw(b, ":", 1);
            put_string(b, kv[2 * i + 1]);
        }
        for (int i = 0; i < n; i++) {
            if (!has_names(ts[i].tensor)) continue;
            if (!first) fc_json_buf_raw(b, ",", 1);
            first = 0;
            put_axes_entry(b, ts[i].name, ts[i].tensor);
        }
        fc_json_buf_raw(b, "}", 1);
        first = 0;
    }
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        const fc_tensor *t = ts[i].tensor;
        uint64_t nb = fc_tensor_nbytes(t);
        if (!first) fc_json_buf_raw(b, ",", 1);
        first = 0;
        put_string(b, ts[i].name);
        fc_json_buf_raw(b, ":{\"dtype\":\"", 11);
        const char *dn = st_dtype_name(fc_tensor_dtype(t));
        fc_json_buf_raw(b, dn, strlen(dn));
        fc_json_buf_raw(b, "\",\"shape\":[", 11);
        for (int a = 0; a < fc_tensor_rank(t); a++) {
            if (a) fc_json_buf_raw(b, ",", 1);
            fc_json_buf_int(b, fc_tensor_dim(t, a));
        }
        fc_json_buf_raw(b, "],\"data_offsets\":[", 18);
        fc_json_buf_int(b, (int64_t)off);
        fc_json_buf_raw(b, ",", 1);
        fc_json_buf_int(b, (int64_t)(off + nb));
        fc_json_buf_raw(b, "]}", 2);
        off += nb;
    }
    fc_json_buf_raw(b, "}", 1);
    while (!b->oom && b->n % 8 != 0) fc_json_buf_raw(b, " ", 1);
    if (b->oom) return fc_fail(ctx, FC_ERR_OOM, OP ": out of memory (the header)"), 0;
    return 1;
}

static int write_tensor(fc_ctx *ctx, fc_atomic_file *af, const fc_tensor *t)
{
    size_t nb = fc_tensor_nbytes(t);
    if (fc_tensor_is_contiguous(t)) return fc_atomic_write(af, fc_tensor_data(t), nb);
    /* Any strides: gather row-major first. */
    void *tmp = malloc(nb);
    if (!tmp) {
        fc_fail(ctx, FC_ERR_OOM, OP ": out of memory (%zu bytes to gather a strided tensor)", nb);
        fc_atomic_abort(af);
        return 0;
    }
    int ok = fc_tensor_read(ctx, t, tmp, nb) == FC_OK;
    if (!ok) fc_atomic_abort(af);
    ok = ok && fc_atomic_write(af, tmp, nb);
    free(tmp);
    return ok;
}

fc_status fc_safetensors_save(fc_ctx *ctx, const char *path, const fc_named_tensor *ts, int n,
                              const char *const *meta_kv, int n_meta)
{
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!path) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, OP ": path is NULL");
        return FC_ERR_INVALID_ARG;
    }
    if (!check_args(ctx, ts, n, meta_kv, n_meta)) return fc_ctx_status(ctx);
    fc_json_buf hb = {0};
    if (!build_header(ctx, &hb, ts, n, meta_kv, n_meta)) {
        fc_json_buf_free(&hb);
        return fc_ctx_status(ctx);
    }
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hb.n >> (8 * i));
    fc_atomic_file af;
    int ok = fc_atomic_open(&af, ctx, OP, path) && fc_atomic_write(&af, len8, 8) && fc_atomic_write(&af, hb.p, hb.n);
    fc_json_buf_free(&hb);
    for (int i = 0; ok && i < n; i++) ok = write_tensor(ctx, &af, ts[i].tensor);
    ok = ok && fc_atomic_commit(&af);
    return ok ? FC_OK : fc_ctx_status(ctx);
}
