/* SPDX-License-Identifier: MIT */
/* Gradients of the nn ops: softmax (scale, mask, causal on either axis,
 * sinks, fully masked rows), log_softmax, rmsnorm, the fused residual
 * rmsnorm (both outputs), layernorm, rope (interleaved, NeoX, partial,
 * linear scaling, YaRN, freq_factors, both angle modes, backward mode) and
 * attention (GQA, MQA, no head axes, batch axes k/v broadcast over, scale,
 * softcap, causal, window, mask, sinks, f16 K/V).
 *
 *   - PyTorch 1.13's float64 gradients of sum(out * wt)
 *     (tests/goldens/autograd_nn.txt from gen_autograd_nn_goldens.py);
 *   - central finite differences (fc_gradcheck) per op and option, with
 *     non-contiguous (permuted, narrowed) variables; the nn ops take f32,
 *     f16 and bf16 only, so the checks run in f32 and f16/bf16 gradients are
 *     compared with the f32 ones;
 *   - attention gradients bitwise identical on 1 and 2 threads;
 *   - errors (freq_factors requiring a gradient, a saved softmax output
 *     modified in place, rank overflow of the grouped-head recompute) with
 *     a clear message and no leak (the suite fixture counts live handles). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fucina/fucina.h"
#include "fct_golden.h"

static fc_ctx *ctx;
#define NAMES(...) ((const char *const[]){__VA_ARGS__})

static void setup(void) { ctx = fct_suite_begin(2); }
static void teardown(void) { fct_suite_end(ctx); }
TestSuite(autograd_nn, .init = setup, .fini = teardown);

/* ---- helpers ------------------------------------------------------------------ */

static fc_tensor *add(fc_ctx *c, fc_tensor *a, fc_tensor *b) { return a ? fc_add(c, a, b) : b; }

