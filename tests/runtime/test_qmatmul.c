/* SPDX-License-Identifier: MIT */
/* fc_qmatmul (src/exec/qmatmul.h) against two independent references, both
 * through the ggml oracle:
 *
 * 1. An f32 reference: W's bytes come from ggml_quantize_chunk, are decoded
 *    with ggml's dequantize_row_<fmt>; each activation row goes through
 *    ggml's quantize_row_<partner>_ref and back (dequantize_row_q8_0 / _q8_K;
 *    q8_1, which ggml does not export a decoder for, is d * q by its layout);
 *    then a double-precision dot. What is left is float summation order,
 *    with u = 2^-24, nb blocks per row, S = sum_k |aq_k * wd_jk|:
 *      integer path:  |got - ref| <= (2*nb + 8) * 2u * S'
 *        per block an exact integer dot, then a few float products and one
 *        add per block. S' = S for formats without mins; with mins (q4_1,
 *        q5_1, q2_K, q4_K, q5_K) the scaled part and the min part are
 *        rounded apart and may cancel, each at most ~2x the row's largest
 *        |decoded weight|: S' = 4 * sum_k |aq_k| * max_k |wd_jk|. With a q8_1
 *        partner, ggml's dot uses the block sum s = f16(d * sum q), rounded
 *        to half precision: + sum_blocks |m_w| * sum_block |aq| * 2^-11.
 *      f32-decode path: |got - ref| <= (K + 2) * 2u * S
 *        (exec/gemm.h's bound: one FMA chain over K, exact inputs).
 * 2. ggml's own ggml_vec_dot_<fmt>_q8_<x> on the same activation bytes (the
 *    _ref quantizer's: ggml's AVX quantize_row_q8_0 rounds ties and the
 *    scale differently, up to one quantum per element): within the sum of
 *    both sides' bounds (ggml's own is the integer-path bound). On the
 *    decode path only when it quantizes A (src/quant has the partner's
 *    encoder; otherwise the difference is A's quantization error).
 *
 * Shapes: M in {1, 3, 5, 17, 64}, N in {37, 70} (not multiples of any tile),
 * K of 1, 3 and 12 blocks, and M = 150 (row tasks) at N 37, K of 1 and 3 blocks, padded lda / ldc (padding must stay untouched);
 * 1 thread vs 2 threads bitwise; the forced decode path; bad arguments.
 * One activation row at parallel sizes (the home-range split) on 2, 3 and 5
 * threads, bitwise against 1 thread, single and fused products. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/dispatch.h"
#include "exec/qmatmul.h"
#include "exec/workers.h"
#include "fct.h"
#include "fucina/half.h"
#include "ggml_oracle.h"
#include "quant/quant.h"

#define SENTINEL 1234.5f

/* ggml prototypes (ggml/include/ggml.h, ggml-cpu.h; ggml-quants.h). */
typedef size_t (*quantize_chunk_fn)(int type, const float *src, void *dst, int64_t start, int64_t nrows,
                                    int64_t n_per_row, const float *imatrix);
typedef void (*dequant_fn)(const void *x, float *y, int64_t k);
typedef void (*quant_row_fn)(const float *x, void *y, int64_t k);
typedef void (*vec_dot_fn)(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by,
                           int nrc);

typedef struct oracle {
    quantize_chunk_fn quantize_chunk;
    dequant_fn dequant_w, dequant_a; /* dequant_a NULL for q8_1 */
    quant_row_fn quant_a_ref;
    vec_dot_fn vec_dot;
} oracle;

static void *sym(const char *name)
{
    void *p = fco_ggml_sym(name);
    cr_assert(p, "ggml oracle does not export %s", name);
    return p;
}

