/* SPDX-License-Identifier: MIT */
/* Optimizers, gradient clipping and learning-rate schedules against PyTorch
 * 1.13 (tests/goldens/optim_goldens.txt, written by gen_optim_goldens.py):
 * SGD (momentum, Nesterov, dampening, weight decay), Adam (L2), AdamW, two
 * parameter groups, Muon (wide and tall matrices, its AdamW for vectors),
 * clip by norm and by value, the schedules. Also: 1 and 2 threads give the
 * same bits; f16/bf16 parameters through f32 master copies; strided
 * parameters; state export / import round trips bit for bit; errors name
 * the function and the argument or entry. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fucina/fucina.h"
#include "fct_golden.h"

static fc_ctx *ctx;

static void setup(void) { ctx = fct_suite_begin(2); }
static void teardown(void) { fct_suite_end(ctx); }
TestSuite(optim, .init = setup, .fini = teardown);

static const char *const RC[2] = {"r", "c"}, *const C1[1] = {"c"};
static const char *const KRC[3] = {"k", "r", "c"}, *const KC[2] = {"k", "c"};
#define K 5

static fc_tensor *variable(fc_ctx *c, fc_tensor *t)
{
    cr_assert(t, "%s", fc_ctx_error(c));
    cr_assert_eq(fc_requires_grad(c, t, 1), FC_OK, "%s", fc_ctx_error(c));
    return t;
}

static void set_grad(fc_ctx *c, fc_tensor *p, fc_tensor *g)
{
    cr_assert_eq(fc_set_grad(c, p, g), FC_OK, "%s", fc_ctx_error(c));
}

/* Max |got - want| / (1 + |want|) over the n values of golden e at offset off. */
static double max_err(const fc_tensor *t, const fct_golden *e, int64_t off)
{
    double *v = fct_values(t), m = 0;
    for (int64_t i = 0; i < fc_tensor_numel(t); i++) m = fmax(m, fabs(v[i] - e->v[off + i]) / (1 + fabs(e->v[off + i])));
    free(v);
    return m;
}

static void expect_close(const fc_tensor *t, const fct_golden *e, int64_t off, double tol, const char *what, int step)
{
    double err = max_err(t, e, off);
    cr_expect(err <= tol, "%s after step %d: relative error %.3g > %.3g", what, step + 1, err, tol);
}

/* ---- goldens: optimizer trajectories ------------------------------------------ */

typedef struct ocase {
    const char *name;
    fc_optim_kind kind;
    fc_optim_options o;
    int two_groups;           /* w and b in separate groups with gw / gb */
    fc_optim_group gw, gb;
    int tall;                 /* w is [c=6, r=4] */
    double tol;
} ocase;

#define SGD(...) .kind = FC_OPTIM_SGD, .o = {__VA_ARGS__}
static const ocase cases[] = {
    {.name = "sgd", SGD(.lr = 0.1), .tol = 1e-6},
    {.name = "sgd_mom", SGD(.lr = 0.1, .momentum = 0.9), .tol = 1e-6},
    {.name = "sgd_nesterov", SGD(.lr = 0.05, .momentum = 0.9, .nesterov = 1), .tol = 1e-6},
    {.name = "sgd_damp", SGD(.lr = 0.1, .momentum = 0.8, .dampening = 0.3), .tol = 1e-6},
    {.name = "sgd_wd", SGD(.lr = 0.1, .momentum = 0.9, .weight_decay = 0.05), .tol = 1e-6},
    {.name = "adam", .kind = FC_OPTIM_ADAM, .o = {.lr = 1e-2}, .tol = 1e-6},
    {.name = "adam_wd", .kind = FC_OPTIM_ADAM, .o = {.lr = 1e-2, .betas = {0.8, 0.99}, .eps = 1e-6, .weight_decay = 0.1},
     .tol = 1e-6},
    {.name = "adamw", .kind = FC_OPTIM_ADAMW, .o = {.lr = 1e-2, .weight_decay = 0.1}, .tol = 1e-6},
    {.name = "adamw_groups", .kind = FC_OPTIM_ADAMW, .o = {.lr = 1e-3, .weight_decay = 0.01}, .two_groups = 1,
     .gw = {.lr = 2e-2, .weight_decay = 0.05}, .gb = {.lr = 5e-3, .weight_decay = FC_OPTIM_ZERO}, .tol = 1e-6},
    {.name = "muon", .kind = FC_OPTIM_MUON, .o = {.lr = 0.02, .weight_decay = 0.1, .momentum = 0.95}, .tol = 1e-6},
    {.name = "muon_tall", .kind = FC_OPTIM_MUON, .o = {.lr = 0.05, .momentum = 0.9, .nesterov = -1, .ns_steps = 3},
     .tall = 1, .tol = 1e-6},
};

typedef struct fixture {
    fc_tensor *w, *b, *gw, *gb; /* parameters; gradients [k, ...] */
} fixture;

static fixture make_fixture(fc_ctx *c, const fct_goldens *g, int tall)
{
    fixture f;
    f.w = fct_golden_tensor(c, fct_golden_get(g, "init.w"), FC_F32, RC);
    if (tall) f.w = fc_clone(c, fc_transpose(c, f.w, "r", "c"));
    variable(c, f.w);
    f.b = variable(c, fct_golden_tensor(c, fct_golden_get(g, "init.b"), FC_F32, C1));
    f.gw = fct_golden_tensor(c, fct_golden_get(g, "grad.w"), FC_F32, KRC);
    f.gb = fct_golden_tensor(c, fct_golden_get(g, "grad.b"), FC_F32, KC);
    return f;
}

static fc_optim *make_opt(fc_ctx *c, const ocase *oc, fc_tensor *w, fc_tensor *b)
{
    fc_optim *opt = fc_optim_new(c, oc->kind, &oc->o);
    cr_assert(opt, "%s: %s", oc->name, fc_ctx_error(c));
    if (oc->two_groups) {
        cr_assert_eq(fc_optim_add_group(opt, FC_PARAMS(w), FC_NAMES("w"), &oc->gw), 0, "%s", fc_ctx_error(c));
        cr_assert_eq(fc_optim_add_group(opt, FC_PARAMS(b), FC_NAMES("b"), &oc->gb), 1, "%s", fc_ctx_error(c));
    } else {
        cr_assert_eq(fc_optim_add_group(opt, FC_PARAMS(w, b), FC_NAMES("w", "b"), NULL), 0, "%s", fc_ctx_error(c));
    }
    return opt;
}

