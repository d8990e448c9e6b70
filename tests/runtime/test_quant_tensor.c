/* SPDX-License-Identifier: MIT */
/* Block-quantized tensors (fucina/qtensor.h) against independent references:
 *   - the dtype table vs src/quant's fcq_traits and ggml's type traits;
 *   - fc_dequantize / fc_cast vs ggml's dequantize_row_<fmt> on blocks made by
 *     ggml_quantize_chunk (every format the oracle has), bit for bit, small and
 *     big (threaded) tensors, copied and zero-copy;
 *   - fc_quantize vs ggml's quantize_row_<fmt>_ref, byte for byte (formats
 *     with an encoder; the others must say FC_ERR_UNSUPPORTED);
 *   - fc_get_rows vs rows of the full dequantization;
 *   - fc_linear / fc_dot / fc_matmul with a block right operand vs a double
 *     product with ggml's dequantized weights, within the bound of the q8
 *     activation rounding (see linear_bound) or of f32 summation;
 *   - GGUF round trip: block tensors read zero-copy, identical bytes and
 *     values, re-emitted byte for byte;
 *   - every other op refuses a block tensor with FC_ERR_DTYPE naming op and
 *     dtype; block tensors never require grad; dx of fc_linear(x, w_block)
 *     equals dx with the dequantized f32 weight. */
#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fct_golden.h"
#include "fucina/fucina.h"
#include "fucina/qtensor.h"
#include "ggml_oracle.h"
#include "quant/quant.h"

FCT_SUITE_WITH_TMPDIR(qtensor, 2, "fc_qtensor_");

/* ggml prototypes (ggml/include/ggml.h, ggml-quants.h), called through dlsym. */
typedef size_t (*quantize_chunk_fn)(int type, const float *src, void *dst, int64_t start, int64_t nrows,
                                    int64_t n_per_row, const float *imatrix);
typedef void (*dequant_fn)(const void *x, float *y, int64_t k);
typedef void (*quant_ref_fn)(const float *x, void *y, int64_t k);
typedef int64_t (*blck_size_fn)(int type);
typedef size_t (*type_size_fn)(int type);
typedef const char *(*type_name_fn)(int type);

static void need_oracle(void)
{
    const char *why = NULL;
    if (!fco_ggml_available(&why)) cr_skip_test("%s", why);
}

static void *osym(const char *prefix, const char *name)
{
    char s[96];
    snprintf(s, sizeof s, "%s%s", prefix, name);
    return fco_ggml_sym(s);
}

/* Deterministic "random" data: a Gaussian-ish mix with a few outliers. */
static uint64_t rng = 88172645463325252ull;
static double urand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1p-53;
}
static void fill(float *x, int64_t n, double scale)
{
    for (int64_t i = 0; i < n; i++) {
        double v = (urand() + urand() + urand() - 1.5) * 2.0;
        if (urand() < 0.01) v *= 6.0;
        x[i] = (float)(v * scale);
    }
}

static int64_t row_bytes(fc_dtype dt, int64_t cols) { return (int64_t)fc_dtype_row_bytes(dt, cols); }

/* rows x cols of dt encoded by ggml (imatrix of ones for the formats that
 * need one); NULL when the oracle cannot make this format. */
static unsigned char *ggml_blocks(fc_dtype dt, const float *x, int64_t rows, int64_t cols)
{
    quantize_chunk_fn qc = (quantize_chunk_fn)fco_ggml_sym("ggml_quantize_chunk");
    cr_assert(qc, "the oracle has no ggml_quantize_chunk");
    size_t nb = (size_t)(rows * row_bytes(dt, cols));
    unsigned char *w = malloc(nb);
    float *im = malloc((size_t)cols * sizeof(float));
    for (int64_t i = 0; i < cols; i++) im[i] = 1.0f;
    size_t got = qc(fc_dtype_ggml_type(dt), x, w, 0, rows, cols, im);
    free(im);
    cr_assert_eq(got, nb, "%s: ggml_quantize_chunk wrote %zu bytes, expected %zu", fc_dtype_name(dt), got, nb);
    return w;
}

/* Random blocks of the grid formats (IQ2, IQ3, IQ1), whose ggml encoders
 * need seconds of table set-up per process: every bit pattern is a valid
 * block (grid indices cover their tables); only the f16 scale is made
 * finite (d at byte 0, or for iq1_m the exponent's top bit, bit 6 of byte 55). */
static int grid_format(fc_dtype dt)
{
    return dt == FC_IQ2_XXS || dt == FC_IQ2_XS || dt == FC_IQ2_S || dt == FC_IQ3_XXS || dt == FC_IQ3_S ||
           dt == FC_IQ1_S || dt == FC_IQ1_M;
}

static unsigned char *random_blocks(fc_dtype dt, int64_t rows, int64_t cols)
{
    size_t nb = (size_t)(rows * row_bytes(dt, cols)), bb = fc_dtype_block_bytes(dt);
    unsigned char *w = malloc(nb);
    for (size_t i = 0; i < nb; i++) w[i] = (unsigned char)(urand() * 256);
    for (size_t b = 0; b < nb; b += bb) {
        if (dt == FC_IQ1_M) {
            w[b + 55] &= (unsigned char)~0x40;
        } else {
            uint16_t d = (uint16_t)((urand() < 0.5 ? 0x8000 : 0) | ((1 + (int)(urand() * 20)) << 10) |
                                    (int)(urand() * 1024));
            w[b] = (unsigned char)d;
            w[b + 1] = (unsigned char)(d >> 8);
        }
    }
    return w;
}

/* The formats the oracle can both encode (quantize_chunk) and decode. */
static int oracle_has(fc_dtype dt)
{
    if (dt == FC_Q8_1 || dt == FC_Q8_K) return 0; /* not in ggml_quantize_chunk */
    type_name_fn tn = (type_name_fn)fco_ggml_sym("ggml_type_name");
    const char *n = tn ? tn(fc_dtype_ggml_type(dt)) : NULL;
    return n && strcmp(n, fc_dtype_name(dt)) == 0 && osym("dequantize_row_", fc_dtype_name(dt)) != NULL;
}

static int64_t cols_for(fc_dtype dt, int blocks) { return (int64_t)fc_dtype_block_elems(dt) * blocks; }

static int same_bits(const float *a, const float *b, int64_t n, int64_t *where)
{
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], 4) != 0) return *where = i, 0;
    return 1;
}

/* ---- the dtype table ------------------------------------------------------------------ */

