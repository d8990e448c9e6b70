/* SPDX-License-Identifier: MIT */
/* fc_gemm_f32 against an independent double-precision reference:
 *   |got - ref| <= (K + 2) * 2^-23 * (sum_k |a||b| + |C0|)
 * (one FMA chain per KC block, blocks and the accumulated C added after:
 * at most K + 2 roundings of u = 2^-24 each; 2^-23 gives a factor 2).
 * Shapes cover every M in 1..13 against N in 1..70, K across the KC block
 * edge, primes, every stride layout of A and B (row-major, transposed, both
 * strides non-unit), accumulate, f16 / bf16 B (the reference widens the same
 * stored values), batches, 1 vs 2 threads (bitwise), each dispatchable ISA's
 * tile geometry (FUCINA_ISA caps), the provider switch, the half-weight
 * skinny path (M 1..21) and its row bits being independent of M. Elements of C outside
 * the product (ldc padding) must stay untouched. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/dispatch.h"
#include "exec/gemm.h"
#include "exec/workers.h"
#include "fct.h"
#include "fucina/half.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))
#define SENTINEL 1234.5f

/* Operand layouts: 'n' row-major, 't' transposed (column-major), 's' both
 * strides non-unit (every other element of a wider row-major array). */
typedef struct spec {
    int64_t m, n, k;
    char la, lb;
    fc_gemm_btype bt;
    int accumulate;
} spec;

typedef struct problem {
    spec s;
    float *a;
    void *b;
    double *bd; /* B widened, indexed like b */
    float *c0, *c;
    size_t a_len, b_len, c_len;
    fc_gemm_args g;
} problem;

static void strides(char l, int64_t rows, int64_t cols, int64_t *rs, int64_t *cs, size_t *len)
{
    switch (l) {
    case 'n':
        *cs = 1;
        *rs = cols + 3;
        break;
    case 't':
        *rs = 1;
        *cs = rows + 2;
        break;
    default: /* 's' */
        *cs = 2;
        *rs = 2 * cols + 5;
        break;
    }
    *len = (size_t)((rows - 1) * *rs + (cols - 1) * *cs + 1);
}

static size_t bsize(fc_gemm_btype t) { return t == FC_GEMM_B_F32 ? 4 : 2; }

static void problem_new(problem *p, spec s, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    p->s = s;
    fct_rng r = {seed};
    int64_t rsa, csa, rsb, csb;
    strides(s.la, s.m, s.k, &rsa, &csa, &p->a_len);
    strides(s.lb, s.k, s.n, &rsb, &csb, &p->b_len);
    int64_t ldc = s.n + 5;
    p->c_len = (size_t)(s.m * ldc);
    p->a = malloc(p->a_len * sizeof(float));
    p->b = malloc(p->b_len * bsize(s.bt));
    p->bd = malloc(p->b_len * sizeof(double));
    p->c0 = malloc(p->c_len * sizeof(float));
    p->c = malloc(p->c_len * sizeof(float));
    cr_assert(p->a && p->b && p->bd && p->c0 && p->c);
    for (size_t i = 0; i < p->a_len; i++) p->a[i] = (float)fct_uniform(&r, -1, 1);
    for (size_t i = 0; i < p->b_len; i++) {
        float v = (float)fct_uniform(&r, -1, 1);
        switch (s.bt) {
        case FC_GEMM_B_F32:
            ((float *)p->b)[i] = v;
            p->bd[i] = v;
            break;
        case FC_GEMM_B_F16:
            ((fc_f16 *)p->b)[i] = fc_f32_to_f16(v);
            p->bd[i] = fc_f16_to_f32(((fc_f16 *)p->b)[i]);
            break;
        case FC_GEMM_B_BF16:
            ((fc_bf16 *)p->b)[i] = fc_f32_to_bf16(v);
            p->bd[i] = fc_bf16_to_f32(((fc_bf16 *)p->b)[i]);
            break;
        }
    }
    for (size_t i = 0; i < p->c_len; i++)
        p->c0[i] = (int64_t)(i % (size_t)ldc) < s.n ? (float)fct_uniform(&r, -1, 1) : SENTINEL;
    memcpy(p->c, p->c0, p->c_len * sizeof(float));
    p->g = (fc_gemm_args){.m = s.m, .n = s.n, .k = s.k, .a = p->a, .rsa = rsa, .csa = csa, .b = p->b,
                          .btype = s.bt, .rsb = rsb, .csb = csb, .c = p->c, .ldc = ldc,
                          .accumulate = s.accumulate};
}

