/* SPDX-License-Identifier: MIT */
/* Flash attention (src/exec/attention.c) against a naive double-precision
 * reference that forms the full softmax: many shapes (queries, keys, head
 * dims, GQA groups), causal with position offsets, sliding windows, additive
 * masks, sinks, softcap, f16 K/V (the reference uses the exactly widened
 * values), strided and aliased layouts, 1 vs 2 threads bit for bit, and the
 * dispatch capped to scalar and avx2.
 *
 * Tolerance: |got - ref| <= 1e-5 * (1 + max|V|) per element (the reference
 * is exact to double; the kernel accumulates in f32 with a 2-ulp exp). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/dispatch.h"
#include "exec/attention.h"
#include "exec/workers.h"
#include "fct.h"

typedef struct tcase {
    int64_t n_q, n_kv, n_head, n_kv_head, d, dv;
    int causal;
    int64_t q_pos0, window;
    int use_mask, mask_per_head, mask_full_rows; /* mask_full_rows: some rows entirely -inf */
    int use_sinks;
    float sink_bias;   /* added to the random sink logits */
    float softcap;
    float logit_gain;  /* multiplies the default 1/sqrt(d) scale */
    int f16;
    int pad;           /* extra elements in every stride */
    int alias_o_q;     /* O written over Q */
    uint64_t seed;
} tcase;

typedef struct tdata {
    float *q, *o, *mask, *sinks;
    void *k, *v;
    int64_t q_ts, q_hs, k_ts, k_hs, v_ts, v_hs, o_ts, o_hs, mask_rs, mask_hs;
    double *ref;
    double vmax;
} tdata;

static double kv_get(const tcase *c, const void *p, int64_t i)
{
    if (c->f16) return (double)fc_f16_to_f32(((const fc_f16 *)p)[i]);
    return (double)((const float *)p)[i];
}

static void fill_kv(const tcase *c, void *p, int64_t n, fct_rng *r)
{
    for (int64_t i = 0; i < n; i++) {
        float x = (float)fct_uniform(r, -1.0, 1.0);
        if (c->f16)
            ((fc_f16 *)p)[i] = fc_f32_to_f16(x);
        else
            ((float *)p)[i] = x;
    }
}

static float case_scale(const tcase *c)
{
    return (float)(c->logit_gain / sqrt((double)c->d));
}