static void oracle_get(fcq_type t, oracle *o)
{
    const char *why = NULL;
    if (!fco_ggml_available(&why)) cr_skip_test("%s", why);
    const fcq_traits *wt = fcq_traits_of(t), *at = fcq_traits_of(wt->dot_partner);
    char name[64];
    o->quantize_chunk = (quantize_chunk_fn)sym("ggml_quantize_chunk");
    snprintf(name, sizeof name, "dequantize_row_%s", wt->name);
    o->dequant_w = (dequant_fn)sym(name);
    o->dequant_a = NULL;
    if (at->type != FCQ_Q8_1) {
        snprintf(name, sizeof name, "dequantize_row_%s", at->name);
        o->dequant_a = (dequant_fn)sym(name);
    }
    snprintf(name, sizeof name, "quantize_row_%s_ref", at->name);
    o->quant_a_ref = (quant_row_fn)sym(name);
    snprintf(name, sizeof name, "ggml_vec_dot_%s_%s", wt->name, at->name);
    o->vec_dot = (vec_dot_fn)sym(name);
}

/* An activation row through the partner format and back, ggml's way. */
static void act_roundtrip(const oracle *o, const fcq_traits *at, const float *x, float *y, size_t k, void *q)
{
    o->quant_a_ref(x, q, (int64_t)k);
    if (o->dequant_a) {
        o->dequant_a(q, y, (int64_t)k);
        return;
    }
    const fcq_block_q8_1 *b = q; /* q8_1: x = d * q (s is only a sum) */
    for (size_t i = 0; i < k / at->block_elems; i++) {
        float d = fc_f16_to_f32((fc_f16){b[i].d});
        for (size_t e = 0; e < 32; e++) y[i * 32 + e] = d * (float)b[i].qs[e];
    }
}

typedef struct prob {
    int64_t m, n, k, lda, ldc;
    const fcq_traits *wt, *at;
    float *a, *c, *c2, *wf;
    unsigned char *w;
    size_t wrb;
} prob;

static void prob_new(prob *p, fcq_type t, const oracle *o, int64_t m, int64_t n, int64_t kblocks, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    p->wt = fcq_traits_of(t);
    p->at = fcq_traits_of(p->wt->dot_partner);
    p->m = m, p->n = n, p->k = kblocks * p->wt->block_elems;
    p->lda = p->k + 3, p->ldc = n + 5;
    p->wrb = fcq_row_bytes(p->wt, (size_t)p->k) + 7; /* a padded row stride */
    fct_rng r = {seed};
    p->a = malloc((size_t)(m * p->lda) * sizeof(float));
    p->wf = malloc((size_t)(n * p->k) * sizeof(float));
    p->w = calloc((size_t)n, p->wrb);
    p->c = malloc((size_t)(m * p->ldc) * sizeof(float));
    p->c2 = malloc((size_t)(m * p->ldc) * sizeof(float));
    cr_assert(p->a && p->wf && p->w && p->c && p->c2);
    for (int64_t i = 0; i < m * p->lda; i++) p->a[i] = (float)fct_uniform(&r, -2, 2);
    /* Weights: a per-row scale so rows differ in magnitude, plus an offset
     * in some rows (the min-carrying formats then need their mins). */
    for (int64_t j = 0; j < n; j++) {
        double s = fct_uniform(&r, 0.05, 1.0), off = j % 3 == 0 ? 0.3 * s : 0.0;
        for (int64_t k = 0; k < p->k; k++) p->wf[j * p->k + k] = (float)(off + s * fct_uniform(&r, -1, 1));
    }
    unsigned char *tmp = malloc(fcq_row_bytes(p->wt, (size_t)p->k) * (size_t)n);
    cr_assert(tmp);
    o->quantize_chunk((int)t, p->wf, tmp, 0, n, p->k, NULL);
    size_t rb = fcq_row_bytes(p->wt, (size_t)p->k);
    for (int64_t j = 0; j < n; j++) memcpy(p->w + (size_t)j * p->wrb, tmp + (size_t)j * rb, rb);
    free(tmp);
    for (int64_t i = 0; i < m * p->ldc; i++) p->c[i] = p->c2[i] = SENTINEL;
}

static void prob_free(prob *p)
{
    free(p->a), free(p->wf), free(p->w), free(p->c), free(p->c2);
}

static fc_qmatmul_args args_of(const prob *p, float *c)
{
    return (fc_qmatmul_args){.m = p->m, .n = p->n, .k = p->k, .a = p->a, .lda = p->lda, .w = p->w,
                             .wtype = p->wt->type, .w_row_bytes = p->wrb, .c = c, .ldc = p->ldc};
}