static void problem_free(problem *p)
{
    free(p->a);
    free(p->b);
    free(p->bd);
    free(p->c0);
    free(p->c);
}

static void reset_c(problem *p) { memcpy(p->c, p->c0, p->c_len * sizeof(float)); }

static const char *desc(const problem *p)
{
    static char buf[160];
    const char *bt = p->s.bt == FC_GEMM_B_F32 ? "f32" : p->s.bt == FC_GEMM_B_F16 ? "f16" : "bf16";
    snprintf(buf, sizeof buf, "M=%lld N=%lld K=%lld A:%c B:%c %s acc=%d path=%s", (long long)p->s.m,
             (long long)p->s.n, (long long)p->s.k, p->s.la, p->s.lb, bt, p->s.accumulate,
             fc_gemm_provider_for(&p->g));
    return buf;
}

/* Check p->c against the double reference and the untouched padding. */
static void check(const problem *p)
{
    const fc_gemm_args *g = &p->g;
    for (int64_t i = 0; i < g->m; i++) {
        for (int64_t j = 0; j < g->ldc; j++) {
            float got = p->c[i * g->ldc + j];
            if (j >= g->n) {
                cr_assert(got == SENTINEL, "%s: C[%lld][%lld] (padding) overwritten", desc(p), (long long)i,
                          (long long)j);
                continue;
            }
            double ref = 0, mag = 0;
            for (int64_t q = 0; q < g->k; q++) {
                double av = g->a[i * g->rsa + q * g->csa], bv = p->bd[q * g->rsb + j * g->csb];
                ref += av * bv;
                mag += fabs(av * bv);
            }
            double c0 = g->accumulate ? p->c0[i * g->ldc + j] : 0.0;
            ref += c0;
            mag += fabs(c0);
            double bound = (double)(g->k + 2) * ldexp(1.0, -23) * mag;
            cr_assert(fabs(got - ref) <= bound, "%s: C[%lld][%lld] = %.9g, reference %.9g (bound %.3g)", desc(p),
                      (long long)i, (long long)j, got, ref, bound);
        }
    }
}

static void run_check(fc_workers *w, spec s, uint64_t seed)
{
    problem p;
    problem_new(&p, s, seed);
    cr_assert_eq(fc_gemm_f32(w, &p.g), 0, "%s: returned an error", desc(&p));
    check(&p);
    problem_free(&p);
}

static spec sp(int64_t m, int64_t n, int64_t k)
{
    return (spec){m, n, k, 'n', 'n', FC_GEMM_B_F32, 0};
}

/* ---- shapes ----------------------------------------------------------------- */

Test(gemm, one_by_one)
{
    run_check(NULL, sp(1, 1, 1), 1);
    spec s = sp(1, 1, 1);
    s.accumulate = 1;
    run_check(NULL, s, 2);
}

Test(gemm, every_m_and_n_small_k)
{
    static const int64_t ks[] = {1, 7, 257};
    for (size_t q = 0; q < N_ELEMS(ks); q++)
        for (int64_t m = 1; m <= 13; m++)
            for (int64_t n = 1; n <= 70; n++) run_check(NULL, sp(m, n, ks[q]), (uint64_t)(m * 1000 + n));
}

Test(gemm, every_m_edge_n_deep_k)
{
    static const int64_t ks[] = {255, 256, 257, 1000};
    static const int64_t ns[] = {1, 4, 11, 12, 13, 15, 16, 17, 31, 33, 63, 64, 65, 70};
    for (size_t q = 0; q < N_ELEMS(ks); q++)
        for (int64_t m = 1; m <= 13; m++)
            for (size_t j = 0; j < N_ELEMS(ns); j++) run_check(NULL, sp(m, ns[j], ks[q]), (uint64_t)(m * 7 + j));
}