static void make_data(const tcase *c, tdata *t)
{
    fct_rng r = {c->seed ? c->seed : 12345u};
    const int64_t dv = c->dv ? c->dv : c->d;
    const int64_t pad = c->pad;
    size_t kel = c->f16 ? sizeof(fc_f16) : sizeof(float);

    t->q_hs = c->d + pad;
    t->q_ts = c->n_head * t->q_hs + pad;
    t->k_hs = c->d + pad;
    t->k_ts = c->n_kv_head * t->k_hs + 3 * pad;
    t->v_hs = dv + 2 * pad;
    t->v_ts = c->n_kv_head * t->v_hs + pad;
    if (c->alias_o_q) {
        t->o_hs = t->q_hs;
        t->o_ts = t->q_ts;
    } else {
        t->o_hs = dv + pad;
        t->o_ts = c->n_head * t->o_hs + 2 * pad;
    }
    const int64_t nq_el = c->n_q * t->q_ts + 1, nk_el = c->n_kv * t->k_ts + 1, nv_el = c->n_kv * t->v_ts + 1;
    t->q = malloc((size_t)nq_el * sizeof(float));
    t->k = malloc((size_t)nk_el * kel);
    t->v = malloc((size_t)nv_el * kel);
    t->o = c->alias_o_q ? t->q : malloc((size_t)(c->n_q * t->o_ts + 1) * sizeof(float));
    for (int64_t i = 0; i < nq_el; i++) t->q[i] = (float)fct_uniform(&r, -1.0, 1.0);
    fill_kv(c, t->k, nk_el, &r);
    fill_kv(c, t->v, nv_el, &r);
    if (!c->alias_o_q)
        for (int64_t i = 0; i < c->n_q * t->o_ts + 1; i++) t->o[i] = 1234.5f; /* poison */

    t->mask = NULL;
    t->mask_rs = t->mask_hs = 0;
    if (c->use_mask) {
        t->mask_rs = c->n_kv + pad;
        t->mask_hs = c->mask_per_head ? c->n_q * t->mask_rs : 0;
        int64_t n = (c->mask_per_head ? c->n_head : 1) * c->n_q * t->mask_rs + 1;
        t->mask = malloc((size_t)n * sizeof(float));
        for (int64_t i = 0; i < n; i++) {
            double u = fct_uniform(&r, 0.0, 1.0);
            t->mask[i] = u < 0.2 ? -INFINITY : (float)fct_uniform(&r, -2.0, 2.0);
        }
        if (c->mask_full_rows)
            for (int64_t tq = 0; tq < c->n_q; tq += 3)
                for (int64_t s = 0; s < c->n_kv; s++) t->mask[tq * t->mask_rs + s] = -INFINITY;
    }
    t->sinks = NULL;
    if (c->use_sinks) {
        t->sinks = malloc((size_t)c->n_head * sizeof(float));
        for (int64_t h = 0; h < c->n_head; h++) t->sinks[h] = (float)fct_uniform(&r, -2.0, 2.0) + c->sink_bias;
    }

    /* the reference, on the inputs as they are before the call */
    t->ref = calloc((size_t)(c->n_q * c->n_head * dv), sizeof(double));
    double *x = malloc((size_t)(c->n_kv ? c->n_kv : 1) * sizeof(double));
    int *vis = malloc((size_t)(c->n_kv ? c->n_kv : 1) * sizeof(int));
    const int64_t G = c->n_head / c->n_kv_head;
    const double scale = (double)case_scale(c);
    t->vmax = 0.0;
    for (int64_t s = 0; s < c->n_kv; s++)
        for (int64_t g = 0; g < c->n_kv_head; g++)
            for (int64_t i = 0; i < dv; i++) {
                double a = fabs(kv_get(c, t->v, s * t->v_ts + g * t->v_hs + i));
                if (a > t->vmax) t->vmax = a;
            }
    for (int64_t tq = 0; tq < c->n_q; tq++)
        for (int64_t h = 0; h < c->n_head; h++) {
            const int64_t g = h / G, pos = c->q_pos0 + tq;
            double mx = -INFINITY;
            for (int64_t s = 0; s < c->n_kv; s++) {
                vis[s] = 1;
                if (c->causal && s > pos) vis[s] = 0;
                if (c->window > 0 && pos - s >= c->window) vis[s] = 0;
                if (!vis[s]) continue;
                double dot = 0.0;
                for (int64_t i = 0; i < c->d; i++)
                    dot += (double)t->q[tq * t->q_ts + h * t->q_hs + i] * kv_get(c, t->k, s * t->k_ts + g * t->k_hs + i);
                double xl = scale * dot;
                if (c->softcap > 0.0f) xl = (double)c->softcap * tanh(xl / (double)c->softcap);
                if (t->mask) xl += (double)t->mask[tq * t->mask_rs + h * t->mask_hs + s];
                x[s] = xl;
                if (xl == -INFINITY) vis[s] = 0;
                else if (xl > mx) mx = xl;
            }
            double *out = t->ref + (tq * c->n_head + h) * dv;
            if (mx == -INFINITY) continue; /* fully masked: zeros */
            double den = 0.0;
            if (t->sinks) {
                double sk = (double)t->sinks[h];
                if (sk > mx) mx = sk;
                den += exp(sk - mx);
            }
            for (int64_t s = 0; s < c->n_kv; s++) {
                if (!vis[s]) continue;
                double p = exp(x[s] - mx);
                den += p;
                for (int64_t i = 0; i < dv; i++) out[i] += p * kv_get(c, t->v, s * t->v_ts + g * t->v_hs + i);
            }
            for (int64_t i = 0; i < dv; i++) out[i] /= den;
        }
    free(x);
    free(vis);
}

static void free_data(const tcase *c, tdata *t)
{
    free(t->q);
    free(t->k);
    free(t->v);
    if (!c->alias_o_q) free(t->o);
    free(t->mask);
    free(t->sinks);
    free(t->ref);
}

static fc_attn_args make_args(const tcase *c, tdata *t, fc_attn_workspace *ws)
{
    fc_attn_args a;
    memset(&a, 0, sizeof a);
    a.n_q = c->n_q;
    a.n_kv = c->n_kv;
    a.n_head = c->n_head;
    a.n_kv_head = c->n_kv_head;
    a.head_dim = c->d;
    a.head_dim_v = c->dv;
    a.q = t->q;
    a.q_ts = t->q_ts;
    a.q_hs = t->q_hs;
    a.kv_type = c->f16 ? FC_ATTN_KV_F16 : FC_ATTN_KV_F32;
    a.k = t->k;
    a.k_ts = t->k_ts;
    a.k_hs = t->k_hs;
    a.v = t->v;
    a.v_ts = t->v_ts;
    a.v_hs = t->v_hs;
    a.o = t->o;
    a.o_ts = t->o_ts;
    a.o_hs = t->o_hs;
    a.scale = case_scale(c);
    a.softcap = c->softcap;
    a.causal = c->causal;
    a.q_pos0 = c->q_pos0;
    a.window = c->window;
    a.mask = t->mask;
    a.mask_rs = t->mask_rs;
    a.mask_hs = t->mask_hs;
    a.sinks = t->sinks;
    a.ws = ws;
    return a;
}