static int is_int_path(fcq_type t) { return strncmp(fc_qmatmul_path(t), "int", 3) == 0; }

/* The decode path rests on src/quant's decoder and partner encoder: skip
 * (never pass) while they do not yet match ggml, which test_quant_* reports. */
static void require_codec(const prob *p, const oracle *o)
{
    size_t k = (size_t)p->k;
    float *x = malloc(k * sizeof(float)), *y = malloc(k * sizeof(float));
    unsigned char *q1 = malloc(fcq_row_bytes(p->at, k)), *q2 = malloc(fcq_row_bytes(p->at, k));
    cr_assert(x && y && q1 && q2);
    p->wt->decode(p->w, x, k);
    o->dequant_w(p->w, y, (int64_t)k);
    int dec_ok = memcmp(x, y, k * sizeof(float)) == 0;
    int enc_ok = 1;
    if (p->at->encode) {
        p->at->encode(p->a, q1, k);
        o->quant_a_ref(p->a, q2, (int64_t)k);
        enc_ok = memcmp(q1, q2, fcq_row_bytes(p->at, k)) == 0;
    }
    free(x), free(y), free(q1), free(q2);
    if (!dec_ok) cr_skip_test("fcq_decode_%s does not match ggml's dequantize_row_%s yet", p->wt->name, p->wt->name);
    if (!enc_ok) cr_skip_test("fcq_encode_%s does not match ggml's quantize_row_%s_ref yet", p->at->name, p->at->name);
}

static void check_padding(const prob *p, const float *c)
{
    for (int64_t i = 0; i < p->m; i++)
        for (int64_t j = p->n; j < p->ldc; j++)
            cr_assert(c[i * p->ldc + j] == SENTINEL, "%s: ldc padding written at (%lld, %lld)", p->wt->name,
                      (long long)i, (long long)j);
}

static int has_mins(fcq_type t)
{
    return t == FCQ_Q4_1 || t == FCQ_Q5_1 || t == FCQ_Q2_K || t == FCQ_Q4_K || t == FCQ_Q5_K;
}

/* The integer path's bound for C[i, j] (see the top of the file). */
static double int_bound(const prob *p, int64_t j, const float *ai, size_t nb, double sabs, double sa, double wmax)
{
    double b = (double)(2 * nb + 8) * 0x1p-23 * (has_mins(p->wt->type) ? 4 * sa * wmax : sabs);
    if (p->at->type == FCQ_Q8_1) {
        /* q4_1 / q5_1 blocks start with d, m (f16): the min times f16(s). */
        for (size_t bi = 0; bi < nb; bi++) {
            uint16_t mbits;
            memcpy(&mbits, p->w + (size_t)j * p->wrb + bi * p->wt->block_bytes + 2, 2);
            double m = fabs(fc_f16_to_f32((fc_f16){mbits})), s = 0;
            for (size_t e = 0; e < 32; e++) s += fabs(ai[bi * 32 + e]);
            b += m * s * 0x1p-11;
        }
    }
    return b;
}