static void check(fc_loss_fn f, void *user, fc_tensor *const *in, int n, const fc_gradcheck_opts *o, const char *what)
{
    fc_status st = fc_gradcheck(ctx, f, user, in, n, o);
    cr_expect_eq(st, FC_OK, "%s: %s", what, fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
}

/* f32 steps: the loss is a sum of a few dozen f32 terms, so a larger step
 * keeps its rounding noise well under atol; the ops are smooth, so the
 * truncation error (~eps^2) stays small too. */
static const fc_gradcheck_opts F32_OPTS = {.eps = 4e-3, .atol = 2e-3, .rtol = 1e-2};

static fc_tensor *normal(fc_dtype dt, const fc_dim *dims, int rank, uint64_t seed, double sd)
{
    fc_tensor *t = fc_rand_normal(ctx, dt, dims, rank, seed, 0, sd);
    cr_assert(t, "%s", fc_ctx_error(ctx));
    return t;
}

/* A variable that is a non-contiguous view: `dims` (the view's order) over
 * a normal sample stored in the reverse axis order. */
static fc_tensor *permuted_var(const fc_dim *dims, int rank, uint64_t seed, double sd)
{
    fc_dim rev[8];
    const char *order[8];
    for (int i = 0; i < rank; i++) {
        rev[i] = dims[rank - 1 - i];
        order[i] = dims[i].name;
    }
    fc_tensor *v = fc_permute(ctx, normal(FC_F32, rev, rank, seed, sd), order, rank);
    cr_assert(v && !fc_tensor_is_contiguous(v), "%s", fc_ctx_error(ctx));
    return fct_variable(ctx, v);
}

/* A variable that is a narrowed view (elements [1, 1+size) of axis `axis`,
 * the last one, of a sample two longer): rows are not contiguous. */
static fc_tensor *narrowed_var(const fc_dim *dims, int rank, uint64_t seed, double sd)
{
    fc_dim big[8];
    memcpy(big, dims, (size_t)rank * sizeof *dims);
    big[rank - 1].size += 2;
    fc_tensor *v = fc_narrow(ctx, normal(FC_F32, big, rank, seed, sd), dims[rank - 1].name, 1, dims[rank - 1].size);
    cr_assert(v && !fc_tensor_is_contiguous(v), "%s", fc_ctx_error(ctx));
    return fct_variable(ctx, v);
}

/* An f32 copy of a half-precision tensor, as a new leaf. */
static fc_tensor *f32_copy(fc_tensor *t)
{
    return fc_detach(ctx, fc_cast(ctx, t, FC_F32));
}

static fc_tensor *nvar(const fc_dim *dims, int rank, uint64_t seed, double sd)
{
    return fct_variable(ctx, normal(FC_F32, dims, rank, seed, sd));
}

/* |got - want| <= tol (1 + |want|) elementwise (any layout). */
static void expect_close(const fc_tensor *got, const fc_tensor *want, double tol, const char *what)
{
    cr_assert(got && want, "%s: NULL (%s)", what, fc_ctx_error(ctx));
    cr_assert_eq(fc_tensor_numel(got), fc_tensor_numel(want), "%s: sizes differ", what);
    double *a = fct_values(got), *b = fct_values(want);
    for (int64_t i = 0; i < fc_tensor_numel(got); i++)
        cr_expect(fabs(a[i] - b[i]) <= tol * (1 + fabs(b[i])), "%s[%lld] = %.9g, want %.9g", what, (long long)i, a[i],
                  b[i]);
    free(a);
    free(b);
}

/* The gradient of x (released here) against golden <name>. */
static void expect_grad(fc_tensor *x, const fct_goldens *g, const char *name, double tol)
{
    fc_tensor *gr = fc_grad(ctx, x);
    cr_assert(gr, "%s: no gradient", name);
    const fct_golden *e = fct_golden_get(g, name);
    cr_assert_eq(fc_tensor_numel(gr), e->n, "%s: %lld elements, want %lld", name, (long long)fc_tensor_numel(gr),
                 (long long)e->n);
    double *v = fct_values(gr);
    for (int64_t i = 0; i < e->n; i++)
        cr_expect(fabs(v[i] - e->v[i]) <= tol * (1 + fabs(e->v[i])), "%s[%lld] = %.9g, want %.9g", name, (long long)i,
                  v[i], e->v[i]);
    free(v);
    fc_release(gr);
}

/* Golden <case>.<name> as an f32 tensor with axes `names`; a variable when
 * `grad`. */
static fc_tensor *gt(const fct_goldens *g, const char *cs, const char *name, const char *const *names, int grad)
{
    char nm[64];
    snprintf(nm, sizeof nm, "%s.%s", cs, name);
    fc_tensor *t = fct_golden_tensor(ctx, fct_golden_get(g, nm), FC_F32, names);
    return grad ? fct_variable(ctx, t) : t;
}

/* sum(y * <case>.<wt>) */
static fc_tensor *golden_loss(const fct_goldens *g, const char *cs, const char *wt, fc_tensor *y)
{
    cr_assert(y, "%s: %s", cs, fc_ctx_error(ctx));
    const char *names[8];
    for (int i = 0; i < fc_tensor_rank(y); i++) names[i] = fc_tensor_axis(y, i);
    return fc_sum(ctx, fc_mul(ctx, y, gt(g, cs, wt, names, 0)), FC_NO_AXES);
}

static void backward(fc_tensor *loss)
{
    cr_assert(loss, "%s", fc_ctx_error(ctx));
    cr_assert_eq(fc_backward(ctx, loss), FC_OK, "%s", fc_ctx_error(ctx));
}

/* The gradient of x as a new tensor (owned by the current scope). */
static fc_tensor *grad_of(fc_tensor *x)
{
    fc_tensor *g = fc_grad(ctx, x);
    cr_assert(g, "no gradient: %s", fc_ctx_error(ctx));
    fc_tensor *c = fc_clone(ctx, g);
    fc_release(g);
    fc_zero_grad(ctx, x);
    return c;
}

#define TOL_GOLDEN 2e-5

/* ---- PyTorch goldens ------------------------------------------------------------ */

Test(autograd_nn, softmax_goldens)
{
    fct_goldens g = fct_golden_load("autograd_nn.txt");
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *x = gt(&g, "sm", "x", NAMES("r", "c"), 1);
    backward(golden_loss(&g, "sm", "wt", fc_softmax(ctx, x, "c", NULL)));
    expect_grad(x, &g, "sm.g_x", TOL_GOLDEN);

    /* scale, mask (one -inf), causal (query axis q, key axis = the softmax
     * axis, q_offset 1) and per-head sinks broadcast over the queries */
    x = gt(&g, "smo", "x", NAMES("h", "q", "k"), 1);
    fc_tensor *mask = gt(&g, "smo", "mask", NAMES("q", "k"), 1);
    fc_tensor *sinks = gt(&g, "smo", "sinks", NAMES("h"), 1);
    fc_softmax_options o = {.scale = 0.7, .mask = mask, .causal = 1, .query_axis = "q", .q_offset = 1, .sinks = sinks};
    backward(golden_loss(&g, "smo", "wt", fc_softmax(ctx, x, "k", &o)));
    expect_grad(x, &g, "smo.g_x", TOL_GOLDEN);
    expect_grad(mask, &g, "smo.g_mask", TOL_GOLDEN);
    expect_grad(sinks, &g, "smo.g_sinks", TOL_GOLDEN);

    x = gt(&g, "lsm", "x", NAMES("c", "r"), 1);
    backward(golden_loss(&g, "lsm", "wt", fc_log_softmax(ctx, x, "c")));
    expect_grad(x, &g, "lsm.g_x", TOL_GOLDEN);
    fc_scope_end(ctx, sc);
    fct_golden_free(&g);
}

Test(autograd_nn, norm_goldens)
{
    fct_goldens g = fct_golden_load("autograd_nn.txt");
    fc_scope sc = fc_scope_begin(ctx);
    const double eps = 1e-5;
    fc_tensor *x = gt(&g, "rms", "x", NAMES("t", "d"), 1), *w = gt(&g, "rms", "w", NAMES("d"), 1);
    backward(golden_loss(&g, "rms", "wt", fc_rmsnorm(ctx, x, w, "d", eps)));
    expect_grad(x, &g, "rms.g_x", TOL_GOLDEN);
    expect_grad(w, &g, "rms.g_w", TOL_GOLDEN);

    /* both outputs of the fused step feed the loss */
    x = gt(&g, "rmsr", "x", NAMES("t", "d"), 1);
    fc_tensor *r = gt(&g, "rmsr", "r", NAMES("t", "d"), 1);
    w = gt(&g, "rmsr", "w", NAMES("d"), 1);
    fc_tensor *s = NULL;
    fc_tensor *y = fc_rmsnorm_residual(ctx, x, r, w, "d", eps, &s);
    backward(fc_add(ctx, golden_loss(&g, "rmsr", "wt0", y), golden_loss(&g, "rmsr", "wt1", s)));
    expect_grad(x, &g, "rmsr.g_x", TOL_GOLDEN);
    expect_grad(r, &g, "rmsr.g_r", TOL_GOLDEN);
    expect_grad(w, &g, "rmsr.g_w", TOL_GOLDEN);

    x = gt(&g, "ln", "x", NAMES("t", "d"), 1);
    w = gt(&g, "ln", "w", NAMES("d"), 1);
    fc_tensor *b = gt(&g, "ln", "b", NAMES("d"), 1);
    backward(golden_loss(&g, "ln", "wt", fc_layernorm(ctx, x, w, b, "d", eps)));
    expect_grad(x, &g, "ln.g_x", TOL_GOLDEN);
    expect_grad(w, &g, "ln.g_w", TOL_GOLDEN);
    expect_grad(b, &g, "ln.g_b", TOL_GOLDEN);
    fc_scope_end(ctx, sc);
    fct_golden_free(&g);
}

Test(autograd_nn, rope_goldens)
{
    fct_goldens g = fct_golden_load("autograd_nn.txt");
    fc_scope sc = fc_scope_begin(ctx);
    static const char *const cases[3] = {"rope_n", "rope_x", "rope_p"};
    const fc_rope_options opts[3] = {
        {.style = FC_ROPE_STYLE_NORMAL, .f64_angles = 1},
        {.style = FC_ROPE_STYLE_NEOX, .freq_scale = 0.5, .f64_angles = 1},
        {.style = FC_ROPE_STYLE_NEOX, .n_rot = 4, .f64_angles = 1},
    };
    for (int i = 0; i < 3; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "%s.pos", cases[i]);
        fc_tensor *pos = fct_golden_tensor(ctx, fct_golden_get(&g, nm), FC_I64, NAMES("seq"));
        fc_tensor *x = gt(&g, cases[i], "x", NAMES("seq", "head", "d"), 1);
        backward(golden_loss(&g, cases[i], "wt", fc_rope(ctx, x, pos, &opts[i])));
        snprintf(nm, sizeof nm, "%s.g_x", cases[i]);
        expect_grad(x, &g, nm, TOL_GOLDEN);
    }
    fc_scope_end(ctx, sc);
    fct_golden_free(&g);
}

