/* SPDX-License-Identifier: MIT */
/* Prepared (packed) weights, fc_qweights (src/exec/qmatmul.h), against two
 * references that do not use the packed code:
 *
 * 1. fc_qmatmul with dispatch capped to the scalar arms: every C element is
 *    the scalar qgemm/qgemv arms' per-block sum (one exact integer dot per
 *    block, (d_w * d_a) * float(s), one add per block), which is the packed
 *    layout's contract (registry/quant_packed.yaml): bit for bit equal.
 * 2. A double-precision dot of the decoded operands (src/quant's decoders;
 *    activations through the reference q8_0 encoder, byte-identical to the
 *    generated quantizer and to ggml's _ref): within the integer path's bound
 *    |got - ref| <= (2 nb + 8) 2u sum_k |aq_k wd_jk| (u = 2^-24), the bound
 *    tests/runtime/test_qmatmul.c uses for fc_qmatmul.
 * And: the row-major SIMD path agrees within twice that bound; 1 vs 2 threads
 * bitwise; N not a multiple of the 16-row interleave, odd M (partial M
 * tiles), padded lda/ldc untouched; M below the threshold takes the
 * row-major path; bad arguments are errors naming the argument. Skips (never
 * passes) where this CPU has no packed SIMD kernel. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/dispatch.h"
#include "exec/qmatmul.h"
#include "exec/workers.h"
#include "fct.h"
#include "quant/quant.h"

#define SENTINEL 1234.5f

typedef struct prob {
    int64_t m, n, k, lda, ldc;
    float *a, *c;
    unsigned char *w;
    size_t rb;
} prob;

static prob make(fcq_type t, int64_t m, int64_t n, int64_t k, uint64_t seed)
{
    const fcq_traits *tr = fcq_traits_of(t);
    prob p = {.m = m, .n = n, .k = k, .lda = k + 3, .ldc = n + 5};
    fct_rng r = {seed};
    p.rb = fcq_row_bytes(tr, (size_t)k);
    p.a = malloc((size_t)(m * p.lda) * sizeof(float));
    p.c = malloc((size_t)(m * p.ldc) * sizeof(float));
    p.w = malloc(p.rb * (size_t)n);
    float *wf = malloc((size_t)k * sizeof(float));
    cr_assert(p.a && p.c && p.w && wf);
    for (int64_t i = 0; i < m * p.lda; i++) p.a[i] = (float)fct_uniform(&r, -2, 2);
    for (int64_t j = 0; j < n; j++) {
        for (int64_t e = 0; e < k; e++) wf[e] = (float)fct_uniform(&r, -1, 1) * (j % 7 == 3 ? 8.0f : 1.0f);
        tr->encode(wf, p.w + (size_t)j * p.rb, (size_t)k);
    }
    free(wf);
    return p;
}

static void clear_c(prob *p)
{
    for (int64_t i = 0; i < p->m * p->ldc; i++) p->c[i] = SENTINEL;
}

static void drop(prob *p)
{
    free(p->a), free(p->c), free(p->w);
}

static fc_qweights *prepare(const prob *p, fcq_type t)
{
    fc_qweights *q = NULL;
    char err[200];
    cr_assert(fc_qweights_prepare(&q, p->w, t, p->n, p->k, p->rb, err, sizeof err) == 0, "prepare: %s", err);
    return q;
}

static void need_packed(fcq_type t)
{
    prob p = make(t, 1, 16, (int64_t)fcq_traits_of(t)->block_elems, 1);
    fc_qweights *q = prepare(&p, t);
    size_t b = fc_qweights_packed_bytes(q);
    fc_qweights_free(q);
    drop(&p);
    if (b == 0) cr_skip_test("%s", "no packed SIMD kernel for this format on this CPU (row-major path only)");
}

static void check_padding(const prob *p, const char *what)
{
    for (int64_t i = 0; i < p->m; i++)
        for (int64_t j = p->n; j < p->ldc; j++)
            cr_assert(p->c[i * p->ldc + j] == SENTINEL, "%s: wrote C padding at [%lld][%lld]", what, (long long)i,
                      (long long)j);
}

static void run_case(fcq_type t, int64_t m, int64_t n, int64_t k, fc_workers *pool)
{
    char what[96];
    snprintf(what, sizeof what, "%s m=%lld n=%lld k=%lld", fcq_traits_of(t)->name, (long long)m, (long long)n,
             (long long)k);
    prob p = make(t, m, n, k, fct_seed_of(what));
    size_t mn = (size_t)(m * p.ldc);
    float *c_scalar = malloc(mn * sizeof(float)), *c_rm = malloc(mn * sizeof(float));
    float *c1 = malloc(mn * sizeof(float));
    cr_assert(c_scalar && c_rm && c1);
    fc_qmatmul_args g = {.m = m, .n = n, .k = k, .a = p.a, .lda = p.lda, .w = p.w, .wtype = t, .w_row_bytes = p.rb,
                         .c = p.c, .ldc = p.ldc};

    /* Reference 1: the row-major path on the scalar arms. */
    char err[200];
    cr_assert(fck_dispatch_resolve("scalar", err, sizeof err), "%s", err);
    clear_c(&p);
    cr_assert(fc_qmatmul(NULL, &g) == 0);
    memcpy(c_scalar, p.c, mn * sizeof(float));
    cr_assert(fck_dispatch_resolve(getenv("FUCINA_ISA"), err, sizeof err), "%s", err); /* restore */
    /* The row-major SIMD path. */
    clear_c(&p);
    cr_assert(fc_qmatmul(NULL, &g) == 0);
    memcpy(c_rm, p.c, mn * sizeof(float));

    fc_qweights *q = prepare(&p, t);
    const int packed = m >= fc_qweights_min_m(); /* else the row-major SIMD path: only the bound applies */
    cr_assert(m < fc_qweights_min_m() || strncmp(fc_qweights_path(q, m), "packed", 6) == 0,
              "%s: path %s at M >= %lld", what, fc_qweights_path(q, m), (long long)fc_qweights_min_m());
    clear_c(&p);
    cr_assert(fc_qmatmul_prepared(NULL, q, m, p.a, p.lda, p.c, p.ldc) == 0, "%s", what);
    check_padding(&p, what);
    memcpy(c1, p.c, mn * sizeof(float));
    clear_c(&p);
    cr_assert(fc_qmatmul_prepared(pool, q, m, p.a, p.lda, p.c, p.ldc) == 0, "%s (2 threads)", what);
    check_padding(&p, what);
    cr_assert(memcmp(c1, p.c, mn * sizeof(float)) == 0, "%s: 1 and 2 threads differ", what);

    /* Reference 2: decoded operands, double dot. */
    const fcq_traits *wt = fcq_traits_of(t), *at = fcq_traits_of(wt->dot_partner);
    size_t arb = fcq_row_bytes(at, (size_t)k);
    unsigned char *aq = malloc(arb);
    float *ad = malloc((size_t)k * sizeof(float)), *wd = malloc((size_t)(n * k) * sizeof(float));
    cr_assert(aq && ad && wd);
    for (int64_t j = 0; j < n; j++) wt->decode(p.w + (size_t)j * p.rb, wd + j * k, (size_t)k);
    const double u = ldexp(1.0, -24);
    const double nb = (double)k / wt->block_elems;
    int bad = 0;
    for (int64_t i = 0; i < m && bad < 5; i++) {
        at->encode(p.a + i * p.lda, aq, (size_t)k);
        at->decode(aq, ad, (size_t)k);
        for (int64_t j = 0; j < n && bad < 5; j++) {
            double s = 0, sa = 0;
            for (int64_t e = 0; e < k; e++) {
                s += (double)ad[e] * wd[j * k + e];
                sa += fabs((double)ad[e] * wd[j * k + e]);
            }
            double bound = (2 * nb + 8) * 2 * u * sa;
            float got = c1[i * p.ldc + j];
            if (packed && got != c_scalar[i * p.ldc + j]) {
                cr_expect(0, "%s: C[%lld][%lld] = %.9g, the scalar row-major arms give %.9g (must be equal bits)",
                          what, (long long)i, (long long)j, got, c_scalar[i * p.ldc + j]);
                bad++;
            }
            if (fabs(got - s) > bound) {
                cr_expect(0, "%s: C[%lld][%lld] = %.9g, reference %.9g, bound %.3g", what, (long long)i,
                          (long long)j, got, s, bound);
                bad++;
            }
            if (fabs((double)got - c_rm[i * p.ldc + j]) > 2 * bound) {
                cr_expect(0, "%s: C[%lld][%lld] = %.9g, row-major SIMD path %.9g, bound %.3g", what, (long long)i,
                          (long long)j, got, c_rm[i * p.ldc + j], 2 * bound);
                bad++;
            }
        }
    }
    free(aq), free(ad), free(wd);
    fc_qweights_free(q);
    free(c_scalar), free(c_rm), free(c1);
    drop(&p);
}