/* Part 1: against the f32 reference. Returns the worst |err| / bound. */
static double check_reference(const prob *p, const oracle *o, int int_path)
{
    size_t k = (size_t)p->k, nb = k / p->wt->block_elems;
    /* The decode path quantizes activations only when src/quant has the
     * partner's encoder (qmatmul.h). */
    int quant = int_path || p->at->encode != NULL;
    float *aq = malloc((size_t)p->m * k * sizeof(float)), *wd = malloc((size_t)p->n * k * sizeof(float));
    void *q = malloc(fcq_row_bytes(p->at, k));
    cr_assert(aq && wd && q);
    for (int64_t i = 0; i < p->m; i++) {
        if (quant) act_roundtrip(o, p->at, p->a + i * p->lda, aq + (size_t)i * k, k, q);
        else memcpy(aq + (size_t)i * k, p->a + i * p->lda, k * sizeof(float));
    }
    for (int64_t j = 0; j < p->n; j++) o->dequant_w(p->w + (size_t)j * p->wrb, wd + (size_t)j * k, (int64_t)k);
    double worst = 0;
    for (int64_t j = 0; j < p->n; j++) {
        const float *wj = wd + (size_t)j * k;
        double wmax = 0;
        for (size_t e = 0; e < k; e++) wmax = fmax(wmax, fabs(wj[e]));
        for (int64_t i = 0; i < p->m; i++) {
            const float *ai = aq + (size_t)i * k;
            double ref = 0, sabs = 0, sa = 0;
            for (size_t e = 0; e < k; e++) {
                ref += (double)ai[e] * (double)wj[e];
                sabs += fabs((double)ai[e] * (double)wj[e]);
                sa += fabs(ai[e]);
            }
            double bound = int_path ? int_bound(p, j, ai, nb, sabs, sa, wmax) : (double)(k + 2) * 0x1p-23 * sabs;
            bound += 1e-30;
            double got = p->c[i * p->ldc + j], err = fabs(got - ref);
            cr_assert(err <= bound, "%s %s M=%lld N=%lld K=%zu: C[%lld,%lld] = %.9g, reference %.9g, |err| %.3g > %.3g",
                      p->wt->name, int_path ? "int" : "decode", (long long)p->m, (long long)p->n, k, (long long)i,
                      (long long)j, got, ref, err, bound);
            if (err / bound > worst) worst = err / bound;
        }
    }
    free(aq), free(wd), free(q);
    return worst;
}

/* Part 2: against ggml's vec_dot, on the reference quantizer's bytes. */
static void check_ggml(const prob *p, const oracle *o, int int_path)
{
    size_t k = (size_t)p->k, nb = k / p->wt->block_elems, arb = fcq_row_bytes(p->at, k);
    unsigned char *qa = malloc(arb * (size_t)p->m);
    float *aq = malloc((size_t)p->m * k * sizeof(float)), *wd = malloc(k * sizeof(float));
    cr_assert(qa && aq && wd);
    for (int64_t i = 0; i < p->m; i++) {
        /* quantize into qa's row, decode it to aq's */
        act_roundtrip(o, p->at, p->a + i * p->lda, aq + (size_t)i * k, k, qa + (size_t)i * arb);
    }
    for (int64_t j = 0; j < p->n; j++) {
        o->dequant_w(p->w + (size_t)j * p->wrb, wd, (int64_t)k);
        double wmax = 0;
        for (size_t e = 0; e < k; e++) wmax = fmax(wmax, fabs(wd[e]));
        for (int64_t i = 0; i < p->m; i++) {
            float s = 0;
            o->vec_dot((int)k, &s, 0, p->w + (size_t)j * p->wrb, 0, qa + (size_t)i * arb, 0, 1);
            const float *ai = aq + (size_t)i * k;
            double sa = 0, sabs = 0;
            for (size_t e = 0; e < k; e++) {
                sa += fabs(ai[e]);
                sabs += fabs((double)ai[e] * (double)wd[e]);
            }
            double ib = int_bound(p, j, ai, nb, sabs, sa, wmax);
            double bound = (int_path ? 2 * ib : ib + (double)(k + 2) * 0x1p-23 * sabs) + 1e-30;
            double got = p->c[i * p->ldc + j];
            cr_assert(fabs(got - s) <= bound, "%s M=%lld N=%lld K=%zu: C[%lld,%lld] = %.9g, ggml vec_dot %.9g (bound %.3g)",
                      p->wt->name, (long long)p->m, (long long)p->n, k, (long long)i, (long long)j, got, (double)s,
                      bound);
        }
    }
    free(qa), free(aq), free(wd);
}