Test(autograd_nn, attention_goldens)
{
    fct_goldens g = fct_golden_load("autograd_nn.txt");
    fc_scope sc = fc_scope_begin(ctx);
    /* GQA (4 query heads on 2 kv heads), v's d of another size, every option */
    fc_tensor *q = gt(&g, "attn", "q", NAMES("seq", "head", "d"), 1);
    fc_tensor *k = gt(&g, "attn", "k", NAMES("kv_seq", "kv_head", "d"), 1);
    fc_tensor *v = gt(&g, "attn", "v", NAMES("kv_seq", "kv_head", "d"), 1);
    fc_tensor *mask = gt(&g, "attn", "mask", NAMES("seq", "kv_seq"), 1);
    fc_tensor *sinks = gt(&g, "attn", "sinks", NAMES("head"), 1);
    fc_attention_options o = {.scale = 0.6, .softcap = 2.0, .causal = 1, .q_pos0 = 2, .window = 4, .mask = mask,
                              .sinks = sinks};
    backward(golden_loss(&g, "attn", "wt", fc_attention(ctx, q, k, v, &o)));
    expect_grad(q, &g, "attn.g_q", TOL_GOLDEN);
    expect_grad(k, &g, "attn.g_k", TOL_GOLDEN);
    expect_grad(v, &g, "attn.g_v", TOL_GOLDEN);
    expect_grad(mask, &g, "attn.g_mask", TOL_GOLDEN);
    expect_grad(sinks, &g, "attn.g_sinks", TOL_GOLDEN);

    /* a batch axis that k and v lack (their gradients sum over it), MQA */
    q = gt(&g, "attnb", "q", NAMES("b", "seq", "head", "d"), 1);
    k = gt(&g, "attnb", "k", NAMES("kv_seq", "kv_head", "d"), 1);
    v = gt(&g, "attnb", "v", NAMES("kv_seq", "kv_head", "d"), 1);
    backward(golden_loss(&g, "attnb", "wt", fc_attention(ctx, q, k, v, NULL)));
    expect_grad(q, &g, "attnb.g_q", TOL_GOLDEN);
    expect_grad(k, &g, "attnb.g_k", TOL_GOLDEN);
    expect_grad(v, &g, "attnb.g_v", TOL_GOLDEN);
    fc_scope_end(ctx, sc);
    fct_golden_free(&g);
}

/* ---- softmax / log_softmax: finite differences ----------------------------------- */

typedef struct sm_case {
    const char *axis;
    fc_softmax_options o;   /* constant mask / sinks may be set here */
    int mask_var, sinks_var; /* in[1], in[2] (or in[1]) are the mask / the sinks */
    int log;
} sm_case;

static fc_tensor *sm_loss(fc_ctx *c, void *u, fc_tensor *const *in, int n)
{
    const sm_case *s = u;
    fc_softmax_options o = s->o;
    int i = 1;
    if (s->mask_var) o.mask = in[i++];
    if (s->sinks_var) o.sinks = in[i++];
    cr_assert_eq(i, n);
    fc_tensor *y = s->log ? fc_log_softmax(c, in[0], s->axis) : fc_softmax(c, in[0], s->axis, &o);
    return fct_weighted_sum(c, y, 11, -1.0, 1.0);
}