/* Gradient k of the fixture into w and b, then one step. The gradients are
 * given as [r, c] even for the tall w: fc_set_grad lays them out as w. */
static void step_k(fc_ctx *c, fc_optim *opt, const fixture *f, int k)
{
    set_grad(c, f->w, fc_select(c, f->gw, "k", k));
    set_grad(c, f->b, fc_select(c, f->gb, "k", k));
    cr_assert_eq(fc_optim_step(opt), FC_OK, "%s", fc_ctx_error(c));
}

Test(optim, goldens)
{
    fct_goldens g = fct_golden_load("optim_goldens.txt");
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const ocase *oc = &cases[ci];
        fc_scope s = fc_scope_begin(ctx);
        fixture f = make_fixture(ctx, &g, oc->tall);
        fc_optim *opt = make_opt(ctx, oc, f.w, f.b);
        char nw[64], nb[64];
        snprintf(nw, sizeof nw, "%s.w", oc->name);
        snprintf(nb, sizeof nb, "%s.b", oc->name);
        const fct_golden *ew = fct_golden_get(&g, nw), *eb = fct_golden_get(&g, nb);
        int64_t nw_el = fc_tensor_numel(f.w), nb_el = fc_tensor_numel(f.b);
        double worst = 0;
        for (int k = 0; k < K; k++) {
            step_k(ctx, opt, &f, k);
            expect_close(f.w, ew, k * nw_el, oc->tol, nw, k);
            expect_close(f.b, eb, k * nb_el, oc->tol, nb, k);
            worst = fmax(worst, fmax(max_err(f.w, ew, k * nw_el), max_err(f.b, eb, k * nb_el)));
        }
        cr_log_info("%-14s max relative error %.3g", oc->name, worst);
        cr_expect_eq(fc_optim_steps(opt), K);
        fc_optim_free(opt);
        fc_scope_end(ctx, s);
    }
    fct_golden_free(&g);
}

/* The golden cases again, each parameter as a strided (transposed) view,
 * bit for bit against the contiguous run. */
Test(optim, strided_parameters_match_contiguous)
{
    fct_goldens g = fct_golden_load("optim_goldens.txt");
    const int pick[] = {2, 7, 9};
    for (int pi = 0; pi < 3; pi++) {
        const ocase *oc = &cases[pick[pi]];
        fc_scope s = fc_scope_begin(ctx);
        fixture f = make_fixture(ctx, &g, 0);
        fixture t = make_fixture(ctx, &g, 0);
        /* A [c, r] buffer seen as [r, c]: the variable is a strided view. */
        fc_tensor *base = fc_clone(ctx, fc_transpose(ctx, fct_golden_tensor(ctx, fct_golden_get(&g, "init.w"), FC_F32, RC),
                                                     "r", "c"));
        t.w = variable(ctx, fc_transpose(ctx, base, "c", "r"));
        cr_assert(!fc_tensor_is_contiguous(t.w));
        fc_optim *o1 = make_opt(ctx, oc, f.w, f.b), *o2 = make_opt(ctx, oc, t.w, t.b);
        for (int k = 0; k < K; k++) {
            step_k(ctx, o1, &f, k);
            step_k(ctx, o2, &t, k);
            fct_expect_bits(ctx, fc_contiguous(ctx, t.w), ctx, f.w, oc->name);
        }
        fc_optim_free(o1);
        fc_optim_free(o2);
        fc_scope_end(ctx, s);
    }
    fct_golden_free(&g);
}

/* ---- threads ---------------------------------------------------------------------- */

/* Larger parameters (so fc_einsum has work to split) with random gradients,
 * for each optimizer kind, on a 1-thread and a 2-thread context. */
Test(optim, thread_count_independent)
{
    const fc_optim_kind kinds[4] = {FC_OPTIM_SGD, FC_OPTIM_ADAM, FC_OPTIM_ADAMW, FC_OPTIM_MUON};
    for (int ki = 0; ki < 4; ki++) {
        fct_ctx_pair cp = fct_ctx_pair_begin();
        fc_tensor *w[2], *b[2];
        fc_optim *opt[2];
        for (int t = 0; t < 2; t++) {
            fc_ctx *c = cp.c[t];
            w[t] = variable(c, fc_rand_normal(c, FC_F32, FC_SHAPE({"out", 96}, {"in", 160}), 1, 0, 0.1));
            b[t] = variable(c, fc_rand_normal(c, FC_F32, FC_SHAPE({"out", 96}), 2, 0, 0.1));
            opt[t] = fc_optim_new(c, kinds[ki], &(fc_optim_options){.lr = 0.01, .momentum = 0.9, .weight_decay = 0.01});
            cr_assert(opt[t], "%s", fc_ctx_error(c));
            cr_assert_eq(fc_optim_add_group(opt[t], FC_PARAMS(w[t], b[t]), FC_NAMES("w", "b"), NULL), 0);
        }
        for (int k = 0; k < 3; k++) {
            for (int t = 0; t < 2; t++) {
                fc_ctx *c = cp.c[t];
                set_grad(c, w[t], fc_rand_normal(c, FC_F32, FC_SHAPE({"out", 96}, {"in", 160}), 10 + k, 0, 1));
                set_grad(c, b[t], fc_rand_normal(c, FC_F32, FC_SHAPE({"out", 96}), 20 + k, 0, 1));
                cr_assert_eq(fc_optim_step(opt[t]), FC_OK, "%s", fc_ctx_error(c));
                cr_assert_eq(fc_optim_clip_grad_norm(opt[t], 5.0) > 0, 1);
            }
            fct_expect_bits(cp.c[0], w[0], cp.c[1], w[1], fc_optim_kind_name(kinds[ki]));
            fct_expect_bits(cp.c[0], b[0], cp.c[1], b[1], fc_optim_kind_name(kinds[ki]));
        }
        for (int t = 0; t < 2; t++) fc_optim_free(opt[t]);
        fct_ctx_pair_end(&cp);
    }
}

