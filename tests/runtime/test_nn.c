/* SPDX-License-Identifier: MIT */
/* The neural-network ops of include/fucina/nn.h: softmax / log_softmax,
 * rmsnorm (plain and fused residual), layernorm, RoPE and attention.
 *
 *   - goldens from PyTorch in float64 (tests/goldens/gen_nn_goldens.py);
 *   - strided, permuted and broadcast inputs give the bits of contiguous copies;
 *   - f16/bf16 give the bits of cast up -> f32 op -> round once;
 *   - 1 and 2 threads give identical bits;
 *   - every error path returns NULL with a message naming the op and the axis;
 *   - no tensor handle leaks (tensors_live returns to its starting value). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fucina/ctx.h"
#include "fucina/status.h"
#include "fucina/tensor.h"
#include "fucina/nn.h"

/* ---- helpers --------------------------------------------------------------- */

static fc_ctx *mkctx(int threads)
{
    char err[256];
    fc_ctx_options o = {.threads = threads};
    fc_ctx *ctx = fc_ctx_new(&o, err, sizeof err);
    cr_assert(ctx, "fc_ctx_new: %s", err);
    return ctx;
}

static void done(fc_ctx *ctx, uint64_t live0)
{
    cr_expect_eq(fc_ctx_status(ctx), FC_OK, "unexpected error: %s", fc_ctx_error(ctx));
    cr_expect_eq(fc_ctx_pool_stats(ctx).tensors_live, live0, "leaked %lld tensor handles",
                 (long long)(fc_ctx_pool_stats(ctx).tensors_live - live0));
    fc_ctx_free(ctx);
}

#define LIVE(ctx) (fc_ctx_pool_stats(ctx).tensors_live)

/* n floats of tests/goldens/nn_<name>.f32 (the file must hold exactly n). */
static float *golden(const char *name, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/nn_%s.f32", FC_GOLDEN_DIR, name);
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    float *buf = malloc(n * sizeof(float) + 1);
    size_t got = fread(buf, 1, n * sizeof(float) + 1, f);
    fclose(f);
    cr_assert_eq(got, n * sizeof(float), "%s: %zu bytes, expected %zu", path, got, n * sizeof(float));
    return buf;
}

static fc_tensor *mk(fc_ctx *ctx, const fc_dim *dims, int rank, const float *data)
{
    size_t n = 1;
    for (int i = 0; i < rank; i++) n *= (size_t)dims[i].size;
    fc_tensor *t = fc_from_data(ctx, FC_F32, dims, rank, data, n * sizeof(float));
    cr_assert(t, "fc_from_data: %s", fc_ctx_error(ctx));
    return t;
}

/* A contiguous copy of t in dtype dt (same names and order). */
static fc_tensor *cast(fc_ctx *ctx, fc_tensor *t, fc_dtype dt)
{
    fc_dim dims[FC_MAX_RANK];
    for (int i = 0; i < fc_tensor_rank(t); i++) dims[i] = (fc_dim){fc_tensor_axis(t, i), fc_tensor_dim(t, i)};
    fc_tensor *c = fc_empty(ctx, dt, dims, fc_tensor_rank(t));
    cr_assert(c);
    cr_assert_eq(fc_copy_into(ctx, c, t), FC_OK, "%s", fc_ctx_error(ctx));
    return c;
}

/* The f32 values of t in row-major order of t's axes (malloc'd). */
static float *values(fc_ctx *ctx, fc_tensor *t)
{
    cr_assert(t, "NULL result: %s", fc_ctx_error(ctx));
    fc_tensor *c = cast(ctx, t, FC_F32);
    size_t n = (size_t)fc_tensor_numel(c);
    float *out = malloc(n * sizeof(float));
    cr_assert_eq(fc_tensor_read(ctx, c, out, n * sizeof(float)), FC_OK);
    fc_release(c);
    return out;
}

static void expect_close(const char *what, const float *got, const float *want, size_t n, double atol, double rtol)
{
    int bad = 0;
    for (size_t i = 0; i < n && bad < 5; i++) {
        double g = got[i], w = want[i];
        int ok = (isnan(g) && isnan(w)) || g == w || fabs(g - w) <= atol + rtol * fabs(w);
        if (!ok) {
            cr_expect(0, "%s: element %zu is %.9g, want %.9g", what, i, g, w);
            bad++;
        }
    }
}

static void expect_golden(fc_ctx *ctx, const char *what, fc_tensor *t, const float *want, double atol, double rtol)
{
    float *g = values(ctx, t);
    expect_close(what, g, want, (size_t)fc_tensor_numel(t), atol, rtol);
    free(g);
}

/* a and b hold the same bits for the same named element (b's axes in any order). */
static void expect_same_bits(fc_ctx *ctx, const char *what, fc_tensor *a, fc_tensor *b)
{
    cr_assert(a && b, "%s: NULL result: %s", what, fc_ctx_error(ctx));
    cr_assert_eq(fc_tensor_dtype(a), fc_tensor_dtype(b), "%s: dtypes differ", what);
    cr_assert_eq(fc_tensor_numel(a), fc_tensor_numel(b), "%s: sizes differ", what);
    fc_tensor *bb = cast(ctx, a, fc_tensor_dtype(a));
    cr_assert_eq(fc_copy_into(ctx, bb, b), FC_OK, "%s: %s", what, fc_ctx_error(ctx));
    size_t nb = fc_tensor_nbytes(a);
    unsigned char *x = malloc(nb), *y = malloc(nb);
    cr_assert_eq(fc_tensor_read(ctx, a, x, nb), FC_OK);
    cr_assert_eq(fc_tensor_read(ctx, bb, y, nb), FC_OK);
    size_t es = fc_dtype_size(fc_tensor_dtype(a));
    for (size_t i = 0; i < nb; i += es)
        if (memcmp(x + i, y + i, es)) {
            cr_expect(0, "%s: element %zu differs", what, i / es);
            break;
        }
    free(x);
    free(y);
    fc_release(bb);
}

/* The context holds an error of status st whose message names op and axis. */
static void expect_error(fc_ctx *ctx, fc_tensor *r, fc_status st, const char *op, const char *axis)
{
    cr_expect_null(r, "%s: expected NULL", op);
    if (r) fc_release(r);
    const char *msg = fc_ctx_error(ctx);
    cr_expect_eq(fc_ctx_status(ctx), st, "%s: status %s, want %s (%s)", op, fc_status_name(fc_ctx_status(ctx)),
                 fc_status_name(st), msg);
    cr_expect(strstr(msg, op) != NULL, "message does not name %s: %s", op, msg);
    cr_expect(strstr(msg, axis) != NULL, "message does not name axis %s: %s", axis, msg);
    fc_ctx_clear_error(ctx);
}