Test(autograd_nn, softmax_gradcheck)
{
    fc_scope sc = fc_scope_begin(ctx);
    /* plain, along the last axis */
    sm_case s = {.axis = "c"};
    fc_tensor *x = nvar(FC_SHAPE({"b", 2}, {"r", 3}, {"c", 5}), 1, 1.0);
    check(sm_loss, &s, &x, 1, &F32_OPTS, "softmax");
    /* along the middle axis of a permuted variable, with a scale */
    s = (sm_case){.axis = "r", .o = {.scale = 0.5}};
    x = permuted_var(FC_SHAPE({"b", 2}, {"r", 4}, {"c", 3}), 2, 1.0);
    check(sm_loss, &s, &x, 1, &F32_OPTS, "softmax permuted, scale");
    /* a narrowed variable, a mask variable broadcast over the missing axis
     * and along its size-1 axis */
    s = (sm_case){.axis = "c", .o = {.scale = 1.3}, .mask_var = 1};
    fc_tensor *in[3] = {narrowed_var(FC_SHAPE({"r", 3}, {"b", 2}, {"c", 5}), 3, 1.0),
                        nvar(FC_SHAPE({"b", 1}, {"c", 5}), 4, 1.0)};
    check(sm_loss, &s, in, 2, &F32_OPTS, "softmax narrowed, mask [b=1, c]");
    /* causal (key axis = softmax axis), mask and per-row sinks */
    s = (sm_case){.axis = "k", .o = {.causal = 1, .query_axis = "q", .q_offset = 1, .scale = 0.8}, .mask_var = 1,
                  .sinks_var = 1};
    in[0] = nvar(FC_SHAPE({"q", 4}, {"k", 5}), 5, 1.0);
    in[1] = nvar(FC_SHAPE({"q", 4}, {"k", 5}), 6, 1.0);
    in[2] = nvar(FC_SHAPE({"q", 4}), 7, 1.0);
    check(sm_loss, &s, in, 3, &F32_OPTS, "softmax causal, mask, sinks");
    /* causal along the query axis (the key axis is an outer one) */
    s = (sm_case){.axis = "q", .o = {.causal = 1, .query_axis = "q", .key_axis = "k"}};
    x = nvar(FC_SHAPE({"k", 4}, {"q", 5}), 8, 1.0);
    check(sm_loss, &s, &x, 1, &F32_OPTS, "softmax causal along the query axis");
    /* causal with both axes outer (softmax over a third axis) */
    s = (sm_case){.axis = "c", .o = {.causal = 1, .query_axis = "q", .key_axis = "k", .q_offset = -1}};
    x = nvar(FC_SHAPE({"q", 3}, {"k", 3}, {"c", 4}), 9, 1.0);
    check(sm_loss, &s, &x, 1, &F32_OPTS, "softmax causal over outer axes");
    /* per-head sinks broadcast over the queries; q_offset -1 leaves row 0
     * fully masked (zeros, with no gradient for x or the sink) */
    s = (sm_case){.axis = "k", .o = {.causal = 1, .query_axis = "q", .q_offset = -1}, .sinks_var = 1};
    in[0] = nvar(FC_SHAPE({"h", 2}, {"q", 3}, {"k", 4}), 10, 1.0);
    in[1] = nvar(FC_SHAPE({"h", 2}), 11, 1.0);
    check(sm_loss, &s, in, 2, &F32_OPTS, "softmax sinks [h], a fully masked row");
    /* a constant mask and constant sinks: only x is a variable */
    s = (sm_case){.axis = "k", .o = {.mask = normal(FC_F32, FC_SHAPE({"k", 4}), 12, 1.0),
                                     .sinks = normal(FC_F32, FC_SHAPE({"q", 3}), 13, 1.0)}};
    x = nvar(FC_SHAPE({"q", 3}, {"k", 4}), 14, 1.0);
    check(sm_loss, &s, &x, 1, &F32_OPTS, "softmax constant mask and sinks");
    /* log_softmax along the first axis, permuted */
    s = (sm_case){.axis = "c", .log = 1};
    x = permuted_var(FC_SHAPE({"c", 5}, {"r", 3}), 15, 1.5);
    check(sm_loss, &s, &x, 1, &F32_OPTS, "log_softmax");
    fc_scope_end(ctx, sc);
}

/* f16 / bf16 inputs: f32 gradients equal to those of the f32 op on the same
 * values, up to the rounding of the half-precision output. */
Test(autograd_nn, softmax_half)
{
    fc_scope sc = fc_scope_begin(ctx);
    const fc_dtype dts[2] = {FC_F16, FC_BF16};
    for (int i = 0; i < 2; i++) {
        fc_tensor *h = fct_variable(ctx, normal(dts[i], FC_SHAPE({"r", 3}, {"c", 6}), 20, 1.0));
        fc_tensor *f = fct_variable(ctx, f32_copy(h));
        fc_tensor *sh = fct_variable(ctx, normal(dts[i], FC_SHAPE({"r", 3}), 21, 1.0));
        fc_tensor *sf = fct_variable(ctx, f32_copy(sh));
        backward(fct_weighted_sum(ctx, fc_softmax(ctx, h, "c", &(fc_softmax_options){.sinks = sh}), 3, -1.0, 1.0));
        backward(fct_weighted_sum(ctx, fc_softmax(ctx, f, "c", &(fc_softmax_options){.sinks = sf}), 3, -1.0, 1.0));
        fc_tensor *gh = grad_of(h), *gf = grad_of(f);
        cr_expect_eq(fc_tensor_dtype(gh), FC_F32, "half gradients are f32");
        expect_close(gh, gf, 2e-2, "softmax f16/bf16 x");
        expect_close(grad_of(sh), grad_of(sf), 2e-2, "softmax f16/bf16 sinks");
        backward(fct_weighted_sum(ctx, fc_log_softmax(ctx, h, "c"), 4, -1.0, 1.0));
        backward(fct_weighted_sum(ctx, fc_log_softmax(ctx, f, "c"), 4, -1.0, 1.0));
        expect_close(grad_of(h), grad_of(f), 2e-2, "log_softmax f16/bf16");
    }
    fc_scope_end(ctx, sc);
}

/* ---- normalization: finite differences ---------------------------------------------- */