static void run_format(fcq_type t, int force_decode, int light)
{
    oracle o;
    oracle_get(t, &o);
    fc_qmatmul_force_decode(force_decode);
    int int_path = is_int_path(t);
    fc_workers *two = fc_workers_new(2);
    cr_assert(two);
    /* M = 150 > 2 x 64 splits A rows over tasks too (qmatmul.c's QM_M_TASK). */
    static const int64_t ms[] = {1, 3, 5, 17, 64, 150}, ns[] = {37, 70}, kbs[] = {1, 3, 12};
    /* light (per-ISA runs): M 1, 5, 17 x N 37 x 1, 3 blocks */
    size_t na = light ? 4 : 6, nbn = light ? 1 : 2, nc = light ? 2 : 3;
    double worst = 0;
    for (size_t a = 0; a < na; a++)
        for (size_t b = 0; b < nbn; b++)
            for (size_t c = 0; c < nc; c++) {
                if (light && a % 2 == 1) continue;
                if (ms[a] == 150 && (b > 0 || c == 2)) continue; /* keep the reference cheap */
                prob p;
                prob_new(&p, t, &o, ms[a], ns[b], kbs[c], fct_seed_of("qmatmul") + 1000 * t + 100 * a + 10 * b + c);
                if (!int_path) require_codec(&p, &o);
                fc_qmatmul_args g = args_of(&p, p.c);
                cr_assert(fc_qmatmul(NULL, &g) == 0, "%s: fc_qmatmul failed", p.wt->name);
                g.c = p.c2;
                cr_assert(fc_qmatmul(two, &g) == 0, "%s: fc_qmatmul (2 threads) failed", p.wt->name);
                cr_assert(memcmp(p.c, p.c2, (size_t)(p.m * p.ldc) * sizeof(float)) == 0,
                          "%s M=%lld N=%lld K=%lld: 1 and 2 threads differ", p.wt->name, (long long)p.m,
                          (long long)p.n, (long long)p.k);
                check_padding(&p, p.c);
                double r = check_reference(&p, &o, int_path);
                if (r > worst) worst = r;
                if (int_path || p.at->encode) check_ggml(&p, &o, int_path);
                prob_free(&p);
            }
    fc_workers_free(two);
    cr_log_info("%s (%s): worst error %.3f of the bound", fcq_traits_of(t)->name, fc_qmatmul_path(t), worst);
    fc_qmatmul_force_decode(0);
}