#define SM_DIMS FC_SHAPE({"head", 3}, {"seq", 5}, {"kv_seq", 7})

/* ---- goldens ------------------------------------------------------------- */

Test(nn_golden, softmax)
{
    fc_ctx *ctx = mkctx(1);
    uint64_t live0 = LIVE(ctx);
    float *g = golden("softmax_scale", 2 * 105);
    fc_tensor *x = mk(ctx, SM_DIMS, g);
    fc_tensor *y = fc_softmax(ctx, x, "kv_seq", &(fc_softmax_options){.scale = 0.5});
    expect_golden(ctx, "softmax scale", y, g + 105, 1e-6, 1e-5);
    fc_release(y);
    fc_release(x);
    free(g);

    g = golden("softmax_mask", 105 + 35 + 105);
    x = mk(ctx, SM_DIMS, g);
    fc_tensor *m = mk(ctx, FC_SHAPE({"seq", 5}, {"kv_seq", 7}), g + 105);
    y = fc_softmax(ctx, x, "kv_seq", &(fc_softmax_options){.mask = m});
    expect_golden(ctx, "softmax mask (row 3 fully masked: zeros)", y, g + 140, 1e-6, 1e-5);
    fc_release(y);
    fc_release(m);
    fc_release(x);
    free(g);

    g = golden("softmax_causal", 2 * 105);
    x = mk(ctx, SM_DIMS, g);
    y = fc_softmax(ctx, x, "kv_seq", &(fc_softmax_options){.causal = 1, .q_offset = 2});
    expect_golden(ctx, "softmax causal", y, g + 105, 1e-6, 1e-5);
    fc_release(y);
    fc_release(x);
    free(g);

    g = golden("softmax_sinks", 105 + 3 + 105);
    x = mk(ctx, SM_DIMS, g);
    fc_tensor *s = mk(ctx, FC_SHAPE({"head", 3}), g + 105);
    y = fc_softmax(ctx, x, "kv_seq", &(fc_softmax_options){.sinks = s});
    expect_golden(ctx, "softmax sinks", y, g + 108, 1e-6, 1e-5);
    fc_release(y);
    fc_release(s);
    fc_release(x);
    free(g);

    g = golden("softmax_axis0", 2 * 24);
    x = mk(ctx, FC_SHAPE({"seq", 6}, {"d", 4}), g);
    y = fc_softmax(ctx, x, "seq", NULL);
    expect_golden(ctx, "softmax along axis 0", y, g + 24, 1e-6, 1e-5);
    fc_release(y);
    fc_release(x);
    free(g);

    g = golden("log_softmax", 2 * 36);
    x = mk(ctx, FC_SHAPE({"r", 4}, {"c", 9}), g);
    y = fc_log_softmax(ctx, x, "c");
    expect_golden(ctx, "log_softmax", y, g + 36, 3e-6, 1e-6);
    fc_release(y);
    fc_release(x);
    free(g);
    done(ctx, live0);
}

Test(nn_golden, softmax_causal_query_axis_rows)
{
    /* Causal with the softmax along the query axis: masked where k > q + 2. */
    fc_ctx *ctx = mkctx(1);
    uint64_t live0 = LIVE(ctx);
    float *g = golden("softmax_causal", 2 * 105);
    fc_tensor *x = mk(ctx, SM_DIMS, g);
    fc_tensor *y = fc_softmax(ctx, x, "seq", &(fc_softmax_options){.causal = 1, .key_axis = "kv_seq", .q_offset = 2});
    float *got = values(ctx, y);
    for (int h = 0; h < 3; h++)
        for (int k = 0; k < 7; k++) {
            double z[5], mx = -INFINITY, sum = 0;
            for (int q = 0; q < 5; q++) {
                z[q] = k > q + 2 ? -INFINITY : g[(h * 5 + q) * 7 + k];
                if (z[q] > mx) mx = z[q];
            }
            for (int q = 0; q < 5; q++) sum += mx == -INFINITY ? 0 : exp(z[q] - mx);
            for (int q = 0; q < 5; q++) {
                double want = mx == -INFINITY ? 0 : exp(z[q] - mx) / sum;
                cr_expect(fabs(got[(h * 5 + q) * 7 + k] - want) <= 1e-6, "h %d q %d k %d: %g want %g", h, q, k,
                          got[(h * 5 + q) * 7 + k], want);
            }
        }
    free(got);
    fc_release(y);
    fc_release(x);
    free(g);
    done(ctx, live0);
}

Test(nn_golden, norms)
{
    fc_ctx *ctx = mkctx(1);
    uint64_t live0 = LIVE(ctx);
    float *g = golden("rmsnorm", 64 + 16 + 64);
    fc_tensor *x = mk(ctx, FC_SHAPE({"seq", 4}, {"d", 16}), g);
    fc_tensor *w = mk(ctx, FC_SHAPE({"d", 16}), g + 64);
    fc_tensor *y = fc_rmsnorm(ctx, x, w, "d", 1e-6);
    expect_golden(ctx, "rmsnorm", y, g + 80, 1e-6, 2e-6);
    fc_release(y);
    fc_release(w);
    fc_release(x);
    free(g);

    g = golden("layernorm", 64 + 16 + 16 + 64);
    x = mk(ctx, FC_SHAPE({"seq", 4}, {"d", 16}), g);
    w = mk(ctx, FC_SHAPE({"d", 16}), g + 64);
    fc_tensor *b = mk(ctx, FC_SHAPE({"d", 16}), g + 80);
    y = fc_layernorm(ctx, x, w, b, "d", 1e-5);
    expect_golden(ctx, "layernorm", y, g + 96, 2e-6, 2e-6);
    fc_release(y);
    fc_release(b);
    fc_release(w);
    fc_release(x);
    free(g);
    done(ctx, live0);
}

/* The tables of the last call are reused only for the same parameters and
 * positions: a sequence of calls that changes one input at a time, each
 * against NeoX rotation computed here in double. */
