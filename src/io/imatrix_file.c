/* SPDX-License-Identifier: MIT */
/* Importance matrices (include/fucina/imatrix.h): llama-imatrix's GGUF
 * layout read and written with our GGUF codec. The reader checks what
 * llama.cpp's loader checks (every in_sum2 has its counts and the shapes
 * agree) and what it would only trip over later (F32 data, finite
 * non-negative sums and counts), naming the file, the tensor and the
 * reason. */
#define _POSIX_C_SOURCE 200809L /* strdup */

#include "fucina/imatrix.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/ctx.h"
#include "fucina/gguf.h"
#include "io/atomic_file.h"

static const char *const OP = "fc_imatrix_load";

fc_imatrix *fc_imatrix_new(void)
{
    return calloc(1, sizeof(fc_imatrix));
}

void fc_imatrix_free(fc_imatrix *m)
{
    if (!m) return;
    for (int64_t i = 0; i < m->n_entries; i++) {
        free(m->entries[i].name);
        free(m->entries[i].in_sum2);
        free(m->entries[i].counts);
    }
    free(m->entries);
    for (int64_t i = 0; i < m->n_datasets; i++) free(m->datasets[i]);
    free(m->datasets);
    free(m);
}

/* Binary search over the sorted entries: the index of name, or -(insertion
 * point) - 1. */
static int64_t locate(const fc_imatrix *m, const char *name)
{
    int64_t lo = 0, hi = m->n_entries;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(m->entries[mid].name, name);
        if (c == 0) return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -lo - 1;
}

const fc_imatrix_entry *fc_imatrix_find(const fc_imatrix *m, const char *name)
{
    if (!m || !name) return NULL;
    int64_t i = locate(m, name);
    return i >= 0 ? &m->entries[i] : NULL;
}

fc_imatrix_entry *fc_imatrix_entry_get(fc_ctx *ctx, fc_imatrix *m, const char *name, int64_t n_cols, int64_t n_mat)
{
    if (!m || !name || n_cols < 1 || n_mat < 1) return NULL;
    int64_t i = locate(m, name);
    if (i >= 0) {
        fc_imatrix_entry *e = &m->entries[i];
        if (e->n_cols != n_cols || e->n_mat != n_mat) {
            if (ctx)
                fc_fail(ctx, FC_ERR_INVALID_ARG,
                        "imatrix entry \"%s\": %lld x %lld sums, but this matrix has %lld x %lld", name,
                        (long long)e->n_mat, (long long)e->n_cols, (long long)n_mat, (long long)n_cols);
            return NULL;
        }
        return e;
    }
    int64_t at = -i - 1;
    fc_imatrix_entry *grown = realloc(m->entries, (size_t)(m->n_entries + 1) * sizeof *grown);
    if (!grown) return NULL;
    m->entries = grown;
    fc_imatrix_entry e = {.name = strdup(name),
                          .n_cols = n_cols,
                          .n_mat = n_mat,
                          .in_sum2 = calloc((size_t)(n_cols * n_mat), sizeof(float)),
                          .counts = calloc((size_t)n_mat, sizeof(float))};
    if (!e.name || !e.in_sum2 || !e.counts) {
        free(e.name);
        free(e.in_sum2);
        free(e.counts);
        return NULL;
    }
    memmove(&m->entries[at + 1], &m->entries[at], (size_t)(m->n_entries - at) * sizeof *m->entries);
    m->entries[at] = e;
    m->n_entries++;
    return &m->entries[at];
}

fc_status fc_imatrix_add_dataset(fc_imatrix *m, const char *name)
{
    if (!m || !name) return FC_ERR_INVALID_ARG;
    char **grown = realloc(m->datasets, (size_t)(m->n_datasets + 1) * sizeof *grown);
    if (!grown) return FC_ERR_OOM;
    m->datasets = grown;
    if (!(m->datasets[m->n_datasets] = strdup(name))) return FC_ERR_OOM;
    m->n_datasets++;
    return FC_OK;
}