#define FORMAT_TESTS(fmt, id)                                                  \
    Test(qmatmul, fmt) { run_format(id, 0, 0); }                              \
    Test(qmatmul, fmt##_decode_path) { run_format(id, 1, 0); }

FORMAT_TESTS(q8_0, FCQ_Q8_0)
FORMAT_TESTS(q4_0, FCQ_Q4_0)
FORMAT_TESTS(q4_1, FCQ_Q4_1)
FORMAT_TESTS(q5_0, FCQ_Q5_0)
FORMAT_TESTS(q5_1, FCQ_Q5_1)
FORMAT_TESTS(q2_K, FCQ_Q2_K)
FORMAT_TESTS(q3_K, FCQ_Q3_K)
FORMAT_TESTS(q4_K, FCQ_Q4_K)
FORMAT_TESTS(q5_K, FCQ_Q5_K)
FORMAT_TESTS(q6_K, FCQ_Q6_K)
FORMAT_TESTS(iq4_nl, FCQ_IQ4_NL)
/* No integer kernel yet: the decode path is their default. */
FORMAT_TESTS(iq4_xs, FCQ_IQ4_XS)
FORMAT_TESTS(tq1_0, FCQ_TQ1_0)
FORMAT_TESTS(tq2_0, FCQ_TQ2_0)
FORMAT_TESTS(mxfp4, FCQ_MXFP4)

/* Every ISA this CPU runs, through its own tiles (dispatch re-resolved with
 * that ISA as the cap): the edge handling depends on MR and NR. */
Test(qmatmul, isa_caps)
{
    static const fcq_type fmts[] = {FCQ_Q8_0, FCQ_Q4_0, FCQ_Q4_1, FCQ_Q5_0, FCQ_Q5_1, FCQ_IQ4_NL,
                                    FCQ_Q2_K, FCQ_Q3_K, FCQ_Q4_K, FCQ_Q5_K, FCQ_Q6_K};
    char err[256];
    for (int isa = 0; isa < FCK_ISA_COUNT; isa++) {
        if (!fck_isa_supported((fck_isa)isa) || fck_isa_table[isa].cap != (fck_isa)isa) continue;
        cr_assert(fck_dispatch_resolve(fck_isa_table[isa].name, err, sizeof err), "%s", err);
        for (size_t f = 0; f < sizeof fmts / sizeof fmts[0]; f++) {
            cr_log_info("cap %s: %s", fck_isa_table[isa].name, fc_qmatmul_path(fmts[f]));
            run_format(fmts[f], 0, 1);
        }
    }
    cr_assert(fck_dispatch_resolve(getenv("FUCINA_ISA"), err, sizeof err), "%s", err); /* restore */
}

/* Arguments. */
Test(qmatmul, bad_args)
{
    float a[64] = {0}, c[8];
    unsigned char w[2 * 18] = {0};
    char err[256];
    fc_qmatmul_args ok = {.m = 1, .n = 2, .k = 32, .a = a, .lda = 32, .w = w, .wtype = FCQ_Q4_0,
                          .w_row_bytes = 18, .c = c, .ldc = 2};
    cr_assert(fc_qmatmul_check(&ok, err, sizeof err) == 0, "%s", err);
    struct {
        fc_qmatmul_args g;
        const char *needle;
    } bad[] = {
        {ok, "wtype"}, {ok, "multiple"}, {ok, "w_row_bytes"}, {ok, "lda"}, {ok, "ldc"},
        {ok, "m = -1"}, {ok, "a is NULL"}, {ok, "w is NULL"}, {ok, "c is NULL"}, {ok, "n = -2"},
    };
    bad[0].g.wtype = 0; /* f32: not a block format */
    bad[1].g.k = 48;
    bad[2].g.w_row_bytes = 17;
    bad[3].g.lda = 16;
    bad[4].g.ldc = 1;
    bad[5].g.m = -1;
    bad[6].g.a = NULL;
    bad[7].g.w = NULL;
    bad[8].g.c = NULL;
    bad[9].g.n = -2;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        for (int e = 0; e < 8; e++) c[e] = SENTINEL;
        err[0] = 0;
        cr_assert(fc_qmatmul_check(&bad[i].g, err, sizeof err) == -1, "case %zu accepted", i);
        cr_assert(strstr(err, bad[i].needle), "case %zu: message '%s' does not name '%s'", i, err, bad[i].needle);
        cr_assert(fc_qmatmul(NULL, &bad[i].g) == -1, "case %zu: fc_qmatmul accepted it", i);
        for (int e = 0; e < 8; e++) cr_assert(c[e] == SENTINEL, "case %zu: C written", i);
    }
    cr_assert(fc_qmatmul(NULL, NULL) == -1);
    cr_assert_str_eq(fc_qmatmul_path(0), "bad");
    /* Empty products: M or N of 0 touch nothing; K of 0 zeroes C. */
    fc_qmatmul_args g = ok;
    g.m = 0;
    cr_assert(fc_qmatmul(NULL, &g) == 0);
    g = ok;
    g.k = 0;
    c[0] = c[1] = SENTINEL;
    c[2] = SENTINEL;
    cr_assert(fc_qmatmul(NULL, &g) == 0);
    cr_assert(c[0] == 0 && c[1] == 0 && c[2] == SENTINEL);
}

/* ---- fc_qmatmul_multi: several products over one A ------------------------------------- */

/* Products over one A (K = 512 fits every format here): their C equal,
 * bit for bit, separate fc_qmatmul calls on 1 thread — fused (same partner:
 * q4_K + q6_K + q4_K, q8_0 + q4_0) or run one by one (q8_0 + q4_K: partners
 * q8_0 and q8_K) — and nothing past each C's N columns is written. */