Test(nn, rope_reuses_tables_only_for_the_same_input)
{
    fc_ctx *ctx = mkctx(1);
    uint64_t live0 = LIVE(ctx);
    float xv[2 * 8];
    for (int i = 0; i < 16; i++) xv[i] = (float)(0.25 * (i % 7) - 0.6);
    fc_tensor *x = mk(ctx, FC_SHAPE({"seq", 1}, {"head", 2}, {"d", 8}), xv);
    static const struct { int32_t pos; double theta, attn; int f64; } calls[] = {
        {3, 10000, 0, 0}, {5, 10000, 0, 0}, {3, 500000, 0, 0}, {3, 10000, 0, 0},
        {3, 10000, 2, 0}, {3, 10000, 0, 1}, {3, 10000, 0, 0}, {7, 10000, 0, 0}};
    for (size_t c = 0; c < sizeof calls / sizeof *calls; c++) {
        fc_tensor *pos = fc_from_data(ctx, FC_I32, FC_SHAPE({"seq", 1}), &calls[c].pos, sizeof calls[c].pos);
        fc_rope_options o = {.style = FC_ROPE_STYLE_NEOX, .theta = calls[c].theta, .attn_factor = calls[c].attn,
                             .f64_angles = calls[c].f64};
        fc_tensor *y = fc_rope(ctx, x, pos, &o);
        float want[16];
        const double m = calls[c].attn != 0 ? calls[c].attn : 1.0;
        for (int h = 0; h < 2; h++)
            for (int i = 0; i < 4; i++) {
                const double a = calls[c].pos * pow(calls[c].theta, -2.0 * i / 8.0);
                const double x0 = xv[h * 8 + i], x1 = xv[h * 8 + i + 4];
                want[h * 8 + i] = (float)(m * (x0 * cos(a) - x1 * sin(a)));
                want[h * 8 + i + 4] = (float)(m * (x0 * sin(a) + x1 * cos(a)));
            }
        char what[64];
        snprintf(what, sizeof what, "rope call %zu", c);
        expect_golden(ctx, what, y, want, 1e-5, 1e-5);
        fc_release(y);
        fc_release(pos);
    }
    fc_release(x);
    done(ctx, live0);
}

Test(nn_golden, rope)
{
    fc_ctx *ctx = mkctx(1);
    uint64_t live0 = LIVE(ctx);
    static const char *cases[] = {"rope_neox", "rope_normal", "rope_neox_partial"};
    static const fc_rope_style styles[] = {FC_ROPE_STYLE_NEOX, FC_ROPE_STYLE_NORMAL, FC_ROPE_STYLE_NEOX};
    static const int64_t n_rot[] = {0, 0, 4};
    for (int c = 0; c < 3; c++) {
        float *g = golden(cases[c], 80 + 5 + 80);
        fc_tensor *x = mk(ctx, FC_SHAPE({"seq", 5}, {"head", 2}, {"d", 8}), g);
        int64_t p64[5];
        int32_t p32[5];
        for (int i = 0; i < 5; i++) p32[i] = (int32_t)(p64[i] = (int64_t)g[80 + i]);
        fc_tensor *pos = fc_from_data(ctx, FC_I64, FC_SHAPE({"seq", 5}), p64, sizeof p64);
        fc_tensor *pos32 = fc_from_data(ctx, FC_I32, FC_SHAPE({"seq", 5}), p32, sizeof p32);
        for (int f64 = 0; f64 < 2; f64++) {
            fc_rope_options o = {.style = styles[c], .n_rot = n_rot[c], .f64_angles = f64};
            fc_tensor *y = fc_rope(ctx, x, pos, &o);
            expect_golden(ctx, cases[c], y, g + 85, f64 ? 1e-6 : 1e-5, 1e-6);
            fc_tensor *y32 = fc_rope(ctx, x, pos32, &o);
            expect_same_bits(ctx, "rope i32 positions", y, y32);
            /* backward undoes forward */
            o.backward = 1;
            fc_tensor *back = fc_rope(ctx, y, pos, &o);
            expect_golden(ctx, "rope backward(forward(x))", back, g, 1e-5, 1e-5);
            fc_release(back);
            fc_release(y32);
            fc_release(y);
        }
        fc_release(pos32);
        fc_release(pos);
        fc_release(x);
        free(g);
    }
    done(ctx, live0);
}

#define Q_DIMS FC_SHAPE({"seq", 5}, {"head", 4}, {"d", 8})
#define KV_DIMS FC_SHAPE({"kv_seq", 7}, {"kv_head", 2}, {"d", 8})

Test(nn_golden, attention)
{
    fc_ctx *ctx = mkctx(1);
    uint64_t live0 = LIVE(ctx);
    float *g = golden("attn_causal", 160 + 112 + 112 + 160);
    fc_tensor *q = mk(ctx, Q_DIMS, g), *k = mk(ctx, KV_DIMS, g + 160), *v = mk(ctx, KV_DIMS, g + 272);
    fc_tensor *o = fc_attention(ctx, q, k, v, &(fc_attention_options){.causal = 1, .q_pos0 = 2});
    expect_golden(ctx, "attention causal (GQA)", o, g + 384, 2e-6, 1e-5);
    fc_release(o);
    fc_release(v);
    fc_release(k);
    fc_release(q);
    free(g);

    g = golden("attn_mask", 160 + 112 + 112 + 35 + 160);
    q = mk(ctx, Q_DIMS, g), k = mk(ctx, KV_DIMS, g + 160), v = mk(ctx, KV_DIMS, g + 272);
    fc_tensor *m = mk(ctx, FC_SHAPE({"seq", 5}, {"kv_seq", 7}), g + 384);
    o = fc_attention(ctx, q, k, v, &(fc_attention_options){.mask = m});
    expect_golden(ctx, "attention mask", o, g + 419, 2e-6, 1e-5);
    fc_release(o);
    fc_release(m);
    fc_release(v);
    fc_release(k);
    fc_release(q);
    free(g);

    g = golden("attn_sinks", 160 + 112 + 112 + 4 + 160);
    q = mk(ctx, Q_DIMS, g), k = mk(ctx, KV_DIMS, g + 160), v = mk(ctx, KV_DIMS, g + 272);
    fc_tensor *s = mk(ctx, FC_SHAPE({"head", 4}), g + 384);
    o = fc_attention(ctx, q, k, v, &(fc_attention_options){.causal = 1, .q_pos0 = 2, .sinks = s});
    expect_golden(ctx, "attention sinks", o, g + 388, 2e-6, 1e-5);
    fc_release(o);
    fc_release(s);
    fc_release(v);
    fc_release(k);
    fc_release(q);
    free(g);
    done(ctx, live0);
}

/* ---- layouts: strided / permuted / broadcast == contiguous ------------------ */