Test(qmatmul_packed, q4_0_shapes)
{
    need_packed(FCQ_Q4_0);
    fc_workers *pool = fc_workers_new(2);
    cr_assert(pool);
    static const int64_t ms[] = {1, 3, 4, 7, 8, 9, 17, 64, 150};
    static const int64_t ns[] = {16, 37, 70, 129};
    static const int64_t ks[] = {32, 96, 384};
    for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
            for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) run_case(FCQ_Q4_0, ms[mi], ns[ni], ks[ki], pool);
    run_case(FCQ_Q4_0, 300, 200, 1024, pool); /* several tasks of each kind */
    fc_workers_free(pool);
}

Test(qmatmul_packed, q8_0_shapes)
{
    need_packed(FCQ_Q8_0);
    fc_workers *pool = fc_workers_new(2);
    cr_assert(pool);
    static const int64_t ms[] = {1, 2, 5, 8, 9, 17, 150};
    static const int64_t ns[] = {16, 37, 129};
    static const int64_t ks[] = {32, 96, 384};
    for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
            for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) run_case(FCQ_Q8_0, ms[mi], ns[ni], ks[ki], pool);
    run_case(FCQ_Q8_0, 300, 200, 1024, pool);
    fc_workers_free(pool);
}

Test(qmatmul_packed, q4_K_shapes)
{
    need_packed(FCQ_Q4_K);
    fc_workers *pool = fc_workers_new(2);
    cr_assert(pool);
    static const int64_t ms[] = {1, 2, 5, 8, 9, 17, 150};
    static const int64_t ns[] = {16, 37, 129};
    static const int64_t ks[] = {256, 768};
    for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
            for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) run_case(FCQ_Q4_K, ms[mi], ns[ni], ks[ki], pool);
    run_case(FCQ_Q4_K, 300, 200, 1024, pool);
    fc_workers_free(pool);
}