Test(qmatmul, multi_equals_separate_products)
{
    static const fcq_type sets[][3] = {{FCQ_Q4_K, FCQ_Q6_K, FCQ_Q4_K}, {FCQ_Q8_0, FCQ_Q4_0}, {FCQ_Q8_0, FCQ_Q4_K}};
    static const int nsets[] = {3, 2, 2};
    static const int64_t ns[] = {37, 70, 16}, ms[] = {1, 3};
    const int64_t k = 512, lda = k + 3;
    fc_workers *two = fc_workers_new(2);
    cr_assert(two);
    fct_rng r = {fct_seed_of("qmatmul_multi")};
    for (size_t si = 0; si < sizeof nsets / sizeof nsets[0]; si++)
        for (size_t mi = 0; mi < 2; mi++) {
            const int64_t m = ms[mi];
            float *a = malloc((size_t)(m * lda) * sizeof(float));
            cr_assert(a);
            for (int64_t i = 0; i < m * lda; i++) a[i] = (float)fct_uniform(&r, -2, 2);
            fc_qmatmul_args g[3];
            unsigned char *w[3];
            float *c1[3], *c2[3];
            for (int i = 0; i < nsets[si]; i++) {
                const fcq_traits *tr = fcq_traits_of(sets[si][i]);
                cr_assert(tr->encode, "%s has no reference encoder", tr->name);
                const int64_t n = ns[i], ldc = n + 5;
                const size_t rb = fcq_row_bytes(tr, (size_t)k);
                float *row = malloc((size_t)k * sizeof(float));
                w[i] = malloc((size_t)n * rb);
                c1[i] = malloc((size_t)(m * ldc) * sizeof(float));
                c2[i] = malloc((size_t)(m * ldc) * sizeof(float));
                cr_assert(row && w[i] && c1[i] && c2[i]);
                for (int64_t j = 0; j < n; j++) {
                    for (int64_t e = 0; e < k; e++) row[e] = (float)fct_uniform(&r, -1, 1);
                    tr->encode(row, w[i] + (size_t)j * rb, (size_t)k);
                }
                free(row);
                for (int64_t e = 0; e < m * ldc; e++) c1[i][e] = c2[i][e] = SENTINEL;
                g[i] = (fc_qmatmul_args){.m = m, .n = n, .k = k, .a = a, .lda = lda, .w = w[i], .wtype = tr->type,
                                         .w_row_bytes = rb, .c = c1[i], .ldc = ldc};
                cr_assert(fc_qmatmul(NULL, &g[i]) == 0);
                g[i].c = c2[i];
            }
            cr_assert(fc_qmatmul_multi(two, g, nsets[si]) == 0, "set %zu M=%lld", si, (long long)m);
            for (int i = 0; i < nsets[si]; i++) {
                cr_assert(memcmp(c1[i], c2[i], (size_t)(m * g[i].ldc) * sizeof(float)) == 0,
                          "set %zu product %d (%s) M=%lld: fused differs from fc_qmatmul", si, i,
                          fcq_traits_of(sets[si][i])->name, (long long)m);
                for (int64_t row = 0; row < m; row++)
                    for (int64_t j = g[i].n; j < g[i].ldc; j++)
                        cr_assert(c2[i][row * g[i].ldc + j] == SENTINEL, "set %zu product %d: padding written", si, i);
                free(w[i]), free(c1[i]), free(c2[i]);
            }
            free(a);
        }
    /* a bad product is an error, as for fc_qmatmul */
    float a1[32] = {0}, c[4];
    unsigned char wb[64] = {0};
    fc_qmatmul_args bad[2] = {
        {.m = 1, .n = 1, .k = 32, .a = a1, .lda = 32, .w = wb, .wtype = FCQ_Q8_0, .w_row_bytes = 34, .c = c, .ldc = 1},
        {.m = 1, .n = 1, .k = 33, .a = a1, .lda = 33, .w = wb, .wtype = FCQ_Q8_0, .w_row_bytes = 34, .c = c + 1, .ldc = 1}};
    cr_assert(fc_qmatmul_multi(two, bad, 2) == -1, "K = 33 is not a whole number of q8_0 blocks");
    fc_workers_free(two);
}

/* One activation row on several threads takes the home-range split
 * (qmatmul.c: each thread streams a contiguous share of W in claims, then
 * helps the others). Shapes large enough to run in parallel (past
 * QM_SERIAL_MACS), N not a multiple of the tiles' NR nor of the claims, 2,
 * 3 and 5 threads: every C element equals the 1-thread call's bit for bit,
 * none is skipped (C starts as sentinels) and the ldc padding stays
 * untouched; fused products (Q/K/V-like, mixed q4_K/q6_K) as well. */