void fc_imatrix_weights(const fc_imatrix_entry *e, int64_t k, float *out)
{
    /* llama-quantize: values = sums / (float)count, the count an integer
     * (its loader rounds the file's f32 counts); a matrix that never saw a
     * token gets 1 everywhere, i.e. no preference between columns. */
    const float count = (float)llroundf(e->counts[k]);
    const float *s = e->in_sum2 + k * e->n_cols;
    for (int64_t j = 0; j < e->n_cols; j++) out[j] = count > 0.0f ? s[j] / count : 1.0f;
}

/* ---- reading ---------------------------------------------------------------------- */

static int ends_with(const char *s, const char *suffix, size_t *stem)
{
    size_t n = strlen(s), k = strlen(suffix);
    if (n <= k || strcmp(s + n - k, suffix) != 0) return 0;
    *stem = n - k;
    return 1;
}

static void *load_fail(fc_ctx *ctx, fc_gguf *g, fc_imatrix *m, fc_status st, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static void *load_fail(fc_ctx *ctx, fc_gguf *g, fc_imatrix *m, fc_status st, const char *path, const char *fmt, ...)
{
    char msg[768], pb[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (g) fc_gguf_close(g);
    fc_imatrix_free(m);
    fc_fail(ctx, st, "%s: %s: %s", OP, fc_io_path_for_msg(path, pb, sizeof pb), msg);
    return NULL;
}

/* One in_sum2 / counts tensor: F32, at most 2 dims that mean something. */
static int plain_matrix(const fc_gguf_tensor_info *ti)
{
    if (ti->type != FC_GGML_F32) return 0;
    for (int d = 2; d < ti->n_dims; d++)
        if (ti->ne[d] != 1) return 0;
    return 1;
}

fc_imatrix *fc_imatrix_load(fc_ctx *ctx, const char *path)
{
    if (!ctx) return NULL;
    if (!path) return fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: the path is NULL", OP);
    /* The legacy .dat format starts with an entry count, not "GGUF": say so
     * rather than the GGUF reader's bad-magic message. */
    FILE *f = fopen(path, "rb");
    if (f) {
        char magic[4] = {0};
        size_t got = fread(magic, 1, 4, f);
        fclose(f);
        if (got == 4 && memcmp(magic, "GGUF", 4) != 0)
            return load_fail(ctx, NULL, NULL, FC_ERR_FORMAT, path,
                             "not a GGUF file (llama-imatrix's legacy .dat format is not read; convert it with "
                             "llama-imatrix --in-file FILE.dat -o FILE.gguf)");
    }
    fc_gguf *g = fc_gguf_open(ctx, path, FC_GGUF_READ);
    if (!g) return NULL; /* the reader's message names the file */
    fc_imatrix *m = fc_imatrix_new();
    if (!m) return load_fail(ctx, g, m, FC_ERR_OOM, path, "out of memory");

    const char *type = NULL;
    int64_t kt = fc_gguf_find_kv(g, "general.type");
    if (kt < 0) return load_fail(ctx, g, m, FC_ERR_FORMAT, path, "no general.type: not an imatrix file");
    if (fc_gguf_kv_type(g, kt) != FC_GGUF_STR || fc_gguf_get_str(g, "general.type", &type, NULL) != FC_OK)
        return load_fail(ctx, g, m, FC_ERR_FORMAT, path, "general.type is not a string: not an imatrix file");
    if (strcmp(type, "imatrix") != 0)
        return load_fail(ctx, g, m, FC_ERR_FORMAT, path, "general.type is \"%.60s\", not \"imatrix\"%s", type,
                         !strcmp(type, "model") ? " (this is a model; pass the imatrix file)" : "");
    int et = -1;
    uint64_t nd = 0;
    if (fc_gguf_find_kv(g, "imatrix.datasets") >= 0) {
        if (fc_gguf_get_arr(g, "imatrix.datasets", &et, &nd) != FC_OK || et != FC_GGUF_STR)
            return load_fail(ctx, g, m, FC_ERR_FORMAT, path, "imatrix.datasets is not an array of strings");
        for (uint64_t i = 0; i < nd; i++) {
            const char *s = NULL;
            if (fc_gguf_get_arr_str(g, "imatrix.datasets", i, &s, NULL) != FC_OK ||
                fc_imatrix_add_dataset(m, s) != FC_OK)
                return load_fail(ctx, g, m, FC_ERR_OOM, path, "out of memory");
        }
    }
    static const char *const u32_keys[] = {"imatrix.chunk_count", "imatrix.chunk_size"};
    uint32_t *u32_out[] = {&m->chunk_count, &m->chunk_size};
    for (int k = 0; k < 2; k++)
        if (fc_gguf_find_kv(g, u32_keys[k]) >= 0 && fc_gguf_get_u32(g, u32_keys[k], u32_out[k]) != FC_OK)
            return load_fail(ctx, g, m, FC_ERR_FORMAT, path, "%s is not a u32", u32_keys[k]);

    /* pair every in_sum2 with its counts */
    int64_t nt = fc_gguf_tensor_count(g);
    for (int64_t i = 0; i < nt; i++) {
        fc_gguf_tensor_info ti;
        fc_gguf_tensor_info_at(g, i, &ti);
        size_t stem;
        if (!ends_with(ti.name, ".in_sum2", &stem)) continue;
        char name[512];
        if (stem >= sizeof name - 16)
            return load_fail(ctx, g, m, FC_ERR_FORMAT, path, "tensor name \"%.80s...\" is too long", ti.name);
        memcpy(name, ti.name, stem);
        name[stem] = 0;
        char cname[528];
        snprintf(cname, sizeof cname, "%s.counts", name);
        int64_t ic = fc_gguf_find_tensor(g, cname);
        if (ic < 0)
            return load_fail(ctx, g, m, FC_ERR_FORMAT, path, "tensor \"%s\" has no \"%s\" beside it", ti.name, cname);
        fc_gguf_tensor_info tc;
        fc_gguf_tensor_info_at(g, ic, &tc);
        if (!plain_matrix(&ti) || !plain_matrix(&tc))
            return load_fail(ctx, g, m, FC_ERR_FORMAT, path,
                             "tensor \"%s\" is %s, %d-D: the sums and counts are "
                             "2-D F32",
                             plain_matrix(&ti) ? cname : ti.name, plain_matrix(&ti) ? tc.type_name : ti.type_name,
                             plain_matrix(&ti) ? tc.n_dims : ti.n_dims);
        const int64_t n_cols = ti.ne[0], n_mat = ti.n_dims > 1 ? ti.ne[1] : 1;
        const int64_t c_mat = (tc.n_dims > 1 ? tc.ne[1] : 1) * tc.ne[0];
        if (c_mat != n_mat || (tc.ne[0] != 1 && tc.n_dims > 1))
            return load_fail(ctx, g, m, FC_ERR_FORMAT, path, "\"%s\" holds %lld counts for %lld matrices of sums",
                             cname, (long long)c_mat, (long long)n_mat);
        if (n_cols < 1 || n_mat < 1)
            return load_fail(ctx, g, m, FC_ERR_FORMAT, path, "tensor \"%s\" is empty", ti.name);
        if (fc_imatrix_find(m, name)) return load_fail(ctx, g, m, FC_ERR_FORMAT, path, "two entries for \"%s\"", name);
        fc_imatrix_entry *e = fc_imatrix_entry_get(NULL, m, name, n_cols, n_mat);
        if (!e) return load_fail(ctx, g, m, FC_ERR_OOM, path, "out of memory");
        memcpy(e->in_sum2, ti.data, (size_t)(n_cols * n_mat) * sizeof(float));
        memcpy(e->counts, tc.data, (size_t)n_mat * sizeof(float));
        /* llama-quantize refuses non-finite weights; a negative sum of
         * squares or count cannot come from llama-imatrix either */
        for (int64_t k = 0; k < n_cols * n_mat; k++)
            if (!(e->in_sum2[k] >= 0.0f) || isinf(e->in_sum2[k]))
                return load_fail(ctx, g, m, FC_ERR_FORMAT, path,
                                 "\"%s\" element %lld is %g (sums of squares are "
                                 "finite and >= 0)",
                                 ti.name, (long long)k, (double)e->in_sum2[k]);
        for (int64_t k = 0; k < n_mat; k++)
            if (!(e->counts[k] >= 0.0f) || isinf(e->counts[k]))
                return load_fail(ctx, g, m, FC_ERR_FORMAT, path,
                                 "\"%s\" element %lld is %g (counts are finite and "
                                 ">= 0)",
                                 cname, (long long)k, (double)e->counts[k]);
    }
    /* counts without sums */
    for (int64_t i = 0; i < nt; i++) {
        fc_gguf_tensor_info ti;
        fc_gguf_tensor_info_at(g, i, &ti);
        size_t stem;
        if (!ends_with(ti.name, ".counts", &stem)) continue;
        char name[512];
        snprintf(name, sizeof name, "%.*s", (int)stem, ti.name);
        if (!fc_imatrix_find(m, name))
            return load_fail(ctx, g, m, FC_ERR_FORMAT, path, "tensor \"%s\" has no \"%s.in_sum2\" beside it", ti.name,
                             name);
    }
    if (m->n_entries == 0) return load_fail(ctx, g, m, FC_ERR_FORMAT, path, "no <name>.in_sum2 tensors: no data");
    fc_gguf_close(g);
    return m;
}

/* ---- writing ---------------------------------------------------------------------- */

fc_status fc_imatrix_save(fc_ctx *ctx, const fc_imatrix *m, const char *path)
{
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!m || !path) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_imatrix_save: %s is NULL", m ? "the path" : "the matrix");
        return FC_ERR_INVALID_ARG;
    }
    fc_gguf_writer *w = fc_gguf_writer_new(ctx);
    if (!w) return fc_fail(ctx, FC_ERR_OOM, "fc_imatrix_save: out of memory"), FC_ERR_OOM;
    /* llama-imatrix's order: the type, the datasets, the chunk count and
     * size, then per entry (sorted by name) in_sum2 and counts */
    fc_status st = fc_gguf_set_str(w, "general.type", "imatrix");
    if (st == FC_OK)
        st =
            fc_gguf_set_arr_str(w, "imatrix.datasets", (const char *const *)m->datasets, NULL, (uint64_t)m->n_datasets);
    if (st == FC_OK) st = fc_gguf_set_u32(w, "imatrix.chunk_count", m->chunk_count);
    if (st == FC_OK) st = fc_gguf_set_u32(w, "imatrix.chunk_size", m->chunk_size);
    char name[600];
    for (int64_t i = 0; i < m->n_entries && st == FC_OK; i++) {
        const fc_imatrix_entry *e = &m->entries[i];
        /* ggml's writer stores ggml_n_dims: a dense entry's [cols, 1] and
         * [1, 1] go out 1-D, as in every file llama-imatrix writes */
        int64_t ne_s[2] = {e->n_cols, e->n_mat}, ne_c[2] = {1, e->n_mat};
        const int nd = e->n_mat > 1 ? 2 : 1;
        snprintf(name, sizeof name, "%s.in_sum2", e->name);
        st = fc_gguf_writer_add_raw(w, name, FC_GGML_F32, nd, ne_s, e->in_sum2,
                                    (uint64_t)(e->n_cols * e->n_mat) * sizeof(float));
        if (st != FC_OK) break;
        snprintf(name, sizeof name, "%s.counts", e->name);
        st = fc_gguf_writer_add_raw(w, name, FC_GGML_F32, nd, ne_c, e->counts, (uint64_t)e->n_mat * sizeof(float));
    }
    if (st == FC_OK) st = fc_gguf_writer_save(w, path);
    fc_gguf_writer_free(w);
    return st;
}