/* ---- f16 / bf16 parameters ----------------------------------------------------------- */

/* An f16 (bf16) parameter steps through an f32 master copy: the master
 * follows exactly the trajectory of an f32 parameter that starts from the
 * rounded values, and the parameter is the master rounded once. */
Test(optim, half_parameters_use_f32_master)
{
    fct_goldens g = fct_golden_load("optim_goldens.txt");
    const fc_dtype dts[2] = {FC_F16, FC_BF16};
    const int pick[] = {1, 7, 9};
    for (int di = 0; di < 2; di++)
        for (int pi = 0; pi < 3; pi++) {
            const ocase *oc = &cases[pick[pi]];
            fc_scope s = fc_scope_begin(ctx);
            fixture h = make_fixture(ctx, &g, 0), f = make_fixture(ctx, &g, 0);
            h.w = variable(ctx, fct_golden_tensor(ctx, fct_golden_get(&g, "init.w"), dts[di], RC));
            h.b = variable(ctx, fct_golden_tensor(ctx, fct_golden_get(&g, "init.b"), dts[di], C1));
            f.w = variable(ctx, fc_cast(ctx, fc_detach(ctx, h.w), FC_F32));
            f.b = variable(ctx, fc_cast(ctx, fc_detach(ctx, h.b), FC_F32));
            fc_optim *oh = make_opt(ctx, oc, h.w, h.b), *of = make_opt(ctx, oc, f.w, f.b);
            for (int k = 0; k < K; k++) {
                step_k(ctx, oh, &h, k);
                step_k(ctx, of, &f, k);
                fct_expect_bits(ctx, h.w, ctx, fc_cast(ctx, f.w, dts[di]), "half parameter = rounded master");
                fct_expect_bits(ctx, h.b, ctx, fc_cast(ctx, f.b, dts[di]), "half parameter = rounded master");
            }
            /* The master copies are state entries. */
            int found = 0;
            for (int i = 0; i < fc_optim_state_count(oh); i++) {
                const char *nm;
                fc_tensor *t = fc_optim_state_get(oh, i, &nm);
                if (strcmp(nm, "w.master") == 0) {
                    found = 1;
                    fct_expect_bits(ctx, t, ctx, f.w, "w.master");
                }
            }
            cr_expect(found, "no w.master entry");
            fc_optim_free(oh);
            fc_optim_free(of);
            fc_scope_end(ctx, s);
        }
    fct_golden_free(&g);
}

/* ---- state --------------------------------------------------------------------------- */

static char *dup(const char *s)
{
    char *d = malloc(strlen(s) + 1);
    cr_assert(d);
    return strcpy(d, s);
}

typedef struct snapshot {
    int n;
    char **names;
    fc_tensor **t;
} snapshot;

/* Every entry cloned (the live tensors change as the optimizer steps). */
static snapshot take(fc_ctx *c, fc_optim *opt)
{
    snapshot s = {fc_optim_state_count(opt), NULL, NULL};
    s.names = calloc((size_t)s.n, sizeof *s.names);
    s.t = calloc((size_t)s.n, sizeof *s.t);
    for (int i = 0; i < s.n; i++) {
        const char *nm;
        fc_tensor *t = fc_optim_state_get(opt, i, &nm);
        cr_assert(t && nm, "%s", fc_ctx_error(c));
        s.names[i] = dup(nm);
        s.t[i] = fc_clone(c, t);
    }
    return s;
}

static void drop(snapshot *s)
{
    for (int i = 0; i < s->n; i++) free(s->names[i]);
    free(s->names);
    free(s->t);
}

static void expect_same_state(fc_ctx *c, const snapshot *a, const snapshot *b)
{
    cr_assert_eq(a->n, b->n, "entries: %d vs %d", a->n, b->n);
    for (int i = 0; i < a->n; i++) {
        cr_expect_str_eq(a->names[i], b->names[i]);
        fct_expect_bits(c, a->t[i], c, b->t[i], a->names[i]);
    }
}

static void load(fc_optim *opt, const snapshot *s, fc_status want)
{
    fc_status st = fc_optim_load_state(opt, (const char *const *)s->names, s->t, s->n);
    cr_expect_eq(st, want, "load: %s", fc_ctx_error(ctx));
}

Test(optim, state_names)
{
    fc_scope s = fc_scope_begin(ctx);
    fc_tensor *w = variable(ctx, fc_rand_normal(ctx, FC_F32, FC_SHAPE({"r", 4}, {"c", 6}), 1, 0, 1));
    fc_tensor *b = variable(ctx, fc_rand_normal(ctx, FC_F32, FC_SHAPE({"c", 6}), 2, 0, 1));
    fc_tensor *h = variable(ctx, fc_rand_normal(ctx, FC_BF16, FC_SHAPE({"c", 6}), 3, 0, 1));
    fc_optim *opt = fc_optim_new(ctx, FC_OPTIM_MUON, NULL);
    cr_assert(opt);
    cr_assert_eq(fc_optim_add_group(opt, FC_PARAMS(w, b), FC_NAMES("layer.0.w", "layer.0.b"), NULL), 0);
    cr_assert_eq(fc_optim_add_group(opt, FC_PARAMS(h), FC_NAMES("norm"), &(fc_optim_group){.lr = 1e-3}), 1);
    /* No step yet: the step count and the lrs only. */
    snapshot s0 = take(ctx, opt);
    cr_assert_eq(s0.n, 3);
    cr_expect_str_eq(s0.names[0], "step");
    cr_expect_str_eq(s0.names[1], "group.0.lr");
    cr_expect_str_eq(s0.names[2], "group.1.lr");
    cr_expect_eq(fc_tensor_dtype(s0.t[0]), FC_I64);
    cr_expect_eq(fc_tensor_item(s0.t[1]), 0.02);
    cr_expect_eq(fc_tensor_item(s0.t[2]), 1e-3);
    /* b has no gradient: it takes no step and gets no state. */
    set_grad(ctx, w, fc_rand_normal(ctx, FC_F32, FC_SHAPE({"r", 4}, {"c", 6}), 4, 0, 1));
    set_grad(ctx, h, fc_rand_normal(ctx, FC_F32, FC_SHAPE({"c", 6}), 5, 0, 1));
    fc_tensor *b0 = fc_clone(ctx, b);
    cr_assert_eq(fc_optim_step(opt), FC_OK, "%s", fc_ctx_error(ctx));
    fct_expect_bits(ctx, b, ctx, b0, "a parameter without a gradient does not move");
    snapshot s1 = take(ctx, opt);
    const char *want[] = {"step", "group.0.lr", "group.1.lr", "layer.0.w.momentum_buffer", "norm.step", "norm.exp_avg",
                          "norm.exp_avg_sq", "norm.master"};
    cr_assert_eq(s1.n, 8);
    for (int i = 0; i < 8; i++) cr_expect_str_eq(s1.names[i], want[i]);
    cr_expect_eq(fc_tensor_item(s1.t[0]), 1);
    cr_expect_eq(fc_tensor_item(s1.t[4]), 1);
    cr_expect_eq(fc_tensor_dtype(s1.t[3]), FC_F32);
    cr_expect_str_eq(fc_tensor_axis(s1.t[3], 1), "c");
    cr_expect_null(fc_optim_state_get(opt, 8, NULL));
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_optim_state_get", "i = 8");
    /* zero_grad forgets the gradients. */
    fc_optim_zero_grad(opt);
    cr_expect_null(fc_grad(ctx, w));
    cr_expect_null(fc_grad(ctx, h));
    drop(&s0);
    drop(&s1);
    fc_optim_free(opt);
    fc_scope_end(ctx, s);
}