static void describe(const tcase *c, char *buf, size_t n)
{
    snprintf(buf, n,
             "n_q=%lld n_kv=%lld heads=%lld/%lld d=%lld dv=%lld causal=%d pos0=%lld window=%lld mask=%d/%d/%d "
             "sinks=%d(+%g) softcap=%g gain=%g f16=%d pad=%d alias=%d",
             (long long)c->n_q, (long long)c->n_kv, (long long)c->n_head, (long long)c->n_kv_head, (long long)c->d,
             (long long)c->dv, c->causal, (long long)c->q_pos0, (long long)c->window, c->use_mask,
             c->mask_per_head, c->mask_full_rows, c->use_sinks, (double)c->sink_bias, (double)c->softcap,
             (double)c->logit_gain, c->f16, c->pad, c->alias_o_q);
}

/* Run the case with pool w1 (and, when w2 is given, again with w2 and
 * compare bits); check against the reference. */
static void run_case(const tcase *c0, fc_workers *w1, fc_workers *w2)
{
    tcase c = *c0;
    if (c.logit_gain == 0.0f) c.logit_gain = 1.0f;
    char desc[512];
    describe(&c, desc, sizeof desc);
    tdata t;
    make_data(&c, &t);
    const int64_t dv = c.dv ? c.dv : c.d;

    float *q_saved = NULL;
    if (c.alias_o_q) {
        q_saved = malloc((size_t)(c.n_q * t.q_ts + 1) * sizeof(float));
        memcpy(q_saved, t.q, (size_t)(c.n_q * t.q_ts + 1) * sizeof(float));
    }

    fc_attn_args a = make_args(&c, &t, NULL);
    cr_assert_eq(fc_attention_f32(w1, &a), 0, "%s", desc);

    const double tol = 1e-5 * (1.0 + t.vmax);
    double worst = 0.0;
    for (int64_t tq = 0; tq < c.n_q; tq++)
        for (int64_t h = 0; h < c.n_head; h++)
            for (int64_t i = 0; i < dv; i++) {
                double got = (double)t.o[tq * t.o_ts + h * t.o_hs + i];
                double want = t.ref[(tq * c.n_head + h) * dv + i];
                double err = fabs(got - want);
                if (!(err <= tol))
                    cr_assert_fail("%s: O[%lld,%lld,%lld] = %.9g, want %.9g (err %.3g > %.3g)", desc, (long long)tq,
                                   (long long)h, (long long)i, got, want, err, tol);
                if (err > worst) worst = err;
            }
    /* nothing outside the output rows was written */
    if (!c.alias_o_q)
        for (int64_t tq = 0; tq < c.n_q; tq++)
            for (int64_t h = 0; h < c.n_head; h++)
                for (int64_t i = dv; i < t.o_hs && (h + 1 < c.n_head || i < t.o_ts - h * t.o_hs); i++)
                    cr_assert_eq(t.o[tq * t.o_ts + h * t.o_hs + i], 1234.5f, "%s: padding written", desc);

    if (w2) {
        float *first = malloc((size_t)(c.n_q * t.o_ts + 1) * sizeof(float));
        memcpy(first, t.o, (size_t)(c.n_q * t.o_ts + 1) * sizeof(float));
        if (c.alias_o_q) memcpy(t.q, q_saved, (size_t)(c.n_q * t.q_ts + 1) * sizeof(float));
        fc_attn_workspace *ws = fc_attn_workspace_new();
        fc_attn_args a2 = make_args(&c, &t, ws);
        cr_assert_eq(fc_attention_f32(w2, &a2), 0, "%s", desc);
        for (int64_t tq = 0; tq < c.n_q; tq++)
            for (int64_t h = 0; h < c.n_head; h++)
                cr_assert(memcmp(first + tq * t.o_ts + h * t.o_hs, t.o + tq * t.o_ts + h * t.o_hs,
                                 (size_t)dv * sizeof(float)) == 0,
                          "%s: 2 threads differ from 1 at row (%lld, %lld)", desc, (long long)tq, (long long)h);
        fc_attn_workspace_free(ws);
        free(first);
    }
    free(q_saved);
    free_data(&c, &t);
}