Test(qtensor, dtype_table_agrees_with_quant_traits)
{
    cr_expect_eq(FC_DTYPE_COUNT, FC_DTYPE_PLAIN_COUNT + 27);
    int seen[FCQ_TYPE_LIMIT] = {0};
    for (int i = 0; i < FC_DTYPE_COUNT; i++) {
        fc_dtype dt = (fc_dtype)i;
        fc_dtype back;
        cr_assert(fc_dtype_parse(fc_dtype_name(dt), &back) && back == dt, "%s does not parse back", fc_dtype_name(dt));
        int id = fc_dtype_ggml_type(dt);
        if (!fc_dtype_is_block(dt)) {
            cr_expect_neq(fc_dtype_size(dt), 0u);
            cr_expect_eq(fc_dtype_block_elems(dt), 1u);
            cr_expect_eq(fc_dtype_block_bytes(dt), fc_dtype_size(dt));
            cr_expect_null(fcq_traits_of(id < 0 ? 0 : (uint32_t)id), "%s has quant traits", fc_dtype_name(dt));
            continue;
        }
        cr_expect_eq(fc_dtype_size(dt), 0u, "%s has an element size", fc_dtype_name(dt));
        cr_expect(!fc_dtype_is_float(dt) && !fc_dtype_is_integer(dt));
        const fcq_traits *tr = id >= 0 ? fcq_traits_of((uint32_t)id) : NULL;
        cr_assert(tr, "%s: ggml id %d has no fcq_traits", fc_dtype_name(dt), id);
        cr_expect_str_eq(tr->name, fc_dtype_name(dt));
        cr_expect_eq(tr->block_elems, fc_dtype_block_elems(dt), "%s block elems", tr->name);
        cr_expect_eq(tr->block_bytes, fc_dtype_block_bytes(dt), "%s block bytes", tr->name);
        cr_expect(fc_dtype_from_ggml_type((uint32_t)id, &back) && back == dt);
        cr_expect_eq(fc_dtype_row_bytes(dt, 3 * (int64_t)tr->block_elems), 3u * tr->block_bytes);
        cr_expect_eq(fc_dtype_row_bytes(dt, (int64_t)tr->block_elems + 1), 0u);
        seen[id] = 1;
    }
    /* every format quant knows is a dtype */
    for (uint32_t id = 0; id < FCQ_TYPE_LIMIT; id++)
        if (fcq_traits_of(id)) cr_expect(seen[id], "fcq type %u (%s) is no fc_dtype", id, fcq_traits_of(id)->name);
    fc_dtype d;
    cr_expect(fc_dtype_parse("Q4_K", &d) && d == FC_Q4_K);
    cr_expect(fc_dtype_parse("iq2_xxs", &d) && d == FC_IQ2_XXS);
    cr_expect(!fc_dtype_parse("F32", &d), "element names stay case-sensitive");
    cr_expect(!fc_dtype_parse("q4_k_m", &d));
    cr_expect(!fc_dtype_from_ggml_type(4, &d) && !fc_dtype_from_ggml_type(43, &d));
    cr_expect_eq(fc_dtype_ggml_type(FC_U8), -1);
}

Test(qtensor, ggml_type_table_agrees_with_ggml)
{
    need_oracle();
    blck_size_fn bs = (blck_size_fn)fco_ggml_sym("ggml_blck_size");
    type_size_fn ts = (type_size_fn)fco_ggml_sym("ggml_type_size");
    type_name_fn tn = (type_name_fn)fco_ggml_sym("ggml_type_name");
    cr_assert(bs && ts && tn);
    int checked = 0;
    for (uint32_t id = 0; id < 43; id++) {
        uint32_t be, bb;
        if (!fc_ggml_type_block(id, &be, &bb)) continue;
        const char *gn = tn((int)id);
        if (!gn || strstr(gn, "REMOVED") || !strcmp(gn, "DEPRECATED")) continue; /* older oracle */
        cr_expect_eq((int64_t)be, bs((int)id), "id %u block elems", id);
        cr_expect_eq((size_t)bb, ts((int)id), "id %u block bytes", id);
        /* ggml's "q4_K" is our "Q4_K": equal ignoring case */
        const char *n = fc_ggml_type_name(id);
        cr_expect(strlen(gn) == strlen(n), "id %u: %s vs %s", id, n, gn);
        for (size_t k = 0; gn[k] && n[k]; k++)
            cr_expect((gn[k] | 0x20) == (n[k] | 0x20), "id %u: %s vs %s", id, n, gn);
        checked++;
    }
    cr_expect(checked >= 30, "only %d ids checked", checked);
}

/* ---- creation, inspection ------------------------------------------------------------- */

static int released;
static void on_release(void *user, void *data)
{
    (void)data;
    released += *(int *)user;
}

Test(qtensor, creation_and_inspection)
{
    unsigned char raw[4 * 144];
    for (size_t i = 0; i < sizeof raw; i++) raw[i] = (unsigned char)(i * 37u);
    fc_tensor *t = fc_from_data(ctx, FC_Q4_K, FC_SHAPE({"out", 2}, {"in", 512}), raw, sizeof raw);
    cr_assert(t, "%s", fc_ctx_error(ctx));
    char buf[128];
    cr_expect_str_eq(fc_tensor_describe(t, buf, sizeof buf), "q4_K[out=2, in=512]");
    cr_expect_eq(fc_tensor_dtype(t), FC_Q4_K);
    cr_expect_eq(fc_tensor_nbytes(t), sizeof raw);
    cr_expect_eq(fc_tensor_numel(t), 1024);
    cr_expect(fc_tensor_is_contiguous(t));
    cr_expect_neq(fc_tensor_data(t), (void *)raw, "fc_from_data copies");
    unsigned char back[sizeof raw];
    cr_expect_eq(fc_tensor_read(ctx, t, back, sizeof back), FC_OK, "%s", fc_ctx_error(ctx));
    cr_expect(!memcmp(back, raw, sizeof raw));
    cr_expect(!fc_tensor_requires_grad(t));
    fc_tensor *r = fc_rename(ctx, t, "in", "k");
    cr_assert(r, "%s", fc_ctx_error(ctx));
    cr_expect_str_eq(fc_tensor_describe(r, buf, sizeof buf), "q4_K[out=2, k=512]");
    cr_expect_eq(fc_tensor_data(r), fc_tensor_data(t));
    fc_release(r);
    fc_release(t);

    /* zero-copy: no alignment needed, the hook runs once when the last view goes */
    int one = 1;
    released = 0;
    fc_tensor *w = fc_wrap(ctx, FC_Q8_0, FC_SHAPE({"r", 3}, {"c", 32}), raw + 1, 3 * 34, on_release, &one);
    cr_assert(w, "%s", fc_ctx_error(ctx));
    cr_expect_eq(fc_tensor_data(w), (void *)(raw + 1));
    fc_tensor *w2 = fc_rename_all(ctx, w, FC_AXES("a", "b"));
    fc_release(w);
    cr_expect_eq(released, 0);
    fc_release(w2);
    cr_expect_eq(released, 1);

    fc_ctx_clear_error(ctx);
}