typedef enum norm_op { N_RMS, N_RMS_RES, N_RMS_RES_Y, N_RMS_RES_S, N_LAYER } norm_op;

typedef struct norm_case {
    norm_op op;
    int has_w, has_b;       /* weight / bias variables follow x (and the residual) */
} norm_case;

static fc_tensor *norm_loss(fc_ctx *c, void *u, fc_tensor *const *in, int n)
{
    const norm_case *s = u;
    const double eps = 1e-5;
    int i = 1;
    fc_tensor *res = s->op == N_RMS || s->op == N_LAYER ? NULL : in[i++];
    fc_tensor *w = s->has_w ? in[i++] : NULL;
    fc_tensor *b = s->has_b ? in[i++] : NULL;
    cr_assert_eq(i, n);
    switch (s->op) {
    case N_RMS: return fct_weighted_sum(c, fc_rmsnorm(c, in[0], w, "d", eps), 5, -1.0, 1.0);
    case N_LAYER: return fct_weighted_sum(c, fc_layernorm(c, in[0], w, b, "d", eps), 6, -1.0, 1.0);
    case N_RMS_RES: case N_RMS_RES_Y: case N_RMS_RES_S: {
        fc_tensor *sum = NULL;
        fc_tensor *y = fc_rmsnorm_residual(c, in[0], res, w, "d", eps, s->op == N_RMS_RES_Y ? NULL : &sum);
        if (s->op == N_RMS_RES_Y) return fct_weighted_sum(c, y, 7, -1.0, 1.0);
        if (s->op == N_RMS_RES_S) return fct_weighted_sum(c, sum, 8, -1.0, 1.0);
        return add(c, fct_weighted_sum(c, y, 7, -1.0, 1.0), fct_weighted_sum(c, sum, 8, -1.0, 1.0));
    }
    }
    return NULL;
}

Test(autograd_nn, norm_gradcheck)
{
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *in[4];
    norm_case s = {N_RMS, 1, 0};
    in[0] = nvar(FC_SHAPE({"t", 3}, {"d", 6}), 30, 1.0);
    in[1] = nvar(FC_SHAPE({"d", 6}), 31, 1.0);
    check(norm_loss, &s, in, 2, &F32_OPTS, "rmsnorm");
    /* the normalized axis first, strided */
    in[0] = permuted_var(FC_SHAPE({"d", 5}, {"b", 2}, {"t", 3}), 32, 1.0);
    in[1] = nvar(FC_SHAPE({"d", 5}), 33, 1.0);
    check(norm_loss, &s, in, 2, &F32_OPTS, "rmsnorm permuted");
    s = (norm_case){N_RMS, 0, 0};
    in[0] = narrowed_var(FC_SHAPE({"t", 3}, {"d", 6}), 34, 1.0);
    check(norm_loss, &s, in, 1, &F32_OPTS, "rmsnorm narrowed, no weight");

    /* the fused residual step: both outputs, y only, the sum only; the
     * residual in another axis order */
    const norm_op res_ops[3] = {N_RMS_RES, N_RMS_RES_Y, N_RMS_RES_S};
    const char *const res_what[3] = {"rmsnorm_residual y + s", "rmsnorm_residual y", "rmsnorm_residual s"};
    for (int k = 0; k < 3; k++) {
        s = (norm_case){res_ops[k], 1, 0};
        in[0] = nvar(FC_SHAPE({"t", 3}, {"d", 6}), 35, 1.0);
        in[1] = permuted_var(FC_SHAPE({"d", 6}, {"t", 3}), 36, 1.0);
        in[2] = nvar(FC_SHAPE({"d", 6}), 37, 1.0);
        check(norm_loss, &s, in, 3, &F32_OPTS, res_what[k]);
    }

    s = (norm_case){N_LAYER, 1, 1};
    in[0] = nvar(FC_SHAPE({"t", 3}, {"d", 6}), 40, 1.0);
    in[1] = nvar(FC_SHAPE({"d", 6}), 41, 1.0);
    in[2] = nvar(FC_SHAPE({"d", 6}), 42, 1.0);
    check(norm_loss, &s, in, 3, &F32_OPTS, "layernorm");
    in[0] = permuted_var(FC_SHAPE({"d", 5}, {"t", 4}), 43, 2.0);
    in[1] = nvar(FC_SHAPE({"d", 5}), 44, 1.0);
    check(norm_loss, &(norm_case){N_LAYER, 1, 0}, in, 2, &F32_OPTS, "layernorm permuted, no bias");
    in[1] = nvar(FC_SHAPE({"d", 5}), 45, 1.0);
    check(norm_loss, &(norm_case){N_LAYER, 0, 1}, in, 2, &F32_OPTS, "layernorm no weight");
    fc_scope_end(ctx, sc);
}