static fc_workers *pool2;
static void setup_pool(void)
{
    pool2 = fc_workers_new(2);
    cr_assert(pool2);
}
static void teardown_pool(void)
{
    fc_workers_free(pool2);
}

/* ---- the shape grid ------------------------------------------------------------- */

static const int64_t grid_nq[] = {1, 2, 7, 64, 130};
static const int64_t grid_nkv[] = {1, 5, 64, 200};
static const int64_t grid_d[] = {32, 64, 80, 128};
static const int64_t grid_g[] = {1, 2, 4};
#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

static void grid(int causal, int f16)
{
    uint64_t seed = 1;
    for (size_t iq = 0; iq < N_ELEMS(grid_nq); iq++)
        for (size_t ik = 0; ik < N_ELEMS(grid_nkv); ik++)
            for (size_t id = 0; id < N_ELEMS(grid_d); id++)
                for (size_t ig = 0; ig < N_ELEMS(grid_g); ig++) {
                    tcase c = {0};
                    c.n_q = grid_nq[iq];
                    c.n_kv = grid_nkv[ik];
                    c.d = grid_d[id];
                    c.n_kv_head = 2;
                    c.n_head = 2 * grid_g[ig];
                    c.causal = causal;
                    /* causal: queries are the last n_q positions (decode /
                     * chunked prefill), or start earlier than the keys end */
                    if (causal) c.q_pos0 = (seed % 3 == 0) ? 0 : (c.n_kv > c.n_q ? c.n_kv - c.n_q : 0);
                    c.f16 = f16;
                    c.seed = seed++;
                    run_case(&c, NULL, (seed % 4 == 0) ? pool2 : NULL);
                }
}

Test(attention, grid_full, .init = setup_pool, .fini = teardown_pool) { grid(0, 0); }
Test(attention, grid_causal, .init = setup_pool, .fini = teardown_pool) { grid(1, 0); }
Test(attention, grid_causal_f16, .init = setup_pool, .fini = teardown_pool) { grid(1, 1); }

/* ---- options ------------------------------------------------------------------- */

Test(attention, causal_offsets, .init = setup_pool, .fini = teardown_pool)
{
    /* q_pos0 past, at and before the keys' end; queries longer than keys */
    const int64_t pos0s[] = {0, 3, 60, 63, 64, 100, 250};
    for (size_t i = 0; i < N_ELEMS(pos0s); i++) {
        tcase c = {.n_q = 37, .n_kv = 64, .n_head = 8, .n_kv_head = 2, .d = 64, .causal = 1, .q_pos0 = pos0s[i]};
        c.seed = 100 + i;
        run_case(&c, pool2, NULL);
    }
}

Test(attention, sliding_window, .init = setup_pool, .fini = teardown_pool)
{
    const int64_t windows[] = {1, 2, 7, 32, 100, 1000};
    for (size_t i = 0; i < N_ELEMS(windows); i++)
        for (int causal = 0; causal <= 1; causal++) {
            tcase c = {.n_q = 130, .n_kv = 200, .n_head = 4, .n_kv_head = 2, .d = 80, .causal = causal,
                       .q_pos0 = 70, .window = windows[i]};
            c.seed = 200 + i;
            run_case(&c, NULL, pool2);
            c.n_q = 1;
            c.q_pos0 = 199;
            run_case(&c, NULL, pool2);
        }
}

Test(attention, additive_mask, .init = setup_pool, .fini = teardown_pool)
{
    for (int per_head = 0; per_head <= 1; per_head++)
        for (int causal = 0; causal <= 1; causal++) {
            tcase c = {.n_q = 64, .n_kv = 200, .n_head = 4, .n_kv_head = 1, .d = 64, .causal = causal,
                       .q_pos0 = 136, .use_mask = 1, .mask_per_head = per_head, .pad = 3};
            c.seed = 300 + per_head * 2 + causal;
            run_case(&c, NULL, pool2);
            c.n_q = 1;
            c.q_pos0 = 199;
            run_case(&c, NULL, pool2);
        }
}