/* Step A twice, export, load into B (fresh, over copies of A's current
 * parameters), then step both three more times: same bits everywhere. */
Test(optim, state_round_trip_bit_exact)
{
    fct_goldens g = fct_golden_load("optim_goldens.txt");
    const int pick[] = {1, 3, 6, 8, 9, 10};
    for (int pi = 0; pi < 6; pi++) {
        const ocase *oc = &cases[pick[pi]];
        fc_scope s = fc_scope_begin(ctx);
        fixture a = make_fixture(ctx, &g, oc->tall);
        fc_optim *oa = make_opt(ctx, oc, a.w, a.b);
        step_k(ctx, oa, &a, 0);
        step_k(ctx, oa, &a, 1);
        cr_assert_eq(fc_optim_set_lr(oa, 0, 0.75 * fc_optim_lr(oa, 0)), FC_OK);
        snapshot exported = take(ctx, oa);
        fixture b = a;
        b.w = variable(ctx, fc_clone(ctx, fc_detach(ctx, a.w)));
        b.b = variable(ctx, fc_clone(ctx, fc_detach(ctx, a.b)));
        fc_optim *ob = make_opt(ctx, oc, b.w, b.b);
        load(ob, &exported, FC_OK);
        cr_expect_eq(fc_optim_steps(ob), 2);
        cr_expect_eq(fc_optim_lr(ob, 0), fc_optim_lr(oa, 0));
        snapshot again = take(ctx, ob);
        expect_same_state(ctx, &exported, &again);
        for (int k = 2; k < K; k++) {
            step_k(ctx, oa, &a, k);
            step_k(ctx, ob, &b, k);
            fct_expect_bits(ctx, a.w, ctx, b.w, oc->name);
            fct_expect_bits(ctx, a.b, ctx, b.b, oc->name);
        }
        snapshot sa = take(ctx, oa), sb = take(ctx, ob);
        expect_same_state(ctx, &sa, &sb);
        /* Loading into an optimizer that has state replaces it. */
        load(oa, &exported, FC_OK);
        snapshot back = take(ctx, oa);
        expect_same_state(ctx, &exported, &back);
        drop(&exported);
        drop(&again);
        drop(&sa);
        drop(&sb);
        drop(&back);
        fc_optim_free(oa);
        fc_optim_free(ob);
        fc_scope_end(ctx, s);
    }
    fct_golden_free(&g);
}