/* f16 x with an f16 or f32 weight: gradients close to the f32 op's. */
Test(autograd_nn, norm_half)
{
    fc_scope sc = fc_scope_begin(ctx);
    for (int wk = 0; wk < 2; wk++) {
        fc_tensor *xh = fct_variable(ctx, normal(FC_F16, FC_SHAPE({"t", 3}, {"d", 8}), 50, 1.0));
        fc_tensor *rh = fct_variable(ctx, normal(FC_F16, FC_SHAPE({"t", 3}, {"d", 8}), 51, 1.0));
        fc_tensor *wh = fct_variable(ctx, normal(wk ? FC_F32 : FC_F16, FC_SHAPE({"d", 8}), 52, 1.0));
        fc_tensor *xf = fct_variable(ctx, f32_copy(xh)), *rf = fct_variable(ctx, f32_copy(rh));
        fc_tensor *wf = fct_variable(ctx, f32_copy(wh));
        backward(fct_weighted_sum(ctx, fc_layernorm(ctx, xh, wh, NULL, "d", 1e-5), 9, -1.0, 1.0));
        backward(fct_weighted_sum(ctx, fc_layernorm(ctx, xf, wf, NULL, "d", 1e-5), 9, -1.0, 1.0));
        expect_close(grad_of(xh), grad_of(xf), 2e-2, "layernorm f16 x");
        expect_close(grad_of(wh), grad_of(wf), 2e-2, "layernorm f16 weight");
        fc_tensor *sh = NULL, *sf = NULL;
        fc_tensor *yh = fc_rmsnorm_residual(ctx, xh, rh, wh, "d", 1e-5, &sh);
        fc_tensor *yf = fc_rmsnorm_residual(ctx, xf, rf, wf, "d", 1e-5, &sf);
        backward(add(ctx, fct_weighted_sum(ctx, yh, 10, -1.0, 1.0), fct_weighted_sum(ctx, sh, 11, -1.0, 1.0)));
        backward(add(ctx, fct_weighted_sum(ctx, yf, 10, -1.0, 1.0), fct_weighted_sum(ctx, sf, 11, -1.0, 1.0)));
        /* the f16 sum is rounded once; the f32 one is not: looser */
        expect_close(grad_of(xh), grad_of(xf), 3e-2, "rmsnorm_residual f16 x");
        expect_close(grad_of(rh), grad_of(rf), 3e-2, "rmsnorm_residual f16 residual");
        expect_close(grad_of(wh), grad_of(wf), 3e-2, "rmsnorm_residual f16 weight");
    }
    fc_scope_end(ctx, sc);
}

/* ---- rope: finite differences ---------------------------------------------------------- */

typedef struct rope_case {
    fc_rope_options o;
    fc_tensor *pos;
} rope_case;

static fc_tensor *rope_loss(fc_ctx *c, void *u, fc_tensor *const *in, int n)
{
    (void)n;
    const rope_case *s = u;
    return fct_weighted_sum(c, fc_rope(c, in[0], s->pos, &s->o), 12, -1.0, 1.0);
}

static fc_tensor *positions(fc_dtype dt, const char *axis, const int64_t *v, int64_t n)
{
    fc_tensor *t = fc_empty(ctx, dt, (fc_dim[]){{axis, n}}, 1);
    cr_assert(t, "%s", fc_ctx_error(ctx));
    for (int64_t i = 0; i < n; i++) {
        if (dt == FC_I32) ((int32_t *)fc_tensor_data(t))[i] = (int32_t)v[i];
        else ((int64_t *)fc_tensor_data(t))[i] = v[i];
    }
    return t;
}