Test(attention, fully_masked_rows_are_zero, .init = setup_pool, .fini = teardown_pool)
{
    /* every third row of the mask is -inf everywhere, with and without sinks */
    for (int sinks = 0; sinks <= 1; sinks++) {
        tcase c = {.n_q = 7, .n_kv = 64, .n_head = 4, .n_kv_head = 2, .d = 32, .use_mask = 1,
                   .mask_full_rows = 1, .use_sinks = sinks};
        c.seed = 400 + sinks;
        run_case(&c, NULL, pool2);
    }
    /* causal queries before every key: q_pos0 < 0 means no visible key */
    tcase c = {.n_q = 5, .n_kv = 20, .n_head = 2, .n_kv_head = 1, .d = 32, .causal = 1, .q_pos0 = -3};
    run_case(&c, NULL, NULL);
    /* no keys at all */
    tcase e = {.n_q = 3, .n_kv = 0, .n_head = 2, .n_kv_head = 1, .d = 32, .use_sinks = 1};
    run_case(&e, NULL, NULL);
}

Test(attention, sinks, .init = setup_pool, .fini = teardown_pool)
{
    const float biases[] = {0.0f, -30.0f, 5.0f, 40.0f};
    for (size_t i = 0; i < N_ELEMS(biases); i++) {
        tcase c = {.n_q = 64, .n_kv = 64, .n_head = 8, .n_kv_head = 2, .d = 64, .causal = 1,
                   .use_sinks = 1, .sink_bias = biases[i]};
        c.seed = 500 + i;
        run_case(&c, NULL, pool2);
        c.n_q = 1;
        c.q_pos0 = 63;
        run_case(&c, NULL, pool2);
    }
}

Test(attention, softcap_and_large_logits, .init = setup_pool, .fini = teardown_pool)
{
    tcase c = {.n_q = 64, .n_kv = 200, .n_head = 4, .n_kv_head = 2, .d = 128, .causal = 1, .q_pos0 = 136,
               .softcap = 30.0f, .logit_gain = 40.0f, .seed = 600};
    run_case(&c, NULL, pool2);
    c.softcap = 0.0f;
    c.logit_gain = 8.0f; /* logits of tens: exercises the running-max rescale */
    run_case(&c, NULL, pool2);
}

Test(attention, f16_kv, .init = setup_pool, .fini = teardown_pool)
{
    tcase c = {.n_q = 130, .n_kv = 200, .n_head = 8, .n_kv_head = 2, .d = 80, .causal = 1, .q_pos0 = 70,
               .f16 = 1, .pad = 5, .use_mask = 1, .use_sinks = 1, .window = 50, .seed = 700};
    run_case(&c, NULL, pool2);
    c.n_q = 1;
    c.q_pos0 = 199;
    run_case(&c, NULL, pool2);
}

Test(attention, strided_and_aliased, .init = setup_pool, .fini = teardown_pool)
{
    const int pads[] = {1, 7, 16};
    for (size_t i = 0; i < N_ELEMS(pads); i++) {
        tcase c = {.n_q = 64, .n_kv = 64, .n_head = 4, .n_kv_head = 4, .d = 64, .causal = 1, .pad = pads[i],
                   .seed = 800 + i};
        run_case(&c, NULL, pool2);
        c.alias_o_q = 1;
        run_case(&c, pool2, NULL);
        c.n_q = 1;
        c.q_pos0 = 63;
        run_case(&c, NULL, NULL);
    }
}

Test(attention, value_dim_differs, .init = setup_pool, .fini = teardown_pool)
{
    tcase c = {.n_q = 7, .n_kv = 200, .n_head = 4, .n_kv_head = 2, .d = 96, .dv = 64, .causal = 1,
               .q_pos0 = 193, .seed = 900};
    run_case(&c, NULL, pool2);
    c.dv = 130;
    run_case(&c, NULL, pool2);
}

Test(attention, decode_long_context, .init = setup_pool, .fini = teardown_pool)
{
    tcase c = {.n_q = 1, .n_kv = 1500, .n_head = 8, .n_kv_head = 2, .d = 128, .causal = 1, .q_pos0 = 1499,
               .seed = 1000};
    run_case(&c, NULL, pool2);
    c.f16 = 1;
    run_case(&c, NULL, pool2);
    c.n_kv_head = 1; /* MQA */
    run_case(&c, NULL, pool2);
}

/* ---- several key blocks (prefill), split-KV (decode) ----------------------------------- */

static fc_attn_plan plan_of(const tcase *c)
{
    tdata t;
    make_data(c, &t);
    fc_attn_args a = make_args(c, &t, NULL);
    fc_attn_plan plan;
    cr_assert_eq(fc_attention_plan(&a, &plan), 0);
    free_data(c, &t);
    return plan;
}