#define EXPECT_FAILS(expr, status, needle)                                                                   \
    do {                                                                                                     \
        fc_ctx_clear_error(ctx);                                                                             \
        cr_expect_null((expr), "%s made a tensor", #expr);                                                   \
        cr_expect_eq(fc_ctx_status(ctx), status, "%s: status %s: %s", #expr, fc_status_name(fc_ctx_status(ctx)), \
                     fc_ctx_error(ctx));                                                                     \
        cr_expect(strstr(fc_ctx_error(ctx), needle), "%s: \"%s\" not in: %s", #expr, needle, fc_ctx_error(ctx)); \
        fc_ctx_clear_error(ctx);                                                                             \
    } while (0)

Test(qtensor, creation_errors_name_the_reason)
{
    unsigned char raw[144];
    memset(raw, 0, sizeof raw);
    EXPECT_FAILS(fc_from_data(ctx, FC_Q4_0, FC_SHAPE({"r", 2}, {"c", 48}), raw, 36), FC_ERR_SHAPE,
                 "not a multiple of the q4_0 block size 32");
    EXPECT_FAILS(fc_from_data(ctx, FC_Q4_0, FC_SHAPE({"r", 2}, {"c", 64}), raw, 71), FC_ERR_SHAPE, "need 72");
    EXPECT_FAILS(fc_from_data(ctx, FC_Q4_0, FC_SCALAR, raw, 18), FC_ERR_SHAPE, "rank >= 1");
    EXPECT_FAILS(fc_wrap(ctx, FC_Q4_0, FC_SHAPE({"r", 2}, {"c", 64}), raw, 71, NULL, NULL), FC_ERR_SHAPE, "need 72");
    EXPECT_FAILS(fc_wrap(ctx, FC_Q4_0, FC_SHAPE({"c", 64}), NULL, 36, NULL, NULL), FC_ERR_INVALID_ARG, "data is NULL");
    EXPECT_FAILS(fc_empty(ctx, FC_Q4_K, FC_SHAPE({"c", 256})), FC_ERR_DTYPE, "fc_empty: q4_K is a block-quantized");
    EXPECT_FAILS(fc_zeros(ctx, FC_Q8_0, FC_SHAPE({"c", 32})), FC_ERR_DTYPE, "fc_zeros: q8_0");
    EXPECT_FAILS(fc_full(ctx, FC_Q8_0, FC_SHAPE({"c", 32}), 1), FC_ERR_DTYPE, "fc_full: q8_0");
    EXPECT_FAILS(fc_scalar(ctx, FC_Q8_0, 1), FC_ERR_DTYPE, "fc_scalar: q8_0");
    EXPECT_FAILS(fc_arange(ctx, FC_Q8_0, "c", 32), FC_ERR_DTYPE, "fc_arange: q8_0");
    EXPECT_FAILS(fc_empty_pos(ctx, FC_Q8_0, 1, (int64_t[]){32}), FC_ERR_DTYPE, "fc_empty_pos: q8_0");
    EXPECT_FAILS(fc_rand_uniform(ctx, FC_Q8_0, FC_SHAPE({"c", 32}), 1, 0, 1), FC_ERR_DTYPE, "q8_0");
    EXPECT_FAILS(fc_rand_normal(ctx, FC_Q8_0, FC_SHAPE({"c", 32}), 1, 0, 1), FC_ERR_DTYPE, "q8_0");
    fc_tensor *x = fc_zeros(ctx, FC_F32, FC_SHAPE({"r", 2}, {"c", 48}));
    EXPECT_FAILS(fc_quantize(ctx, x, FC_Q4_0), FC_ERR_SHAPE, "not a multiple of the q4_0 block size 32");
    EXPECT_FAILS(fc_quantize(ctx, x, FC_F16), FC_ERR_DTYPE, "not a block-quantized dtype");
    fc_tensor *xi = fc_zeros(ctx, FC_I32, FC_SHAPE({"c", 32}));
    EXPECT_FAILS(fc_quantize(ctx, xi, FC_Q8_0), FC_ERR_DTYPE, "must be f32");
    EXPECT_FAILS(fc_cast(ctx, x, FC_Q8_0), FC_ERR_DTYPE, "fc_quantize");
    fc_release(x);
    fc_release(xi);
}

/* ---- dequantize ----------------------------------------------------------------------- */

Test(qtensor, dequantize_matches_ggml)
{
    need_oracle();
    int done = 0;
    for (int i = FC_DTYPE_PLAIN_COUNT; i < FC_DTYPE_COUNT; i++) {
        fc_dtype dt = (fc_dtype)i;
        if (!oracle_has(dt)) {
            cr_log_info("%s: not in this oracle, skipped", fc_dtype_name(dt));
            continue;
        }
        dequant_fn deq = (dequant_fn)osym("dequantize_row_", fc_dtype_name(dt));
        /* 7 rows (serial) and, for a few formats, 300 rows of 256 columns
         * (threaded; ggml's IQ encoders are too slow to make that many). */
        int bigs = dt == FC_Q4_0 || dt == FC_Q4_K || dt == FC_Q6_K || dt == FC_IQ4_XS ? 2 : 1;
        for (int big = 0; big < bigs; big++) {
            int64_t rows = big ? 300 : 7, cols = big ? 256 : cols_for(dt, 3);
            if (cols % (int64_t)fc_dtype_block_elems(dt)) cols = cols_for(dt, 1);
            float *x = malloc((size_t)(rows * cols) * sizeof(float)), *ref = malloc((size_t)(rows * cols) * sizeof(float));
            fill(x, rows * cols, 0.7);
            unsigned char *w = grid_format(dt) ? random_blocks(dt, rows, cols) : ggml_blocks(dt, x, rows, cols);
            deq(w, ref, rows * cols);
            fc_scope s = fc_scope_begin(ctx);
            fc_tensor *t = fc_wrap(ctx, dt, FC_SHAPE({"out", rows}, {"in", cols}), w,
                                   (size_t)(rows * row_bytes(dt, cols)), NULL, NULL);
            cr_assert(t, "%s", fc_ctx_error(ctx));
            fc_tensor *y = fc_dequantize(ctx, t), *y2 = fc_cast(ctx, t, FC_F32);
            cr_assert(y && y2, "%s", fc_ctx_error(ctx));
            char b1[96], b2[96];
            cr_expect_str_eq(fc_tensor_describe(y, b1, sizeof b1),
                             (snprintf(b2, sizeof b2, "f32[out=%lld, in=%lld]", (long long)rows, (long long)cols), b2));
            int64_t at = 0;
            cr_expect(same_bits(fc_tensor_data(y), ref, rows * cols, &at), "%s (%lld x %lld): element %lld: %a vs ggml %a",
                      fc_dtype_name(dt), (long long)rows, (long long)cols, (long long)at,
                      (double)((float *)fc_tensor_data(y))[at], (double)ref[at]);
            cr_expect(same_bits(fc_tensor_data(y2), ref, rows * cols, &at), "%s: fc_cast differs", fc_dtype_name(dt));
            fc_scope_end(ctx, s);
            free(w);
            free(x);
            free(ref);
        }
        done++;
    }
    cr_expect(done >= 20, "only %d formats checked", done);
}

/* ---- quantize ------------------------------------------------------------------------- */

Test(qtensor, quantize_matches_ggml_ref)
{
    need_oracle();
    int done = 0;
    for (int i = FC_DTYPE_PLAIN_COUNT; i < FC_DTYPE_COUNT; i++) {
        fc_dtype dt = (fc_dtype)i;
        const fcq_traits *tr = fcq_traits_of((uint32_t)fc_dtype_ggml_type(dt));
        int64_t rows = 9, cols = cols_for(dt, 2);
        fc_scope s = fc_scope_begin(ctx);
        fc_tensor *x = fc_empty(ctx, FC_F32, FC_SHAPE({"r", rows}, {"c", cols}));
        fill(fc_tensor_data(x), rows * cols, 1.3);
        if (!tr->encode) {
            EXPECT_FAILS(fc_quantize(ctx, x, dt), FC_ERR_UNSUPPORTED, "has no reference encoder");
            fc_scope_end(ctx, s);
            continue;
        }
        char nm[48];
        snprintf(nm, sizeof nm, "%s_ref", fc_dtype_name(dt));
        quant_ref_fn ref = (quant_ref_fn)osym("quantize_row_", nm);
        fc_tensor *q = fc_quantize(ctx, x, dt);
        cr_assert(q, "%s: %s", fc_dtype_name(dt), fc_ctx_error(ctx));
        cr_expect_eq(fc_tensor_dtype(q), dt);
        cr_expect_eq(fc_tensor_nbytes(q), (size_t)(rows * row_bytes(dt, cols)));
        if (!ref) {
            cr_log_info("%s: the oracle has no quantize_row_%s, bytes unchecked", fc_dtype_name(dt), nm);
            fc_scope_end(ctx, s);
            continue;
        }
        size_t nb = (size_t)(rows * row_bytes(dt, cols));
        unsigned char *want = malloc(nb);
        for (int64_t r = 0; r < rows; r++)
            ref((const float *)fc_tensor_data(x) + r * cols, want + r * row_bytes(dt, cols), cols);
        cr_expect(!memcmp(fc_tensor_data(q), want, nb), "%s: fc_quantize bytes differ from quantize_row_%s",
                  fc_dtype_name(dt), nm);
        /* a strided x (a transposed copy transposed back) gives the same bytes */
        fc_tensor *xt = fc_contiguous(ctx, fc_transpose(ctx, x, "r", "c"));
        fc_tensor *xv = fc_transpose(ctx, xt, "c", "r");
        cr_assert(xv && !fc_tensor_is_contiguous(xv));
        fc_tensor *q2 = fc_quantize(ctx, xv, dt);
        cr_assert(q2, "%s", fc_ctx_error(ctx));
        cr_expect(!memcmp(fc_tensor_data(q2), want, nb), "%s: strided input differs", fc_dtype_name(dt));
        free(want);
        fc_scope_end(ctx, s);
        done++;
    }
    cr_log_info("fc_quantize checked byte for byte on %d formats", done);
    cr_expect(done >= 5, "only %d formats have encoders", done);
}

/* ---- get_rows ------------------------------------------------------------------------- */

Test(qtensor, get_rows_equals_rows_of_dequantize)
{
    need_oracle();
    const fc_dtype dts[] = {FC_Q4_0, FC_Q8_0, FC_Q4_K, FC_Q6_K, FC_IQ4_XS};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        fc_dtype dt = dts[d];
        int64_t rows = 50, cols = 512;
        float *x = malloc((size_t)(rows * cols) * sizeof(float));
        fill(x, rows * cols, 1.0);
        unsigned char *w = ggml_blocks(dt, x, rows, cols);
        fc_scope s = fc_scope_begin(ctx);
        fc_tensor *t = fc_from_data(ctx, dt, FC_SHAPE({"vocab", rows}, {"d", cols}), w,
                                    (size_t)(rows * row_bytes(dt, cols)));
        cr_assert(t, "%s", fc_ctx_error(ctx));
        fc_tensor *full = fc_dequantize(ctx, t);
        int32_t idv[6] = {3, 49, 0, 3, 17, 48};
        fc_tensor *ids = fc_from_data(ctx, FC_I32, FC_SHAPE({"b", 2}, {"s", 3}), idv, sizeof idv);
        fc_tensor *y = fc_get_rows(ctx, t, ids);
        cr_assert(y, "%s", fc_ctx_error(ctx));
        char buf[96];
        cr_expect_str_eq(fc_tensor_describe(y, buf, sizeof buf), "f32[b=2, s=3, d=512]");
        for (int i = 0; i < 6; i++) {
            int64_t at;
            cr_expect(same_bits((const float *)fc_tensor_data(y) + i * cols,
                                (const float *)fc_tensor_data(full) + idv[i] * cols, cols, &at),
                      "%s: row %d (table row %d) differs at %lld", fc_dtype_name(dt), i, idv[i], (long long)at);
        }
        /* a rank-3 table: a "row" is 2 rows of the blocked axis */
        fc_tensor *t3 = fc_from_data(ctx, dt, FC_SHAPE({"e", 25}, {"h", 2}, {"d", cols}), w,
                                     (size_t)(rows * row_bytes(dt, cols)));
        int64_t id3[2] = {24, 7};
        fc_tensor *ids3 = fc_from_data(ctx, FC_I64, FC_SHAPE({"k", 2}), id3, sizeof id3);
        fc_tensor *y3 = fc_get_rows(ctx, t3, ids3);
        cr_assert(y3, "%s", fc_ctx_error(ctx));
        for (int i = 0; i < 2; i++) {
            int64_t at;
            cr_expect(same_bits((const float *)fc_tensor_data(y3) + i * 2 * cols,
                                (const float *)fc_tensor_data(full) + id3[i] * 2 * cols, 2 * cols, &at),
                      "%s: rank-3 row %d differs", fc_dtype_name(dt), i);
        }
        int32_t badv[1] = {50};
        fc_tensor *bad = fc_from_data(ctx, FC_I32, FC_SHAPE({"k", 1}), badv, sizeof badv);
        EXPECT_FAILS(fc_get_rows(ctx, t, bad), FC_ERR_INVALID_ARG, "50");
        fc_tensor *t1 = fc_from_data(ctx, dt, FC_SHAPE({"d", cols}), w, (size_t)row_bytes(dt, cols));
        EXPECT_FAILS(fc_get_rows(ctx, t1, bad), FC_ERR_SHAPE, "rank >= 2");
        fc_scope_end(ctx, s);
        free(w);
        free(x);
    }
}

/* ---- contractions --------------------------------------------------------------------- */

/* |y - sum_k x_k w_k| for the quantized product. Each activation row is
 * quantized to the partner format in blocks of B (32 or 256) with scale
 * d = amax(block)/127 stored as f16 (q8_0, q8_1) or f32 (q8_K): each element
 * moves by at most d/2 + 127 d 2^-11 < 0.6 d. The rest is f32 summation of
 * K products, generously (K + 2) * 2^-23 * 4 * sum |x_k w_k|. */
static double linear_bound(const float *x, const float *w, int64_t k, int64_t pblock)
{
    double q8 = 0, mag = 0;
    for (int64_t b0 = 0; b0 < k; b0 += pblock) {
        double amax = 0;
        for (int64_t i = b0; i < b0 + pblock; i++) amax = fmax(amax, fabs(x[i]));
        for (int64_t i = b0; i < b0 + pblock; i++) q8 += 0.6 * amax / 127.0 * fabs(w[i]);
    }
    for (int64_t i = 0; i < k; i++) mag += fabs((double)x[i] * w[i]);
    return q8 + (double)(k + 2) * 0x1p-23 * 4 * mag + 1e-30;
}

static double f32_bound(const float *x, const float *w, int64_t k, int64_t ws)
{
    double mag = 0;
    for (int64_t i = 0; i < k; i++) mag += fabs((double)x[i] * w[i * ws]);
    return (double)(k + 2) * 0x1p-23 * 4 * mag + 1e-30;
}

Test(qtensor, linear_dot_matmul_with_block_weights)
{
    need_oracle();
    const fc_dtype dts[] = {FC_Q4_0, FC_Q8_0, FC_Q4_K, FC_Q6_K, FC_Q5_1, FC_IQ4_NL, FC_IQ4_XS, FC_IQ2_XS};
    const int64_t ms[] = {1, 5, 64};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        fc_dtype dt = dts[d];
        if (!oracle_has(dt)) continue;
        const fcq_traits *tr = fcq_traits_of((uint32_t)fc_dtype_ggml_type(dt));
        int64_t pblock = fcq_traits_of(tr->dot_partner)->block_elems;
        int64_t n = 37, k = dt == FC_Q4_0 || dt == FC_Q8_0 || dt == FC_Q5_1 || dt == FC_IQ4_NL ? 96 : 512;
        float *wx = malloc((size_t)(n * k) * sizeof(float)), *wd = malloc((size_t)(n * k) * sizeof(float));
        fill(wx, n * k, 0.05);
        unsigned char *wb = grid_format(dt) ? random_blocks(dt, n, k) : ggml_blocks(dt, wx, n, k);
        ((dequant_fn)osym("dequantize_row_", fc_dtype_name(dt)))(wb, wd, n * k);
        double worst = 0;
        for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
            int64_t m = ms[mi];
            fc_scope s = fc_scope_begin(ctx);
            fc_tensor *w = fc_from_data(ctx, dt, FC_SHAPE({"out", n}, {"in", k}), wb, (size_t)(n * row_bytes(dt, k)));
            fc_tensor *x = fc_empty(ctx, FC_F32, FC_SHAPE({"batch", m}, {"in", k}));
            cr_assert(w && x, "%s", fc_ctx_error(ctx));
            const float *xp = fc_tensor_data(x);
            fill((float *)fc_tensor_data(x), m * k, 1.0);
            fc_tensor *y = fc_linear(ctx, x, w, NULL);
            cr_assert(y, "%s: %s", fc_dtype_name(dt), fc_ctx_error(ctx));
            char buf[96], want[96];
            snprintf(want, sizeof want, "f32[batch=%lld, out=%lld]", (long long)m, (long long)n);
            cr_expect_str_eq(fc_tensor_describe(y, buf, sizeof buf), want);
            const float *yp = fc_tensor_data(y);
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++) {
                    double ref = 0;
                    for (int64_t q = 0; q < k; q++) ref += (double)xp[i * k + q] * wd[j * k + q];
                    double bound = linear_bound(xp + i * k, wd + j * k, k, pblock), err = fabs(yp[i * n + j] - ref);
                    worst = fmax(worst, err / bound);
                    cr_expect(err <= bound, "%s M=%lld: y[%lld,%lld] = %.9g, f32 ref %.9g, |err| %.3g > bound %.3g",
                              fc_dtype_name(dt), (long long)m, (long long)i, (long long)j, yp[i * n + j], ref, err, bound);
                }
            /* fc_dot over "in" is the same product, bit for bit */
            fc_tensor *y2 = fc_dot(ctx, x, w, "in");
            cr_assert(y2, "%s", fc_ctx_error(ctx));
            cr_expect(!memcmp(fc_tensor_data(y2), yp, (size_t)(m * n) * 4), "%s: fc_dot differs from fc_linear",
                      fc_dtype_name(dt));
            /* a bias adds after */
            fc_tensor *bias = fc_full(ctx, FC_F32, FC_SHAPE({"out", n}), 0.5);
            fc_tensor *y3 = fc_linear(ctx, x, w, bias);
            cr_assert(y3, "%s", fc_ctx_error(ctx));
            cr_expect_eq(((float *)fc_tensor_data(y3))[0], yp[0] + 0.5f);
            /* fc_matmul(x[m, out], w[out, in]) contracts the block rows: decoded, f32 accuracy */
            fc_tensor *xo = fc_empty(ctx, FC_F32, FC_SHAPE({"batch", m}, {"out", n}));
            fill((float *)fc_tensor_data(xo), m * n, 1.0);
            fc_tensor *z = fc_matmul(ctx, xo, w);
            cr_assert(z, "%s: %s", fc_dtype_name(dt), fc_ctx_error(ctx));
            snprintf(want, sizeof want, "f32[batch=%lld, in=%lld]", (long long)m, (long long)k);
            cr_expect_str_eq(fc_tensor_describe(z, buf, sizeof buf), want);
            const float *zp = fc_tensor_data(z), *xop = fc_tensor_data(xo);
            for (int64_t i = 0; i < m; i++)
                for (int64_t q = 0; q < k; q++) {
                    double ref = 0;
                    for (int64_t j = 0; j < n; j++) ref += (double)xop[i * n + j] * wd[j * k + q];
                    double bound = f32_bound(xop + i * n, wd + q, n, k);
                    cr_expect(fabs(zp[i * k + q] - ref) <= bound, "%s matmul M=%lld [%lld,%lld]: %.9g vs %.9g",
                              fc_dtype_name(dt), (long long)m, (long long)i, (long long)q, zp[i * k + q], ref);
                }
            fc_scope_end(ctx, s);
        }
        cr_log_info("%s (%s): worst error %.3f of the bound", fc_dtype_name(dt), tr->name, worst);
        free(wx);
        free(wd);
        free(wb);
    }
}