Test(nn_layout, softmax_and_norms)
{
    fc_ctx *ctx = mkctx(1);
    uint64_t live0 = LIVE(ctx);
    fc_scope sc = fc_scope_begin(ctx);
    /* storage [kv_seq, seq, head], viewed as [head, seq, kv_seq] */
    fc_tensor *raw = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"kv_seq", 7}, {"seq", 5}, {"head", 3}), 11, 0, 2);
    fc_tensor *xv = fc_permute(ctx, raw, FC_AXES("head", "seq", "kv_seq"));
    fc_tensor *xc = fc_clone(ctx, xv);
    fc_tensor *m = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"kv_seq", 7}, {"seq", 5}), 12, 0, 1);
    fc_tensor *s = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"seq", 5}), 13, 0, 1);
    const char *axes[] = {"kv_seq", "seq", "head"};
    for (int a = 0; a < 3; a++) {
        fc_softmax_options o = {.scale = 0.7, .mask = m, .causal = a == 0, .q_offset = 1};
        if (a != 1) o.sinks = s;
        expect_same_bits(ctx, "softmax view", fc_softmax(ctx, xc, axes[a], &o), fc_softmax(ctx, xv, axes[a], &o));
        expect_same_bits(ctx, "log_softmax view", fc_log_softmax(ctx, xc, axes[a]), fc_log_softmax(ctx, xv, axes[a]));
        expect_same_bits(ctx, "rmsnorm view", fc_rmsnorm(ctx, xc, NULL, axes[a], 1e-5),
                         fc_rmsnorm(ctx, xv, NULL, axes[a], 1e-5));
        expect_same_bits(ctx, "layernorm view", fc_layernorm(ctx, xc, NULL, NULL, axes[a], 1e-5),
                         fc_layernorm(ctx, xv, NULL, NULL, axes[a], 1e-5));
    }
    /* a contiguous mask equals a materialized broadcast one */
    fc_tensor *mb = fc_clone(ctx, fc_broadcast_to(ctx, m, FC_SHAPE({"head", 3}, {"seq", 5}, {"kv_seq", 7})));
    expect_same_bits(ctx, "softmax broadcast mask",
                     fc_softmax(ctx, xc, "kv_seq", &(fc_softmax_options){.mask = m}),
                     fc_softmax(ctx, xc, "kv_seq", &(fc_softmax_options){.mask = mb}));
    /* a broadcast (stride 0) input equals its materialized copy */
    fc_tensor *xb = fc_broadcast_to(ctx, m, FC_SHAPE({"head", 3}, {"seq", 5}, {"kv_seq", 7}));
    expect_same_bits(ctx, "softmax broadcast x", fc_softmax(ctx, mb, "kv_seq", NULL),
                     fc_softmax(ctx, xb, "kv_seq", NULL));
    expect_same_bits(ctx, "rmsnorm broadcast x", fc_rmsnorm(ctx, mb, NULL, "seq", 1e-6),
                     fc_rmsnorm(ctx, xb, NULL, "seq", 1e-6));
    /* weights: strided view == contiguous; f32 weight for an f16 x works */
    fc_tensor *wraw = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"kv_seq", 14}), 14, 1, 0.1);
    fc_tensor *wv = fc_as_strided(ctx, wraw, FC_SHAPE({"kv_seq", 7}), (const int64_t[]){2}, 0);
    fc_tensor *wc = fc_clone(ctx, wv);
    expect_same_bits(ctx, "rmsnorm strided weight", fc_rmsnorm(ctx, xv, wc, "kv_seq", 1e-6),
                     fc_rmsnorm(ctx, xv, wv, "kv_seq", 1e-6));
    expect_same_bits(ctx, "layernorm strided weight", fc_layernorm(ctx, xv, wc, wc, "kv_seq", 1e-6),
                     fc_layernorm(ctx, xv, wv, wv, "kv_seq", 1e-6));
    fc_scope_end(ctx, sc);
    done(ctx, live0);
}

Test(nn_layout, rmsnorm_residual)
{
    fc_ctx *ctx = mkctx(1);
    uint64_t live0 = LIVE(ctx);
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *x = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"seq", 6}, {"d", 32}), 21, 0, 1);
    fc_tensor *rraw = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"d", 32}, {"seq", 6}), 22, 0, 1);
    fc_tensor *r = fc_transpose(ctx, rraw, "d", "seq"); /* [seq, d], strided */
    fc_tensor *w = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"d", 32}), 23, 1, 0.1);
    for (int dt = 0; dt < 3; dt++) {
        fc_dtype t = dt == 0 ? FC_F32 : dt == 1 ? FC_F16 : FC_BF16;
        fc_tensor *xt = cast(ctx, x, t), *rt = cast(ctx, r, t);
        fc_tensor *rtv = fc_transpose(ctx, cast(ctx, rraw, t), "d", "seq"); /* strided residual */
        fc_tensor *sum = NULL;
        fc_tensor *y = fc_rmsnorm_residual(ctx, xt, rtv, w, "d", 1e-6, &sum);
        cr_assert(y && sum, "%s", fc_ctx_error(ctx));
        /* s = x + r, rounded once */
        float *xs = values(ctx, xt), *rs = values(ctx, rt);
        float buf[192];
        for (int i = 0; i < 192; i++) buf[i] = xs[i] + rs[i];
        fc_tensor *want_s = fc_from_data(ctx, FC_F32, FC_SHAPE({"seq", 6}, {"d", 32}), buf, sizeof buf);
        expect_same_bits(ctx, "residual sum", sum, cast(ctx, want_s, t));
        expect_same_bits(ctx, "residual y == rmsnorm(s)", y, fc_rmsnorm(ctx, sum, w, "d", 1e-6));
        free(xs);
        free(rs);
    }
    fc_scope_end(ctx, sc);
    done(ctx, live0);
}