Test(attention, prefill_several_key_blocks, .init = setup_pool, .fini = teardown_pool)
{
    /* more keys than one block: the online rescale across blocks (logits of
     * tens), K/V packed once per (KV head, key block) and shared by the
     * query blocks */
    tcase c = {.n_q = 100, .n_kv = 1300, .n_head = 8, .n_kv_head = 2, .d = 128, .causal = 1, .q_pos0 = 1200,
               .logit_gain = 8.0f, .seed = 1100};
    fc_attn_plan plan = plan_of(&c);
    cr_assert(plan.kv_split == 0 && plan.prepacked, "prefill shape: split %lld, prepacked %d",
              (long long)plan.kv_split, plan.prepacked);
    cr_assert(plan.kv_block < c.n_kv, "one key block of %lld holds all %lld keys", (long long)plan.kv_block,
              (long long)c.n_kv);
    run_case(&c, NULL, pool2);
    /* window, mask, sinks, f16, padding, d 64 (longer blocks) */
    tcase d = {.n_q = 90, .n_kv = 2500, .n_head = 4, .n_kv_head = 1, .d = 64, .causal = 1, .q_pos0 = 2400,
               .window = 1500, .use_mask = 1, .mask_per_head = 1, .use_sinks = 1, .f16 = 1, .pad = 3,
               .logit_gain = 4.0f, .seed = 1101};
    run_case(&d, NULL, pool2);
    /* softcap, queries from position 0 (the early query blocks skip the late
     * key blocks), value dim differs */
    tcase e = {.n_q = 700, .n_kv = 700, .n_head = 2, .n_kv_head = 2, .d = 32, .dv = 48, .causal = 1,
               .softcap = 30.0f, .logit_gain = 40.0f, .seed = 1102};
    run_case(&e, NULL, pool2);
    /* packed K/V beyond the prepack budget (64 MiB): each chunk packs its
     * own blocks (the plan only: the data is never touched) */
    static float dummy[1];
    fc_attn_args big;
    memset(&big, 0, sizeof big);
    big.n_q = 60;
    big.n_kv = 8800;
    big.n_head = big.n_kv_head = 8;
    big.head_dim = 128;
    big.q = big.o = dummy;
    big.k = big.v = dummy;
    big.causal = 1;
    big.q_pos0 = 8740;
    cr_assert_eq(fc_attention_plan(&big, &plan), 0);
    cr_assert(plan.kv_split == 0 && !plan.prepacked && plan.n_chunks >= 8, "split %lld, prepacked %d, %lld chunks",
              (long long)plan.kv_split, plan.prepacked, (long long)plan.n_chunks);
    big.n_kv = 4000; /* within the budget */
    big.q_pos0 = 3940;
    cr_assert_eq(fc_attention_plan(&big, &plan), 0);
    /* Prepacking pays only when a KV head has several query blocks; how many
     * depends on the tile height (one block with NEON's 8-row tile). */
    if (plan.n_chunks > big.n_kv_head)
        cr_assert(plan.prepacked, "4000 keys x 8 heads, %lld chunks: not prepacked", (long long)plan.n_chunks);
    else
        cr_assert(!plan.prepacked, "one query block per KV head, yet prepacked");
}

Test(attention, split_kv_decode, .init = setup_pool, .fini = teardown_pool)
{
    fc_workers *w3 = fc_workers_new(3);
    cr_assert(w3);
    for (int64_t nq = 1; nq <= 3; nq += 2) {
        tcase c = {.n_q = nq, .n_kv = 3000, .n_head = 8, .n_kv_head = 2, .d = 128, .causal = 1,
                   .q_pos0 = 3000 - nq, .seed = 1200 + (uint64_t)nq};
        fc_attn_plan plan = plan_of(&c);
        cr_assert(plan.kv_split > 0 && plan.n_chunks > 1, "decode shape: split %lld, %lld chunks",
                  (long long)plan.kv_split, (long long)plan.n_chunks);
        run_case(&c, NULL, pool2);
        run_case(&c, pool2, w3);
        /* a window: most splits see no key */
        tcase d = c;
        d.window = 300;
        d.use_mask = 1;
        d.use_sinks = 1;
        d.seed += 10;
        run_case(&d, NULL, w3);
        /* large logits (the merge rescales), softcap, f16, padding, dv */
        tcase e = c;
        e.f16 = 1;
        e.pad = 5;
        e.logit_gain = 30.0f;
        e.softcap = 20.0f;
        e.dv = 80;
        e.seed += 20;
        run_case(&e, NULL, pool2);
        /* queries early in a long cache: the later splits are empty; f16
         * with the heads of a token contiguous (whole rows widened at once) */
        tcase f = c;
        f.q_pos0 = 700;
        f.n_kv_head = 8;
        f.f16 = 1;
        f.logit_gain = 10.0f;
        f.seed += 30;
        run_case(&f, pool2, w3);
        /* a long cache: splits of many blocks */
        tcase l = {.n_q = nq, .n_kv = 40000, .n_head = 4, .n_kv_head = 2, .d = 64, .causal = 1,
                   .q_pos0 = 40000 - nq, .logit_gain = 6.0f, .seed = 1250 + (uint64_t)nq};
        plan = plan_of(&l);
        cr_assert(plan.kv_split > 2 * plan.kv_block, "split of %lld keys", (long long)plan.kv_split);
        run_case(&l, NULL, w3);
        /* sinks that dominate, every key masked in some rows */
        tcase g = c;
        g.n_kv = 1000;
        g.q_pos0 = 1000 - nq;
        g.use_sinks = 1;
        g.sink_bias = 40.0f;
        g.use_mask = 1;
        g.mask_full_rows = 1;
        g.seed += 40;
        run_case(&g, NULL, w3);
    }
    fc_workers_free(w3);
}