Test(gemm, primes_and_blocks)
{
    fc_workers *w = fc_workers_new(2);
    cr_assert_not_null(w);
    static const int64_t shapes[][3] = {{97, 89, 101}, {131, 257, 263}, {149, 1031, 521}, {293, 67, 17},
                                        {7, 1300, 300}, {300, 5, 600},   {1600, 70, 1030}};
    for (size_t i = 0; i < N_ELEMS(shapes); i++) run_check(w, sp(shapes[i][0], shapes[i][1], shapes[i][2]), i);
    fc_workers_free(w);
}

Test(gemm, zero_sizes)
{
    problem p;
    problem_new(&p, sp(3, 5, 1), 3);
    p.g.k = 0;
    cr_assert_eq(fc_gemm_f32(NULL, &p.g), 0);
    for (int64_t i = 0; i < 3; i++)
        for (int64_t j = 0; j < 5; j++) cr_assert(p.c[i * p.g.ldc + j] == 0.0f, "K = 0 must give C = 0");
    reset_c(&p);
    p.g.accumulate = 1;
    cr_assert_eq(fc_gemm_f32(NULL, &p.g), 0);
    cr_assert(memcmp(p.c, p.c0, p.c_len * sizeof(float)) == 0, "K = 0 with accumulate leaves C");
    p.g.m = 0;
    cr_assert_eq(fc_gemm_f32(NULL, &p.g), 0);
    p.g.m = -1;
    cr_assert_eq(fc_gemm_f32(NULL, &p.g), -1);
    p.g.m = 3;
    p.g.ldc = 2; /* < N */
    cr_assert_eq(fc_gemm_f32(NULL, &p.g), -1);
    problem_free(&p);
}

/* ---- layouts, accumulate, B types ------------------------------------------------ */

static const int64_t layout_shapes[][3] = {
    {1, 70, 257},  /* skinny path (dot / axpy), M == 1 */
    {3, 45, 300},  /* skinny path, M > 1 */
    {5, 33, 300},  /* packed path (skinny for half B with K contiguous) */
    {37, 131, 513},
    {200, 150, 600},
    {40, 1, 300},  /* N == 1 */
    {1, 1, 1000},
};

static void layouts(fc_gemm_btype bt, int accumulate)
{
    static const char ls[] = {'n', 't', 's'};
    fc_workers *w = fc_workers_new(2);
    cr_assert_not_null(w);
    for (size_t i = 0; i < N_ELEMS(layout_shapes); i++)
        for (size_t la = 0; la < 3; la++)
            for (size_t lb = 0; lb < 3; lb++) {
                spec s = {layout_shapes[i][0], layout_shapes[i][1], layout_shapes[i][2], ls[la], ls[lb], bt,
                          accumulate};
                run_check(i % 2 ? w : NULL, s, i * 9 + la * 3 + lb);
            }
    fc_workers_free(w);
}

Test(gemm, layouts_f32) { layouts(FC_GEMM_B_F32, 0); }
Test(gemm, layouts_f32_accumulate) { layouts(FC_GEMM_B_F32, 1); }
Test(gemm, layouts_f16) { layouts(FC_GEMM_B_F16, 0); }
Test(gemm, layouts_bf16_accumulate) { layouts(FC_GEMM_B_BF16, 1); }

Test(gemm, half_b_edges)
{
    for (int64_t m = 1; m <= 13; m += 3)
        for (int64_t n = 1; n <= 70; n += 9) {
            spec s = {m, n, 257, 'n', 't', FC_GEMM_B_F16, 0};
            run_check(NULL, s, (uint64_t)(m * 100 + n));
            s.bt = FC_GEMM_B_BF16;
            s.lb = 'n';
            run_check(NULL, s, (uint64_t)(m * 100 + n + 1));
        }
}

/* The skinny path's f16 / bf16 weight kernels (dot_x1..dot_x8, M up to 20
 * in groups of 8, 4, 2, 1, the last one padded): every M in 1..21 (21 takes
 * the packed path), K across the kernels' tiles and tails, against the
 * double reference. */