Test(autograd_nn, rope_gradcheck)
{
    fc_scope sc = fc_scope_begin(ctx);
    const int64_t pv[4] = {0, 5, 17, 40};
    fc_tensor *p64 = positions(FC_I64, "seq", pv, 4), *p32 = positions(FC_I32, "seq", pv, 4);
    fc_tensor *ff = fc_from_data(ctx, FC_F32, FC_SHAPE({"f", 3}), (const float[]){1.0f, 2.5f, 8.0f}, 12);
    struct { fc_rope_options o; const char *what; } cases[] = {
        {{.style = FC_ROPE_STYLE_NORMAL}, "normal"},
        {{.style = FC_ROPE_STYLE_NEOX}, "neox"},
        {{.style = FC_ROPE_STYLE_NEOX, .n_rot = 4}, "neox partial"},
        {{.style = FC_ROPE_STYLE_NORMAL, .n_rot = 2, .f64_angles = 1}, "normal partial, f64 angles"},
        {{.style = FC_ROPE_STYLE_NORMAL, .freq_scale = 0.25, .theta = 500}, "linear scaling, theta"},
        {{.style = FC_ROPE_STYLE_NEOX, .ext_factor = 1, .n_ctx_orig = 16, .freq_scale = 0.25, .attn_factor = 1.5,
          .beta_fast = 8, .beta_slow = 2}, "yarn"},
        {{.style = FC_ROPE_STYLE_NORMAL, .freq_factors = ff}, "freq_factors (constant)"},
        {{.style = FC_ROPE_STYLE_NEOX, .backward = 1}, "backward mode"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rope_case s = {cases[i].o, i % 2 ? p32 : p64};
        fc_tensor *x = nvar(FC_SHAPE({"seq", 4}, {"head", 2}, {"d", 6}), 60 + i, 1.0);
        check(rope_loss, &s, &x, 1, &F32_OPTS, cases[i].what);
    }
    /* the dim axis not last (strided), a batch axis, no head axis, own names */
    rope_case s = {{.style = FC_ROPE_STYLE_NEOX, .token_axis = "t", .dim_axis = "e"}, positions(FC_I64, "t", pv, 3)};
    fc_tensor *x = permuted_var(FC_SHAPE({"b", 2}, {"e", 4}, {"t", 3}), 70, 1.0);
    check(rope_loss, &s, &x, 1, &F32_OPTS, "rope strided, batch axis, no head");
    x = narrowed_var(FC_SHAPE({"seq", 4}, {"head", 2}, {"d", 6}), 71, 1.0);
    s = (rope_case){{.style = FC_ROPE_STYLE_NORMAL}, p64};
    check(rope_loss, &s, &x, 1, &F32_OPTS, "rope narrowed");
    fc_scope_end(ctx, sc);
}

/* ---- attention: finite differences --------------------------------------------------------- */

typedef struct attn_case {
    fc_attention_options o; /* constant mask / sinks may be set here */
    int kv_var;             /* in[1], in[2] are k and v */
    int mask_var, sinks_var;
} attn_case;

static fc_tensor *attn_loss(fc_ctx *c, void *u, fc_tensor *const *in, int n)
{
    const attn_case *s = u;
    fc_attention_options o = s->o;
    int i = 1;
    fc_tensor *k = s->kv_var ? in[i++] : NULL, *v = s->kv_var ? in[i++] : NULL;
    if (s->mask_var) o.mask = in[i++];
    if (s->sinks_var) o.sinks = in[i++];
    cr_assert_eq(i, n);
    cr_assert(k && v, "the attention cases make k and v variables");
    return fct_weighted_sum(c, fc_attention(c, in[0], k, v, &o), 13, -1.0, 1.0);
}

Test(autograd_nn, attention_gradcheck)
{
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *in[5];
    /* GQA with every option; the mask per head */
    attn_case s = {.o = {.scale = 0.5, .softcap = 3.0, .causal = 1, .q_pos0 = 2, .window = 4}, .kv_var = 1,
                   .mask_var = 1, .sinks_var = 1};
    in[0] = nvar(FC_SHAPE({"seq", 3}, {"head", 4}, {"d", 4}), 80, 1.0);
    in[1] = nvar(FC_SHAPE({"kv_seq", 5}, {"kv_head", 2}, {"d", 4}), 81, 1.0);
    in[2] = nvar(FC_SHAPE({"kv_seq", 5}, {"kv_head", 2}, {"d", 3}), 82, 1.0);
    in[3] = nvar(FC_SHAPE({"head", 4}, {"seq", 3}, {"kv_seq", 5}), 83, 1.0);
    in[4] = nvar(FC_SHAPE({"head", 4}), 84, 1.0);
    check(attn_loss, &s, in, 5, &F32_OPTS, "attention GQA, all options");
    /* MHA, default options, a batch axis; q permuted, k with a size-1 batch
     * axis, v without it (both broadcast) */
    s = (attn_case){.kv_var = 1};
    in[0] = permuted_var(FC_SHAPE({"b", 2}, {"seq", 3}, {"head", 2}, {"d", 4}), 85, 1.0);
    in[1] = nvar(FC_SHAPE({"b", 1}, {"kv_seq", 4}, {"kv_head", 2}, {"d", 4}), 86, 1.0);
    in[2] = narrowed_var(FC_SHAPE({"kv_seq", 4}, {"kv_head", 2}, {"d", 4}), 87, 1.0);
    check(attn_loss, &s, in, 3, &F32_OPTS, "attention MHA, batch broadcast, strided");
    /* no head axes; window without causal; a mask with a size-1 axis */
    s = (attn_case){.o = {.window = 2, .q_pos0 = 1}, .kv_var = 1, .mask_var = 1};
    in[0] = nvar(FC_SHAPE({"seq", 3}, {"d", 4}), 88, 1.0);
    in[1] = nvar(FC_SHAPE({"kv_seq", 4}, {"d", 4}), 89, 1.0);
    in[2] = nvar(FC_SHAPE({"kv_seq", 4}, {"d", 2}), 90, 1.0);
    in[3] = nvar(FC_SHAPE({"seq", 1}, {"kv_seq", 4}), 91, 1.0);
    check(attn_loss, &s, in, 4, &F32_OPTS, "attention no heads, window, mask [seq=1]");
    /* MQA: q heads on k/v without a head axis; sinks; own axis names; a
     * fully masked first row (causal with q_pos0 -1) */
    s = (attn_case){.o = {.causal = 1, .q_pos0 = -1, .seq_axis = "t", .kv_seq_axis = "s", .dim_axis = "e",
                          .head_axis = "h"},
                    .kv_var = 1, .sinks_var = 1};
    in[0] = nvar(FC_SHAPE({"h", 3}, {"t", 3}, {"e", 4}), 92, 1.0);
    in[1] = nvar(FC_SHAPE({"s", 3}, {"e", 4}), 93, 1.0);
    in[2] = nvar(FC_SHAPE({"s", 3}, {"e", 4}), 94, 1.0);
    in[3] = nvar(FC_SHAPE({"h", 3}), 95, 1.0);
    check(attn_loss, &s, in, 4, &F32_OPTS, "attention MQA, sinks, a fully masked row");
    fc_scope_end(ctx, sc);
}

/* f16 K/V: q, k and v get f32 gradients; checked by finite differences
 * (the step actually taken in f16 is what gradcheck divides by). */
Test(autograd_nn, attention_f16_kv)
{
    fc_scope sc = fc_scope_begin(ctx);
    attn_case s = {.o = {.causal = 1}, .kv_var = 1};
    fc_tensor *in[3] = {
        nvar(FC_SHAPE({"seq", 3}, {"head", 2}, {"d", 4}), 100, 1.0),
        fct_variable(ctx, normal(FC_F16, FC_SHAPE({"kv_seq", 3}, {"kv_head", 1}, {"d", 4}), 101, 1.0)),
        fct_variable(ctx, normal(FC_F16, FC_SHAPE({"kv_seq", 3}, {"kv_head", 1}, {"d", 4}), 102, 1.0)),
    };
    check(attn_loss, &s, in, 3, &(fc_gradcheck_opts){.eps = 1.5e-2, .atol = 2e-3, .rtol = 1e-2}, "attention f16 k/v");
    backward(fct_weighted_sum(ctx, fc_attention(ctx, in[0], in[1], in[2], &s.o), 1, -1.0, 1.0));
    fc_tensor *gk = grad_of(in[1]);
    cr_expect_eq(fc_tensor_dtype(gk), FC_F32);
    cr_expect_str_eq(fc_tensor_axis(gk, 1), "kv_head");
    fc_zero_grad(ctx, in[0]);
    fc_zero_grad(ctx, in[2]);
    fc_scope_end(ctx, sc);
}

/* ---- thread independence ------------------------------------------------------------------- */

static void attention_grads(fc_ctx *c, fc_tensor **out)
{
    fc_tensor *q = fct_variable(c, fc_rand_normal(c, FC_F32, FC_SHAPE({"b", 2}, {"seq", 17}, {"head", 4}, {"d", 8}), 1, 0, 1));
    fc_tensor *k = fct_variable(c, fc_rand_normal(c, FC_F32, FC_SHAPE({"b", 2}, {"kv_seq", 23}, {"kv_head", 2}, {"d", 8}), 2, 0, 1));
    fc_tensor *v = fct_variable(c, fc_rand_normal(c, FC_F32, FC_SHAPE({"kv_seq", 23}, {"kv_head", 2}, {"d", 8}), 3, 0, 1));
    fc_tensor *m = fct_variable(c, fc_rand_normal(c, FC_F32, FC_SHAPE({"seq", 17}, {"kv_seq", 23}), 4, 0, 1));
    fc_tensor *sk = fct_variable(c, fc_rand_normal(c, FC_F32, FC_SHAPE({"head", 4}), 5, 0, 1));
    fc_attention_options o = {.causal = 1, .q_pos0 = 6, .softcap = 4, .mask = m, .sinks = sk};
    fc_tensor *y = fc_attention(c, q, k, v, &o);
    /* a second attention on the first's output: two records in one pass */
    fc_tensor *y2 = fc_attention(c, y, k, v, &(fc_attention_options){.window = 5});
    fc_tensor *loss = add(c, fct_weighted_sum(c, y, 7, -1.0, 1.0), fct_weighted_sum(c, y2, 8, -1.0, 1.0));
    cr_assert_eq(fc_backward(c, loss), FC_OK, "%s", fc_ctx_error(c));
    fc_tensor *vars[5] = {q, k, v, m, sk};
    for (int i = 0; i < 5; i++) {
        out[i] = fc_grad(c, vars[i]);
        cr_assert(out[i], "no gradient for operand %d", i);
    }
}

Test(autograd_nn, attention_threads_bitwise)
{
    fct_ctx_pair p = fct_ctx_pair_begin();
    fc_tensor *g[2][5];
    for (int i = 0; i < 2; i++) attention_grads(p.c[i], g[i]);
    static const char *const what[5] = {"grad q", "grad k", "grad v", "grad mask", "grad sinks"};
    for (int j = 0; j < 5; j++) fct_expect_bits(p.c[0], g[0][j], p.c[1], g[1][j], what[j]);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 5; j++) fc_release(g[i][j]);
    fct_ctx_pair_end(&p);
}