/* ---- threads: bitwise equality across pool sizes ------------------------------------ */

Test(attention, thread_count_independent)
{
    fc_workers *w1 = fc_workers_new(1), *w2 = fc_workers_new(2), *w3 = fc_workers_new(3);
    cr_assert(w1 && w2 && w3);
    tcase cs[] = {
        {.n_q = 130, .n_kv = 200, .n_head = 8, .n_kv_head = 2, .d = 64, .causal = 1, .q_pos0 = 70, .seed = 1},
        {.n_q = 1, .n_kv = 200, .n_head = 16, .n_kv_head = 4, .d = 128, .causal = 1, .q_pos0 = 199, .seed = 2},
        {.n_q = 64, .n_kv = 64, .n_head = 4, .n_kv_head = 1, .d = 80, .use_mask = 1, .use_sinks = 1, .f16 = 1,
         .seed = 3},
        /* decode over a short cache: one key range, its KV heads divided
         * among chunks (8 heads; 3 heads, fewer than the chunks wanted) */
        {.n_q = 1, .n_kv = 40, .n_head = 16, .n_kv_head = 8, .d = 128, .causal = 1, .q_pos0 = 39, .f16 = 1, .seed = 4},
        {.n_q = 2, .n_kv = 70, .n_head = 6, .n_kv_head = 3, .d = 64, .causal = 1, .q_pos0 = 68, .seed = 5},
        /* decode over f16 K/V read in place (dot_x / axpy_x kernels): 4
         * query rows per KV head; per-head masks with whole rows -inf (a
         * row with no weight takes the one-row path) */
        {.n_q = 1, .n_kv = 90, .n_head = 8, .n_kv_head = 2, .d = 128, .causal = 1, .q_pos0 = 89, .f16 = 1, .seed = 6},
        {.n_q = 2, .n_kv = 100, .n_head = 8, .n_kv_head = 4, .d = 64, .f16 = 1, .use_mask = 1, .mask_per_head = 1,
         .mask_full_rows = 1, .seed = 7},
    };
    for (size_t i = 0; i < N_ELEMS(cs); i++) {
        run_case(&cs[i], w1, w2);
        run_case(&cs[i], w2, w3);
        run_case(&cs[i], NULL, w3);
    }
    fc_workers_free(w1);
    fc_workers_free(w2);
    fc_workers_free(w3);
}

/* ---- the dispatch capped to scalar and avx2 ------------------------------------------ */