Test(nn_layout, rope)
{
    fc_ctx *ctx = mkctx(1);
    uint64_t live0 = LIVE(ctx);
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *pos = fc_arange(ctx, FC_I64, "seq", 6);
    /* storage [head, seq, d] viewed as [seq, head, d] */
    fc_tensor *raw = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"head", 3}, {"seq", 6}, {"d", 16}), 31, 0, 1);
    fc_tensor *xv = fc_permute(ctx, raw, FC_AXES("seq", "head", "d"));
    fc_tensor *xc = fc_clone(ctx, xv);
    for (int st = 0; st < 2; st++) {
        fc_rope_options o = {.style = st ? FC_ROPE_STYLE_NEOX : FC_ROPE_STYLE_NORMAL, .n_rot = 12, .theta = 500000,
                             .freq_scale = 0.5};
        fc_tensor *want = fc_rope(ctx, xc, pos, &o);
        expect_same_bits(ctx, "rope strided", want, fc_rope(ctx, xv, pos, &o));
        /* the dim axis first (not contiguous: copy path) */
        fc_tensor *xd = fc_permute(ctx, xc, FC_AXES("d", "seq", "head"));
        expect_same_bits(ctx, "rope d first", want, fc_rope(ctx, xd, pos, &o));
        /* no head axis, custom names */
        fc_tensor *x1 = fc_rename(ctx, fc_select(ctx, xc, "head", 1), "seq", "tok");
        fc_tensor *p1 = fc_rename(ctx, pos, "seq", "tok");
        fc_rope_options o1 = o;
        o1.token_axis = "tok";
        expect_same_bits(ctx, "rope one head", fc_select(ctx, want, "head", 1), fc_rename(ctx, fc_rope(ctx, x1, p1, &o1), "tok", "seq"));
        /* batch axis: each batch index rotated alike */
        fc_tensor *xb = fc_broadcast_to(ctx, xc, FC_SHAPE({"b", 2}, {"seq", 6}, {"head", 3}, {"d", 16}));
        fc_tensor *yb = fc_rope(ctx, xb, pos, &o);
        expect_same_bits(ctx, "rope batch 0", want, fc_select(ctx, yb, "b", 0));
        expect_same_bits(ctx, "rope batch 1", want, fc_select(ctx, yb, "b", 1));
    }
    /* YaRN runs and differs from plain */
    fc_tensor *yy = fc_rope(ctx, xc, pos, &(fc_rope_options){.ext_factor = 1, .n_ctx_orig = 4096, .freq_scale = 0.25});
    cr_assert(yy, "%s", fc_ctx_error(ctx));
    fc_scope_end(ctx, sc);
    done(ctx, live0);
}

Test(nn_layout, attention)
{
    fc_ctx *ctx = mkctx(1);
    uint64_t live0 = LIVE(ctx);
    fc_scope sc = fc_scope_begin(ctx);
    /* q: [seq, head, d] narrowed out of a wider d (strided rows) */
    fc_tensor *qraw = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"seq", 9}, {"head", 4}, {"d", 24}), 41, 0, 1);
    fc_tensor *qv = fc_narrow(ctx, qraw, "d", 4, 16);
    fc_tensor *qc = fc_clone(ctx, qv);
    /* k, v stored [kv_head, kv_seq, d] */
    fc_tensor *kraw = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"kv_head", 2}, {"kv_seq", 11}, {"d", 16}), 42, 0, 1);
    fc_tensor *vraw = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"kv_head", 2}, {"kv_seq", 11}, {"d", 16}), 43, 0, 1);
    fc_tensor *kv = fc_permute(ctx, kraw, FC_AXES("kv_seq", "kv_head", "d"));
    fc_tensor *vv = fc_permute(ctx, vraw, FC_AXES("kv_seq", "kv_head", "d"));
    fc_tensor *kc = fc_clone(ctx, kv), *vc = fc_clone(ctx, vv);
    fc_attention_options o = {.causal = 1, .q_pos0 = 2, .window = 6};
    fc_tensor *want = fc_attention(ctx, qc, kc, vc, &o);
    expect_same_bits(ctx, "attention strided", want, fc_attention(ctx, qv, kv, vv, &o));
    /* d not innermost: copy path */
    fc_tensor *qd = fc_permute(ctx, qc, FC_AXES("d", "head", "seq"));
    fc_tensor *kd = fc_permute(ctx, kc, FC_AXES("d", "kv_seq", "kv_head"));
    expect_same_bits(ctx, "attention d first", want, fc_attention(ctx, qd, kd, vc, &o));
    /* GQA == explicit repeat_interleave of kv heads */
    fc_tensor *krep = fc_merge_axes(ctx, fc_broadcast_to(ctx, fc_unsqueeze(ctx, kc, "r", 2),
                                                         FC_SHAPE({"kv_seq", 11}, {"kv_head", 2}, {"r", 2}, {"d", 16})),
                                    FC_AXES("kv_head", "r"), "kv_head");
    fc_tensor *vrep = fc_merge_axes(ctx, fc_broadcast_to(ctx, fc_unsqueeze(ctx, vc, "r", 2),
                                                         FC_SHAPE({"kv_seq", 11}, {"kv_head", 2}, {"r", 2}, {"d", 16})),
                                    FC_AXES("kv_head", "r"), "kv_head");
    cr_assert(krep && vrep, "%s", fc_ctx_error(ctx));
    float *a = values(ctx, want), *b = values(ctx, fc_attention(ctx, qc, krep, vrep, &o));
    expect_close("GQA vs repeated heads", a, b, 9 * 4 * 16, 1e-6, 1e-6);
    free(a);
    free(b);
    /* window + causal == an explicit -inf mask */
    float mbuf[9 * 11];
    for (int t = 0; t < 9; t++)
        for (int s = 0; s < 11; s++) mbuf[t * 11 + s] = (s <= t + 2 && (t + 2) - s < 6) ? 0.0f : -INFINITY;
    fc_tensor *m = fc_from_data(ctx, FC_F32, FC_SHAPE({"seq", 9}, {"kv_seq", 11}), mbuf, sizeof mbuf);
    a = values(ctx, want);
    b = values(ctx, fc_attention(ctx, qc, kc, vc, &(fc_attention_options){.mask = m}));
    expect_close("window vs mask", a, b, 9 * 4 * 16, 1e-6, 1e-6);
    free(a);
    free(b);
    /* a transposed mask (kv_seq not contiguous) is materialized */
    fc_tensor *mt = fc_transpose(ctx, fc_clone(ctx, fc_permute(ctx, m, FC_AXES("kv_seq", "seq"))), "kv_seq", "seq");
    expect_same_bits(ctx, "attention transposed mask", fc_attention(ctx, qc, kc, vc, &(fc_attention_options){.mask = m}),
                     fc_attention(ctx, qc, kc, vc, &(fc_attention_options){.mask = mt}));
    /* f16 k/v == f32 k/v holding the same (widened) values */
    fc_tensor *k16 = cast(ctx, kc, FC_F16), *v16 = cast(ctx, vc, FC_F16);
    a = values(ctx, fc_attention(ctx, qc, k16, v16, &o));
    b = values(ctx, fc_attention(ctx, qc, cast(ctx, k16, FC_F32), cast(ctx, v16, FC_F32), &o));
    expect_close("f16 kv", a, b, 9 * 4 * 16, 1e-6, 1e-6);
    free(a);
    free(b);
    /* batch axis: broadcast k/v, batched q */
    fc_tensor *qb = fc_broadcast_to(ctx, qc, FC_SHAPE({"b", 2}, {"seq", 9}, {"head", 4}, {"d", 16}));
    fc_tensor *ob = fc_attention(ctx, qb, kc, vc, &o);
    expect_same_bits(ctx, "attention batch 1", want, fc_select(ctx, ob, "b", 1));
    fc_scope_end(ctx, sc);
    done(ctx, live0);
}