Test(qtensor, contraction_layouts_that_decode)
{
    /* einsum with a block operand on the left, or a batch axis: decoded whole,
     * equal to the same einsum on fc_dequantize's result. */
    fc_scope s = fc_scope_begin(ctx);
    fc_tensor *wf = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"out", 6}, {"in", 64}), 7, 0, 1);
    fc_tensor *w = fc_quantize(ctx, wf, FC_Q8_0);
    if (!w) {
        fc_scope_end(ctx, s);
        cr_skip_test("q8_0 has no encoder yet: %s", fc_ctx_error(ctx));
    }
    fc_tensor *wd = fc_dequantize(ctx, w);
    fc_tensor *x = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"t", 3}, {"in", 64}), 8, 0, 1);
    fc_tensor *a = fc_einsum(ctx, w, x, FC_AXES("t", "out"));
    fc_tensor *b = fc_einsum(ctx, wd, x, FC_AXES("t", "out"));
    cr_assert(a && b, "%s", fc_ctx_error(ctx));
    cr_expect(!memcmp(fc_tensor_data(a), fc_tensor_data(b), fc_tensor_nbytes(b)), "block left operand differs");
    fc_tensor *xo = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"out", 6}, {"in", 64}), 9, 0, 1);
    fc_tensor *c = fc_einsum(ctx, xo, w, FC_AXES("out")); /* batch axis "out" */
    fc_tensor *e = fc_einsum(ctx, xo, wd, FC_AXES("out"));
    cr_assert(c && e, "%s", fc_ctx_error(ctx));
    cr_expect(!memcmp(fc_tensor_data(c), fc_tensor_data(e), fc_tensor_nbytes(e)), "batch layout differs");
    EXPECT_FAILS(fc_einsum(ctx, w, w, FC_AXES("out")), FC_ERR_DTYPE, "both operands are block-quantized");
    fc_scope_end(ctx, s);
}