Test(gemm, half_weights_small_m)
{
    static const int64_t ks[] = {1, 15, 16, 33, 64, 257, 1024};
    static const int64_t ns[] = {1, 2, 31, 33, 70};
    static const fc_gemm_btype bts[] = {FC_GEMM_B_F16, FC_GEMM_B_BF16};
    fc_workers *w = fc_workers_new(2);
    cr_assert_not_null(w);
    for (size_t b = 0; b < N_ELEMS(bts); b++)
        for (int64_t m = 1; m <= 21; m++)
            for (size_t q = 0; q < N_ELEMS(ks); q++)
                for (size_t j = 0; j < N_ELEMS(ns); j++) {
                    spec s = {m, ns[j], ks[q], (m % 3) ? 'n' : 's', 't', bts[b], (int)(j % 2)};
                    run_check(j % 2 ? w : NULL, s, (uint64_t)(m * 1000 + (int64_t)q * 10 + (int64_t)j));
                }
    fc_workers_free(w);
}

/* Row i of C = A·Wᵀ with half W has the same bits whatever M is (the rows'
 * group sizes differ with M), so a batch of sequences decodes like one. */
static void half_rows_invariant(void)
{
    static const fc_gemm_btype bts[] = {FC_GEMM_B_F16, FC_GEMM_B_BF16};
    for (size_t b = 0; b < N_ELEMS(bts); b++) {
        problem p;
        problem_new(&p, (spec){20, 100, 1030, 'n', 't', bts[b], 0}, 77 + b);
        cr_assert_str_eq(fc_gemm_provider_for(&p.g), "own-gemv", "%s", desc(&p));
        cr_assert_eq(fc_gemm_f32(NULL, &p.g), 0);
        for (int64_t m = 1; m <= 19; m++)
            for (int64_t i0 = 0; i0 + m <= 20; i0 += m) {
                fc_gemm_args g = p.g;
                float *c = malloc((size_t)(m * g.ldc) * sizeof(float));
                cr_assert_not_null(c);
                g.m = m;
                g.a = p.a + i0 * g.rsa;
                g.c = c;
                cr_assert_eq(fc_gemm_f32(NULL, &g), 0);
                for (int64_t i = 0; i < m; i++)
                    cr_assert(memcmp(c + i * g.ldc, p.c + (i0 + i) * g.ldc, (size_t)g.n * sizeof(float)) == 0,
                              "%s: row %lld computed with M=%lld differs from M=20", desc(&p), (long long)(i0 + i),
                              (long long)m);
                free(c);
            }
        check(&p);
        problem_free(&p);
    }
}

Test(gemm, half_weights_rows_independent_of_m) { half_rows_invariant(); }

/* ---- threads: bitwise identical ------------------------------------------------------ */

static void same_bits(spec s, uint64_t seed)
{
    static const int threads[] = {2, 3};
    problem p;
    problem_new(&p, s, seed);
    cr_assert_eq(fc_gemm_f32(NULL, &p.g), 0);
    float *one = malloc(p.c_len * sizeof(float));
    cr_assert_not_null(one);
    memcpy(one, p.c, p.c_len * sizeof(float));
    for (size_t t = 0; t < N_ELEMS(threads); t++) {
        fc_workers *w = fc_workers_new(threads[t]);
        cr_assert_not_null(w);
        reset_c(&p);
        cr_assert_eq(fc_gemm_f32(w, &p.g), 0);
        cr_assert(memcmp(one, p.c, p.c_len * sizeof(float)) == 0, "%s: 1 and %d threads differ", desc(&p),
                  threads[t]);
        fc_workers_free(w);
    }
    free(one);
    problem_free(&p);
}