/* ---- f16 / bf16: cast up, op in f32, round once ------------------------- */

Test(nn_dtype, half_equals_f32_rounded)
{
    fc_ctx *ctx = mkctx(1);
    uint64_t live0 = LIVE(ctx);
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *x32 = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"head", 3}, {"seq", 6}, {"d", 40}), 51, 0, 2);
    fc_tensor *m = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"seq", 6}, {"d", 40}), 52, 0, 1);
    fc_tensor *s = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"head", 3}), 53, 0, 1);
    fc_tensor *pos = fc_arange(ctx, FC_I32, "seq", 6);
    fc_dtype dts[2] = {FC_F16, FC_BF16};
    for (int i = 0; i < 2; i++) {
        fc_dtype t = dts[i];
        fc_tensor *x = cast(ctx, x32, t);
        fc_tensor *xu = cast(ctx, x, FC_F32);
        fc_tensor *w = fc_rand_normal(ctx, t, FC_SHAPE({"d", 40}), 54, 1, 0.2);
        fc_tensor *wu = cast(ctx, w, FC_F32);
        fc_softmax_options so = {.scale = 0.3, .mask = m, .sinks = s, .causal = 1, .query_axis = "seq",
                                 .key_axis = "d", .q_offset = 20};
        const char *ax[2] = {"d", "seq"};
        for (int a = 0; a < 2; a++) {
            if (a == 1) so.causal = 0;
            if (a == 1) so.sinks = NULL;
            expect_same_bits(ctx, "softmax half", fc_softmax(ctx, x, ax[a], &so),
                             cast(ctx, fc_softmax(ctx, xu, ax[a], &so), t));
            expect_same_bits(ctx, "log_softmax half", fc_log_softmax(ctx, x, ax[a]),
                             cast(ctx, fc_log_softmax(ctx, xu, ax[a]), t));
        }
        expect_same_bits(ctx, "rmsnorm half", fc_rmsnorm(ctx, x, w, "d", 1e-6),
                         cast(ctx, fc_rmsnorm(ctx, xu, wu, "d", 1e-6), t));
        expect_same_bits(ctx, "rmsnorm half f32 weight", fc_rmsnorm(ctx, x, wu, "d", 1e-6),
                         cast(ctx, fc_rmsnorm(ctx, xu, wu, "d", 1e-6), t));
        expect_same_bits(ctx, "layernorm half", fc_layernorm(ctx, x, w, w, "d", 1e-5),
                         cast(ctx, fc_layernorm(ctx, xu, wu, wu, "d", 1e-5), t));
        fc_tensor *xr = fc_rename(ctx, x, "head", "h2");
        fc_tensor *xru = fc_rename(ctx, xu, "head", "h2");
        fc_rope_options ro = {.style = FC_ROPE_STYLE_NEOX, .head_axis = "h2"};
        expect_same_bits(ctx, "rope half", fc_rope(ctx, xr, pos, &ro), cast(ctx, fc_rope(ctx, xru, pos, &ro), t));
    }
    fc_scope_end(ctx, sc);
    done(ctx, live0);
}

/* ---- 1 vs 2 threads -------------------------------------------------------- */

typedef struct outs { fc_tensor *t[12]; int n; } outs;

static void run_all(fc_ctx *ctx, outs *o)
{
    fc_tensor *x = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"head", 8}, {"seq", 64}, {"kv_seq", 160}), 61, 0, 2);
    fc_tensor *m = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"seq", 64}, {"kv_seq", 160}), 62, 0, 1);
    fc_tensor *s = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"head", 8}), 63, 0, 1);
    fc_tensor *w = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"kv_seq", 160}), 64, 1, 0.1);
    fc_tensor *xh = cast(ctx, x, FC_BF16);
    o->n = 0;
    o->t[o->n++] = fc_softmax(ctx, x, "kv_seq", &(fc_softmax_options){.mask = m, .sinks = s, .causal = 1, .q_offset = 60});
    o->t[o->n++] = fc_softmax(ctx, x, "seq", NULL);
    o->t[o->n++] = fc_softmax(ctx, xh, "kv_seq", NULL);
    o->t[o->n++] = fc_log_softmax(ctx, x, "head");
    o->t[o->n++] = fc_rmsnorm(ctx, x, w, "kv_seq", 1e-6);
    o->t[o->n++] = fc_layernorm(ctx, xh, NULL, NULL, "seq", 1e-5);
    fc_tensor *sum = NULL;
    o->t[o->n++] = fc_rmsnorm_residual(ctx, x, x, w, "kv_seq", 1e-6, &sum);
    o->t[o->n++] = sum;
    fc_tensor *q = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"seq", 64}, {"head", 8}, {"d", 32}), 65, 0, 1);
    fc_tensor *k = fc_rand_normal(ctx, FC_F16, FC_SHAPE({"kv_seq", 96}, {"kv_head", 2}, {"d", 32}), 66, 0, 1);
    fc_tensor *v = fc_rand_normal(ctx, FC_F16, FC_SHAPE({"kv_seq", 96}, {"kv_head", 2}, {"d", 32}), 67, 0, 1);
    o->t[o->n++] = fc_attention(ctx, q, k, v, &(fc_attention_options){.causal = 1, .q_pos0 = 32, .sinks = s});
    o->t[o->n++] = fc_rope(ctx, q, fc_arange(ctx, FC_I64, "seq", 64), &(fc_rope_options){.style = FC_ROPE_STYLE_NEOX});
}

Test(nn_threads, one_vs_two)
{
    fc_ctx *c1 = mkctx(1), *c2 = mkctx(2);
    cr_assert_eq(fc_ctx_threads(c2), 2);
    uint64_t l1 = LIVE(c1), l2 = LIVE(c2);
    fc_scope s1 = fc_scope_begin(c1), s2 = fc_scope_begin(c2);
    outs a, b;
    run_all(c1, &a);
    run_all(c2, &b);
    cr_assert_eq(a.n, b.n);
    for (int i = 0; i < a.n; i++) {
        char what[32];
        snprintf(what, sizeof what, "op %d", i);
        cr_assert(a.t[i] && b.t[i], "%s: %s %s", what, fc_ctx_error(c1), fc_ctx_error(c2));
        size_t nb = fc_tensor_nbytes(a.t[i]);
        void *x = malloc(nb), *y = malloc(nb);
        fc_tensor_read(c1, a.t[i], x, nb);
        fc_tensor_read(c2, b.t[i], y, nb);
        cr_expect(memcmp(x, y, nb) == 0, "%s: 1 and 2 threads differ", what);
        free(x);
        free(y);
    }
    fc_scope_end(c1, s1);
    fc_scope_end(c2, s2);
    done(c1, l1);
    done(c2, l2);
}