Test(optim, state_load_errors_change_nothing)
{
    fc_scope s = fc_scope_begin(ctx);
    fc_tensor *w = variable(ctx, fc_rand_normal(ctx, FC_F32, FC_SHAPE({"r", 4}, {"c", 6}), 1, 0, 1));
    fc_tensor *b = variable(ctx, fc_rand_normal(ctx, FC_F32, FC_SHAPE({"c", 6}), 2, 0, 1));
    fc_optim *opt = fc_optim_new(ctx, FC_OPTIM_ADAMW, NULL);
    cr_assert_eq(fc_optim_add_group(opt, FC_PARAMS(w, b), FC_NAMES("w", "b"), NULL), 0);
    set_grad(ctx, w, fc_rand_normal(ctx, FC_F32, FC_SHAPE({"r", 4}, {"c", 6}), 3, 0, 1));
    set_grad(ctx, b, fc_rand_normal(ctx, FC_F32, FC_SHAPE({"c", 6}), 4, 0, 1));
    cr_assert_eq(fc_optim_step(opt), FC_OK);
    snapshot good = take(ctx, opt);
    cr_assert_eq(good.n, 8); /* step, group.0.lr, w.{step,exp_avg,exp_avg_sq}, b.{...} */
    snapshot bad = take(ctx, opt);

    /* An unknown name. */
    free(bad.names[3]);
    bad.names[3] = dup("w.foo");
    load(opt, &bad, FC_ERR_INVALID_ARG);
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_optim_load_state", "\"w.foo\"");
    free(bad.names[3]);
    bad.names[3] = dup(good.names[3]);
    /* A shape mismatch (w.exp_avg is entry 3). */
    cr_assert_str_eq(good.names[3], "w.exp_avg");
    fc_tensor *keep = bad.t[3];
    bad.t[3] = fc_zeros(ctx, FC_F32, FC_SHAPE({"r", 3}, {"c", 6}));
    load(opt, &bad, FC_ERR_SHAPE);
    fct_expect_error(ctx, FC_ERR_SHAPE, "fc_optim_load_state", "\"w.exp_avg\"");
    bad.t[3] = fc_zeros(ctx, FC_F32, FC_SHAPE({"r", 4}, {"d", 6}));
    load(opt, &bad, FC_ERR_SHAPE);
    fct_expect_error(ctx, FC_ERR_SHAPE, "fc_optim_load_state", "\"w.exp_avg\"");
    /* A dtype mismatch. */
    bad.t[3] = fc_zeros(ctx, FC_F64, FC_SHAPE({"r", 4}, {"c", 6}));
    load(opt, &bad, FC_ERR_DTYPE);
    fct_expect_error(ctx, FC_ERR_DTYPE, "fc_optim_load_state", "\"w.exp_avg\"");
    /* The axes in another order are fine (copied by name). */
    bad.t[3] = fc_clone(ctx, fc_transpose(ctx, keep, "r", "c"));
    load(opt, &bad, FC_OK);
    snapshot after = take(ctx, opt);
    expect_same_state(ctx, &good, &after);
    drop(&after);
    bad.t[3] = keep;
    /* A bad step count. */
    keep = bad.t[2];
    bad.t[2] = fc_scalar(ctx, FC_F64, 1.5);
    load(opt, &bad, FC_ERR_DTYPE);
    fct_expect_error(ctx, FC_ERR_DTYPE, "fc_optim_load_state", "\"w.step\"");
    bad.t[2] = fc_scalar(ctx, FC_F64, 1.0); /* a whole f64 is accepted */
    load(opt, &bad, FC_OK);
    bad.t[2] = keep;
    /* A missing entry (drop the last: b.exp_avg_sq), and a missing step. */
    bad.n = 7;
    load(opt, &bad, FC_ERR_INVALID_ARG);
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_optim_load_state", "\"b.exp_avg_sq\" is missing");
    bad.n = 8;
    char *n0 = bad.names[0];
    fc_tensor *t0 = bad.t[0];
    bad.names[0] = bad.names[1];
    bad.t[0] = bad.t[1];
    load(opt, &bad, FC_ERR_INVALID_ARG);
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_optim_load_state", "\"group.0.lr\" is given twice");
    bad.t[0] = t0;
    const char *only_lr[1] = {"group.0.lr"};
    cr_expect_eq(fc_optim_load_state(opt, only_lr, &bad.t[1], 1), FC_ERR_INVALID_ARG);
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_optim_load_state", "\"step\" is missing");
    bad.names[0] = n0;
    /* A NULL tensor, a bad group and a negative lr. */
    keep = bad.t[5];
    bad.t[5] = NULL;
    load(opt, &bad, FC_ERR_INVALID_ARG);
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_optim_load_state", "tensors[5]");
    bad.t[5] = keep;
    const char *g7[1] = {"group.7.lr"};
    cr_expect_eq(fc_optim_load_state(opt, g7, &bad.t[1], 1), FC_ERR_INVALID_ARG);
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_optim_load_state", "\"group.7.lr\"");
    keep = bad.t[1];
    bad.t[1] = fc_scalar(ctx, FC_F64, -1);
    load(opt, &bad, FC_ERR_INVALID_ARG);
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_optim_load_state", "\"group.0.lr\"");
    bad.t[1] = keep;
    /* Nothing above changed the state. */
    after = take(ctx, opt);
    expect_same_state(ctx, &good, &after);
    /* Only the global entries: back to no state for either parameter. */
    load(opt, &(snapshot){2, good.names, good.t}, FC_OK);
    cr_expect_eq(fc_optim_state_count(opt), 2);
    drop(&after);
    drop(&good);
    drop(&bad);
    fc_optim_free(opt);
    fc_scope_end(ctx, s);
}

/* ---- interplay with autograd and scopes --------------------------------------------- */

Test(optim, step_invalidates_saved_graph)
{
    fc_scope s = fc_scope_begin(ctx);
    fc_tensor *w = variable(ctx, fc_rand_normal(ctx, FC_F32, FC_SHAPE({"n", 8}), 1, 0, 1));
    fc_optim *opt = fc_optim_new(ctx, FC_OPTIM_SGD, &(fc_optim_options){.lr = 0.1});
    cr_assert_eq(fc_optim_add_group(opt, FC_PARAMS(w), FC_NAMES("w"), NULL), 0);
    fc_tensor *loss = fc_sum(ctx, fc_mul(ctx, w, w), FC_NO_AXES);
    set_grad(ctx, w, fc_full(ctx, FC_F32, FC_SHAPE({"n", 8}), 1.0));
    cr_assert_eq(fc_optim_step(opt), FC_OK);
    /* The step changed w in place after the graph saved it. */
    cr_expect_eq(fc_backward(ctx, loss), FC_ERR_STATE);
    fc_ctx_clear_error(ctx);
    fc_optim_free(opt);
    fc_scope_end(ctx, s);
}

/* The optimizer's state outlives the caller's scopes. */
Test(optim, state_outlives_scopes)
{
    fc_tensor *w = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"r", 3}, {"c", 5}), 1, 0, 1);
    variable(ctx, w);
    fc_optim *opt = fc_optim_new(ctx, FC_OPTIM_ADAM, NULL);
    cr_assert_eq(fc_optim_add_group(opt, FC_PARAMS(w), FC_NAMES("w"), NULL), 0);
    for (int k = 0; k < 3; k++) {
        fc_scope outer = fc_scope_begin(ctx);
        fc_scope inner = fc_scope_begin(ctx);
        set_grad(ctx, w, fc_rand_normal(ctx, FC_F32, FC_SHAPE({"r", 3}, {"c", 5}), 7 + k, 0, 1));
        cr_assert_eq(fc_optim_step(opt), FC_OK);
        fc_scope_end(ctx, inner);
        fc_scope_end(ctx, outer);
    }
    cr_expect_eq(fc_optim_state_count(opt), 5);
    fc_scope s = fc_scope_begin(ctx);
    fc_tensor *m = fc_optim_state_get(opt, 3, NULL);
    cr_expect(isfinite(fc_tensor_item(fc_sum(ctx, m, FC_NO_AXES))));
    fc_scope_end(ctx, s);
    fc_optim_free(opt);
    fc_zero_grad(ctx, w);
    fc_release(w);
}