/* ---- autograd ------------------------------------------------------------------------- */

Test(qtensor, linear_gives_x_its_gradient)
{
    fc_scope s = fc_scope_begin(ctx);
    fc_tensor *wf = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"out", 24}, {"in", 256}), 3, 0, 0.1);
    fc_tensor *w = fc_quantize(ctx, wf, FC_Q4_K);
    if (!w) {
        fc_scope_end(ctx, s);
        cr_skip_test("q4_K has no encoder yet: %s", fc_ctx_error(ctx));
    }
    fc_ctx_clear_error(ctx);
    cr_expect_eq(fc_requires_grad(ctx, w, 1), FC_ERR_DTYPE);
    cr_expect(strstr(fc_ctx_error(ctx), "q4_K"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    cr_expect(!fc_tensor_requires_grad(w));
    fc_tensor *wd = fc_dequantize(ctx, w);
    fc_tensor *seed = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"b", 5}, {"out", 24}), 4, 0, 1);
    fc_tensor *dx[2];
    for (int v = 0; v < 2; v++) {
        fc_tensor *x = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"b", 5}, {"in", 256}), 5, 0, 1);
        cr_assert_eq(fc_requires_grad(ctx, x, 1), FC_OK, "%s", fc_ctx_error(ctx));
        fc_tensor *y = fc_linear(ctx, x, v ? wd : w, NULL);
        cr_assert(y && fc_tensor_requires_grad(y), "%s", fc_ctx_error(ctx));
        cr_assert_eq(fc_backward_with(ctx, y, seed), FC_OK, "%s", fc_ctx_error(ctx));
        dx[v] = fc_grad(ctx, x);
        cr_assert(dx[v], "%s", fc_ctx_error(ctx));
    }
    cr_expect(fc_grad(ctx, w) == NULL, "a block weight got a gradient");
    fc_ctx_clear_error(ctx);
    char b1[96], b2[96];
    cr_expect_str_eq(fc_tensor_describe(dx[0], b1, sizeof b1), fc_tensor_describe(dx[1], b2, sizeof b2));
    /* dx = dy · w: the block path decodes w (one slab at this size) and runs
     * the same f32 GEMM as the dequantized weight, so the bits agree. */
    int64_t at = 0;
    cr_expect(same_bits(fc_tensor_data(dx[0]), fc_tensor_data(dx[1]), 5 * 256, &at),
              "dx differs at %lld: %a vs %a", (long long)at, (double)((float *)fc_tensor_data(dx[0]))[at],
              (double)((float *)fc_tensor_data(dx[1]))[at]);
    fc_scope_end(ctx, s);
}