/* ---- errors ----------------------------------------------------------------- */

Test(nn_errors, softmax_and_norms)
{
    fc_ctx *ctx = mkctx(1);
    uint64_t live0 = LIVE(ctx);
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *x = fc_rand_normal(ctx, FC_F32, SM_DIMS, 71, 0, 1);
    fc_tensor *xi = fc_zeros(ctx, FC_I32, SM_DIMS);
    fc_tensor *x64 = fc_zeros(ctx, FC_F64, SM_DIMS);
    fc_tensor *mbad = fc_zeros(ctx, FC_F32, FC_SHAPE({"seq", 4}, {"kv_seq", 7}));
    fc_tensor *mfoo = fc_zeros(ctx, FC_F32, FC_SHAPE({"foo", 2}));
    fc_tensor *m16 = fc_zeros(ctx, FC_F16, FC_SHAPE({"kv_seq", 7}));
    fc_tensor *sink_on_axis = fc_zeros(ctx, FC_F32, FC_SHAPE({"kv_seq", 7}));
    uint64_t live1 = LIVE(ctx);

    expect_error(ctx, fc_softmax(ctx, x, "nope", NULL), FC_ERR_AXIS, "fc_softmax", "nope");
    expect_error(ctx, fc_log_softmax(ctx, x, "nope"), FC_ERR_AXIS, "fc_log_softmax", "nope");
    expect_error(ctx, fc_softmax(ctx, xi, "kv_seq", NULL), FC_ERR_DTYPE, "fc_softmax", "kv_seq");
    expect_error(ctx, fc_softmax(ctx, x64, "kv_seq", NULL), FC_ERR_DTYPE, "fc_softmax", "kv_seq");
    expect_error(ctx, fc_softmax(ctx, x, "kv_seq", &(fc_softmax_options){.mask = mbad}), FC_ERR_SHAPE, "fc_softmax",
                 "seq");
    expect_error(ctx, fc_softmax(ctx, x, "kv_seq", &(fc_softmax_options){.mask = mfoo}), FC_ERR_AXIS, "fc_softmax",
                 "foo");
    expect_error(ctx, fc_softmax(ctx, x, "kv_seq", &(fc_softmax_options){.mask = m16}), FC_ERR_DTYPE, "fc_softmax",
                 "kv_seq");
    expect_error(ctx, fc_softmax(ctx, x, "kv_seq", &(fc_softmax_options){.sinks = sink_on_axis}), FC_ERR_AXIS,
                 "fc_softmax", "kv_seq");
    expect_error(ctx, fc_softmax(ctx, x, "kv_seq", &(fc_softmax_options){.scale = INFINITY}), FC_ERR_INVALID_ARG,
                 "fc_softmax", "kv_seq");
    expect_error(ctx, fc_softmax(ctx, x, "kv_seq", &(fc_softmax_options){.causal = 1, .query_axis = "q"}),
                 FC_ERR_AXIS, "fc_softmax", "q");
    expect_error(ctx, fc_softmax(ctx, x, "kv_seq", &(fc_softmax_options){.causal = 1, .query_axis = "kv_seq"}),
                 FC_ERR_INVALID_ARG, "fc_softmax", "kv_seq");

    fc_tensor *w = fc_zeros(ctx, FC_F32, FC_SHAPE({"kv_seq", 6}));
    fc_tensor *wname = fc_zeros(ctx, FC_F32, FC_SHAPE({"d", 7}));
    fc_tensor *wdt = fc_zeros(ctx, FC_F16, FC_SHAPE({"kv_seq", 7}));
    live1 = LIVE(ctx);
    expect_error(ctx, fc_rmsnorm(ctx, x, NULL, "nope", 1e-6), FC_ERR_AXIS, "fc_rmsnorm", "nope");
    expect_error(ctx, fc_rmsnorm(ctx, x, w, "kv_seq", 1e-6), FC_ERR_SHAPE, "fc_rmsnorm", "kv_seq");
    expect_error(ctx, fc_rmsnorm(ctx, x, wname, "kv_seq", 1e-6), FC_ERR_SHAPE, "fc_rmsnorm", "kv_seq");
    expect_error(ctx, fc_rmsnorm(ctx, x, wdt, "kv_seq", 1e-6), FC_ERR_DTYPE, "fc_rmsnorm", "kv_seq");
    expect_error(ctx, fc_rmsnorm(ctx, xi, NULL, "kv_seq", 1e-6), FC_ERR_DTYPE, "fc_rmsnorm", "kv_seq");
    expect_error(ctx, fc_rmsnorm(ctx, x, NULL, "kv_seq", -1), FC_ERR_INVALID_ARG, "fc_rmsnorm", "kv_seq");
    expect_error(ctx, fc_layernorm(ctx, x, NULL, w, "kv_seq", 1e-5), FC_ERR_SHAPE, "fc_layernorm", "kv_seq");
    expect_error(ctx, fc_layernorm(ctx, x, NULL, NULL, "nope", 1e-5), FC_ERR_AXIS, "fc_layernorm", "nope");
    fc_tensor *sum = (fc_tensor *)1;
    fc_tensor *r = fc_zeros(ctx, FC_F32, FC_SHAPE({"head", 3}, {"seq", 5}, {"kv_seq", 6}));
    fc_tensor *r16 = fc_zeros(ctx, FC_F16, SM_DIMS);
    live1 = LIVE(ctx);
    expect_error(ctx, fc_rmsnorm_residual(ctx, x, r, NULL, "kv_seq", 1e-6, &sum), FC_ERR_SHAPE,
                 "fc_rmsnorm_residual", "kv_seq");
    cr_expect_null(sum);
    expect_error(ctx, fc_rmsnorm_residual(ctx, x, r16, NULL, "kv_seq", 1e-6, &sum), FC_ERR_DTYPE,
                 "fc_rmsnorm_residual", "kv_seq");
    /* NULL operands: NULL, no error recorded */
    cr_expect_null(fc_softmax(ctx, NULL, "kv_seq", NULL));
    cr_expect_null(fc_rmsnorm(ctx, NULL, NULL, "d", 1e-6));
    cr_expect_eq(fc_ctx_status(ctx), FC_OK);
    cr_expect_eq(LIVE(ctx), live1, "error paths leaked handles");
    fc_scope_end(ctx, sc);
    done(ctx, live0);
}