/* ---- clipping ----------------------------------------------------------------------- */

Test(optim, clip_goldens)
{
    fct_goldens g = fct_golden_load("optim_goldens.txt");
    fc_scope s = fc_scope_begin(ctx);
    fc_tensor *gw = fc_select(ctx, fct_golden_tensor(ctx, fct_golden_get(&g, "grad.w"), FC_F32, KRC), "k", 0);
    fc_tensor *gb = fc_select(ctx, fct_golden_tensor(ctx, fct_golden_get(&g, "grad.b"), FC_F32, KC), "k", 0);
    fc_tensor *w = variable(ctx, fc_zeros(ctx, FC_F32, FC_SHAPE({"r", 4}, {"c", 6})));
    fc_tensor *b = variable(ctx, fc_zeros(ctx, FC_F32, FC_SHAPE({"c", 6})));
    fc_tensor *nog = variable(ctx, fc_zeros(ctx, FC_F32, FC_SHAPE({"c", 2}))); /* no gradient: skipped */
    fc_tensor *const ps[3] = {w, nog, b};
    /* Clipped (norm > 1). */
    set_grad(ctx, w, gw);
    set_grad(ctx, b, gb);
    double total = fc_clip_grad_norm(ctx, ps, 3, 1.0);
    const fct_golden *tot = fct_golden_get(&g, "clip_norm.total");
    cr_expect(fabs(total - tot->v[0]) <= 1e-6 * tot->v[0], "total %.9g, want %.9g", total, tot->v[0]);
    expect_close(fc_grad(ctx, w), fct_golden_get(&g, "clip_norm.w"), 0, 1e-6, "clip_norm.w", 0);
    expect_close(fc_grad(ctx, b), fct_golden_get(&g, "clip_norm.b"), 0, 1e-6, "clip_norm.b", 0);
    /* Not clipped: the gradients keep their bits. */
    set_grad(ctx, w, gw);
    set_grad(ctx, b, gb);
    total = fc_clip_grad_norm(ctx, ps, 3, 100.0);
    tot = fct_golden_get(&g, "clip_norm_big.total");
    cr_expect(fabs(total - tot->v[0]) <= 1e-6 * tot->v[0], "total %.9g, want %.9g", total, tot->v[0]);
    fct_expect_bits(ctx, fc_grad(ctx, w), ctx, gw, "unclipped w");
    fct_expect_bits(ctx, fc_grad(ctx, b), ctx, gb, "unclipped b");
    /* By value. */
    cr_expect_eq(fc_clip_grad_value(ctx, ps, 3, 0.5), FC_OK);
    expect_close(fc_grad(ctx, w), fct_golden_get(&g, "clip_value.w"), 0, 0, "clip_value.w", 0);
    expect_close(fc_grad(ctx, b), fct_golden_get(&g, "clip_value.b"), 0, 0, "clip_value.b", 0);
    cr_expect_null(fc_grad(ctx, nog));
    /* Through an optimizer: its parameters in order. */
    fc_optim *opt = fc_optim_new(ctx, FC_OPTIM_SGD, &(fc_optim_options){.lr = 1});
    cr_assert_eq(fc_optim_add_group(opt, ps, FC_NAMES("w", "nog", "b"), NULL), 0);
    set_grad(ctx, w, gw);
    set_grad(ctx, b, gb);
    total = fc_optim_clip_grad_norm(opt, 1.0);
    tot = fct_golden_get(&g, "clip_norm.total");
    cr_expect(fabs(total - tot->v[0]) <= 1e-6 * tot->v[0], "total %.9g, want %.9g", total, tot->v[0]);
    expect_close(fc_grad(ctx, w), fct_golden_get(&g, "clip_norm.w"), 0, 1e-6, "optim clip_norm.w", 0);
    cr_expect_eq(fc_optim_clip_grad_value(opt, 1e-3), FC_OK);
    cr_expect_eq(fc_tensor_item(fc_max(ctx, fc_abs(ctx, fc_grad(ctx, w)), FC_NO_AXES)), (double)1e-3f);
    /* No gradients at all: 0. */
    fc_optim_zero_grad(opt);
    cr_expect_eq(fc_clip_grad_norm(ctx, ps, 3, 1.0), 0);
    /* f64 gradients are clipped in double. */
    fc_tensor *d = variable(ctx, fc_zeros(ctx, FC_F64, FC_SHAPE({"n", 2})));
    set_grad(ctx, d, fc_from_data(ctx, FC_F64, FC_SHAPE({"n", 2}), (double[]){3, 4}, 16));
    cr_expect_eq(fc_clip_grad_norm(ctx, &d, 1, 1.0), 5.0);
    cr_expect(fabs(fc_tensor_get(fc_grad(ctx, d), (int64_t[]){1}) - 4 / (5 + 1e-6)) < 1e-15);
    fc_zero_grad(ctx, d);
    fc_optim_free(opt);
    fc_scope_end(ctx, s);
    fct_golden_free(&g);
}

/* ---- schedules ---------------------------------------------------------------------- */

static void expect_schedule(const fct_goldens *g, const char *name, const fc_lr_schedule *sc)
{
    cr_assert_eq(fc_lr_schedule_check(ctx, sc), FC_OK, "%s: %s", name, fc_ctx_error(ctx));
    const fct_golden *e = fct_golden_get(g, name);
    for (int64_t i = 0; i < e->n; i++) {
        double got = fc_lr_at(sc, i);
        cr_expect(fabs(got - e->v[i]) <= 1e-12 * fabs(e->v[i]) + 1e-18, "%s at step %lld: %.17g, want %.17g", name,
                  (long long)i, got, e->v[i]);
    }
}