Test(gemm, threads_bitwise_identical)
{
    same_bits(sp(300, 2100, 600), 1);  /* several NC and KC blocks */
    same_bits(sp(1700, 200, 1100), 7); /* two M super-blocks, three KC blocks */
    same_bits(sp(1, 3000, 1024), 2);  /* skinny, row-major B (axpy) */
    spec s = {1, 3000, 1024, 'n', 't', FC_GEMM_B_F32, 1};
    same_bits(s, 3);                   /* skinny, weights [N, K] (dot) */
    s = (spec){4, 777, 515, 'n', 't', FC_GEMM_B_BF16, 0};
    same_bits(s, 4);
    s = (spec){150, 700, 300, 't', 's', FC_GEMM_B_F16, 1};
    same_bits(s, 5);
    s = (spec){13, 1000, 1024, 'n', 't', FC_GEMM_B_F16, 0};
    same_bits(s, 8); /* skinny, half weights, groups 8 + 4 + 1 */
    s = (spec){7, 333, 515, 's', 't', FC_GEMM_B_BF16, 1};
    same_bits(s, 9);
    s = (spec){3000, 1, 257, 'n', 'n', FC_GEMM_B_F32, 0};
    same_bits(s, 6); /* N == 1 */
}

/* ---- batched ---------------------------------------------------------------------------- */

static void batched(int64_t m, int64_t n, int64_t k, int64_t batch, fc_gemm_btype bt)
{
    fc_workers *w = fc_workers_new(2);
    cr_assert_not_null(w);
    size_t es = bsize(bt);
    int64_t bsa = m * k + 3, bsb = k * n + 5, bsc = m * n + 7;
    float *a = malloc((size_t)(bsa * batch) * sizeof(float));
    unsigned char *b = malloc((size_t)(bsb * batch) * es);
    float *c = malloc((size_t)(bsc * batch) * sizeof(float)), *c1 = malloc((size_t)(bsc * batch) * sizeof(float));
    cr_assert(a && b && c && c1);
    fct_rng r = {42};
    for (int64_t i = 0; i < bsa * batch; i++) a[i] = (float)fct_uniform(&r, -1, 1);
    for (int64_t i = 0; i < bsb * batch; i++) {
        float v = (float)fct_uniform(&r, -1, 1);
        if (bt == FC_GEMM_B_F32) memcpy(b + (size_t)i * es, &v, 4);
        else if (bt == FC_GEMM_B_F16) ((fc_f16 *)b)[i] = fc_f32_to_f16(v);
        else ((fc_bf16 *)b)[i] = fc_f32_to_bf16(v);
    }
    for (int64_t i = 0; i < bsc * batch; i++) c[i] = c1[i] = (float)i;
    fc_gemm_args g = {.m = m, .n = n, .k = k, .a = a, .rsa = k, .csa = 1, .b = b, .btype = bt, .rsb = 1, .csb = k,
                      .c = c, .ldc = n, .accumulate = 1};
    cr_assert_eq(fc_gemm_f32_batched(w, &g, batch, bsa, bsb, bsc), 0);
    for (int64_t i = 0; i < batch; i++) {
        fc_gemm_args x = g;
        x.a = a + i * bsa;
        x.b = b + (size_t)(i * bsb) * es;
        x.c = c1 + i * bsc;
        cr_assert_eq(fc_gemm_f32(NULL, &x), 0);
    }
    cr_assert(memcmp(c, c1, (size_t)(bsc * batch) * sizeof(float)) == 0,
              "batched %lldx%lldx%lld x%lld differs from one call per product", (long long)m, (long long)n,
              (long long)k, (long long)batch);
    /* and one product against the reference */
    problem p;
    problem_new(&p, (spec){m, n, k, 'n', 't', bt, 0}, 9);
    cr_assert_eq(fc_gemm_f32_batched(w, &p.g, 1, 0, 0, 0), 0);
    check(&p);
    problem_free(&p);
    free(a);
    free(b);
    free(c);
    free(c1);
    fc_workers_free(w);
}

Test(gemm, batched)
{
    batched(7, 33, 65, 5, FC_GEMM_B_F32);    /* small: one product per thread */
    batched(1, 100, 64, 9, FC_GEMM_B_BF16);  /* small skinny */
    batched(130, 140, 300, 3, FC_GEMM_B_F32); /* large: the pool inside each */
    batched(64, 64, 64, 4, FC_GEMM_B_F16);
}

/* ---- each ISA's tile geometry ------------------------------------------------------------- */