/* The packed layout's size against the row-major matrix it comes from: q4_0
 * and q8_0 keep every byte count (f16 scales, no stored sums), so a copy
 * costs no more bandwidth than the original at small M; a partial last group
 * is padded to 16 rows. q4_K stores its scales and mins pre-decoded: 2496
 * bytes per 16 rows and super-block, against 16 x 144. */
Test(qmatmul_packed, packed_size_against_row_major)
{
    static const struct { fcq_type t; int64_t k; } cases[] = {{FCQ_Q4_0, 96}, {FCQ_Q8_0, 96}, {FCQ_Q4_K, 512}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const fcq_type t = cases[c].t;
        for (int64_t n = 16; n <= 47; n += 31) { /* one whole group; three, the last of 15 rows */
            prob p = make(t, 1, n, cases[c].k, 3);
            fc_qweights *q = prepare(&p, t);
            const size_t got = fc_qweights_packed_bytes(q), groups = (size_t)(n + 15) / 16;
            const size_t want = t == FCQ_Q4_K ? groups * (size_t)(cases[c].k / 256) * 2496 : groups * 16 * p.rb;
            fc_qweights_free(q);
            drop(&p);
            if (got == 0) continue; /* no packed kernel for this format on this CPU */
            cr_expect(got == want, "%s n=%lld: packed %zu bytes, want %zu (row-major %zu)", fcq_traits_of(t)->name,
                      (long long)n, got, want, (size_t)n * p.rb);
        }
    }
}