static void capped(const char *cap)
{
    char err[256];
    fck_isa isa;
    /* An ISA this build does not have (avx2 on AArch64) is a skip, not a pass. */
    if (!fck_isa_parse_cap(cap, &isa, err, sizeof err)) cr_skip_test("this build has no %s arms", cap);
    if (!fck_isa_supported(isa)) cr_skip_test("this CPU lacks %s", cap);
    cr_assert(fck_dispatch_resolve(cap, err, sizeof err), "%s", err);
    fc_attn_plan plan;
    tcase p = {.n_q = 1, .n_kv = 1, .n_head = 1, .n_kv_head = 1, .d = 32};
    tdata t;
    make_data(&p, &t);
    fc_attn_args a = make_args(&p, &t, NULL);
    cr_assert_eq(fc_attention_plan(&a, &plan), 0);
    free_data(&p, &t);
    cr_log_info("cap %s: tile %lldx%lld", cap, (long long)plan.mr, (long long)plan.nr);

    fc_workers *w2 = fc_workers_new(2);
    tcase cs[] = {
        {.n_q = 130, .n_kv = 200, .n_head = 8, .n_kv_head = 2, .d = 80, .causal = 1, .q_pos0 = 70, .seed = 11},
        {.n_q = 7, .n_kv = 64, .n_head = 4, .n_kv_head = 1, .d = 32, .use_mask = 1, .use_sinks = 1, .f16 = 1,
         .window = 20, .causal = 1, .q_pos0 = 57, .seed = 12},
        {.n_q = 1, .n_kv = 200, .n_head = 8, .n_kv_head = 2, .d = 128, .causal = 1, .q_pos0 = 199, .seed = 13},
        {.n_q = 64, .n_kv = 5, .n_head = 2, .n_kv_head = 2, .d = 64, .softcap = 20.0f, .logit_gain = 10.0f,
         .pad = 3, .seed = 14},
    };
    for (size_t i = 0; i < N_ELEMS(cs); i++) run_case(&cs[i], NULL, w2);
    fc_workers_free(w2);
    cr_assert(fck_dispatch_resolve(NULL, err, sizeof err), "%s", err);
}

Test(attention, dispatch_scalar) { capped("scalar"); }
Test(attention, dispatch_avx2) { capped("avx2"); }

/* ---- workspace and arguments --------------------------------------------------------- */

Test(attention, workspace_reused)
{
    tcase c = {.n_q = 64, .n_kv = 200, .n_head = 8, .n_kv_head = 2, .d = 64, .causal = 1, .q_pos0 = 136, .seed = 7};
    c.logit_gain = 1.0f;
    tdata t;
    make_data(&c, &t);
    fc_attn_workspace *ws = fc_attn_workspace_new();
    cr_assert(ws);
    fc_workers *w2 = fc_workers_new(2);
    fc_attn_args a = make_args(&c, &t, ws);
    cr_assert_eq(fc_attention_f32(w2, &a), 0);
    size_t bytes = fc_attn_workspace_bytes(ws);
    cr_assert(bytes > 0);
    float *first = malloc((size_t)(c.n_q * t.o_ts) * sizeof(float));
    memcpy(first, t.o, (size_t)(c.n_q * t.o_ts) * sizeof(float));
    /* same shape again, and a smaller one: no growth, same bits */
    cr_assert_eq(fc_attention_f32(w2, &a), 0);
    cr_assert_eq(fc_attn_workspace_bytes(ws), bytes);
    cr_assert(memcmp(first, t.o, (size_t)(c.n_q * t.o_ts) * sizeof(float)) == 0);
    a.n_q = 1;
    a.q_pos0 = 199;
    cr_assert_eq(fc_attention_f32(w2, &a), 0);
    cr_assert_eq(fc_attn_workspace_bytes(ws), bytes);
    free(first);
    fc_workers_free(w2);
    fc_attn_workspace_free(ws);
    free_data(&c, &t);
}

Test(attention, invalid_arguments)
{
    tcase c = {.n_q = 2, .n_kv = 5, .n_head = 3, .n_kv_head = 2, .d = 32, .seed = 8};
    c.logit_gain = 1.0f;
    tcase ok = c;
    ok.n_head = 4;
    tdata t;
    make_data(&ok, &t);
    fc_attn_args a = make_args(&ok, &t, NULL);
    a.n_head = 3; /* not a multiple of n_kv_head */
    cr_assert_eq(fc_attention_f32(NULL, &a), -2);
    a = make_args(&ok, &t, NULL);
    a.q = NULL;
    cr_assert_eq(fc_attention_f32(NULL, &a), -2);
    a = make_args(&ok, &t, NULL);
    a.k_ts = -1;
    cr_assert_eq(fc_attention_f32(NULL, &a), -2);
    a = make_args(&ok, &t, NULL);
    a.head_dim = 0;
    cr_assert_eq(fc_attention_f32(NULL, &a), -2);
    cr_assert_eq(fc_attention_f32(NULL, NULL), -2);
    /* O untouched by the rejected calls */
    for (int64_t i = 0; i < ok.n_q * t.o_ts; i++) cr_assert_eq(t.o[i], 1234.5f);
    /* n_q = 0 is a no-op */
    a = make_args(&ok, &t, NULL);
    a.n_q = 0;
    cr_assert_eq(fc_attention_f32(NULL, &a), 0);
    free_data(&ok, &t);
}