static void under_cap(const char *cap, const char *want_tile)
{
    char err[256];
    cr_assert(fck_dispatch_resolve(cap, err, sizeof err), "%s", err);
    size_t slot = fck_dispatch_slot_index("f32_gemm");
    cr_assert(slot < FCK_SLOT_COUNT);
    const char *tile = fck_dispatch_chosen_tile(slot);
    if (want_tile) cr_assert_str_eq(tile, want_tile, "cap %s: f32_gemm tile %s", cap, tile);
    fc_workers *w = fc_workers_new(2);
    cr_assert_not_null(w);
    static const int64_t shapes[][3] = {{13, 70, 257}, {1, 70, 300}, {150, 131, 520}, {6, 64, 256}, {4, 4, 3}};
    for (size_t i = 0; i < N_ELEMS(shapes); i++) {
        run_check(w, sp(shapes[i][0], shapes[i][1], shapes[i][2]), i);
        spec s = {shapes[i][0], shapes[i][1], shapes[i][2], 't', 't', FC_GEMM_B_F16, 1};
        run_check(NULL, s, i + 100);
    }
    same_bits(sp(97, 300, 300), 7);
    half_rows_invariant(); /* this ISA's dot_x1..dot_x8 arms */
    fc_workers_free(w);
    cr_assert(fck_dispatch_resolve(getenv("FUCINA_ISA"), err, sizeof err), "%s", err); /* restore */
}

Test(gemm, isa_scalar) { under_cap("scalar", "4x4"); }

Test(gemm, isa_avx2)
{
    fck_isa isa;
    if (!fck_isa_parse_cap("avx2", &isa, NULL, 0) || !fck_isa_supported(isa)) cr_skip_test("no avx2 here");
    under_cap("avx2", "6x16");
}

Test(gemm, isa_avx512)
{
    fck_isa isa;
    if (!fck_isa_parse_cap("avx512", &isa, NULL, 0) || !fck_isa_supported(isa)) cr_skip_test("no avx512 here");
    under_cap("avx512", "6x64");
}

/* ---- providers ------------------------------------------------------------------------------ */

Test(gemm, provider_switch)
{
    problem p;
    problem_new(&p, sp(64, 64, 64), 5);
    cr_assert_eq(fc_gemm_set_provider("bogus"), -1);
    cr_assert_eq(fc_gemm_set_provider("own"), 0);
    cr_assert_str_eq(fc_gemm_provider_for(&p.g), "own-blocked");
    fc_gemm_args one = p.g;
    one.m = 1;
    cr_assert_str_eq(fc_gemm_provider_for(&one), "own-gemv");
    if (fc_gemm_set_provider("openblas") == 0) {
        cr_assert_str_eq(fc_gemm_provider_for(&p.g), "openblas");
        cr_assert_eq(fc_gemm_f32(NULL, &p.g), 0);
        check(&p);
        reset_c(&p);
        p.g.accumulate = 1;
        cr_assert_eq(fc_gemm_f32(NULL, &p.g), 0);
        check(&p);
        /* shapes OpenBLAS cannot take fall back to our own */
        fc_gemm_args h = p.g;
        h.btype = FC_GEMM_B_F16;
        cr_assert_str_neq(fc_gemm_provider_for(&h), "openblas");
    }
    int have_openblas = fc_gemm_set_provider("openblas") == 0;
    cr_assert_eq(fc_gemm_set_provider("auto"), 0);
    cr_assert_eq(fc_gemm_set_provider(NULL), 0);
    /* auto: OpenBLAS only for the large shapes of the measured rule */
    fc_gemm_args big = p.g;
    big.m = 512;
    big.n = 3072;
    big.k = 1024;
    big.rsa = 1024;
    big.rsb = 1;
    big.csb = 1024;
    big.ldc = 3072;
    cr_assert_str_eq(fc_gemm_provider_for(&big), have_openblas ? "openblas" : "own-blocked");
    cr_assert_str_eq(fc_gemm_provider_for(&p.g), "own-blocked");
    cr_assert_str_eq(fc_gemm_provider_for(&one), "own-gemv");
    problem_free(&p);
}