/* A format without a packed layout: prepare keeps W only, and the prepared
 * product is fc_qmatmul's, bit for bit. */
Test(qmatmul_packed, unpacked_format_is_row_major)
{
    prob p = make(FCQ_Q6_K, 20, 37, 256, 7);
    fc_qweights *q = prepare(&p, FCQ_Q6_K);
    if (fc_qweights_packed_bytes(q) != 0) {
        fc_qweights_free(q);
        drop(&p);
        cr_skip_test("%s", "q6_K has a packed layout now: covered by the shape tests");
    }
    size_t mn = (size_t)(p.m * p.ldc);
    float *want = malloc(mn * sizeof(float));
    cr_assert(want);
    fc_qmatmul_args g = {.m = p.m, .n = p.n, .k = p.k, .a = p.a, .lda = p.lda, .w = p.w, .wtype = FCQ_Q6_K,
                         .w_row_bytes = p.rb, .c = p.c, .ldc = p.ldc};
    clear_c(&p);
    cr_assert(fc_qmatmul(NULL, &g) == 0);
    memcpy(want, p.c, mn * sizeof(float));
    clear_c(&p);
    cr_assert(fc_qmatmul_prepared(NULL, q, p.m, p.a, p.lda, p.c, p.ldc) == 0);
    cr_assert(memcmp(want, p.c, mn * sizeof(float)) == 0);
    free(want);
    fc_qweights_free(q);
    drop(&p);
}

Test(qmatmul_packed, bad_arguments)
{
    unsigned char w[18 * 4] = {0};
    fc_qweights *q = (fc_qweights *)&w; /* must be reset to NULL on failure */
    char err[200] = "";
    cr_assert(fc_qweights_prepare(&q, w, FCQ_Q4_0, 4, 33, 18, err, sizeof err) == -1);
    cr_assert(q == NULL);
    cr_assert(strstr(err, "k = 33") && strstr(err, "block size"), "%s", err);
    cr_assert(fc_qweights_prepare(&q, w, FCQ_Q4_0, 4, 32, 17, err, sizeof err) == -1);
    cr_assert(strstr(err, "w_row_bytes"), "%s", err);
    cr_assert(fc_qweights_prepare(&q, w, 9999, 4, 32, 18, err, sizeof err) == -1);
    cr_assert(strstr(err, "wtype"), "%s", err);
    cr_assert(fc_qweights_prepare(NULL, w, FCQ_Q4_0, 4, 32, 18, err, sizeof err) == -1);
    cr_assert(strstr(err, "out is NULL"), "%s", err);
    cr_assert(fc_qweights_prepare(&q, w, FCQ_Q4_0, 4, 32, 18, err, sizeof err) == 0, "%s", err);
    float a[32] = {0}, c[4];
    cr_assert(fc_qmatmul_prepared(NULL, q, 1, a, 31, c, 4) == -1, "lda < k must fail");
    cr_assert(fc_qmatmul_prepared(NULL, NULL, 1, a, 32, c, 4) == -1, "NULL weights must fail");
    cr_assert(fc_qmatmul_prepared(NULL, q, 8, a, 32, c, 3) == -1, "ldc < n must fail (packed path)");
    fc_qweights_free(q);
    fc_qweights_free(NULL);
}