Test(optim, schedule_goldens)
{
    fct_goldens g = fct_golden_load("optim_goldens.txt");
    expect_schedule(&g, "sched.warmup0", &(fc_lr_schedule){.kind = FC_LR_WARMUP, .lr = 0.1, .warmup_steps = 5});
    expect_schedule(&g, "sched.warmup25",
                    &(fc_lr_schedule){.kind = FC_LR_WARMUP, .lr = 0.1, .warmup_steps = 5, .warmup_start = 0.25});
    expect_schedule(&g, "sched.cosine",
                    &(fc_lr_schedule){.kind = FC_LR_COSINE, .lr = 0.1, .total_steps = 10, .min_lr = 1e-3});
    expect_schedule(&g, "sched.step", &(fc_lr_schedule){.kind = FC_LR_STEP, .lr = 0.1, .step_size = 3, .gamma = 0.5});
    expect_schedule(&g, "sched.warmup_cosine",
                    &(fc_lr_schedule){.kind = FC_LR_WARMUP_COSINE, .lr = 0.1, .warmup_steps = 4, .warmup_start = 0.1,
                                      .total_steps = 14, .min_lr = 2e-3});
    expect_schedule(&g, "sched.warmup0_cosine",
                    &(fc_lr_schedule){.kind = FC_LR_WARMUP_COSINE, .lr = 0.1, .warmup_steps = 4, .total_steps = 14,
                                      .min_lr = 2e-3});
    fct_golden_free(&g);
    fc_lr_schedule c = {.kind = FC_LR_CONSTANT, .lr = 3e-4};
    cr_expect_eq(fc_lr_at(&c, 0), 3e-4);
    cr_expect_eq(fc_lr_at(&c, 1000000), 3e-4);
    cr_expect(isnan(fc_lr_at(&c, -1)));
    cr_expect(isnan(fc_lr_at(NULL, 0)));
    /* StepLR's default gamma. */
    cr_expect(fabs(fc_lr_at(&(fc_lr_schedule){.kind = FC_LR_STEP, .lr = 1, .step_size = 2}, 5) - 0.01) < 1e-17);
    /* Driving an optimizer's lr. */
    fc_scope s = fc_scope_begin(ctx);
    fc_tensor *w = variable(ctx, fc_zeros(ctx, FC_F32, FC_SHAPE({"n", 3})));
    fc_optim *opt = fc_optim_new(ctx, FC_OPTIM_SGD, &(fc_optim_options){.lr = 1});
    cr_assert_eq(fc_optim_add_group(opt, FC_PARAMS(w), FC_NAMES("w"), NULL), 0);
    cr_assert_eq(fc_optim_add_group(opt, FC_PARAMS(variable(ctx, fc_zeros(ctx, FC_F32, FC_SHAPE({"n", 3})))),
                                    FC_NAMES("v"), &(fc_optim_group){.lr = 2}),
                 1);
    fc_lr_schedule wc = {.kind = FC_LR_WARMUP_COSINE, .lr = 0.1, .warmup_steps = 4, .total_steps = 14, .min_lr = 2e-3};
    cr_expect_eq(fc_optim_set_lr(opt, -1, fc_lr_at(&wc, 6)), FC_OK);
    cr_expect_eq(fc_optim_lr(opt, 0), fc_lr_at(&wc, 6));
    cr_expect_eq(fc_optim_lr(opt, 1), fc_lr_at(&wc, 6));
    cr_expect_eq(fc_optim_set_lr(opt, 1, 0.5), FC_OK);
    cr_expect_eq(fc_optim_lr(opt, 1), 0.5);
    cr_expect(isnan(fc_optim_lr(opt, 2)));
    /* An invalid schedule gives NaN, which set_lr rejects. */
    cr_expect_eq(fc_optim_set_lr(opt, 0, fc_lr_at(&(fc_lr_schedule){.kind = FC_LR_COSINE, .lr = 0.1}, 3)),
                 FC_ERR_INVALID_ARG);
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_optim_set_lr", "lr = nan");
    cr_expect_eq(fc_optim_set_lr(opt, 2, 0.1), FC_ERR_INVALID_ARG);
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_optim_set_lr", "group = 2");
    fc_optim_free(opt);
    fc_scope_end(ctx, s);
}