/* ---- GGUF ----------------------------------------------------------------------------- */

Test(qtensor, gguf_round_trip_zero_copy)
{
    need_oracle();
    struct { const char *name; fc_dtype dt; int64_t rows, cols; } spec[] = {
        {"blk.0.ffn_up.weight", FC_Q4_0, 8, 64}, {"blk.0.attn_v.weight", FC_Q8_0, 3, 32},
        {"blk.0.ffn_down.weight", FC_Q4_K, 4, 512}, {"output_norm.weight", FC_F32, 1, 40},
    };
    enum { NT = sizeof spec / sizeof spec[0] };
    unsigned char *bytes[NT];
    size_t nb[NT];
    fc_tensor *orig[NT];
    fc_gguf_writer *w = fc_gguf_writer_new(ctx);
    cr_assert(w);
    cr_assert_eq(fc_gguf_set_str(w, "general.architecture", "llama"), FC_OK);
    for (int i = 0; i < NT; i++) {
        int64_t n = spec[i].rows * spec[i].cols;
        float *x = malloc((size_t)n * sizeof(float));
        fill(x, n, 0.5);
        if (spec[i].dt == FC_F32) {
            bytes[i] = (unsigned char *)x;
            nb[i] = (size_t)n * 4;
        } else {
            bytes[i] = ggml_blocks(spec[i].dt, x, spec[i].rows, spec[i].cols);
            nb[i] = (size_t)(spec[i].rows * row_bytes(spec[i].dt, spec[i].cols));
            free(x);
        }
        orig[i] = spec[i].rows > 1 ? fc_from_data(ctx, spec[i].dt, FC_SHAPE({"r", spec[i].rows}, {"c", spec[i].cols}), bytes[i], nb[i])
                                   : fc_from_data(ctx, spec[i].dt, FC_SHAPE({"c", spec[i].cols}), bytes[i], nb[i]);
        cr_assert(orig[i], "%s", fc_ctx_error(ctx));
        cr_assert_eq(fc_gguf_writer_add_tensor(w, spec[i].name, orig[i]), FC_OK, "%s", fc_ctx_error(ctx));
    }
    cr_assert_eq(fc_gguf_writer_save(w, fct_path(dir, "a.gguf")), FC_OK, "%s", fc_ctx_error(ctx));
    fc_gguf_writer_free(w);

    for (int mode = 0; mode < 2; mode++) {
        fc_gguf *g = fc_gguf_open(ctx, fct_path(dir, "a.gguf"), mode ? FC_GGUF_READ : 0);
        cr_assert(g, "%s", fc_ctx_error(ctx));
        fc_tensor *got[NT];
        fc_gguf_writer *w2 = fc_gguf_writer_new(ctx);
        cr_assert_eq(fc_gguf_set_str(w2, "general.architecture", "llama"), FC_OK);
        for (int i = 0; i < NT; i++) {
            fc_gguf_tensor_info ti;
            cr_assert(fc_gguf_tensor_info_at(g, fc_gguf_find_tensor(g, spec[i].name), &ti));
            cr_expect_eq(ti.type, (uint32_t)fc_dtype_ggml_type(spec[i].dt), "%s type", spec[i].name);
            got[i] = fc_gguf_tensor(g, spec[i].name);
            cr_assert(got[i], "%s: %s", spec[i].name, fc_ctx_error(ctx));
            cr_expect_eq(fc_tensor_dtype(got[i]), spec[i].dt);
            cr_expect_eq(fc_tensor_data(got[i]), ti.data, "%s: not zero-copy", spec[i].name);
            cr_expect_eq(fc_tensor_nbytes(got[i]), nb[i]);
            cr_expect(!memcmp(fc_tensor_data(got[i]), bytes[i], nb[i]), "%s: bytes differ", spec[i].name);
            cr_assert_eq(fc_gguf_writer_add_tensor(w2, spec[i].name, got[i]), FC_OK, "%s", fc_ctx_error(ctx));
        }
        fc_gguf_close(g); /* the tensors outlive the handle */
        for (int i = 0; i < NT; i++) {
            fc_tensor *a = fc_dequantize(ctx, got[i]), *b = fc_dequantize(ctx, orig[i]);
            cr_assert(a && b, "%s", fc_ctx_error(ctx));
            cr_expect(!memcmp(fc_tensor_data(a), fc_tensor_data(b), fc_tensor_nbytes(b)), "%s: values differ",
                      spec[i].name);
            fc_release(a);
            fc_release(b);
        }
        /* re-emitted from the read tensors: the same file, byte for byte */
        cr_assert_eq(fc_gguf_writer_save(w2, fct_path(dir, "b.gguf")), FC_OK, "%s", fc_ctx_error(ctx));
        fc_gguf_writer_free(w2);
        size_t n1, n2;
        unsigned char *f1 = fct_read_file(fct_path(dir, "a.gguf"), &n1), *f2 = fct_read_file(fct_path(dir, "b.gguf"), &n2);
        cr_expect(n1 == n2 && !memcmp(f1, f2, n1), "re-emitted file differs (%zu vs %zu bytes)", n1, n2);
        free(f1);
        free(f2);
        for (int i = 0; i < NT; i++) fc_release(got[i]);
    }
    for (int i = 0; i < NT; i++) {
        fc_release(orig[i]);
        free(bytes[i]);
    }
    /* safetensors cannot hold block tensors: a clear refusal */
    unsigned char raw[34] = {0};
    fc_tensor *q = fc_from_data(ctx, FC_Q8_0, FC_SHAPE({"c", 32}), raw, 34);
    fc_named_tensor nt = {"q", q};
    fc_ctx_clear_error(ctx);
    cr_expect_eq(fc_safetensors_save(ctx, fct_path(dir, "q.st"), &nt, 1, NULL, 0), FC_ERR_DTYPE);
    cr_expect(strstr(fc_ctx_error(ctx), "q8_0, a block-quantized dtype"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    fc_tensor *f = fc_zeros(ctx, FC_F32, FC_SHAPE({"c", 32}));
    fc_named_tensor nf = {"q", f};
    cr_assert_eq(fc_safetensors_save(ctx, fct_path(dir, "f.st"), &nf, 1, NULL, 0), FC_OK, "%s", fc_ctx_error(ctx));
    cr_expect_eq(fc_safetensors_load_into(ctx, fct_path(dir, "f.st"), &nt, 1, 0), FC_ERR_DTYPE);
    cr_expect(strstr(fc_ctx_error(ctx), "q8_0, a block-quantized dtype"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    fc_release(f);
    fc_release(q);
}

/* ---- every other op refuses ----------------------------------------------------------- */

#define REFUSED(opname, expr)                                                                                \
    do {                                                                                                     \
        fc_ctx_clear_error(ctx);                                                                             \
        const void *r_ = (const void *)(expr);                                                               \
        cr_expect_null(r_, "%s accepted a block tensor", opname);                                           \
        cr_expect_eq(fc_ctx_status(ctx), FC_ERR_DTYPE, "%s: status %s (%s)", opname,                         \
                     fc_status_name(fc_ctx_status(ctx)), fc_ctx_error(ctx));                                 \
        cr_expect(strstr(fc_ctx_error(ctx), opname) && strstr(fc_ctx_error(ctx), "q4_0"),                    \
                  "%s: the message does not name the op and the dtype: %s", opname, fc_ctx_error(ctx));      \
        n_checked++;                                                                                         \
    } while (0)
#define REFUSED_ST(opname, expr) REFUSED(opname, (uintptr_t)((expr) == FC_OK))

Test(qtensor, every_other_op_refuses_block_tensors)
{
    unsigned char raw[4 * 2 * 18];
    memset(raw, 0, sizeof raw);
    fc_scope s = fc_scope_begin(ctx);
    fc_tensor *q = fc_from_data(ctx, FC_Q4_0, FC_SHAPE({"r", 4}, {"c", 64}), raw, sizeof raw);
    fc_tensor *f = fc_zeros(ctx, FC_F32, FC_SHAPE({"r", 4}, {"c", 64}));
    fc_tensor *b = fc_zeros(ctx, FC_BOOL, FC_SHAPE({"r", 4}, {"c", 64}));
    fc_tensor *idx = fc_zeros(ctx, FC_I64, FC_SHAPE({"r", 4}, {"c", 64}));
    fc_tensor *i1 = fc_zeros(ctx, FC_I64, FC_SHAPE({"k", 2}));
    fc_tensor *pos = fc_zeros(ctx, FC_I32, FC_SHAPE({"r", 4}));
    cr_assert(q && f && b && idx && i1 && pos, "%s", fc_ctx_error(ctx));
    int n_checked = 0;
    for (int op = 0; op < FC_UNARY_COUNT; op++) {
        char nm[32];
        snprintf(nm, sizeof nm, "fc_%s", fc_unary_name((fc_unary_op)op));
        REFUSED(nm, fc_unary(ctx, (fc_unary_op)op, q));
    }
    REFUSED("fc_add", fc_add(ctx, q, q));
    REFUSED("fc_add", fc_add(ctx, f, q));
    REFUSED("fc_sub", fc_sub(ctx, q, f));
    REFUSED("fc_mul", fc_mul(ctx, q, q));
    REFUSED("fc_div", fc_div(ctx, q, q));
    REFUSED("fc_maximum", fc_maximum(ctx, q, q));
    REFUSED("fc_minimum", fc_minimum(ctx, q, q));
    REFUSED("fc_add", fc_add_scalar(ctx, q, 1));
    REFUSED("fc_mul", fc_mul_scalar(ctx, q, 2));
    REFUSED("fc_sub", fc_scalar_binary(ctx, FC_SUB, 1, q));
    REFUSED("fc_swiglu", fc_swiglu(ctx, q, q));
    REFUSED("fc_geglu", fc_geglu(ctx, q, f));
    REFUSED_ST("fc_axpy_", fc_axpy_(ctx, f, 1, q));
    REFUSED_ST("fc_axpy_", fc_axpy_(ctx, q, 1, f));
    REFUSED("fc_compare", fc_compare(ctx, FC_LT, q, q));
    REFUSED("fc_compare", fc_compare_scalar(ctx, FC_LT, q, 0));
    REFUSED("fc_where", fc_where(ctx, b, q, q));
    REFUSED("fc_masked_fill", fc_masked_fill(ctx, q, b, 0));
    REFUSED("fc_clamp", fc_clamp(ctx, q, 0, 1));
    REFUSED("fc_cast", fc_cast(ctx, q, FC_F16));
    REFUSED("fc_cast", fc_cast(ctx, q, FC_Q8_0));
    REFUSED("fc_sum", fc_sum(ctx, q, FC_NO_AXES));
    REFUSED("fc_mean", fc_mean(ctx, q, FC_AXES("c")));
    REFUSED("fc_max", fc_max(ctx, q, FC_AXES("c")));
    REFUSED("fc_min", fc_min(ctx, q, FC_AXES("c")));
    REFUSED("fc_var", fc_var(ctx, q, FC_AXES("c"), 0));
    REFUSED("fc_norm", fc_norm(ctx, q, FC_AXES("c")));
    REFUSED("fc_logsumexp", fc_logsumexp(ctx, q, FC_AXES("c")));
    REFUSED("fc_argmax", fc_argmax(ctx, q, "c"));
    REFUSED("fc_argmin", fc_argmin(ctx, q, "c"));
    REFUSED("fc_cumsum", fc_cumsum(ctx, q, "c"));
    REFUSED("fc_softmax", fc_softmax(ctx, q, "c", NULL));
    REFUSED("fc_log_softmax", fc_log_softmax(ctx, q, "c"));
    REFUSED("fc_rmsnorm", fc_rmsnorm(ctx, q, NULL, "c", 1e-6));
    REFUSED("fc_rmsnorm", fc_rmsnorm(ctx, f, q, "c", 1e-6));
    REFUSED("fc_rmsnorm_residual", fc_rmsnorm_residual(ctx, q, f, NULL, "c", 1e-6, NULL));
    REFUSED("fc_layernorm", fc_layernorm(ctx, q, NULL, NULL, "c", 1e-6));
    REFUSED("fc_rope", fc_rope(ctx, q, pos, NULL));
    REFUSED("fc_attention", fc_attention(ctx, q, q, q, NULL));
    REFUSED("fc_attention", fc_attention(ctx, f, q, f, NULL));
    REFUSED("fc_dropout", fc_dropout(ctx, q, 0.5, 1));
    REFUSED("fc_concat", fc_concat(ctx, (fc_tensor *[]){q, q}, 2, "r"));
    REFUSED("fc_stack", fc_stack(ctx, (fc_tensor *[]){q, q}, 2, "s", 0));
    fc_tensor *parts[2];
    REFUSED_ST("fc_split", fc_split(ctx, q, "r", (int64_t[]){2, 2}, 2, parts));
    REFUSED("fc_pad", fc_pad(ctx, q, "r", 1, 1, 0));
    REFUSED("fc_repeat", fc_repeat(ctx, q, "r", 2));
    REFUSED("fc_flip", fc_flip(ctx, q, "r"));
    REFUSED("fc_index_select", fc_index_select(ctx, q, "r", i1));
    REFUSED("fc_gather", fc_gather(ctx, q, "c", idx));
    REFUSED("fc_scatter_add", fc_scatter_add(ctx, q, "c", idx, f));
    REFUSED("fc_scatter_add", fc_scatter_add(ctx, f, "c", idx, q));
    REFUSED_ST("fc_set_slice", fc_set_slice(ctx, q, "r", 0, f));
    REFUSED_ST("fc_set_slice", fc_set_slice(ctx, f, "r", 0, q));
    fc_tensor *tv, *ti;
    REFUSED_ST("fc_topk", fc_topk(ctx, q, "c", 2, 1, &tv, &ti));
    REFUSED("fc_argsort", fc_argsort(ctx, q, "c", 0));
    REFUSED("fc_cross_entropy", fc_cross_entropy(ctx, q, pos, "c", NULL));
    REFUSED("fc_mse", fc_mse(ctx, q, f, FC_REDUCE_MEAN));
    REFUSED("fc_mse", fc_mse(ctx, f, q, FC_REDUCE_MEAN));
    REFUSED("fc_conv1d", fc_conv1d(ctx, q, f, NULL, NULL));
    REFUSED("fc_conv_transpose1d", fc_conv_transpose1d(ctx, q, f, NULL, NULL));
    /* views and writes: a block tensor has no element layout to view */
    REFUSED("fc_narrow", fc_narrow(ctx, q, "r", 0, 2));
    REFUSED("fc_select", fc_select(ctx, q, "r", 1));
    REFUSED("fc_permute", fc_permute(ctx, q, FC_AXES("c", "r")));
    REFUSED("fc_transpose", fc_transpose(ctx, q, "r", "c"));
    REFUSED("fc_broadcast_to", fc_broadcast_to(ctx, q, FC_SHAPE({"b", 2}, {"r", 4}, {"c", 64})));
    REFUSED("fc_reshape", fc_reshape(ctx, q, FC_SHAPE({"x", 256})));
    REFUSED("fc_as_strided", fc_as_strided(ctx, q, FC_SHAPE({"c", 64}), (int64_t[]){1}, 0));
    REFUSED("fc_contiguous", fc_contiguous(ctx, q));
    REFUSED("fc_clone", fc_clone(ctx, q));
    REFUSED("fc_split_axis", fc_split_axis(ctx, q, "r", FC_SHAPE({"a", 2}, {"b", 2})));
    REFUSED("fc_merge_axes", fc_merge_axes(ctx, q, FC_AXES("r", "c"), "x"));
    REFUSED("fc_unsqueeze", fc_unsqueeze(ctx, q, "u", 0));
    fc_tensor *q1 = fc_from_data(ctx, FC_Q4_0, FC_SHAPE({"u", 1}, {"c", 64}), raw, 36);
    REFUSED("fc_squeeze", fc_squeeze(ctx, q1, "u"));
    REFUSED_ST("fc_copy_into", fc_copy_into(ctx, q, f));
    REFUSED_ST("fc_copy_into", fc_copy_into(ctx, f, q));
    REFUSED_ST("fc_fill", fc_fill(ctx, q, 1));
    REFUSED_ST("fc_requires_grad", fc_requires_grad(ctx, q, 1));
    fc_ctx_clear_error(ctx);
    fc_tensor *qd = fc_detach(ctx, q); /* a constant already: detaching is a new handle */
    cr_expect(qd && fc_tensor_data(qd) == fc_tensor_data(q) && fc_tensor_dtype(qd) == FC_Q4_0, "%s", fc_ctx_error(ctx));
    cr_expect(isnan(fc_tensor_item(q)) && isnan(fc_tensor_get(q, (int64_t[]){0, 0})), "element reads are NaN");
    /* nothing was written through the refusals */
    for (size_t i = 0; i < sizeof raw; i++) cr_assert_eq(((unsigned char *)fc_tensor_data(q))[i], 0);
    cr_log_info("%d refusals checked", n_checked);
    fc_ctx_clear_error(ctx);
    fc_scope_end(ctx, s);
}