Test(nn_errors, rope_and_attention)
{
    fc_ctx *ctx = mkctx(1);
    uint64_t live0 = LIVE(ctx);
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *x = fc_rand_normal(ctx, FC_F32, Q_DIMS, 81, 0, 1);
    fc_tensor *pos = fc_arange(ctx, FC_I64, "seq", 5);
    fc_tensor *pos4 = fc_arange(ctx, FC_I64, "seq", 4);
    fc_tensor *posf = fc_arange(ctx, FC_F32, "seq", 5);
    fc_tensor *posn = fc_arange(ctx, FC_I32, "tok", 5);
    fc_tensor *xi = fc_zeros(ctx, FC_I32, Q_DIMS);
    uint64_t live1 = LIVE(ctx);
    expect_error(ctx, fc_rope(ctx, x, pos, &(fc_rope_options){.token_axis = "tok"}), FC_ERR_AXIS, "fc_rope", "tok");
    expect_error(ctx, fc_rope(ctx, x, pos, &(fc_rope_options){.dim_axis = "dd"}), FC_ERR_AXIS, "fc_rope", "dd");
    expect_error(ctx, fc_rope(ctx, x, pos, &(fc_rope_options){.head_axis = "hh"}), FC_ERR_AXIS, "fc_rope", "hh");
    expect_error(ctx, fc_rope(ctx, x, pos4, NULL), FC_ERR_SHAPE, "fc_rope", "seq");
    expect_error(ctx, fc_rope(ctx, x, posn, NULL), FC_ERR_SHAPE, "fc_rope", "seq");
    expect_error(ctx, fc_rope(ctx, x, posf, NULL), FC_ERR_DTYPE, "fc_rope", "seq");
    expect_error(ctx, fc_rope(ctx, xi, pos, NULL), FC_ERR_DTYPE, "fc_rope", "seq");
    expect_error(ctx, fc_rope(ctx, x, pos, &(fc_rope_options){.n_rot = 3}), FC_ERR_INVALID_ARG, "fc_rope", "d");
    expect_error(ctx, fc_rope(ctx, x, pos, &(fc_rope_options){.n_rot = 10}), FC_ERR_INVALID_ARG, "fc_rope", "d");
    expect_error(ctx, fc_rope(ctx, x, pos, &(fc_rope_options){.style = (fc_rope_style)7}), FC_ERR_INVALID_ARG,
                 "fc_rope", "STYLE");
    expect_error(ctx, fc_rope(ctx, x, pos, &(fc_rope_options){.theta = -1}), FC_ERR_INVALID_ARG, "fc_rope", "d");
    expect_error(ctx, fc_rope(ctx, x, pos, &(fc_rope_options){.ext_factor = 1}), FC_ERR_INVALID_ARG, "fc_rope", "d");

    fc_tensor *k = fc_rand_normal(ctx, FC_F32, KV_DIMS, 82, 0, 1);
    fc_tensor *k3 = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"kv_seq", 7}, {"kv_head", 3}, {"d", 8}), 83, 0, 1);
    fc_tensor *kd = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"kv_seq", 7}, {"kv_head", 2}, {"d", 4}), 84, 0, 1);
    fc_tensor *v6 = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"kv_seq", 6}, {"kv_head", 2}, {"d", 8}), 85, 0, 1);
    fc_tensor *k16 = cast(ctx, k, FC_F16);
    fc_tensor *kx = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"kv_seq", 7}, {"kv_head", 2}, {"zz", 2}, {"d", 8}), 86, 0, 1);
    fc_tensor *mbad = fc_zeros(ctx, FC_F32, FC_SHAPE({"seq", 5}, {"kv_seq", 6}));
    fc_tensor *sbad = fc_zeros(ctx, FC_F32, FC_SHAPE({"head", 3}));
    live1 = LIVE(ctx);
    const char *op = "fc_attention";
    expect_error(ctx, fc_attention(ctx, x, k3, k3, NULL), FC_ERR_SHAPE, op, "kv_head");
    {
        const char *msg;
        fc_tensor *r = fc_attention(ctx, x, k3, k3, NULL);
        msg = fc_ctx_error(ctx);
        cr_expect(strstr(msg, "4") && strstr(msg, "3") && strstr(msg, "head"), "GQA message names both sizes: %s", msg);
        if (r) fc_release(r);
        fc_ctx_clear_error(ctx);
    }
    expect_error(ctx, fc_attention(ctx, x, kd, kd, NULL), FC_ERR_SHAPE, op, "d");
    expect_error(ctx, fc_attention(ctx, x, k, v6, NULL), FC_ERR_SHAPE, op, "kv_seq");
    expect_error(ctx, fc_attention(ctx, x, k16, k, NULL), FC_ERR_DTYPE, op, "kv_seq");
    expect_error(ctx, fc_attention(ctx, k16, k, k, NULL), FC_ERR_DTYPE, op, "kv_seq");
    expect_error(ctx, fc_attention(ctx, x, kx, kx, NULL), FC_ERR_AXIS, op, "zz");
    expect_error(ctx, fc_attention(ctx, x, k, k, &(fc_attention_options){.seq_axis = "tok"}), FC_ERR_AXIS, op, "tok");
    expect_error(ctx, fc_attention(ctx, x, k, k, &(fc_attention_options){.kv_seq_axis = "kv"}), FC_ERR_AXIS, op, "kv");
    expect_error(ctx, fc_attention(ctx, x, k, k, &(fc_attention_options){.mask = mbad}), FC_ERR_SHAPE, op, "kv_seq");
    expect_error(ctx, fc_attention(ctx, x, k, k, &(fc_attention_options){.sinks = sbad}), FC_ERR_SHAPE, op, "head");
    expect_error(ctx, fc_attention(ctx, x, k, k, &(fc_attention_options){.window = -1}), FC_ERR_INVALID_ARG, op,
                 "seq");
    expect_error(ctx, fc_attention(ctx, x, k, k, &(fc_attention_options){.softcap = -1}), FC_ERR_INVALID_ARG, op,
                 "seq");
    cr_expect_eq(LIVE(ctx), live1, "error paths leaked handles");
    fc_scope_end(ctx, sc);
    done(ctx, live0);
}