Test(optim, schedule_errors)
{
    struct { fc_lr_schedule s; const char *field; } bad[] = {
        {{.kind = (fc_lr_kind)9, .lr = 0.1}, "kind = 9"},
        {{.kind = FC_LR_CONSTANT, .lr = -0.1}, "lr = -0.1"},
        {{.kind = FC_LR_CONSTANT, .lr = INFINITY}, "lr = inf"},
        {{.kind = FC_LR_WARMUP, .lr = 0.1}, "warmup_steps = 0"},
        {{.kind = FC_LR_WARMUP, .lr = 0.1, .warmup_steps = 3, .warmup_start = 1.5}, "warmup_start = 1.5"},
        {{.kind = FC_LR_COSINE, .lr = 0.1, .total_steps = 0}, "total_steps = 0"},
        {{.kind = FC_LR_COSINE, .lr = 0.1, .total_steps = 5, .min_lr = 0.2}, "min_lr = 0.2"},
        {{.kind = FC_LR_WARMUP_COSINE, .lr = 0.1, .warmup_steps = 5, .total_steps = 5}, "total_steps = 5"},
        {{.kind = FC_LR_STEP, .lr = 0.1}, "step_size = 0"},
        {{.kind = FC_LR_STEP, .lr = 0.1, .step_size = 2, .gamma = -1}, "gamma = -1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_expect_eq(fc_lr_schedule_check(ctx, &bad[i].s), FC_ERR_INVALID_ARG);
        fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_lr_schedule_check", bad[i].field);
        cr_expect(isnan(fc_lr_at(&bad[i].s, 1)), "%s", bad[i].field);
    }
    cr_expect_eq(fc_lr_schedule_check(ctx, NULL), FC_ERR_INVALID_ARG);
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_lr_schedule_check", "NULL");
}

/* ---- errors ----------------------------------------------------------------------------- */

Test(optim, hyper_parameter_errors)
{
    struct { fc_optim_kind kind; fc_optim_options o; const char *arg; } bad[] = {
        {FC_OPTIM_SGD, {.lr = 0}, "opts->lr is required"},
        {FC_OPTIM_SGD, {.lr = -0.1}, "opts->lr = -0.1"},
        {FC_OPTIM_ADAM, {.lr = NAN}, "opts->lr = nan"},
        {FC_OPTIM_ADAM, {.betas = {1.0, 0.999}}, "opts->betas[0] = 1"},
        {FC_OPTIM_ADAMW, {.betas = {0.9, -0.1}}, "opts->betas[1] = -0.1"},
        {FC_OPTIM_ADAM, {.eps = -1e-8}, "opts->eps"},
        {FC_OPTIM_ADAMW, {.weight_decay = -0.01}, "opts->weight_decay"},
        {FC_OPTIM_SGD, {.lr = 0.1, .momentum = -0.9}, "opts->momentum"},
        {FC_OPTIM_SGD, {.lr = 0.1, .nesterov = 1}, "opts->nesterov"},
        {FC_OPTIM_SGD, {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .nesterov = 1}, "opts->nesterov"},
        {FC_OPTIM_SGD, {.lr = 0.1, .nesterov = 2}, "opts->nesterov = 2"},
        {FC_OPTIM_MUON, {.momentum = 1.0}, "opts->momentum = 1"},
        {FC_OPTIM_MUON, {.ns_steps = -1}, "opts->ns_steps = -1"},
        {(fc_optim_kind)7, {.lr = 0.1}, "kind = 7"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_expect_null(fc_optim_new(ctx, bad[i].kind, &bad[i].o), "%s", bad[i].arg);
        fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_optim_new", bad[i].arg);
    }
    /* Explicit zeros where the default is not zero are fine. */
    fc_optim *o = fc_optim_new(ctx, FC_OPTIM_ADAMW, &(fc_optim_options){.betas = {FC_OPTIM_ZERO, 0.5},
                                                                        .weight_decay = FC_OPTIM_ZERO});
    cr_expect(o, "%s", fc_ctx_error(ctx));
    fc_optim_free(o);
    o = fc_optim_new(ctx, FC_OPTIM_SGD, &(fc_optim_options){.lr = FC_OPTIM_ZERO});
    cr_expect(o, "%s", fc_ctx_error(ctx));
    fc_optim_free(o);
}

Test(optim, parameter_errors)
{
    fc_scope s = fc_scope_begin(ctx);
    fc_optim *opt = fc_optim_new(ctx, FC_OPTIM_ADAM, NULL);
    cr_assert(opt);
    fc_tensor *w = variable(ctx, fc_zeros(ctx, FC_F32, FC_SHAPE({"n", 3})));
    fc_tensor *konst = fc_zeros(ctx, FC_F32, FC_SHAPE({"n", 3}));
    fc_tensor *made = fc_mul_scalar(ctx, w, 2); /* an op's result, not a leaf */
    fc_tensor *d = variable(ctx, fc_zeros(ctx, FC_F64, FC_SHAPE({"n", 3})));
    cr_expect_eq(fc_optim_add_group(opt, FC_PARAMS(w, konst), FC_NAMES("w", "konst"), NULL), -1);
    fct_expect_error(ctx, FC_ERR_STATE, "fc_optim_add_group", "params[1] (\"konst\")");
    cr_expect_eq(fc_optim_add_group(opt, FC_PARAMS(made), FC_NAMES("made"), NULL), -1);
    fct_expect_error(ctx, FC_ERR_STATE, "fc_optim_add_group", "not a variable");
    cr_expect_eq(fc_optim_add_group(opt, FC_PARAMS(d), FC_NAMES("d"), NULL), -1);
    fct_expect_error(ctx, FC_ERR_DTYPE, "fc_optim_add_group", "f64");
    cr_expect_eq(fc_optim_add_group(opt, FC_PARAMS(w, w), FC_NAMES("a", "b"), NULL), -1);
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_optim_add_group", "already in the optimizer");
    cr_expect_eq(fc_optim_add_group(opt, FC_PARAMS(NULL), FC_NAMES("x"), NULL), -1);
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_optim_add_group", "params[0] (\"x\") is NULL");
    cr_expect_eq(fc_optim_add_group(opt, FC_PARAMS(w), FC_NAMES(""), NULL), -1);
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_optim_add_group", "names[0] is empty");
    cr_expect_eq(fc_optim_add_group(opt, FC_PARAMS(w), FC_NAMES("w"), &(fc_optim_group){.lr = -1}), -1);
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_optim_add_group", "g->lr = -1");
    cr_expect_eq(fc_optim_add_group(opt, FC_PARAMS(w), (const char *const[]){"w"}, 0, NULL), -1);
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_optim_add_group", "n = 0");
    /* Nothing was added by the failures. */
    cr_expect_eq(fc_optim_param_count(opt), 0);
    cr_expect_eq(fc_optim_group_count(opt), 0);
    cr_expect_eq(fc_optim_add_group(opt, FC_PARAMS(w), FC_NAMES("w"), NULL), 0);
    fc_tensor *v = variable(ctx, fc_zeros(ctx, FC_F32, FC_SHAPE({"n", 3})));
    cr_expect_eq(fc_optim_add_group(opt, FC_PARAMS(v), FC_NAMES("w"), NULL), -1);
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_optim_add_group", "names[0] = \"w\" is already");
    const char *nm;
    cr_expect_eq(fc_optim_param(opt, 0, &nm), w);
    cr_expect_str_eq(nm, "w");
    cr_expect_null(fc_optim_param(opt, 1, NULL));
    /* Clipping arguments. */
    cr_expect_eq(fc_clip_grad_norm(ctx, FC_PARAMS(w, NULL), 2, 1.0), -1);
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_clip_grad_norm", "params[1] is NULL");
    cr_expect_eq(fc_clip_grad_norm(ctx, FC_PARAMS(w), 1, -1.0), -1);
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_clip_grad_norm", "max_norm = -1");
    cr_expect_eq(fc_clip_grad_value(ctx, FC_PARAMS(w), 1, NAN), FC_ERR_INVALID_ARG);
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_clip_grad_value", "clip = nan");
    /* NULL optimizers are no-ops / errors without a context. */
    cr_expect_eq(fc_optim_step(NULL), FC_ERR_INVALID_ARG);
    fc_optim_zero_grad(NULL);
    fc_optim_free(NULL);
    cr_expect_eq(fc_optim_state_count(NULL), 0);
    cr_expect_eq(fc_ctx_status(ctx), FC_OK);
    fc_optim_free(opt);
    fc_scope_end(ctx, s);
}