Test(qmatmul, one_row_home_ranges_equal_one_thread)
{
    static const fcq_type types[] = {FCQ_Q4_K, FCQ_Q6_K, FCQ_Q8_0, FCQ_Q4_0};
    static const int64_t ns[] = {3001, 4099, 1027};
    static const int nthreads[] = {2, 3, 5};
    const int64_t k = 1024, lda = k + 7;
    fct_rng r = {fct_seed_of("qmatmul_home_ranges")};
    float *a = malloc((size_t)lda * sizeof(float));
    cr_assert(a);
    for (int64_t e = 0; e < lda; e++) a[e] = (float)fct_uniform(&r, -2, 2);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const fcq_traits *tr = fcq_traits_of(types[ti]);
        /* three products: types[ti], then q6_K and types[ti] (the partner
         * must match to fuse: q8_K formats together, q8_0 formats together) */
        const fcq_type second = tr->dot_partner == FCQ_Q8_K ? FCQ_Q6_K : FCQ_Q8_0;
        const fcq_type set[3] = {types[ti], second, types[ti]};
        fc_qmatmul_args g[3];
        unsigned char *w[3];
        float *ref[3], *got[3];
        for (int i = 0; i < 3; i++) {
            const fcq_traits *t = fcq_traits_of(set[i]);
            const int64_t n = ns[i], ldc = n + 3;
            const size_t rb = fcq_row_bytes(t, (size_t)k);
            float *row = malloc((size_t)k * sizeof(float));
            w[i] = malloc((size_t)n * rb);
            ref[i] = malloc((size_t)ldc * sizeof(float));
            got[i] = malloc((size_t)ldc * sizeof(float));
            cr_assert(row && w[i] && ref[i] && got[i]);
            for (int64_t j = 0; j < n; j++) {
                for (int64_t e = 0; e < k; e++) row[e] = (float)fct_uniform(&r, -1, 1);
                t->encode(row, w[i] + (size_t)j * rb, (size_t)k);
            }
            free(row);
            g[i] = (fc_qmatmul_args){.m = 1, .n = n, .k = k, .a = a, .lda = lda, .w = w[i], .wtype = t->type,
                                     .w_row_bytes = rb, .c = ref[i], .ldc = ldc};
            cr_assert(fc_qmatmul(NULL, &g[i]) == 0);
        }
        for (size_t pi = 0; pi < sizeof nthreads / sizeof nthreads[0]; pi++) {
            fc_workers *pool = fc_workers_new(nthreads[pi]);
            cr_assert(pool);
            for (int fused = 0; fused < 2; fused++) {
                for (int i = 0; i < 3; i++) {
                    for (int64_t j = 0; j < g[i].ldc; j++) got[i][j] = SENTINEL;
                    g[i].c = got[i];
                }
                if (fused) cr_assert(fc_qmatmul_multi(pool, g, 3) == 0);
                else
                    for (int i = 0; i < 3; i++) cr_assert(fc_qmatmul(pool, &g[i]) == 0);
                for (int i = 0; i < 3; i++) {
                    for (int64_t j = 0; j < g[i].n; j++)
                        cr_assert(memcmp(&got[i][j], &ref[i][j], sizeof(float)) == 0,
                                  "%s product %d (%s) N=%lld, %d threads%s: C[%lld] = %g, 1 thread %g", tr->name, i,
                                  fcq_traits_of(set[i])->name, (long long)g[i].n, nthreads[pi],
                                  fused ? ", fused" : "", (long long)j, got[i][j], ref[i][j]);
                    for (int64_t j = g[i].n; j < g[i].ldc; j++)
                        cr_assert(got[i][j] == SENTINEL, "%s product %d: padding written", tr->name, i);
                }
            }
            fc_workers_free(pool);
        }
        for (int i = 0; i < 3; i++) free(w[i]), free(ref[i]), free(got[i]);
    }
    free(a);
}