/* ---- errors --------------------------------------------------------------------------------- */

Test(autograd_nn, errors)
{
    fc_scope sc = fc_scope_begin(ctx);
    /* freq_factors are not differentiable: refused at backward, by name */
    fc_tensor *x = nvar(FC_SHAPE({"seq", 2}, {"d", 4}), 110, 1.0);
    fc_tensor *ff = fct_variable(ctx, fc_full(ctx, FC_F32, FC_SHAPE({"f", 2}), 1.0));
    fc_tensor *pos = positions(FC_I64, "seq", (const int64_t[]){0, 1}, 2);
    fc_tensor *y = fc_rope(ctx, x, pos, &(fc_rope_options){.freq_factors = ff});
    cr_assert(y, "%s", fc_ctx_error(ctx));
    cr_expect_eq(fc_backward(ctx, fct_weighted_sum(ctx, y, 1, -1.0, 1.0)), FC_ERR_STATE);
    fct_expect_error(ctx, FC_ERR_STATE, "fc_rope", "freq_factors");
    /* the same graph with a detached view of freq_factors works */
    y = fc_rope(ctx, x, pos, &(fc_rope_options){.freq_factors = fc_detach(ctx, ff)});
    cr_expect_eq(fc_backward(ctx, fct_weighted_sum(ctx, y, 1, -1.0, 1.0)), FC_OK, "%s", fc_ctx_error(ctx));
    fc_zero_grad(ctx, x);

    /* the saved softmax output modified in place (back-propagating from
     * the output itself, so the softmax record is the first one checked) */
    fc_tensor *p = fc_softmax(ctx, x, "d", NULL);
    cr_assert_eq(fc_fill(ctx, p, 0.25), FC_OK);
    cr_expect_eq(fc_backward_with(ctx, p, fc_full(ctx, FC_F32, FC_SHAPE({"seq", 2}, {"d", 4}), 1.0)), FC_ERR_STATE);
    fct_expect_error(ctx, FC_ERR_STATE, "fc_softmax", NULL);

    /* five batch axes plus grouped heads: the recompute would need rank 9 */
    fc_tensor *q = nvar(FC_SHAPE({"a", 1}, {"b", 1}, {"c", 1}, {"e", 1}, {"f", 1}, {"seq", 2}, {"head", 4}, {"d", 2}), 111,
                        1.0);
    fc_tensor *k = normal(FC_F32, FC_SHAPE({"kv_seq", 2}, {"kv_head", 2}, {"d", 2}), 112, 1.0);
    y = fc_attention(ctx, q, k, k, NULL);
    cr_assert(y, "%s", fc_ctx_error(ctx));
    cr_expect_eq(fc_backward(ctx, fct_weighted_sum(ctx, y, 3, -1.0, 1.0)), FC_ERR_SHAPE);
    fct_expect_error(ctx, FC_ERR_SHAPE, "fc_attention", "rank");
    fc_scope_end(ctx, sc);
}
